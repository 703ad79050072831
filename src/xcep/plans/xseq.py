"""XSeq queries (``xcep.xseq``) as a plan: a query on its runtime, the rest in one automaton."""

from __future__ import annotations

import json
from itertools import repeat

from xcep.errors import StateError
from xcep.events.model import EventBatch
from xcep.plans.base import Plan, Row, Run, documents_ended, make_rows

# Several queries: the node selections the path runtime serves run together on one path
# runtime (one pass, one DFA for all of them); the flat sequence patterns that read one
# list alike in a group on one list reader (``SequenceGroup``: each batch read once, each
# element stepped in every pattern's lists; a pattern whose list is anywhere, under //,
# on its own runtime); the others share one automaton. (Until node selections shared the
# path runtime, more than 16 sequence queries went to the automaton, whose templates and
# counting index won for them.)


class XSeqPlan(Plan):
    """XSeq queries: one query on its runtime; several: the node selections with
    predicates all on one path runtime (``PlainPath`` of them all), the flat sequence
    patterns in a sequence group per list shape (one under // on its own runtime), the
    rest in one automaton (queries added while it runs join the automaton, at the next
    document).
    Every run is saved: the path runtime's run, each sequence group's and own runtime's,
    the automaton with its driver. Each query's rows come in its own order; a batch gives
    the rows of the path runtime first, then the sequence groups', the own runtimes', then
    the automaton's.

    Options: ``selection``, ``values_only``, ``schema`` and ``opt`` (``XSeqEngine``),
    ``fast`` (one query: its fast runtime where it qualifies, else the automaton), and
    ``skip_invalid``: a query that does not compile is left out and named in
    ``plan.invalid`` (id → its error) instead of failing the plan."""

    kind = "xseq"

    def __init__(
        self, queries: dict, skip_invalid: bool = False, several: bool = False, **options
    ) -> None:
        """``several``: the plan of several queries even for one (what restores a run of
        several that removed all but one)."""
        super().__init__(queries, skip_invalid=skip_invalid, **options)
        from xcep.xseq import QuerySyntaxError, XSeqEngine, XSeqMultiEngine, compile_query
        from xcep.xseq.engine import compile_fast_path
        from xcep.xseq.paths import PlainPath
        from xcep.xseq.sequence import SequencePattern

        self.invalid: dict = {}
        fast = options.pop("fast", True)
        runtime = options.pop("runtime", "auto")  # (several queries: the fast paths or not)
        fast = fast and runtime != "automaton"
        if len(self.queries) == 1 and not (skip_invalid or several):
            ((self.single_id, text),) = self.queries.items()
            self.engine = XSeqEngine(text, fast=fast, runtime=runtime, **options)
            self.can = frozenset({"snapshot"})
            return
        self.single_id = None
        self.engine = None
        # the automaton of the others: compiled where it takes them (``XSeqMultiEngine``);
        # ``runtime="compiled"``: every query on it, none on the fast paths
        self.automaton = "automaton" if runtime == "automaton" or not fast else "auto"
        paths_too = fast and runtime != "compiled"
        self.can = frozenset({"snapshot", "add", "remove"})
        self.engine_options = options
        XSeqMultiEngine(**options)  # the options are checked here
        schema, opt = options.get("schema"), options.get("opt", "all")
        selection = options.get("selection", "all")
        self.own: dict = {}  # id → the XSeqEngine of a query that runs on its own runtime
        self.path_ids: list = []  # the queries on the path runtime, in its selections' order
        self.analyses: dict = {}  # id → a query the automaton runs, compiled (its steps'
        paths = []  # predicates lifted, to share a template): what every run subscribes
        fields_by_shape: dict = {}  # the flat sequence patterns' fields, per list shape
        grouped: dict = {}  # list shape -> [(id, its flat sequence pattern)]
        for qid, text in self.queries.items():
            try:
                analysis = compile_query(text, schema, opt)
                found = (
                    compile_fast_path(analysis, selection, fields_by_shape) if paths_too else "off"
                )
                if isinstance(found, str):
                    self.analyses[qid] = compile_query(text, schema, opt, lift=True)
            except (QuerySyntaxError, ValueError) as error:
                if not skip_invalid:
                    raise
                self.invalid[qid] = error
                continue
            if isinstance(found, PlainPath):
                self.path_ids.append(qid)
                paths.append(analysis)
            elif isinstance(found, SequencePattern) and not found.anywhere:
                grouped.setdefault(found.shape, []).append((qid, found))
            elif not isinstance(found, str):
                self.own[qid] = XSeqEngine(analysis, fast=fast, **options)
        for qid in self.invalid:
            del self.queries[qid]
        self.paths = PlainPath(paths) if paths else None
        self.groups = [self._group(members) for members in grouped.values()]
        self.fast = fast

    def _group(self, members: list):
        from xcep.xseq.sequence_group import SequenceGroup

        values_only = self.engine_options.get("values_only", False)
        return SequenceGroup(members, values_only, self.engine_options.get("selection", "all"))

    def sequence_group(self, queries: list):
        """A run of the sequence group of ``queries`` ((id, text) in order): this plan's
        when they are one of its groups, else compiled (a restored run's)."""
        from xcep.xseq import compile_query
        from xcep.xseq.sequence import SequencePattern

        ids = [qid for qid, _ in queries]
        same = all(self.queries.get(qid) == text for qid, text in queries)
        found = next((g for g in self.groups if g.ids == ids), None) if same else None
        if found is None:
            schema, opt = self.engine_options.get("schema"), self.engine_options.get("opt", "all")
            fields: dict = {}
            patterns = [SequencePattern(compile_query(t, schema, opt), fields) for _, t in queries]
            found = self._group(list(zip(ids, patterns, strict=True)))
        return found.start()

    def path_runtime(self, queries: list):
        """A run of the path runtime for ``queries`` ((id, text) in order): this plan's
        when they are its own, else compiled (a restored run's, saved by another plan)."""
        from xcep.xseq import compile_query
        from xcep.xseq.pathrun import PlainPathRun
        from xcep.xseq.paths import PlainPath

        paths = self.paths
        if [qid for qid, _ in queries] != self.path_ids or any(
            self.queries.get(qid) != text for qid, text in queries
        ):
            schema, opt = self.engine_options.get("schema"), self.engine_options.get("opt", "all")
            paths = PlainPath([compile_query(text, schema, opt) for _, text in queries])
        values_only = self.engine_options.get("values_only", False)
        return PlainPathRun(paths, values_only, tagged=True)

    def own_engine(self, qid):
        """The engine of a query that a run keeps on its own runtime."""
        from xcep.xseq import XSeqEngine

        found = self.own.get(qid)  # (a restored run's may be beyond this plan's own)
        if found is None:
            found = XSeqEngine(self.queries[qid], fast=self.fast, **self.engine_options)
        return found

    def start(self) -> XSeqRun:
        return XSeqRun(self)

    def _restore(self, state) -> XSeqRun:
        if self.engine is not None and "multi" in state:  # a run of several, one left
            return XSeqPlan(self.queries, several=True, **self.options)._restore(state)
        run = XSeqRun(self, state)
        run.documents = state["documents"]
        return run

    def explain(self, format: str = "text") -> str:
        """One query: its analysis and automaton (``dot``: the automaton for Graphviz);
        several: their automata's statistics, per partition clause (JSON)."""
        if self.engine is None:
            own = {str(qid): engine.stats()["evaluator"] for qid, engine in self.own.items()}
            multi = self.start().multi
            automaton = multi.stats()
            why = multi.not_compiled
            paths = [str(qid) for qid in self.path_ids]
            groups = [[str(qid) for qid in group.ids] for group in self.groups]
            templates = [
                [str(group.ids[i]) for i in indexes]
                for group in self.groups
                for _, indexes, conds in group.units
                if conds is not None
            ]
            found = {"path runtime": paths, "sequence groups": groups}
            found |= {"sequence templates": templates, "own runtimes": own}
            if multi.queries:
                found["automaton runs on"] = (
                    "the compiled automaton, a run per template (docs/xseq.md)"
                    if why is None
                    else f"the Python automaton ({why})"
                )
            return json.dumps({**found, "automaton": automaton}, indent=2)
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
        # the queries on the path runtime, in its order (a restored run's: as saved), the
        # path runtime's run, and the queries removed from it (it reads on for the others)
        self.path_queries = [(qid, plan.queries[qid]) for qid in plan.path_ids]
        self.paths = None
        self.removed: set = set()
        # the sequence groups' queries ((id, text) in order) and runs
        group_queries = [[(qid, plan.queries[qid]) for qid in g.ids] for g in plan.groups]
        if saved:  # several: the automaton and its driver, the own runtimes' runs, as saved
            self.multi, self.driver, self.texts = saved["multi"], saved["driver"], saved["texts"]
            self.path_queries, self.removed = saved["path_queries"], saved["removed"]
            group_queries = [queries for queries, _ in saved["groups"]]
        if self.path_queries:
            self.paths = plan.path_runtime(self.path_queries)
            if saved:
                self.paths.restore(saved["paths"])
        self.groups = [(q, plan.sequence_group(q)) for q in group_queries]
        if saved:
            for (_, run), (_, state) in zip(self.groups, saved["groups"], strict=True):
                run.restore(state)
        if saved:
            own = saved["own"]
            self.own = {qid: plan.own_engine(qid).resume(data) for qid, data in own.items()}
            self.idle, self.last_doc = saved["idle"], saved["last_doc"]
            return
        from xcep.xseq import XSeqMultiEngine

        self.multi = XSeqMultiEngine(**plan.engine_options, runtime=plan.automaton)
        self.texts = dict(plan.queries)
        self.own = {qid: engine.start() for qid, engine in plan.own.items()}
        for qid, analysis in plan.analyses.items():
            self.multi.subscribe(qid, analysis)
        self.driver = self.multi.start()
        # while the automaton has no query its driver is not fed (it would visit every
        # event for nothing); the first query it gets joins at the next document
        self.idle = not self.multi.queries
        self.last_doc = None  # the last document an idle driver let pass

    def _rows(self, found: list) -> list[Row]:
        if self.plan.engine is not None:
            return make_rows(repeat(self.plan.single_id), found)
        return make_rows([row[0] for row in found], [row[1:] for row in found])

    def _feed(self, batch: EventBatch) -> list[Row]:
        self.documents += documents_ended(batch)
        if self.plan.engine is not None:
            return self._rows(self.run.feed([batch]))
        rows = self._path_rows(self.paths.feed(batch)) if self.paths is not None else []
        for queries, run in self.groups:
            for i, found in run.feed(batch):
                rows += make_rows(repeat(queries[i][0]), found)
        for qid, run in self.own.items():
            rows += make_rows(repeat(qid), run.feed([batch]))
        batch = self._for_the_driver(batch)
        return rows if batch is None else rows + self._rows(self.driver.feed(batch))

    def _path_rows(self, found: list) -> list[Row]:
        queries, removed = self.path_queries, self.removed
        if removed:
            found = [(q, row) for q, row in found if queries[q][0] not in removed]
        return make_rows([queries[q][0] for q, _ in found], [row for _, row in found])

    def _for_the_driver(self, batch: EventBatch) -> EventBatch | None:
        """What of ``batch`` the automaton's driver reads: nothing while it has no query;
        from the next document on once it has one after being idle."""
        if not self.idle:
            return batch
        runs = list(batch.document_runs())
        if self.multi.queries:  # its first query: from a document's start
            fresh = next((start for number, start, _ in runs if number != self.last_doc), None)
            if fresh is not None:
                self.idle = False
                return batch.slice(fresh, len(batch.kinds)) if fresh else batch
        if runs:
            self.last_doc = runs[-1][0]
        return None

    def _finish(self) -> list[Row]:
        if self.plan.engine is not None:
            return self._rows(self.run.finish())
        rows = self._path_rows(self.paths.end(final=True)) if self.paths is not None else []
        for queries, run in self.groups:
            for i, found in run.end(final=True):
                rows += make_rows(repeat(queries[i][0]), found)
        for qid, run in self.own.items():
            rows += make_rows(repeat(qid), run.finish())
        return rows + self._rows(self.driver.finish())

    def _state(self):
        if self.plan.engine is not None:
            return {"run": self.run.snapshot(), "documents": self.documents}
        return {
            "multi": self.multi,
            "driver": self.driver,
            "own": {qid: run.snapshot() for qid, run in self.own.items()},
            "path_queries": self.path_queries,
            "paths": None if self.paths is None else self.paths.state(),
            "groups": [(queries, run.state()) for queries, run in self.groups],
            "removed": self.removed,
            "idle": self.idle,
            "last_doc": self.last_doc,
            "texts": self.texts,
            "documents": self.documents,
        }

    def queries(self) -> dict:
        return dict(self.texts) if self.plan.engine is None else dict(self.plan.queries)

    def add(self, query_id, text: str) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are added to a plan of several XSeq queries")
        if query_id in self.texts:
            raise ValueError(f"query id {query_id!r} is already subscribed")
        self.multi.subscribe(query_id, text)
        self.texts[query_id] = text

    def remove(self, query_id) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are removed from a plan of several XSeq queries")
        member = self._group_member(query_id)
        if query_id in dict(self.path_queries) and query_id not in self.removed:
            self.removed.add(query_id)  # the path runtime reads on; its rows are dropped
        elif member is not None:
            member[0].mute(member[1])  # the group reads on; its rows are dropped
        elif self.own.pop(query_id, None) is None:
            self.multi.unsubscribe(query_id)
        del self.texts[query_id]

    def _group_member(self, query_id) -> tuple | None:
        """(the sequence group run, the member) of a query that is in one and not removed."""
        for queries, run in self.groups:
            for i, (qid, _) in enumerate(queries):
                if qid == query_id and i not in run.muted:
                    return run, i
        return None

    def stats(self) -> dict:
        engine = self.plan.engine
        found = engine.stats() if engine is not None else self.multi.stats()
        if engine is None and self.own:
            found = {**found, "own runtimes": len(self.own)}
        if engine is None and self.groups:
            grouped = sum(len(queries) - len(run.muted) for queries, run in self.groups)
            found = {**found, "sequence groups": {"groups": len(self.groups), "queries": grouped}}
        if engine is None and self.paths is not None:
            on_paths = len(self.path_queries) - len(self.removed)
            stats = self.paths.p.stats()
            found = {**found, "path runtime": {"queries": on_paths, **stats}}
        return {**found, **super().stats(), "queries": len(self.queries())}
