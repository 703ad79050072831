"""Every kind of standing query over one parse per unit on Spark (``xcep spark run``).

``mapInArrow`` over the units (files, or records with ``--record-path``): each
unit is parsed once, and its events go to a run of every plan — the filters,
each XSeq and XQuery query, the XSCL join — exactly as ``xcep run`` runs them
over one input: a unit is a stream of its own. So the answer of ``xcep spark
run`` on a set of files is the union of ``xcep run``'s answers on each file
(tested), computed in parallel; a query that must see several files as one
stream (an XSeq ``partition by`` across files, an XSCL join across files) has
its own job (``xcep spark xseq``, ``xcep spark xscl``).

Each Python worker compiles the plans once (``spark/engines.py``) and keeps one
filter run for every unit (a filter run holds nothing between documents; its
lazily built states stay warm); the others start a run per unit.

Output rows: ``kind``, ``query`` (the query's id; null for filters), ``doc_id``
(filters: the document; null otherwise), ``value`` (a VARIANT: the matching
filter ids, an XSeq row, an XQuery item as a string, an XSCL result) and
``error`` (a malformed document or unit, or a query that failed on the unit).
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

from xcep.spark.engines import worker_plan
from xcep.spark.units import WorkerCache

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

OUTPUT_SCHEMA = "kind string, query string, doc_id string, value string, error string"
COLUMNS = ["kind", "query", "doc_id", "value", "error"]

_FILTER_RUNS = WorkerCache()  # per Python worker process: a filter plan → its one run


def run_units(units: DataFrame, queries: dict[str, dict]) -> DataFrame:
    """The rows of every standing query (``queries``: kind → id → text) over each unit
    (see the module's docstring). The queries compile on the driver first, so a bad one
    fails here."""
    from xcep.plans import standing_plans

    queries = {kind: dict(texts) for kind, texts in queries.items() if texts}
    if not queries:
        raise ValueError("give queries: --filters, --xseq, --xquery or --xscl FILE")
    from pyspark.sql import functions as F

    for kind, texts in queries.items():
        standing_plans(kind, texts, per_document=False)
    rows = units.mapInArrow(_run_units(queries), OUTPUT_SCHEMA)
    return rows.withColumn("value", F.parse_json("value"))  # JSON Lines output nests it


def _plans(queries: dict[str, dict]) -> list[tuple[str, object]]:
    """(kind, plan) of every standing query, the worker's compiled ones."""
    plans = []
    for kind, texts in queries.items():
        if kind in ("xseq", "xquery"):  # one plan per query (as standing_plans)
            plans += [(kind, worker_plan(kind, {qid: text})) for qid, text in texts.items()]
        else:
            plans.append((kind, worker_plan(kind, texts)))
    return plans


def _filter_run(plan):
    """The worker's one run of a filter plan (keyed by the plan object, which the
    worker's plan cache keeps: no key made of 100,000 filters per unit)."""
    return _FILTER_RUNS.get(plan, plan.start)


def _value(kind: str, value) -> str:
    if kind == "xscl":  # its result's JSON already
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class _UnitRuns:
    """Every plan's run over one unit: rows out, a run that fails (a dynamic error)
    stopped with its error, costing only itself."""

    def __init__(self, plans: list, unit, out: list) -> None:
        self.plans, self.unit, self.out = plans, unit, out
        self.runs = [
            _filter_run(plan) if kind == "filter" else plan.start() for kind, plan in plans
        ]
        self.failed: dict[int, str] = {}

    def step(self, at: int, call) -> None:
        from xcep.errors import XcepError

        if at in self.failed:
            return
        try:
            rows = call()
        except XcepError as error:
            self.failed[at] = str(error)
            return
        kind, unit = self.plans[at][0], self.unit
        for row in rows:
            doc = unit.doc_id(row.doc) if row.doc is not None else None
            query = None if row.query is None else str(row.query)
            self.out.append((kind, query, doc, _value(kind, row.value), None))

    def feed(self, events) -> None:
        for at, run in enumerate(self.runs):
            self.step(at, partial(run.feed, events))

    def finish(self, name: str) -> None:
        for at, (kind, _) in enumerate(self.plans):
            if kind != "filter":  # (the filter run goes on with the next unit)
                self.step(at, self.runs[at].finish)
                self.runs[at].close()
        for at, message in self.failed.items():
            kind, plan = self.plans[at]
            query = None if kind == "filter" else str(next(iter(plan.queries)))
            self.out.append((kind, query, name, None, message))


def _run_units(queries: dict[str, dict]):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from xcep.spark.units import read_unit, string_batch, unit_rows

        plans = _plans(queries)
        for batch in batches:
            out: list[tuple] = []
            for path, record, content, error in unit_rows(batch):
                if error is not None:
                    out.append((None, None, path, None, error))
                    continue
                unit = read_unit(path, record, content, keep_whitespace=True)
                runs = _UnitRuns(plans, unit, out)
                for _, doc_batches in unit.good():
                    for events in doc_batches:
                        runs.feed(events)
                runs.finish(path if record is None else f"{path}#{record}")
                out += [(None, None, doc_id, None, message) for doc_id, message in unit.bad()]
            yield string_batch(out, COLUMNS)

    return run
