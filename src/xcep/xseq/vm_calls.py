"""What the compiled automaton's run (``xcep/xseq/_vm.c``, planned by ``vm.py``) calls
back in Python: the selection policies over the matches it hands out, predicates that
read above their node, pending checks and output terms decided on nodes built of the
events it captured, and conditions the C tree does not hold, on nodes made of records."""

from __future__ import annotations

from collections import deque

from xcep.xseq.dom import ELEMENT, ROOT, TEXT_NODE, Node
from xcep.xseq.emitters import select_starts
from xcep.xseq.evaluate import holds
from xcep.xseq.matches import Binding, conditions_hold, term_output, term_values
from xcep.xseq.program import PENDING
from xcep.xseq.semantics import Analysis

HEAD = 4  # a record's fields before its attributes' values: node, depth, tag, document


class Selected:
    """A match the compiled run handed out, awaiting the selection policy: its run, where
    it starts and ends ((document, node) keys), what it gives (its row, or its values)."""

    __slots__ = ("end", "number", "payload", "run", "selected", "start", "verdict")

    def __init__(self, run, start, end, payload, number: int, selected=PENDING) -> None:
        self.run, self.start, self.end, self.payload = run, start, end, payload
        self.number = number  # (its place in the run's order: by end, then binding)
        self.verdict = True  # (the compiled run hands out only the matches that hold)
        self.selected = selected


class Selection:
    """A selection policy over the matches the compiled run hands out — ``(run, start,
    end, payload)`` in the order rows go out — decided per run by ``select_starts`` (as the
    automaton's ``Emitter`` decides them) once the run's floor (``Vm.floors``: where its
    threads and queued matches begin, as of its last close) is past their start; a
    document that broke off — ``(run, None, document, floor)`` — drops the matches its
    floor then left undecided (as the emitter abandons a broken document's run)."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.queue: deque = deque()  # in the order they go out
        self.waiting: dict = {}  # run -> its matches whose selection is undecided
        self.last_end: dict = {}  # skip-past-last: per run, the end of the last selected
        self.count = 0

    def take(self, out: list, floors: list | None) -> list:
        """What goes out of ``out`` and the matches waiting before it, in order, once
        their selection is decided (``floors`` per run; None: the stream ended)."""
        given: list = []
        for run, start, end, payload in out:
            if start is None:  # the document `end` broke off
                self._decide(run, payload, given)
                self._drop(run, end)
                continue
            self.count += 1
            entry = Selected(run, start, end, payload, self.count)
            self.queue.append(entry)
            self.waiting.setdefault(run, []).append(entry)
        for run in list(self.waiting):
            self._decide(run, None if floors is None else floors[run], given)
        return given

    def _decide(self, run, floor, given: list) -> None:
        entries = self.waiting.get(run)
        if entries:
            last = select_starts(entries, floor, self.policy, self.last_end.get(run), _number, _end)
            if last is not None:
                self.last_end[run] = last
            if not entries:
                del self.waiting[run]
        queue = self.queue
        while queue and queue[0].selected is not PENDING:
            entry = queue.popleft()
            if entry.selected:
                given.append(entry.payload)

    def _drop(self, run, doc) -> None:
        def kept(entry):
            return entry.run != run or entry.end[0] != doc

        self.queue = deque(filter(kept, self.queue))
        if run in self.waiting:
            self.waiting[run] = list(filter(kept, self.waiting[run]))

    def state(self) -> tuple:
        queued = [(e.run, e.start, e.end, e.payload, e.selected) for e in self.queue]
        return queued, dict(self.last_end), self.count

    def restore(self, state) -> None:
        queued, self.last_end, self.count = state
        self.queue, self.waiting = deque(), {}
        for number, (run, start, end, payload, selected) in enumerate(queued):
            entry = Selected(run, start, end, payload, number, selected)
            self.queue.append(entry)
            if selected is PENDING:
                self.waiting.setdefault(run, []).append(entry)


def _number(entry: Selected) -> int:
    return entry.number


def _end(entry: Selected) -> tuple:
    return entry.end


class Above:
    """Decides predicates that read above their node (by number) on its node."""

    def __init__(self, preds: list) -> None:
        self.preds = preds

    def __call__(self, numbers: tuple, node: Node, text=None, ident=0, doc=0) -> bool:
        if text is not None:  # a text() step's predicates: on the text node, under ``node``
            node = Node(TEXT_NODE, None, doc, ident, node)
            node.value = text
        return all(holds(self.preds[number], node) for number in numbers)


def ancestor(parent: Node | None, tag, raw, ident: int, doc: int) -> Node:
    """An element (or with no tag, the document node) of the compiled run's stack, as a
    node under ``parent`` with its attributes, for the predicates that read above."""
    if tag is None:
        return Node(ROOT, None, doc, -1)
    return Node.element(tag, doc, ident, parent, raw or [])


class PyTerms:
    """Makes the output terms the C run does not read itself (``$X//b``, ``tag(first($X))``,
    a Kleene-* variable's values beside aggregates) on the match's nodes — built of their
    captured events, or made of their records — as the automaton's rows make them: a
    term's output, or with aggregates its values (a plain term's output as one value)."""

    def __init__(self, analysis: Analysis, terms: list, check, values_only: bool) -> None:
        self.analysis, self.terms, self.values_only = analysis, terms, values_only
        self.check = check  # (its ``binding``: the nodes of a binding of the compiled run)

    def __call__(self, number: int, binding: tuple, as_values: bool):
        term, bound = self.terms[number], self.check.binding(binding)
        if not as_values:
            return term_output(self.analysis, term, bound, self.values_only)
        if term.aggregate is None:
            return [term_output(self.analysis, term, bound, self.values_only)]
        return term_values(self.analysis, term.expr, bound, self.values_only)


class Handout:
    """Hands each match of a template's compiled run out as the Python automaton's are: its
    ``Binding`` of nodes (those whose subtrees its members read built of their captured
    events, the others made of their records, which keep the ``attributes`` they read), for
    the members' conditions and outputs in Python (``xcep.xseq.vm_multi``)."""

    def __init__(
        self, analysis: Analysis, attributes: tuple, captured: frozenset, above: bool = False
    ) -> None:
        self.analysis = analysis
        self.attributes, self.captured = attributes, captured
        self.above = above  # whether members read above their nodes (their ancestors')
        self.check = None  # (the plan's ``PendingCheck``: it makes a binding's nodes)

    def made(self, check: PendingCheck) -> Handout:
        self.check = check
        return self

    def __call__(self, number: int, binding: tuple, as_values: bool) -> Binding:
        bound = self.check.binding(binding)
        return Binding(bound.slots[: len(self.analysis.variables)], bound.entries)


class PendingCheck:
    """Decides a pending check once the nodes it reads closed: ``[record, number, verdict]``
    a step's predicate (its number) on the node built of the events the run captured, or
    ``[binding, -number, verdict]`` conditions of the where clause (at an iteration, or per
    match) on the binding's nodes, built of their captured events (or their records). The
    verdict is cached in the check."""

    def __init__(self, analysis: Analysis, preds: list, late: list, at: int) -> None:
        self.analysis = analysis
        self.preds, self.late = preds, late
        self.at = at  # where a record's captured events are (a list of one list)
        self.nodes = None  # the records' nodes, where nothing was captured (``RecordNodes``)
        self.width, self.kept = 0, False  # (as the plan's bindings are: ``binding_of``)
        self.made_at = None  # where records keep their nodes made with ancestors, if they do

    def __call__(self, check: list) -> bool:
        if check[2] is None:
            if check[1] >= 0:
                record = check[0]
                check[2] = holds(self.preds[check[1]], self.built(record))
            else:
                conjuncts, iteration = self.late[-check[1] - 1]
                bound = self.binding(check[0])
                check[2] = conditions_hold(self.analysis, conjuncts, bound, iteration)
        return check[2]

    def built(self, record: tuple) -> Node:
        """The node of a record built of its captured events, under its ancestors where the
        record keeps its node made with them (for conditions that read above it)."""
        node = subtree(record[self.at][0], record[3])
        if self.made_at is not None and record[self.made_at] is not None:
            node.parent = record[self.made_at].parent
        return node

    def binding(self, binding: tuple) -> Binding:
        """A binding of the compiled run as one of nodes: those it captured built of their
        events, the others made of their records. A node captured inside another one's
        subtree is that subtree's node (one node, as on the Python automaton: ``$X//b``
        of nested nodes finds each ``b`` once)."""
        made: dict = {}  # id(record) -> its node: a record's events built into one once
        at = self.at
        slots = self.width + (self.analysis.query.groups if self.kept else 0)  # (entries too)
        records = [r for r in _records(binding[:slots]) if len(r) > at and r[at]]
        if len(records) > 1:  # outer nodes first: they hold the inner ones
            built: dict = {}  # (document, node id) -> a node of the subtrees built
            for record in sorted(records, key=lambda r: (r[3], r[0])):
                found = built.get((record[3], record[0]))
                if found is None:
                    found = self.built(record)
                    built.update((n.key, n) for n in _elements(found))
                made[id(record)] = found

        def node(record) -> Node:
            found = made.get(id(record))
            if found is None:
                captured = record[at] if len(record) > at else None
                found = self.built(record) if captured else self.nodes(record)
                made[id(record)] = found
            return found

        return binding_of(binding, self.analysis, self.width, self.kept, node)


def _records(slots) -> list:
    """The records of a binding's slots (a Kleene-* variable's: each)."""
    out = []
    for slot in slots:
        if slot is None or slot == ():
            continue
        out += slot if isinstance(slot[0], tuple) else (slot,)
    return out


def _elements(root: Node):
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in node.children if c.kind == ELEMENT]


def subtree(events: list, doc: int = 0) -> Node:
    """The element of captured events — (tag, attributes, node id) an open, (value, node
    id) a text, None a close — as a node of document ``doc``."""
    root = parent = None
    for event in events:
        if event is None:
            parent = parent.parent
        elif len(event) == 2:
            text = Node(TEXT_NODE, None, doc, event[1], parent)
            text.value = event[0]
            parent.children.append(text)
        else:
            node = Node.element(event[0], doc, event[2], parent, event[1])
            node.closed = True
            if parent is None:
                root = node
            else:
                parent.children.append(node)
            parent = node
    return root


class RecordNodes:
    """Nodes made of records for conditions, one per record while it is recent (conditions
    read the attributes a record keeps)."""

    def __init__(self, attributes: list) -> None:
        self.attributes = attributes  # (filled as the plan is made)
        self.made: dict = {}  # id(record) -> (record, its node): the record kept alive
        self.made_at = None  # where records keep their nodes made with ancestors, if they do

    def __call__(self, record: tuple) -> Node:
        if self.made_at is not None and record[self.made_at] is not None:
            node = record[self.made_at]  # (conditions read above it)
            node.closed = True  # (as the others: a record's node is read for its open tag)
            return node
        found = self.made.get(id(record))
        if found is not None:
            return found[1]
        if len(self.made) > 4096:
            self.made.clear()
        node_id, _, tag = record[:3]  # (and the document: HEAD fields before the values)
        if node_id == -1:  # a document's (or partition's) root: a group's entry
            node = Node(ROOT, None, -1, -1)
        else:
            values = zip(self.attributes, record[HEAD : HEAD + len(self.attributes)], strict=True)
            raw = [(n, v, -1) for n, v in values if v is not None]
            node = Node.element(tag, 0, node_id, None, raw)
        node.closed = True
        self.made[id(record)] = (record, node)
        return node


class ConditionsInPython:
    """Conditions on the open tags of a match's nodes (the where clause's per match,
    decided as the match is found, or at every iteration of a group), on its binding's
    records: each made a node (``RecordNodes``), which ``conditions_hold`` reads as it reads the
    automaton's nodes."""

    def __init__(self, analysis: Analysis, conjuncts, iteration: bool, nodes, width, kept) -> None:
        self.analysis = analysis
        self.conjuncts = conjuncts
        self.iteration = iteration
        self.nodes = nodes
        self.width = width  # the variables' slots
        self.kept = kept  # whether the groups' entries follow them

    def __call__(self, binding: tuple) -> bool:
        bound = binding_of(binding, self.analysis, self.width, self.kept, self.nodes)
        return conditions_hold(self.analysis, self.conjuncts, bound, self.iteration)


def binding_of(binding: tuple, analysis: Analysis, width: int, kept: bool, node) -> Binding:
    """A binding of the compiled run — per variable a record or a tuple of them (``width``
    slots), then per group the record it was entered at where ``prev()`` reads it, then
    its pending checks where it has some — as the automaton's ``Binding`` of nodes, each
    record made a node by ``node``; ``kept``: whether it keeps the groups' entries."""
    slots = tuple(
        None
        if slot is None
        else tuple(map(node, slot))
        if slot == () or isinstance(slot[0], tuple)
        else node(slot)
        for slot in binding[:width]
    )
    groups = analysis.query.groups
    entries = binding[width : width + groups] if kept else (None,) * groups
    return Binding(slots, tuple(None if e is None else node(e) for e in entries))
