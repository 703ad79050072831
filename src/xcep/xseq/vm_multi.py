"""Many queries on the compiled automaton (``XSeqMultiEngine``, every selection policy).

Each template of the union (a program: the path its member queries share, with the
per-match conditions they all have) runs on a compiled run of its own (``vm.py``): its
steps, predicates and common conditions decided in C, and each match handed out as the
Python automaton hands it out — a ``Binding`` of nodes (``Handout``), the end node with
the value the run wrote of it — to the template's emitter. There, as on the Python
automaton, each member's own conditions are decided at once for all members
(``MemberConditions``) and each member that holds makes its row or feeds its aggregates
(``TemplateEmitter``; under maximal and skip-past-last each member first selects among
its own matches). A template of one query runs as that query alone does (its rows made
in C). A template is compiled with what its members read of the nodes
(the attributes its records keep, the variables whose subtrees are captured); one a
member joins between documents is compiled again, and its run starts afresh at that
document (a run without ``partition by`` keeps nothing from one document to the next;
a partitioned query that joins gets a program of its own: ``XSeqMultiEngine``). A query
the compiled automaton does not take, subscribed while the stream runs, runs on a
Python automaton of its own."""

from __future__ import annotations

from dataclasses import replace

from xcep.xseq import ast as A
from xcep.xseq.dom import ELEMENT, Node
from xcep.xseq.emitters import Emitter, Tagged, TemplateEmitter
from xcep.xseq.matches import make_env
from xcep.xseq.program import Program, Verdicts, single_machine
from xcep.xseq.vm import (
    CompiledPlan,
    CompiledRun,
    NotCompiled,
    above_only,
    compiled_plan,
    reads_downward,
    ref_attribute,
    up_to_attributes,
)
from xcep.xseq.vm_calls import Handout, Selection


class Written(Node):
    """A match's end node as the compiled run wrote it (its XML, or with ``--values`` its
    string value; an attribute's or text's value): what a node selection's row prints."""

    __slots__ = ("written",)

    def __init__(self, written: str) -> None:
        super().__init__(ELEMENT, None, 0, 0)
        self.written = written
        self.closed = True

    def serialize(self) -> str:
        return self.written

    def string_value(self) -> str:
        return self.written


END = Written("")  # the end node of a match whose row does not print it


def reads(program) -> tuple:
    """(the attributes of bound nodes its members' conditions and outputs read, the
    variables whose subtrees they read, whether one reads above its nodes) of a template;
    NotCompiled where one reads more above them than their ancestors' attributes."""
    attributes: list = []
    captured: set = set()
    above = False

    def visit(expr) -> None:
        nonlocal above
        if not reads_downward(expr):
            if not up_to_attributes(expr):
                raise NotCompiled(f"a member reads above its nodes: {A.to_text(expr)}")
            above = True  # (its records keep their nodes made with their ancestors)
        for ref in _refs(expr):
            name = ref_attribute(ref)
            if name is None and not above_only(ref.path):
                captured.add(ref.var)
            elif name is not None and name not in attributes:
                attributes.append(name)

    for member in program.members.values():
        for conjunct in member.analysis.per_match:
            visit(conjunct.cond)
        for term in member.analysis.query.returns or ():
            counted = term.aggregate == "count" and isinstance(term.expr, A.VarRef)
            if not (counted and term.expr.path is None):  # (count($X) counts its nodes)
                visit(term.expr)
    return tuple(attributes), frozenset(captured), above


def _refs(expr):
    """The variable references an expression reads nodes through (not a ``tag()``'s: the
    record has the tag)."""
    if isinstance(expr, A.VarRef):
        yield expr
    elif not isinstance(expr, A.Tag):
        for name in getattr(expr, "__slots__", ()):
            value = getattr(expr, name)
            for item in value if isinstance(value, tuple) else (value,):
                if hasattr(item, "__slots__"):
                    yield from _refs(item)


class TemplateRun:
    """One template's compiled run: matches in, the template emitter's entries out; a
    template of one query (its conditions all the template's) makes its rows in C, as the
    query alone does (``CompiledRun``)."""

    def __init__(
        self, program, values_only: bool, selection: str = "all", several: bool | None = None
    ) -> None:
        """``several``: whether its matches are handed out to its members (by default:
        whether it has several; a restored run keeps the way it was saved with)."""
        self.values_only, self.selection = values_only, selection
        analysis = replace(program.analysis, per_match=program.per_match)
        handout = None
        if several if several is not None else len(program.members) > 1:
            handout = Handout(analysis, *reads(program))
        else:  # (all its conditions: those it shares went to the template, as it joined)
            (member,) = program.members.values()
            analysis = member.analysis
        found = compiled_plan(
            analysis, program, single_machine(program), selection, values_only, handout
        )
        if not isinstance(found, CompiledPlan):
            raise NotCompiled(found)
        self.program = program
        self.alone = CompiledRun(found, values_only) if handout is None else None
        self.vm = found.vm() if handout is not None else self.alone.vm
        self.written = analysis.mode == "nodes"  # (the end node's value comes first)
        self.partitioned = found.tables["route"] is not None
        # a policy other than all: each member selects among its own matches
        self.selections: dict = {}  # slot -> its Selection

    def feed(self, batch, emitter: TemplateEmitter) -> None:
        if self.alone is not None:
            return self._rows(self.alone.feed(batch), emitter)
        out = self.vm.feed(
            batch.docs, batch.kinds, batch.names, batch.values, batch.nodes, batch.symbols.names
        )
        if self.selection == "all":
            self._hand(out, emitter)
        else:
            self._select(out, self.vm.floors(), emitter)

    def end(self, final: bool, emitter: TemplateEmitter) -> None:
        """The stream ended (``final``: the aggregates' rows too) or stops here."""
        if self.alone is not None:
            return self._rows(self.alone.end(final), emitter)
        if self.selection == "all":
            self._hand(self.vm.finish(final), emitter)
        else:  # (at the end, every start is decided)
            out = self.vm.finish(final)
            self._select(out, None if final else self.vm.floors(), emitter)
        if final and emitter is not None:
            emitter.finish(self.vm.partitions() if self.partitioned else None)

    def _rows(self, rows: list, emitter: TemplateEmitter | None) -> None:
        """A template of one query: its rows, to its sink."""
        for member in emitter.members.values() if emitter is not None else ():
            for row in rows:
                member.sink(row)

    def _hand(self, out: list, emitter: TemplateEmitter | None) -> None:
        if emitter is None:
            return
        conditional = self.program.conditions.members
        for found in out:
            key, end, binding = self._match(found)
            checks: tuple = ()
            if conditional:
                verdicts = Verdicts(None, [])
                verdicts.passed, verdicts.state = self._passed(binding), True
                if not verdicts.passed and len(conditional) == len(self.program.members):
                    continue
                checks = (verdicts,)
            emitter.add(_Partition(key), [(end, binding, checks)])
        emitter.pump()

    def _match(self, found) -> tuple:
        """(partition key, end node, binding) of a match handed out."""
        key, row = found if self.partitioned else (None, found)
        return key, Written(row[0]) if self.written else END, row[-1]

    def _passed(self, binding) -> set:
        """The members whose own conditions hold on a match (those with some)."""
        env = make_env(self.program.analysis, binding, False, memo=True)
        return self.program.conditions.decide(env)

    def _select(self, out: list, floors, emitter: TemplateEmitter | None) -> None:
        """Under ``maximal`` or ``skip-past-last``: each member's matches (those its own
        conditions pass) through a ``Selection`` of its own, as the query alone selects
        them; the template's floors hold for each (its matches are among the template's)."""
        if emitter is None:
            return
        conditional = self.program.conditions.members
        mine: dict = {slot: [] for slot in emitter.members}
        for item in out:
            if item[1] is None:  # a document broke off: every member drops its matches
                for items in mine.values():
                    items.append(item)
                continue
            passed = self._passed(self._match(item[3])[2]) if conditional else ()
            for slot, items in mine.items():
                if slot in passed or slot not in conditional:
                    items.append(item)
        for slot, items in mine.items():
            selection = self.selections.get(slot)
            if selection is None:
                selection = self.selections[slot] = Selection(self.selection)
            member = emitter.members[slot]
            for payload in selection.take(items, floors):
                key, end, binding = self._match(payload)
                member.add(_Partition(key), [(end, binding, ())])
            member.pump()

    def __getstate__(self) -> dict:
        """Saved as its program and its run's state (the plan is made again)."""
        state = self.alone.state() if self.alone is not None else self.vm.state()
        saved = {"program": self.program, "values_only": self.values_only, "run": state}
        saved |= {"selection": self.selection, "selections": self.selections}
        return {**saved, "several": self.alone is None}

    def __setstate__(self, saved: dict) -> None:
        options = saved["values_only"], saved["selection"], saved["several"]
        self.__init__(saved["program"], *options)
        self.selections = saved["selections"]
        if self.alone is not None:
            self.alone.restore(saved["run"])
        else:
            self.vm.restore(saved["run"])


class _Partition:
    """What an emitter knows of the run a match came from: its partition's key."""

    __slots__ = ("key",)

    def __init__(self, key) -> None:
        self.key = key


class CompiledDriver:
    """Feeds each batch to every template's compiled run (``start`` of ``XSeqMultiEngine``
    where each of its templates compiles): the rows of each batch, per template in its
    order. Subscriptions made while it runs join at the next document; a query that does
    not compile then runs on a Python automaton of its own."""

    def __init__(self, engine, rows: list, run_alone) -> None:
        """``run_alone(analysis)``: a run of a query on a Python automaton of its own."""
        self.engine = engine
        self.rows = rows
        self.run_alone = run_alone
        self.pending: list = []  # (query id, analysis) waiting for the next document
        self.runs: dict = {}  # (group, owner) -> its TemplateRun
        self.emitters: dict = {}  # (group, owner) -> its TemplateEmitter
        self.alone: dict = {}  # query id -> its run on a Python automaton of its own
        self.doc = None  # the document the last batch ended in
        for group in engine.groups.values():
            for owner in group.machine.owners():
                self._compile(group, owner)
        for qid, (group, owner, slot, analysis) in engine.queries.items():
            self._member(qid, group, owner, slot, analysis)

    def _compile(self, group, owner: int) -> None:
        engine = self.engine
        program = group.machine.programs[owner]
        self.runs[(group, owner)] = TemplateRun(program, engine.values_only, engine.selection)

    def _member(self, qid, group, owner: int, slot: int, analysis) -> None:
        emitter = self.emitters.get((group, owner))
        program = group.machine.programs[owner]
        if emitter is None:
            emitter = self.emitters[(group, owner)] = TemplateEmitter(program, owner)
        sink = Tagged(self.rows, qid)
        emitter.join(slot, Emitter(analysis, "all", self.engine.values_only, sink, owner))

    def feed(self, batch) -> list:
        runs = list(batch.document_runs())
        if self.pending:  # they join where the next document starts
            start = next((s for number, s, _ in runs if number != self.doc), None)
            if start is not None:
                if start:
                    self._feed(batch.slice(0, start))
                    batch = batch.slice(start, len(batch.kinds))
                self._join()
        self._feed(batch)
        if runs:
            self.doc = runs[-1][0]
        return self._taken()

    def _feed(self, batch) -> None:
        emitters = self.emitters
        for key, run in self.runs.items():
            run.feed(batch, emitters.get(key))
        for qid, run in self.alone.items():
            self.rows += [[qid, *row] for row in run.feed([batch])]

    def finish(self, final: bool = True) -> list:
        for key, run in self.runs.items():
            run.end(final, self.emitters.get(key))
        for qid, run in self.alone.items():
            self.rows += [[qid, *row] for row in run.finish()]
        return self._taken()

    def _join(self) -> None:
        pending, self.pending = self.pending, []
        engine = self.engine
        for qid, analysis in pending:
            try:  # (alone first: a template it would join stays compiled)
                TemplateRun(_alone(analysis), engine.values_only)
            except NotCompiled:
                self.alone[qid] = self.run_alone(analysis, engine.values_only, engine.selection)
                engine.queries[qid] = None  # (not in the machine)
                continue
            # a partitioned query gets states of its own: no partial match of the others
            # carries over into it (``_Live.start_document``)
            partitioned = analysis.partition is not None
            group, owner, slot = engine._add(qid, analysis, share=not partitioned)
            self._compile(group, owner)  # (afresh: its members read more now)
            self._member(qid, group, owner, slot, analysis)

    def drop(self, qid) -> None:
        """A query not in the machine leaves: subscribed but not joined yet, or alone."""
        self.pending = [(q, a) for q, a in self.pending if q != qid]
        self.alone.pop(qid, None)

    def forget(self, group, owner: int | None, slot: int) -> None:
        """A query left its template (``owner``: the template, which it was the last of)."""
        for key, emitter in list(self.emitters.items()):
            if key[0] is group and slot in emitter.members:
                emitter.leave(slot)
        if owner is not None:
            self.runs.pop((group, owner), None)
            self.emitters.pop((group, owner), None)

    def _taken(self) -> list:
        out = self.rows[:]
        self.rows.clear()
        return out


def _alone(analysis):
    """The program of a query on its own, as a template of one."""
    program = Program(replace(analysis, per_match=[]))
    program.members = {}
    program.join(0, analysis)
    return program
