"""The plans each Python worker keeps between tasks (a bounded cache): shared by the
batch jobs (``xseq.py``, ``xquery.py``, ``filter.py``) and the streaming processors
(``streaming.py``), which therefore do not import each other. Every job runs its
engine through a plan (``xcep.plans``), compiled once per worker."""

from __future__ import annotations

from xcep.spark.units import WorkerCache

_PLANS = WorkerCache()  # per Python worker process: (kind, queries, options) → Plan


def worker_plan(kind: str, queries: dict, **options):
    """The worker's ``compile_plan(kind, queries, **options)``, compiled once."""

    def make():
        from xcep.plans import compile_plan

        return compile_plan(kind, queries, **options)

    key = (kind, tuple(sorted(queries.items(), key=repr)), tuple(sorted(options.items())))
    return _PLANS.get(key, make)


def xquery_rows(plan, batches) -> tuple[list[str], str | None]:
    """(serialized items, None) of one run of an XQuery plan over ``batches``, or ([],
    the error) when the query fails dynamically: a dynamic error costs only its own
    partition or document."""
    from xcep.xquery import XQueryError

    try:
        return [row.value for row in plan.rows(batches)], None
    except XQueryError as error:
        return [], str(error)
