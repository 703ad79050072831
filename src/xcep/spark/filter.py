"""XPush filtering on Spark: ``mapInArrow`` over units, one machine per worker process.

The filter set travels inside the task closure (it works the same with classic
and Connect sessions); each Python worker compiles it once into a plan
(``xcep.plans``) and keeps one run of it in a process-wide cache keyed by the
filter set and options — a filter run holds nothing between documents, so the
one run serves every task, its lazily built states warm — trained before the
first document.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from xcep.spark.units import WorkerCache

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

_RUNS = WorkerCache()  # per Python worker process: key → a FilterRun


def filter_units(
    units: DataFrame,
    filters: dict,
    train: bool = True,
    top_down: bool = True,
    early: bool = False,
) -> DataFrame:
    """``doc_id, matches, error``: per document, the ids of the filters matching it
    (ascending), or, for a malformed document, the error (``matches`` null)."""
    numeric = all(isinstance(fid, int) for fid in filters)
    id_type = "bigint" if numeric else "string"
    ids = filters if numeric else {str(fid): text for fid, text in filters.items()}
    settings = (train, top_down, early)
    key = hashlib.sha256(repr((sorted(ids.items()), settings)).encode()).hexdigest()
    schema = f"doc_id string, matches array<{id_type}>, error string"
    return units.mapInArrow(_filter_batches(key, ids, settings, numeric), schema)


def _run(key: str, filters: dict, settings: tuple):
    def make():
        from xcep.plans import compile_plan

        train, top_down, early = settings
        return compile_plan("filter", filters, train=train, top_down=top_down, early=early).start()

    return _RUNS.get(key, make)


def _filter_batches(key: str, filters: dict, settings: tuple, numeric: bool):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from xcep.spark.units import read_unit, unit_rows

        schema = pa.schema(
            [
                ("doc_id", pa.string()),
                ("matches", pa.list_(pa.int64() if numeric else pa.string())),
                ("error", pa.string()),
            ]
        )
        run = _run(key, filters, settings)
        for batch in batches:
            out: dict[str, list] = {"doc_id": [], "matches": [], "error": []}
            for path, record, content, error in unit_rows(batch):
                if error is not None:
                    _append(out, path, None, error)
                    continue
                unit = read_unit(path, record, content, keep_whitespace=True)
                for doc_id, doc_batches in unit.good():
                    for batch in doc_batches:
                        for row in run.feed(batch):
                            _append(out, doc_id, row.value, None)
                for doc_id, message in unit.bad():
                    _append(out, doc_id, None, message)
            yield pa.RecordBatch.from_pydict(out, schema=schema)

    return run


def _append(out: dict, doc_id: str, matches, error) -> None:
    out["doc_id"].append(doc_id)
    out["matches"].append(matches)
    out["error"].append(error)
