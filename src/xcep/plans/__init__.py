"""One interface to the four engines: plans and runs.

``compile_plan(kind, queries, **options)`` compiles queries of one language
(``filter``, ``xseq``, ``xquery``, ``xscl``; ``queries``: id → text) into a
``Plan``: immutable once made, and the same for every run. ``plan.start()``
gives a ``Run``, which is fed the stream's event batches one at a time and
gives ``Row``s as they are known:

    run = plan.start()
    for batch in EventStream(inputs).batches():
        for row in run.feed(batch):
            ...
    rows = run.finish()  # what only the end of the stream decides

``run.snapshot()`` saves a run as bytes (versioned, checked against the plan)
and ``plan.restore(data)`` — in this process or another — gives a run that
goes on where it stopped; ``run.add(id, text)`` and ``run.remove(id)`` change
the queries of a running plan where the engine allows it (from the next
document on); ``plan.explain()`` and ``run.stats()`` describe them, with the
keys ``queries``, ``documents`` and ``rows`` in every engine. Where an engine
cannot do something (add a query to a plan of one XQuery query), it raises
``StateError`` saying so; ``plan.can`` lists what it can.

A row is ``(query, doc, value)``: for filters one row per document, ``query``
None and ``value`` the matching filter ids, ascending; for XSeq, XQuery and
XSCL one row per result, ``value`` what the command line prints for it (an
XSeq row's list, an XQuery item's serialization, an XSCL result's JSON) and
``doc`` the document it came from where the engine knows it.

The command line, Spark and the service are to run on nothing else (issue 30):
this module is their single entrance to the engines.
"""

from __future__ import annotations

from xcep.plans.base import MAGIC, VERSION, OpenDocument, Plan, Row, Run, documents_ended
from xcep.plans.filter import FilterPlan, FilterRun
from xcep.plans.xquery import XQueryPlan, XQueryRun, XQueryStreamRun
from xcep.plans.xscl import AUTO_BATCH, XsclPlan, XsclRun
from xcep.plans.xseq import XSeqPlan, XSeqRun

__all__ = [
    "AUTO_BATCH",
    "KINDS",
    "MAGIC",
    "PLANS",
    "VERSION",
    "FilterPlan",
    "FilterRun",
    "OpenDocument",
    "Plan",
    "Row",
    "Run",
    "XQueryPlan",
    "XQueryRun",
    "XQueryStreamRun",
    "XSeqPlan",
    "XSeqRun",
    "XsclPlan",
    "XsclRun",
    "compile_plan",
    "documents_ended",
    "read_query_file",
    "standing_plans",
]

PLANS = {plan.kind: plan for plan in (FilterPlan, XSeqPlan, XQueryPlan, XsclPlan)}


def compile_plan(kind: str, queries: dict, **options) -> Plan:
    """Compile ``queries`` (id → text) of the language ``kind`` into a plan."""
    try:
        plan = PLANS[kind]
    except KeyError:
        raise ValueError(f"no engine for {kind!r}: one of {', '.join(PLANS)}") from None
    return plan(queries, **options)


KINDS = tuple(PLANS)


def standing_plans(kind: str, queries: dict, per_document: bool) -> list[Plan]:
    """The plans of one kind's standing queries (``xcep run``, ``xcep serve``, ``xcep
    spark run``): one for the filters (one machine) and the XSCL queries (one join),
    one per XSeq and XQuery query (each its own run; an XQuery query on each document
    alone with ``per_document``, else over the stream)."""
    if not queries:
        return []
    if kind == "xseq":
        return [compile_plan("xseq", {qid: text}) for qid, text in queries.items()]
    if kind == "xquery":
        plans = [
            compile_plan("xquery", {qid: text}, per_document=per_document)
            for qid, text in queries.items()
        ]
        for plan in plans:
            if plan.source_options:
                raise ValueError(
                    f"XQuery query {plan.query_id}: a query that declares namespaces runs "
                    "on its own (xcep xquery): standing queries share one parse, which "
                    "keeps names as spelled"
                )
        return plans
    return [compile_plan(kind, queries)]


def read_query_file(path: str) -> dict:
    """``ID<TAB>QUERY`` per line (as the batch commands read them): id → text."""
    from xcep.idlines import read_filters_file

    return {str(line.fid): line.text for line in read_filters_file(path, what="query")}
