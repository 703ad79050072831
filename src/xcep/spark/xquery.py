"""XQuery on Spark: one partition of records per key, in parallel.

A query whose answer is the union of its answers on each partition — the
usual shape of a CEP query: ``for $e in /log/event group by $u := $e/@uid
pattern … return …`` — runs with ``partition_by="@uid"``: the records at the
record path are keyed, and ``groupBy(key).applyInArrow`` evaluates the query on
each partition (its records, in position order, inside the record path's
ancestors: the input document with only that partition's events). Without
``partition_by`` the query runs on each document (each file, or each record).
Saying that the query's own grouping agrees with the partition key is the
user's part: partition by the key the query groups by.

Output rows: ``doc_id`` (per-document runs), ``key``, ``item`` (one serialized
item of the result sequence, as ``xcep xquery`` prints it), ``error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xcep.spark.engines import worker_plan, xquery_rows
from xcep.spark.partitions import (
    Wrapper,
    keyed_records,
    ordered_records,
    partition_stream,
    split_keyed,
)
from xcep.spark.units import string_batch

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

OUTPUT_SCHEMA = "doc_id string, key string, item string, error string"


def xquery_units(
    units: DataFrame,
    query: str,
    record_path: str | None = None,
    partition_by: str | None = None,
    idle_timeout_ms: int = 60_000,
    watermark_delay_ms: int = 0,
    state_ttl_ms: int | None = None,
) -> DataFrame:
    """The result items of ``query`` per partition (or per document). On a streaming
    DataFrame a partition's items come once it has ended: when the watermark (the newest
    file's time less ``watermark_delay_ms``) is ``idle_timeout_ms`` past its last record
    (see ``xcep.spark.streaming``); per-document runs need no state."""

    from xcep.plans import compile_plan

    compile_plan("xquery", {None: query})  # syntax errors surface here, on the driver
    if partition_by is None:
        return units.mapInArrow(_run_documents(query), OUTPUT_SCHEMA)
    if record_path is None:
        raise ValueError("partitioning an XQuery needs the record path of its events")
    keyed = keyed_records(units, record_path, partition_by)
    errors, good = split_keyed(keyed, "item")
    if units.isStreaming:
        from xcep.spark.streaming import XQueryPartition

        processor = XQueryPartition(query, record_path, idle_timeout_ms, state_ttl_ms)
        items = (
            good.withWatermark("time", f"{watermark_delay_ms} milliseconds")
            .groupBy("key")
            .transformWithStateInPandas(processor, OUTPUT_SCHEMA, "Append", "EventTime")
        )
    else:
        items = good.groupBy("key").applyInArrow(_run_partition(query, record_path), OUTPUT_SCHEMA)
    return items.unionByName(errors)


def _table(rows: list[tuple]) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([string_batch(rows, ["doc_id", "key", "item", "error"])])


def _run_partition(text: str, record_path: str):
    wrap = Wrapper(record_path)

    def run(table: pa.Table) -> pa.Table:
        key = table.column("key")[0].as_py()
        errors: list = []
        plan = worker_plan("xquery", {None: text})
        document = wrap(ordered_records(table))
        stream = partition_stream(key, document, errors.append, **plan.source_options)
        items, failure = xquery_rows(plan, stream.batches())
        rows = [(None, key, item, None) for item in items]
        rows += [(None, key, None, str(e)) for e in errors]
        if failure is not None:
            rows.append((None, key, None, failure))
        return _table(rows)

    return run


def _run_documents(text: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from xcep.spark.units import read_unit, unit_rows

        plan = worker_plan("xquery", {None: text})
        for batch in batches:
            rows: list[tuple] = []
            for path, record, content, error in unit_rows(batch):
                if error is not None:
                    rows.append((path, None, None, error))
                    continue
                unit = read_unit(path, record, content, **plan.source_options)
                for doc_id, doc_batches in unit.good():
                    items, failure = xquery_rows(plan, doc_batches)
                    rows += [(doc_id, None, item, None) for item in items]
                    if failure is not None:
                        rows.append((doc_id, None, None, failure))
                rows += [(doc_id, None, None, message) for doc_id, message in unit.bad()]
            yield from _table(rows).to_batches()

    return run
