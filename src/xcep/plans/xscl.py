"""XSCL join queries (``xcep.xscl``) as a plan: results as each batch of documents is joined."""

from __future__ import annotations

from xcep.events.model import EventBatch
from xcep.events.stepping import Stepper
from xcep.plans.base import OpenDocument, Plan, Row, Run, make_rows

AUTO_BATCH = 500  # the largest batch of ``batch="auto"``


class XsclPlan(Plan):
    """XSCL join queries over named streams (documents fed are on ``stream``, default
    ``S``, until ``XsclRun.begin_stream`` names another); results as each batch of
    documents is joined.

    Options: ``batch``, the documents joined together — a number (a batch waits to
    fill) or ``"auto"`` (the default: the documents each fed event batch completes,
    at most ``AUTO_BATCH``: nothing waits for a batch to fill); ``grouped`` (one
    result for the queries that find the same documents and nodes); ``timestamp``
    (where a document's time is: ``timestamp_reader``; by default its position);
    ``skip_invalid`` (a query that does not compile is left out and named in
    ``plan.invalid``); and the ``XsclEngine``'s ``join``, ``view``, ``view_budget``
    and ``state_budget``."""

    kind = "xscl"
    can = frozenset({"snapshot", "add", "remove"})

    def __init__(
        self,
        queries: dict,
        stream: str = "S",
        batch: int | str = "auto",
        grouped: bool = False,
        timestamp: str | None = None,
        skip_invalid: bool = False,
        **options,
    ) -> None:
        super().__init__(
            queries,
            stream=stream,
            batch=batch,
            grouped=grouped,
            timestamp=timestamp,
            skip_invalid=skip_invalid,
            **options,
        )
        from xcep.xscl import XsclEngine, XsclSyntaxError, timestamp_reader

        if batch != "auto" and (not isinstance(batch, int) or batch < 1):
            raise ValueError(f"batch is a number ≥ 1 or 'auto', not {batch!r}")
        self.stream = stream
        self.batch_size = AUTO_BATCH if batch == "auto" else batch
        self.timestamp = timestamp_reader(timestamp)  # a bad path fails here
        self.engine_options = {"batch_size": self.batch_size, **options}
        engine = XsclEngine(**self.engine_options)
        self.invalid: dict = {}
        for qid, text in self.queries.items():
            try:
                engine.add(qid, text)
            except XsclSyntaxError as error:
                if not skip_invalid:
                    raise
                self.invalid[qid] = error
        for qid in self.invalid:
            del self.queries[qid]
        self._engine = engine  # lent to the first run (an engine changes as it joins)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_engine": None}

    def start(self) -> XsclRun:
        return XsclRun(self)

    def _restore(self, state) -> XsclRun:
        from xcep.xscl import XsclEngine

        run = XsclRun(self, XsclEngine.restore(state["engine"], **self.engine_options))
        run.documents, run.stream = state["documents"], state["stream"]
        run.waiting = state["waiting"]
        for batch in state["open"]:
            run.feed(batch)
        return run

    def engine(self):
        """A new ``XsclEngine`` holding the plan's queries, their templates and SQL
        ready: what a run joins with, and what Spark's job reads to join across its
        executors (``xcep.spark.xscl``)."""
        from xcep.xscl import XsclEngine

        engine = XsclEngine(**self.engine_options)
        for qid, text in self.queries.items():
            engine.add(qid, text)
        engine.flush_queries()
        return engine

    def explain(self) -> str:
        return f"{len(self.queries)} XSCL queries over the stream {self.stream}"


class XsclRun(Run):
    """A saved run holds the documents the join state holds (and the queries they met):
    a restored one joins them again, giving nothing for them. A document whose time
    cannot be read is skipped, its error kept in ``errors`` (one line each) for the
    caller to report."""

    def __init__(self, plan: XsclPlan, engine=None) -> None:
        super().__init__(plan)
        from xcep.xscl.documents import documents_from_batches

        if engine is None:
            engine, plan._engine = plan._engine, None
        self.engine = engine if engine is not None else plan.engine()
        self.stream = plan.stream
        self.waiting: list = []  # (stream, document, time) not joined yet
        self.errors: list[str] = []
        self.failed = None  # the error a join raised, for the next call
        self.pass_ = Stepper(documents_from_batches)
        self.open = OpenDocument()

    def begin_stream(self, name: str) -> list[Row]:
        """The documents fed from now on are of the stream ``name``: those waiting for a
        batch to fill are joined first (their rows)."""
        self._failed()
        rows = self._join(everything=True)
        self.stream = name
        return rows

    def _take(self, documents: list) -> None:
        from xcep.xscl import TimestampError

        for doc in documents:
            position = self.documents
            self.documents += 1
            try:
                time = self.plan.timestamp(doc, position)
            except TimestampError as error:
                self.errors.append(f"{self.stream} document {position}: {error}")
                continue
            self.waiting.append((self.stream, doc, time))

    def _join(self, everything: bool) -> list[Row]:
        """Join the waiting documents in batches of the plan's size (and the last, short
        one when ``everything``)."""
        from xcep.xscl.engine import StateBudgetError

        size, waiting = self.plan.batch_size, self.waiting
        grouped = self.plan.options["grouped"]
        rows: list[Row] = []
        start = 0
        try:
            while len(waiting) - start >= size or (everything and start < len(waiting)):
                batch = waiting[start : start + size]
                start += len(batch)
                rows += _xscl_rows(self.engine.process(batch, grouped))
        except StateBudgetError as error:  # raised at the next call, after these rows
            rows += _xscl_rows(error.results)
            self.failed = error
        del waiting[:start]
        return rows

    def _feed(self, batch: EventBatch) -> list[Row]:
        self._failed()
        self._take(self.pass_.feed(batch))
        self.open.note(batch)
        return self._join(everything=self.plan.options["batch"] == "auto")

    def _finish(self) -> list[Row]:
        self._failed()
        self._take(self.pass_.end())
        return self._join(everything=True)

    def _failed(self) -> None:
        """A join that failed (its state budget) gave the rows found before it; the
        error comes now."""
        if self.failed is not None:
            raise self.failed

    def _state(self):
        return {
            "engine": self.engine.snapshot(),
            "open": self.open.batches,
            "documents": self.documents,
            "stream": self.stream,
            "waiting": self.waiting,
        }

    def queries(self) -> dict:
        return {qid: registered.text for qid, registered in self.engine.queries.items()}

    def add(self, query_id, text: str) -> None:
        self.engine.add(query_id, text)

    def remove(self, query_id) -> None:
        self.engine.remove(query_id)

    def stats(self) -> dict:
        state = self.engine.state_size()
        return {**super().stats(), "queries": len(self.engine.queries), "join state": state}


def _xscl_rows(results: list) -> list[Row]:
    """Rows of XSCL results (a join can have millions)."""
    return make_rows([r.query for r in results], [r.to_json() for r in results])
