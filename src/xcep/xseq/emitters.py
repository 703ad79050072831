"""Where matches leave the XSeq automaton: an ``Emitter`` per query (its selection,
its rows in the documented order: by end node, then binding), a ``TemplateEmitter``
for queries that share a template, and ``Outputs``, a run's emitters by slot."""

from __future__ import annotations

from collections import deque

from xcep.xseq.automaton import Light, Run
from xcep.xseq.dom import ELEMENT, Node
from xcep.xseq.lifting import HIDDEN
from xcep.xseq.matches import (
    Aggregator,
    Binding,
    check_selection,
    match_start,
    output_row,
    pick,
)
from xcep.xseq.program import PENDING, Program, Verdicts
from xcep.xseq.semantics import Analysis


class Emitter:
    """Orders matches (end node, then binding), merges duplicates, waits for checks and
    subtrees, applies the selection policy, and hands out rows or feeds the aggregates."""

    def __init__(
        self, analysis: Analysis, selection: str, values_only: bool, sink, owner: int = 0
    ) -> None:
        check_selection(selection)
        self.analysis = analysis
        self.selection = selection
        self.values_only = values_only
        self.sink = sink  # called with each row
        self.queue: deque = deque()
        self.aggregator = (
            Aggregator(analysis, values_only) if analysis.mode in ("aggregate", "grouped") else None
        )
        self.runs: dict = {}  # run -> its entries awaiting selection
        # the slots of the query's own variables: where a match starts for the selection
        # (a variable lifting added binds an ancestor step, which the query did not name)
        self.own_slots = tuple(
            i for i, v in enumerate(analysis.variables) if not v.startswith(HIDDEN)
        )
        self.owner = owner  # the machine's owner of the query's states
        self.last_end: dict = {}  # skip-past-last: per run, the end of the last match selected

    def add(self, run: Run, matches: list) -> None:
        if len(matches) == 1:  # the usual case: nothing to merge or order
            end, binding, checks = matches[0]
            entry = _Entry(run, end, binding)
            entry.alternatives.append(checks)
            entries: list | tuple = (entry,)
        else:
            merged: dict = {}
            for end, binding, checks in matches:
                key = (id(end), binding.match_key())
                entry = merged.get(key)
                if entry is None:
                    merged[key] = entry = _Entry(run, end, binding)
                entry.alternatives.append(checks)
            entries = sorted(merged.values(), key=_order)
        for entry in entries:
            self.queue.append(entry)
            if self.selection != "all":
                entry.start = match_start(entry.binding, entry.end, self.own_slots)
                self.runs.setdefault(run, []).append(entry)

    def pump(self, final: bool = False) -> None:
        """Emit every entry at the head of the queue that is decided."""
        if self.selection != "all" and self.runs:
            self._select(final)
        queue = self.queue
        while queue:
            entry = queue[0]
            if entry.verdict is PENDING:
                entry.verdict = entry.resolve()
                if entry.verdict is PENDING:
                    return
            if entry.verdict:
                if entry.selected is PENDING:
                    if self.selection != "all":
                        return
                    entry.selected = True
                if entry.selected and not entry.ready():
                    return
            queue.popleft()
            if entry.verdict and entry.selected:
                self.emit(entry)

    def emit(self, entry: _Entry) -> None:
        """A selected match: its row, or its share of the aggregates."""
        if self.aggregator is not None:
            self.aggregator.add(entry.run.key, entry.binding)
        else:
            self.sink(self.row(entry))

    def row(self, entry: _Entry) -> list:
        return output_row(self.analysis, entry.binding, entry.end, self.values_only)

    def park(self) -> bool:
        """Wait, off the active list, for the innermost open element the next row waits
        for (its checks' nodes, the nodes it prints) to close; False if that is not known."""
        if self.selection != "all":
            return False
        entry = self.queue[0]
        nodes = set()
        if entry.verdict is PENDING:
            for checks in entry.alternatives:
                for check in checks:
                    if check.state is PENDING:
                        nodes.update(map(id, check.nodes))
        else:
            nodes.update(id(n) for n in (entry.end, *entry.binding.nodes()) if not n.closed)
        for frame in reversed(entry.run.frames):
            if frame.__class__ is not Light and id(frame.node) in nodes:
                if frame.wake is None:
                    frame.wake = []
                frame.wake.append(self)
                return True
        return False

    def abandon(self, run: Run) -> None:
        """Forget the matches of a run over a document found malformed."""
        kept = [e for e in self.queue if e.run is not run]
        self.queue.clear()
        self.queue.extend(kept)
        self.runs.pop(run, None)

    def finish(self, partitions: list | None = None) -> None:
        self.pump(final=True)
        self.finish_rows(partitions)

    def finish_rows(self, partitions: list | None) -> None:
        if self.aggregator is not None:
            for row in self.aggregator.rows(partitions):
                self.sink(row)

    def _select(self, final: bool) -> None:
        for run, entries in list(self.runs.items()):
            floor = None
            if not final:
                states = run.m.states
                starts = [
                    match_start(t[1], None, self.own_slots)
                    for t in run.live_threads()
                    if states[t[0]].owner == self.owner and t[1].nodes(self.own_slots)
                ]
                floor = min(starts, default=None)
            last_end = self.last_end.get(run)
            last = select_starts(entries, floor, self.selection, last_end, _order, _end_key)
            if last is not None:
                self.last_end[run] = last
            if not entries:
                del self.runs[run]


def select_starts(entries: list, floor, policy: str, last_end, order, end_key) -> object:
    """Decide which of a run's matches awaiting a selection policy (``entries``, each
    with its ``start``, ``verdict`` — True, False or PENDING, which ``resolve()``
    decides — and ``selected``; ``end_key`` gives its end) the policy selects, start by
    start, the earliest first, while no match can begin there any more (a start below
    ``floor``, where the run's threads and undecided matches begin; None: every start):
    of a start's matches that hold, in ``order``, those ``pick`` chooses. The decided
    leave ``entries``; it stops at a start with a verdict pending. Returns the end of the
    last match selected (skip-past-last's, carried from start to start)."""
    while entries:
        first = min(e.start for e in entries)
        if floor is not None and first >= floor:
            break
        group = [e for e in entries if e.start == first]
        for e in group:
            if e.verdict is PENDING:
                e.verdict = e.resolve()
        if any(e.verdict is PENDING for e in group):
            break
        winners = sorted((e for e in group if e.verdict), key=order)
        for e in group:
            e.selected = False
        chosen, last_end = pick(policy, first, [end_key(e) for e in winners], last_end)
        for i in chosen:
            winners[i].selected = True
        entries[:] = [e for e in entries if e.start != first]
    return last_end


def _end_key(entry) -> tuple:
    return entry.end.key


class TemplateEmitter(Emitter):
    """The emitter of a template's member queries under selection ``all``: one entry per
    match of the template, in the one order they share; at its turn each member whose
    conditions held (``Verdicts``, the entry's last check) gets its row, through its
    own ``Emitter`` (in ``members``: its outputs and aggregates, never queued)."""

    _turns = None  # (slot -> its place among the members, those printed at every match)

    def __init__(self, program: Program, owner: int) -> None:
        super().__init__(program.analysis, "all", False, None, owner)
        self.program = program
        self.members: dict[int, Emitter] = {}
        self.outputs: dict = {}  # return clauses of the members, interned

    def join(self, slot: int, emitter: Emitter) -> None:
        self.members[slot] = emitter
        emitter.returns = self.outputs.setdefault(emitter.analysis.query.returns, emitter)
        self._turns = None

    def leave(self, slot: int) -> None:
        del self.members[slot]
        self._turns = None

    def _members_in_turn(self) -> tuple:
        if self._turns is None:
            conditions = self.program.members
            always = frozenset(s for s in self.members if not conditions[s].per_match)
            self._turns = ({slot: i for i, slot in enumerate(self.members)}, always)
        return self._turns

    def add(self, run: Run, matches: list) -> None:
        super().add(run, matches)
        for entry in reversed(self.queue):
            if entry.verdicts is not None:
                break
            checks = entry.alternatives[0]
            entry.verdicts = checks[-1] if checks and checks[-1].__class__ is Verdicts else ()

    def emit(self, entry: _Entry) -> None:
        """The rows of the members whose conditions held (and of those without any), in
        the members' order: a few of many, each found without a look at the others."""
        verdicts = entry.verdicts
        passed = verdicts.passed if verdicts else ()
        turn, always = self._members_in_turn()
        slots = [slot for slot in (always.union(passed) if always else passed) if slot in turn]
        if len(slots) > 1:
            slots.sort(key=turn.__getitem__)
        members = self.members
        rows: dict = {}  # members with the same return clause print the same row
        for slot in slots:
            emitter = members[slot]
            if emitter.aggregator is not None:
                emitter.emit(entry)
                continue
            row = rows.get(id(emitter.returns))
            if row is None:
                row = rows[id(emitter.returns)] = emitter.row(entry)
            emitter.sink(row)

    def finish_rows(self, partitions: list | None) -> None:
        for emitter in self.members.values():
            emitter.finish_rows(partitions)


def _order(entry) -> tuple:
    return (entry.end.key, entry.binding.sort_key())


class _Entry:
    __slots__ = ("alternatives", "binding", "end", "run", "selected", "start", "verdict")
    __slots__ += ("verdicts",)

    def __init__(self, run: Run, end: Node, binding: Binding) -> None:
        self.run = run
        self.end = end
        self.binding = binding
        self.alternatives: list = []
        self.verdict = PENDING
        self.selected = PENDING
        self.start = None
        self.verdicts = None  # a template's entry: which members' conditions held

    def resolve(self):
        pending = False
        for checks in self.alternatives:
            if not checks:  # nothing to wait for
                self.alternatives = []
                return True
            states = [c.state for c in checks]
            if all(s is True for s in states):
                self.alternatives = []
                return True
            if PENDING in states and False not in states:
                pending = True
        return PENDING if pending else False

    def ready(self) -> bool:
        """Whether the nodes the row prints are complete."""
        if self.end.kind == ELEMENT and not self.end.closed:
            return False
        return all(n.closed for n in self.binding.nodes() if n.kind == ELEMENT)


class Outputs:
    """The emitters of the queries a machine runs, by slot.

    ``active`` (shared by all the outputs of one engine run) holds the
    emitters with queued matches: the driver pumps them at every close.
    """

    def __init__(self, active: dict) -> None:
        self.emitters: dict[int, Emitter] = {}
        self.active = active

    def add(self, run: Run, slot: int, matches: list) -> None:
        emitter = self.emitters.get(slot)
        if emitter is not None:  # None: the query was removed
            emitter.add(run, matches)
            self.active[emitter] = None

    def abandon(self, run: Run) -> None:
        for emitter in self.emitters.values():
            emitter.abandon(run)
            self.active[emitter] = None  # it may have been parked on the run's frames

    def finish(self, partitions: list | None) -> None:
        for emitter in self.emitters.values():
            emitter.finish(partitions)

    def drop(self, slot: int) -> None:
        """Forget the query in ``slot`` (on its own, or a template's member)."""
        emitter = self.emitters.pop(slot, None)
        self.active.pop(emitter, None)
        for key, template in list(self.emitters.items()):
            if isinstance(template, TemplateEmitter) and slot in template.members:
                template.leave(slot)
                if not template.members:
                    del self.emitters[key]
                    self.active.pop(template, None)


def pump(active: dict) -> None:
    for emitter in list(active):
        emitter.pump()
        if not emitter.queue or emitter.park():
            del active[emitter]


class Tagged:
    """An emitter's sink in a run of many queries: its rows, tagged with the query's id."""

    __slots__ = ("qid", "rows")

    def __init__(self, rows: list, qid) -> None:
        self.rows = rows
        self.qid = qid

    def __call__(self, row) -> None:
        self.rows.append([self.qid, *row])
