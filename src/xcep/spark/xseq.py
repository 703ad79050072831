"""XSeq on Spark.

- A query with ``partition by P@k``: the stream is cut into its partitioned
  elements (records at the record path, by default P itself when P is an
  absolute path of names), each keyed by its attribute ``k``; then
  ``groupBy(key).applyInArrow`` runs each partition in position order (file
  path, record position) through the engine, as one document: the records
  inside the record path's ancestors. Records without the attribute belong to
  no partition, as in-process.
- A query without ``partition by`` runs per document (``mapInArrow``), unless
  it has only aggregates in its return clause: then all documents make one
  stream, in position order, as in-process.

Output rows: ``doc_id`` (null for partitioned and aggregate queries), ``key``
(the partition key, or null), ``row`` (the JSON text of the output row, as
``xcep xseq`` prints it), ``error`` (a malformed document or record).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from xcep.events.records import parse_record_path
from xcep.spark.engines import worker_plan
from xcep.spark.partitions import (
    Wrapper,
    keyed_records,
    ordered_records,
    partition_stream,
    split_keyed,
)
from xcep.spark.units import string_batch, unit_input

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

OUTPUT_SCHEMA = "doc_id string, key string, row string, error string"  # row: JSON text
RESULT_SCHEMA = "doc_id string, key string, row variant, error string"  # what users get


def xseq_units(
    units: DataFrame,
    query: str,
    selection: str = "all",
    record_path: str | None = None,
    idle_timeout_ms: int = 60_000,
    watermark_delay_ms: int = 0,
    state_ttl_ms: int | None = None,
) -> DataFrame:
    """The output rows of ``query`` over the units (see the module's docstring), ``row``
    as a VARIANT (JSON Lines output nests it; ``to_json(row)`` is its text). On a
    streaming DataFrame, partitions keep their engine state across micro-batches (see
    ``xcep.spark.streaming``); event time is the input files' modification time, and a
    partition ends once the watermark (the latest file's time less ``watermark_delay_ms``)
    is ``idle_timeout_ms`` past its last record."""
    from pyspark.sql import functions as F

    rows = _text_rows(
        units, query, selection, record_path, (idle_timeout_ms, watermark_delay_ms, state_ttl_ms)
    )
    return rows.withColumn("row", F.parse_json("row"))


def _text_rows(
    units: DataFrame,
    query: str,
    selection: str,
    record_path: str | None,
    streaming: tuple,
) -> DataFrame:
    from pyspark.sql import functions as F

    from xcep.plans import compile_plan

    plan = compile_plan("xseq", {None: query}, selection=selection)  # errors: on the driver
    analysis = plan.engine.analysis
    spec = (query, selection)
    if analysis.partition is not None:
        record_path = record_path or partition_record_path(analysis)
        attribute = analysis.partition[1]
        keyed = keyed_records(units, record_path, f"@{attribute}")
        errors, good = split_keyed(keyed, "row")
        if units.isStreaming:
            from xcep.spark.streaming import XSeqPartition

            idle_timeout_ms, watermark_delay_ms, state_ttl_ms = streaming
            processor = XSeqPartition(query, selection, record_path, idle_timeout_ms, state_ttl_ms)
            rows = (
                good.withWatermark("time", f"{watermark_delay_ms} milliseconds")
                .groupBy("key")
                .transformWithStateInPandas(processor, OUTPUT_SCHEMA, "Append", "EventTime")
            )
        else:
            rows = good.groupBy("key").applyInArrow(
                _run_partition(spec, record_path), OUTPUT_SCHEMA
            )
        return rows.unionByName(errors)
    if analysis.mode == "aggregate":
        if units.isStreaming:
            raise ValueError(
                "a query with only aggregates and no partition by has one answer, at the end "
                "of the stream: run it in batch, or partition it"
            )
        one = units.withColumn("key", F.lit(None).cast("string"))
        return one.groupBy("key").applyInArrow(_run_all(spec), OUTPUT_SCHEMA)
    return units.mapInArrow(_run_documents(spec), OUTPUT_SCHEMA)


def partition_record_path(analysis) -> str:
    """The record path a ``partition by`` path gives: the path itself, when it is absolute
    and made of names only (``/stocks/transaction``)."""
    from xcep.xseq import ast as A

    text = A.to_text(analysis.partition[0])
    try:
        parse_record_path(text)
    except ValueError:
        raise ValueError(
            f"partition by {text}@{analysis.partition[1]}: on Spark the partitioned elements "
            "are records at an absolute path of names; give the record path "
            "(--record-path /a/b) that selects them"
        ) from None
    return text


def _output(rows: list[tuple]) -> pa.RecordBatch:
    return string_batch(rows, ["doc_id", "key", "row", "error"])


def _table(rows: list[tuple]) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([_output(rows)])


def _dumps(row) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _plan(spec: tuple):
    """The worker's plan of ``spec`` (query, selection)."""
    query, selection = spec
    return worker_plan("xseq", {None: query}, selection=selection)


def _run_documents(spec: tuple):
    """Per document: the engine over its events alone."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from xcep.spark.units import read_unit, unit_rows

        plan = _plan(spec)
        for batch in batches:
            out = []
            for path, record, content, error in unit_rows(batch):
                if error is not None:
                    out.append((path, None, None, error))
                    continue
                unit = read_unit(path, record, content)
                for doc_id, doc_batches in unit.good():
                    rows = plan.rows(doc_batches)
                    out.extend((doc_id, None, _dumps(row.value), None) for row in rows)
                out.extend((doc_id, None, None, message) for doc_id, message in unit.bad())
            yield _output(out)

    return run


def _run_all(spec: tuple):
    """All units as one stream, in position order (aggregate-only queries)."""

    def run(table: pa.Table) -> pa.Table:
        from xcep.events import EventStream
        from xcep.spark.units import unit_rows

        plan = _plan(spec)
        units = sorted(unit_rows(table), key=lambda u: (u[0], -1 if u[1] is None else u[1]))
        errors: list = []
        inputs = [
            unit_input(path, record, content)
            for path, record, content, error in units
            if error is None
        ]
        stream = EventStream(inputs, errors=errors.append)
        out = [(None, None, _dumps(row.value), None) for row in plan.rows(stream.batches())]
        out += [(path, None, None, error) for path, _, _, error in units if error is not None]
        out += [(None, None, None, str(error)) for error in errors]
        return _table(out)

    return run


def _run_partition(spec: tuple, record_path: str):
    """One partition: its records in position order, inside the record path's ancestors."""
    wrap = Wrapper(record_path)

    def run(table: pa.Table) -> pa.Table:
        plan = _plan(spec)
        key = table.column("key")[0].as_py()
        errors: list = []
        stream = partition_stream(key, wrap(ordered_records(table)), errors.append)
        out = [(None, key, _dumps(row.value), None) for row in plan.rows(stream.batches())]
        out += [(None, key, None, str(error)) for error in errors]
        return _table(out)

    return run
