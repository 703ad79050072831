"""One XQuery query (``xcep.xquery``) as a plan: on whole documents, or a window over a stream."""

from __future__ import annotations

import contextlib

from xcep.events.model import EventBatch
from xcep.events.stepping import Stepper, ThreadStepper
from xcep.plans.base import OpenDocument, Plan, Row, Run, documents_ended


class XQueryPlan(Plan):
    """One XQuery query (``queries``: one id → text). A window over a stream
    (``xcep.xquery.streaming``) gives its rows as windows close, across documents;
    any other query runs on whole documents, read as they complete and evaluated at
    the end (a run saves the documents read so far) —
    or, with ``per_document=True`` (a service: every message a document of its own),
    on each document as it completes, ``$input`` that document."""

    kind = "xquery"
    can = frozenset({"snapshot"})

    def __init__(
        self, queries: dict, per_document: bool = False, variables: dict | None = None
    ) -> None:
        super().__init__(queries, per_document=per_document, variables=variables)
        from xcep import xquery

        self.per_document = per_document
        self.variables = variables  # external variables' values (``--var``)
        if len(self.queries) != 1:
            raise ValueError("an XQuery plan holds one query")
        ((self.query_id, text),) = self.queries.items()
        self.query = xquery.compile(text)
        self.streams = self.query.stream_plan[0] is not None  # (then not per document)
        # a query that declares namespaces reads the documents' declarations
        self.source_options = {"namespaces": True} if self.query.namespaces is not None else {}

    def start(self) -> XQueryRun:
        return XQueryStreamRun(self) if self.streams else XQueryRun(self)

    def _restore(self, state) -> XQueryRun:
        import xml.etree.ElementTree as ET

        if self.streams:
            return XQueryStreamRun(self, state)
        run = XQueryRun(self)
        run.trees = [ET.ElementTree(ET.fromstring(data)) for data in state["documents"]]
        run.documents = len(run.trees)
        for batch in state["open"]:
            run.feed(batch)
        return run

    def explain(self) -> str:
        return self.query.explain()


class XQueryRun(Run):
    def __init__(self, plan: XQueryPlan) -> None:
        super().__init__(plan)
        from xcep.xquery.documents import documents_from_batches

        self.trees: list = []
        prefixes = plan.query.namespaces
        self.pass_ = Stepper(lambda batches: documents_from_batches(batches, prefixes))
        self.open = OpenDocument()

    def _feed(self, batch: EventBatch) -> list[Row]:
        found = self.pass_.feed(batch)
        self.documents += len(found)
        rows = []
        if self.plan.per_document:
            qid = self.plan.query_id
            query, variables = self.plan.query, self.plan.variables
            rows = [Row(qid, None, line) for tree in found for line in query.run([tree], variables)]
        else:
            self.trees += found
        self.open.note(batch)
        return rows

    def _finish(self) -> list[Row]:
        if self.plan.per_document:
            return []
        self.trees += self.pass_.end()
        qid = self.plan.query_id
        lines = self.plan.query.run(self.trees or None, self.plan.variables)
        return [Row(qid, None, line) for line in lines]

    def _state(self):
        import xml.etree.ElementTree as ET

        return {
            "documents": [ET.tostring(t.getroot()) for t in self.trees],
            "open": self.open.batches,
        }


class XQueryStreamRun(Run):
    """A window over a stream: the query's own pass (``XQuery.stream``), in a thread of
    its own (its items are asked for inside the window clause). Between two batches
    that thread waits for the next one, and where it stands is a ``StreamState`` (the
    items a window can still reach, the item being read): a saved run."""

    def __init__(self, plan: XQueryPlan, saved: dict | None = None) -> None:
        super().__init__(plan)
        from xcep.xquery.streaming import StreamState
        from xcep.xquery.values import serialize

        query, stream_plan = plan.query, plan.query.stream_plan[0]
        self.serialize = serialize
        self.state = saved["stream"] if saved else StreamState(stream_plan)
        self.documents = saved["documents"] if saved else 0
        state = self.state
        variables = plan.variables
        self.pass_ = ThreadStepper(
            lambda batches: query.stream(stream_plan, batches, variables, state)
        )

    def _rows(self, items: list) -> list[Row]:
        return [Row(self.plan.query_id, None, self.serialize(item)) for item in items]

    def _feed(self, batch: EventBatch) -> list[Row]:
        self.documents += documents_ended(batch)
        return self._rows(self.pass_.feed(batch))

    def _finish(self) -> list[Row]:
        return self._rows(self.pass_.end())

    def _state(self):
        return {"stream": self.state, "documents": self.documents}

    def close(self) -> None:
        with contextlib.suppress(Exception):  # its error was the caller's business already
            self.pass_.end()
