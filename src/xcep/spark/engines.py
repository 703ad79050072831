"""The compiled queries each Python worker keeps between tasks (bounded caches): shared
by the batch jobs (``xseq.py``, ``xquery.py``) and the streaming processors
(``streaming.py``), which therefore do not import each other."""

from __future__ import annotations

from xcep.spark.units import WorkerCache

_ENGINES = WorkerCache()  # XSeq engines by (query, selection), per Python worker process
_QUERIES = WorkerCache()  # compiled XQueries by text


def xseq_engine(spec: tuple):
    """The worker's ``XSeqEngine(*spec)``, compiled once."""

    def make():
        from xcep.xseq import XSeqEngine

        return XSeqEngine(*spec)

    return _ENGINES.get(spec, make)


def xquery_query(text: str):
    """The worker's compiled XQuery for ``text``."""

    def make():
        from xcep import xquery

        return xquery.compile(text)

    return _QUERIES.get(text, make)


def evaluate_xquery(query, trees) -> tuple[list[str], str | None]:
    """(serialized items, None), or ([], the error) when the query fails dynamically: a
    dynamic error costs only its own partition or document."""
    from xcep.xquery import XQueryError

    try:
        return list(query.run(trees)), None
    except XQueryError as error:
        return [], str(error)
