"""XSeq queries (``xcep.xseq``) as a plan: one query on its runtime, several in one automaton."""

from __future__ import annotations

import json

from xcep.errors import StateError
from xcep.events.model import EventBatch
from xcep.plans.base import Plan, Row, Run, documents_ended


class XSeqPlan(Plan):
    """XSeq queries: one query on its runtime, several in one automaton (queries added
    and removed while it runs). Every run is saved: one query's by its runtime
    (``XSeqEngine.start``), several queries' with their automaton.

    Options: ``selection``, ``values_only``, ``schema`` and ``opt`` (``XSeqEngine``),
    ``fast`` (one query: its fast runtime where it qualifies, else the automaton), and
    ``skip_invalid``: a query that does not compile is left out and named in
    ``plan.invalid`` (id → its error) instead of failing the plan."""

    kind = "xseq"

    def __init__(self, queries: dict, skip_invalid: bool = False, **options) -> None:
        super().__init__(queries, skip_invalid=skip_invalid, **options)
        from xcep.xseq import QuerySyntaxError, XSeqEngine, XSeqMultiEngine, compile_query

        self.invalid: dict = {}
        fast = options.pop("fast", True)
        if len(self.queries) == 1 and not skip_invalid:
            ((self.single_id, text),) = self.queries.items()
            self.engine = XSeqEngine(text, fast=fast, **options)
            self.can = frozenset({"snapshot"})
            return
        self.single_id = None
        self.engine = None
        self.can = frozenset({"snapshot", "add", "remove"})
        self.engine_options = options
        XSeqMultiEngine(**options)  # the options are checked here
        schema, opt = options.get("schema"), options.get("opt", "all")
        self.analyses: dict = {}  # id → the query compiled: what every run subscribes
        for qid, text in self.queries.items():
            try:
                self.analyses[qid] = compile_query(text, schema, opt, lift=True)
            except (QuerySyntaxError, ValueError) as error:
                if not skip_invalid:
                    raise
                self.invalid[qid] = error
        for qid in self.invalid:
            del self.queries[qid]

    def start(self) -> XSeqRun:
        return XSeqRun(self)

    def _restore(self, state) -> XSeqRun:
        run = XSeqRun(self, state)
        run.documents = state["documents"]
        return run

    def explain(self, format: str = "text") -> str:
        """One query: its analysis and automaton (``dot``: the automaton for Graphviz);
        several: their automata's statistics, per partition clause (JSON)."""
        if self.engine is None:
            return json.dumps(self.start().multi.stats(), indent=2)
        if format == "dot":
            return self.engine.vpa.dot()
        return self.engine.explain()


class XSeqRun(Run):
    def __init__(self, plan: XSeqPlan, saved: dict | None = None) -> None:
        super().__init__(plan)
        if plan.engine is not None:  # one query: its runtime's run
            engine = plan.engine
            self.run = engine.resume(saved["run"]) if saved else engine.start()
            return
        if saved:  # several: the automaton and its driver, as saved
            self.multi, self.driver, self.texts = saved["multi"], saved["driver"], saved["texts"]
            return
        from xcep.xseq import XSeqMultiEngine

        self.multi = XSeqMultiEngine(**plan.engine_options)
        self.texts = dict(plan.queries)
        for qid, analysis in plan.analyses.items():
            self.multi.subscribe(qid, analysis)
        self.driver = self.multi.start()

    def _rows(self, found: list) -> list[Row]:
        if self.plan.engine is not None:
            return [Row(self.plan.single_id, None, row) for row in found]
        return [Row(row[0], None, row[1:]) for row in found]

    def _feed(self, batch: EventBatch) -> list[Row]:
        self.documents += documents_ended(batch)
        if self.plan.engine is not None:
            return self._rows(self.run.feed([batch]))
        return self._rows(self.driver.feed(batch))

    def _finish(self) -> list[Row]:
        if self.plan.engine is not None:
            return self._rows(self.run.finish())
        return self._rows(self.driver.finish())

    def _state(self):
        if self.plan.engine is not None:
            return {"run": self.run.snapshot(), "documents": self.documents}
        return {
            "multi": self.multi,
            "driver": self.driver,
            "texts": self.texts,
            "documents": self.documents,
        }

    def queries(self) -> dict:
        return dict(self.texts) if self.plan.engine is None else dict(self.plan.queries)

    def add(self, query_id, text: str) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are added to a plan of several XSeq queries")
        self.multi.subscribe(query_id, text)
        self.texts[query_id] = text

    def remove(self, query_id) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are removed from a plan of several XSeq queries")
        self.multi.unsubscribe(query_id)
        del self.texts[query_id]

    def stats(self) -> dict:
        engine = self.plan.engine
        found = engine.stats() if engine is not None else self.multi.stats()
        return {**found, **super().stats(), "queries": len(self.queries())}
