"""The streaming XSeq engine: runs the VPA over the event stream in one pass.

A ``Run`` is one automaton run over one context (a document, or one
partition's virtual document). Its stack holds a ``Frame`` per open element;
runs that wait for a node (the automaton's wait states) sit in the frame
they wait in, so a subtree nobody waits in is skipped by a push and a pop,
and no run is ever restarted at a later position (the effect of VPSearch).
A thread is ``(state, binding, pending checks, conjuncts done)``.

What cannot be decided at an open tag (a predicate or condition that reads a
subtree) becomes a pending ``Check`` resolved when the subtree closes; only
those subtrees are kept in memory (captured). Matches leave through one
``Emitter`` queue in the documented order: by end node, then binding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from xcep.events import ATTR, OPEN, TEXT, EventBatch
from xcep.xseq import ast as A
from xcep.xseq.dom import ELEMENT, ROOT, TEXT_NODE, Node, test_matches
from xcep.xseq.evaluate import holds
from xcep.xseq.matches import (
    SELECTIONS,
    Aggregator,
    Binding,
    make_env,
    match_start,
    output_row,
)
from xcep.xseq.optimize import optimize
from xcep.xseq.parser import parse_query
from xcep.xseq.semantics import Analysis, analyze
from xcep.xseq.vpa import Vpa, compile_to_vpa

PENDING = None


class Check:
    """A condition waiting for subtrees to close; ``state`` becomes True or False."""

    __slots__ = ("count", "decide", "state")

    def __init__(self, decide: Callable[[], bool], count: int) -> None:
        self.decide = decide
        self.count = count
        self.state = PENDING

    def node_closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.state = bool(self.decide())
            self.decide = None


def needs_subtree(expr) -> bool:
    """Whether deciding ``expr`` on a node reads more than its tag, attributes and ancestors."""
    for node in A.walk(expr):
        if isinstance(node, A.RelPath):
            for step in A.walk(node.path):
                if isinstance(step, A.Step) and step.axis not in (
                    A.ATTRIBUTE,
                    *A.BACKWARD_AXES,
                ):
                    return True
    return False


def _ref_needs_subtree(ref: A.VarRef, as_value: bool) -> bool:
    if ref.path is None:
        return as_value
    return any(isinstance(step, A.Step) and step.axis != A.ATTRIBUTE for step in A.walk(ref.path))


def _subtree_refs(expr) -> list:
    """The variable references in ``expr`` whose nodes must be complete to evaluate it."""
    found = []

    def visit(node, as_value: bool) -> None:
        if isinstance(node, A.VarRef):
            if _ref_needs_subtree(node, as_value):
                found.append(node)
        elif isinstance(node, A.Tag):
            return
        elif isinstance(node, A.VarTest):
            if needs_subtree(node.cond) or _ref_needs_subtree(node.ref, False):
                found.append(node.ref)
        elif isinstance(node, A.Compare | A.Arith):
            visit(node.left, True)
            visit(node.right, True)
        elif isinstance(node, A.And | A.Or):
            visit(node.left, as_value)
            visit(node.right, as_value)
        elif isinstance(node, A.Not):
            visit(node.arg, as_value)

    visit(expr, False)
    return found


class Program:
    """A compiled query: the analysis, the automaton and what the runtime needs to know."""

    def __init__(self, analysis: Analysis, values_only: bool = False, router: bool = False) -> None:
        self.analysis = analysis
        self.vpa: Vpa = compile_to_vpa(analysis)
        self.states = self.vpa.states
        self.index = analysis.index
        self.kleene = analysis.kleene
        self.per_match = list(analysis.per_match)
        self.conjunct_refs = [_subtree_refs(c.cond) for c in self.per_match]
        self.conjunct_vars = [[self.index[v] for v in c.variables] for c in self.per_match]
        self.conjunct_kleene = [any(v in self.kleene for v in c.variables) for c in self.per_match]
        self.iteration = {
            g: (items, [r for c in items for r in _subtree_refs(c.cond)])
            for g, items in analysis.iteration.items()
        }
        captured: set[str] = set()
        for conjunct in analysis.per_match + [c for cs in analysis.iteration.values() for c in cs]:
            captured.update(r.var for r in _subtree_refs(conjunct.cond))
        output_refs = []
        if analysis.query.returns:
            for term in analysis.query.returns:
                output_refs += [n for n in A.walk(term.expr) if isinstance(n, A.VarRef)]
        for ref in output_refs:
            if _ref_needs_subtree(ref, as_value=True):
                captured.add(ref.var)
        self.captured_vars = captured
        # prev() of a first iteration is the group's entry node: capture it when read deeply
        self.captured_entries = {
            g for g, (items, refs) in self.iteration.items() if any(r.func == "prev" for r in refs)
        }
        self.capture_end = analysis.mode == "nodes" and not router  # a router prints nothing
        self.pred_subtree = {
            s.id: [needs_subtree(p) for p in s.step.preds]
            for s in self.states
            if s.step is not None
        }
        self.start = self.vpa.start
        # per wait state: (the name it waits for, None for any; the state a match goes to)
        self.tests = [
            (None if s.step.name == "*" else s.step.name, s.next[0]) if s.kind == "wait" else None
            for s in self.states
        ]
        self.join_width = {
            n.group: len(n.items) for n in A.walk(analysis.path) if isinstance(n, A.Intersect)
        }


_NONE = ()  # no run waits in this list yet


class Frame:
    """The stack entry of an open element: runs waiting among its children, its node.

    No ``__slots__``: most frames keep the class defaults below (nothing waits
    in them), and setting fewer attributes makes the push cheaper.
    """

    node: Node | None = None
    capture = False
    waiting: list | None = None  # checks waiting for this element to close
    # the waiting runs, by wait mode; a list once a run waits here
    any = nxt = desc = txt = dtxt = _NONE

    def __init__(self, tag, attrs, ident: int, doc: int, parent, dchain=(), dtchain=()) -> None:
        self.tag = tag
        self.attrs = attrs  # [(name, value, node id)]
        self.ident = ident
        self.doc = doc
        self.parent = parent
        self.dchain = dchain  # the desc lists of the frames above: they see opens here too
        self.dtchain = dtchain  # the same for descendant text

    def chains(self) -> tuple[tuple, tuple]:
        """The (dchain, dtchain) a child of this frame inherits."""
        dchain = (*self.dchain, self.desc) if self.desc else self.dchain
        dtchain = (*self.dtchain, self.dtxt) if self.dtxt else self.dtchain
        return dchain, dtchain

    def threads(self) -> Iterator:
        yield from self.any
        yield from self.nxt
        yield from self.desc
        yield from self.txt
        yield from self.dtxt


class Light(tuple):
    """A stack entry for an element nothing waits in: (tag, attrs, ident, doc, dchain, dtchain).

    Most elements of a document are such; a ``Light`` entry costs a tuple, and
    becomes a ``Frame`` only when a run must wait in it or read its node.
    """

    __slots__ = ()


class Run:
    """One automaton run over one context: a document or a partition's virtual document."""

    def __init__(self, program: Program, emitter: Emitter, root: Node, key=None) -> None:
        self.p = program
        self.emitter = emitter
        self.key = key
        self.capturing = 0
        self.joins: dict = {}  # intersect: (group, binding, node) -> {operand: checks}
        self.skip = 0  # depth inside a subtree no run waits in
        self.last_end = None  # skip-past-last: the end of the last match selected
        self.suspended: list = []  # stacks of enclosing elements of the same partition
        self.new_matches: list = []
        root_frame = Frame(None, [], root.id, root.doc, None)
        root_frame.node = root
        self.frames = [root_frame]
        binding = Binding.empty(program.analysis)
        self.closure([(s, binding, (), 0) for s in program.start], root_frame, None, root)
        self.flush_matches()

    # node access
    def node_of(self, frame: Frame) -> Node:
        if frame.node is None:
            parent = self.node_of(frame.parent)
            frame.node = Node.element(frame.tag, frame.doc, frame.ident, parent, frame.attrs)
        return frame.node

    def capture(self, node: Node, frame: Frame) -> None:
        """Keep the subtree of the open element ``node`` (its frame is ``frame``)."""
        if not frame.capture and not node.closed:
            frame.capture = True
            self.capturing += 1

    def wait_for(self, decide: Callable[[], bool], nodes: list[Node]) -> Check:
        check = Check(decide, len(nodes))
        for node in nodes:
            frame = self._frame_of(node)
            if frame.waiting is None:
                frame.waiting = []
            frame.waiting.append(check)
        return check

    def _frame_of(self, node: Node) -> Frame:
        for frames in (self.frames, *(stack for stack, *_ in self.suspended)):
            for frame in reversed(frames):
                if frame.__class__ is not Light and frame.node is node:
                    return frame
        raise AssertionError("waiting for a node that is not open")

    def suspend(self) -> None:
        """A partitioned element opens inside another of the same partition: it is the next
        child of the partition root, so it gets a stack of its own until it closes."""
        self.suspended.append((self.frames, self.capturing, self.skip))
        self.frames, self.capturing, self.skip = [self.frames[0]], 0, 0

    def resume(self) -> None:
        self.frames, self.capturing, self.skip = self.suspended.pop()

    # events
    def open(self, tag: str, attrs: list, ident: int, doc: int) -> None:
        if self.skip:
            self.skip += 1
            return
        frames = self.frames
        parent = frames[-1]
        tests = self.p.tests
        found = []
        if parent.__class__ is Light:
            dchain, dtchain = parent[4], parent[5]
            groups = dchain  # only descendant waiters from above can match here
        else:
            dchain, dtchain = parent.chains()
            waiting = parent.nxt
            if waiting:
                parent.nxt = _NONE
            groups = (waiting, parent.any, *dchain) if waiting or parent.any else dchain
        for group in groups:
            for thread in group:
                test, target = tests[thread[0]]
                if test is None or test == tag:
                    found.append((target, *thread[1:]))
        if not (found or self.capturing):
            if dchain or dtchain:
                frames.append(Light((tag, attrs, ident, doc, dchain, dtchain)))
            else:
                self.skip = 1  # nothing can happen below: skip the subtree
            return
        if parent.__class__ is Light:
            parent = self._real(len(frames) - 1)
        frame = Frame(tag, attrs, ident, doc, parent, dchain, dtchain)
        frames.append(frame)
        if self.capturing:
            node = self.node_of(frame)
            node.parent.children.append(node)
        if found:
            if self.joins:
                self.joins.clear()
            self.closure(found, frame, parent, None)
            self.flush_matches()

    def _real(self, index: int) -> Frame:
        """The frame at ``index`` of the stack, made a ``Frame`` if it was ``Light``."""
        entry = self.frames[index]
        if entry.__class__ is Light:
            tag, attrs, ident, doc, dchain, dtchain = entry
            entry = Frame(tag, attrs, ident, doc, self._real(index - 1), dchain, dtchain)
            self.frames[index] = entry
        return entry

    def text(self, value: str, ident: int) -> None:
        if self.skip:
            return
        frame = self.frames[-1]
        # a Light entry is never capturing (captured elements get frames); only its dtchain
        light = frame.__class__ is Light
        groups = frame[5] if light else (frame.txt, frame.dtxt, *frame.dtchain)
        states = self.p.states
        found = [(states[t[0]].next[0], *t[1:]) for group in groups for t in group]
        if found and light:
            frame = self._real(len(self.frames) - 1)
        node = None
        if self.capturing:
            node = Node(TEXT_NODE, None, frame.doc, ident, frame.node)
            node.value = value
            frame.node.children.append(node)
        if found:
            if node is None:
                node = Node(TEXT_NODE, None, frame.doc, ident, self.node_of(frame))
                node.value = value
            if self.joins:
                self.joins.clear()
            self.closure(found, None, None, node)
            self.flush_matches()

    def close(self) -> None:
        if self.skip:
            self.skip -= 1
            return
        frame = self.frames.pop()
        if frame.__class__ is Light:
            return
        if frame.node is not None:
            frame.node.closed = True
        if frame.capture:
            self.capturing -= 1
        if frame.waiting:
            for check in frame.waiting:
                check.node_closed()

    def live_threads(self) -> Iterator:
        for frames in (self.frames, *(stack for stack, *_ in self.suspended)):
            for frame in frames[1:] if frames is not self.frames else frames:
                if frame.__class__ is not Light:
                    yield from frame.threads()

    # the ε-closure
    def closure(self, items: list, child: Frame | None, sibling: Frame | None, node) -> None:
        """Follow the automaton from ``items`` at the current node.

        ``child`` is the frame of the current node's children (its own frame),
        ``sibling`` the frame it sits in; ``node`` is the current node when it
        is not the element of ``child``.
        """
        p = self.p
        states = p.states
        seen = set()
        stack = list(items)
        while stack:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            state_id, binding, checks, done = item
            if checks:
                checks = _live_checks(checks)
                if checks is None:
                    continue
            state = states[state_id]
            kind = state.kind
            if kind == "wait":
                frame = child if state.frame == "child" else sibling
                if frame is not None:
                    name = _LISTS[state.mode]
                    waiting = getattr(frame, name)
                    if waiting is _NONE:
                        waiting = []
                        setattr(frame, name, waiting)
                    waiting.append((state_id, binding, checks, done))
                continue
            here = node if node is not None else self.node_of(child)
            if kind == "match":
                step = state.step
                if state.test_here and not test_matches(step, here):
                    continue
                ok = True
                for pred, deep in zip(step.preds, p.pred_subtree[state_id], strict=True):
                    if deep and not here.closed:
                        self.capture(here, child)
                        check = self.wait_for(
                            lambda pred=pred, here=here: holds(pred, here), [here]
                        )
                        checks = (*checks, check)
                    elif not holds(pred, here):
                        ok = False
                        break
                if not ok:
                    continue
                if step.var:
                    binding = binding.bind(p.index[step.var], here, step.var in p.kleene)
                    if step.var in p.captured_vars and here.kind == ELEMENT:
                        self.capture(here, child)
                    result = self.check_bound(binding, checks, done)
                    if result is None:
                        continue
                    checks, done = result
            elif kind == "enter":
                if state.group in p.captured_entries and here.kind == ELEMENT:
                    self.capture(here, child)
                binding = binding.enter(state.group, here)
            elif kind == "iter":
                items_refs = p.iteration.get(state.group)
                if items_refs:
                    checks = self.check(items_refs[0], items_refs[1], binding, checks, True)
                    if checks is None:
                        continue
            elif kind == "ienter":
                entries = list(binding.entries)
                entries[state.group] = here  # the context node of this intersect
                binding = Binding(binding.slots, tuple(entries))
            elif kind == "join":
                key = (state.group, binding.slots, binding.entries[state.group], here)
                reached = self.joins.setdefault(key, {})
                if state.mode in reached:
                    continue
                reached[state.mode] = checks
                if len(reached) < self.p.join_width[state.group]:
                    continue
                checks = tuple(c for found in reached.values() for c in found)
            elif kind == "attr":
                for attr in here.attrs:
                    if test_matches(state.step, attr):
                        self.closure(
                            [(n, binding, checks, done) for n in state.next], None, None, attr
                        )
                continue
            elif kind == "accept":
                remaining = [c for i, c in enumerate(p.per_match) if not done >> i & 1]
                if remaining:
                    refs = [
                        r
                        for i, refs in enumerate(p.conjunct_refs)
                        if not done >> i & 1
                        for r in refs
                    ]
                    checks = self.check(remaining, refs, binding, checks, False)
                    if checks is None:
                        continue
                if p.capture_end and here.kind == ELEMENT:
                    self.capture(here, child)
                self.new_matches.append((here, binding, checks))
                continue
            for target in state.next:
                stack.append((target, binding, checks, done))

    def check_bound(self, binding: Binding, checks: tuple, done: int):
        """Check the per-match conjuncts over plain variables that are now all bound."""
        p = self.p
        for i, conjunct in enumerate(p.per_match):
            if done >> i & 1 or p.conjunct_kleene[i]:
                continue
            if any(binding.slots[v] is None for v in p.conjunct_vars[i]):
                continue
            done |= 1 << i
            checks = self.check([conjunct], p.conjunct_refs[i], binding, checks, False)
            if checks is None:
                return None
        return checks, done

    def check(self, conjuncts, refs, binding: Binding, checks: tuple, iteration: bool):
        """Decide ``conjuncts`` now, or add a pending check: the new checks, None if false."""
        env = make_env(self.p.analysis, binding, iteration)
        open_nodes = []
        for ref in refs:
            for n in env(ref):
                if n.kind == ELEMENT and not n.closed and n not in open_nodes:
                    open_nodes.append(n)

        def decide() -> bool:
            return all(holds(c.cond, None, env) for c in conjuncts)

        if not open_nodes:
            return checks if decide() else None
        return (*checks, self.wait_for(decide, open_nodes))

    def flush_matches(self) -> None:
        if self.new_matches:
            self.emitter.add(self, self.new_matches)
            self.new_matches = []


_LISTS = {"any": "any", "next": "nxt", "desc": "desc", "text": "txt", "dtext": "dtxt"}


def _live_checks(checks: tuple):
    """The still pending checks, or None when one of them failed."""
    live = []
    for check in checks:
        if check.state is PENDING:
            live.append(check)
        elif check.state is False:
            return None
    return tuple(live)


class Emitter:
    """Orders matches (end node, then binding), merges duplicates, waits for checks and
    subtrees, applies the selection policy, and hands out rows or feeds the aggregates."""

    def __init__(self, analysis: Analysis, selection: str, values_only: bool, sink) -> None:
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, not {selection!r}")
        self.analysis = analysis
        self.selection = selection
        self.values_only = values_only
        self.sink = sink  # called with each row
        self.queue: deque = deque()
        self.aggregator = (
            Aggregator(analysis, values_only) if analysis.mode in ("aggregate", "grouped") else None
        )
        self.runs: dict = {}  # run -> its entries awaiting selection

    def add(self, run: Run, matches: list) -> None:
        merged: dict = {}
        for end, binding, checks in matches:
            key = (id(end), binding.match_key())
            entry = merged.get(key)
            if entry is None:
                merged[key] = entry = _Entry(run, end, binding)
            entry.alternatives.append(checks)
        for entry in sorted(merged.values(), key=_order):
            self.queue.append(entry)
            if self.selection != "all":
                entry.start = match_start(entry.binding, entry.end)
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
                if self.aggregator is not None:
                    self.aggregator.add(entry.run.key, entry.binding)
                else:
                    self.sink(output_row(self.analysis, entry.binding, entry.end, self.values_only))

    def abandon(self, run: Run) -> None:
        """Forget the matches of a run over a document found malformed."""
        kept = [e for e in self.queue if e.run is not run]
        self.queue.clear()
        self.queue.extend(kept)
        self.runs.pop(run, None)

    def finish(self, partitions: list | None = None) -> None:
        self.pump(final=True)
        if self.aggregator is not None:
            for row in self.aggregator.rows(partitions):
                self.sink(row)

    def _select(self, final: bool) -> None:
        for run, entries in list(self.runs.items()):
            floor = None
            if not final:
                starts = [match_start(t[1], None) for t in run.live_threads() if t[1].nodes()]
                floor = min(starts, default=None)
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
                winners = [e for e in group if e.verdict]
                for e in group:
                    e.selected = False
                best = max((e.end.key for e in winners), default=None)
                if self.selection == "maximal":
                    for e in winners:
                        e.selected = e.end.key == best
                elif winners and (run.last_end is None or first > run.last_end):
                    min((e for e in winners if e.end.key == best), key=_order).selected = True
                    run.last_end = best
                entries[:] = [e for e in entries if e.start != first]
            if not entries:
                del self.runs[run]


def _order(entry) -> tuple:
    return (entry.end.key, entry.binding.sort_key())


class _Entry:
    __slots__ = ("alternatives", "binding", "end", "run", "selected", "start", "verdict")

    def __init__(self, run: Run, end: Node, binding: Binding) -> None:
        self.run = run
        self.end = end
        self.binding = binding
        self.alternatives: list = []
        self.verdict = PENDING
        self.selected = PENDING
        self.start = None

    def resolve(self):
        pending = False
        for checks in self.alternatives:
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


class XSeqEngine:
    """Runs one XSeq query over an event stream and yields its output rows.

    >>> engine = XSeqEngine("//a/@id")
    >>> from xcep.events import EventStream
    >>> rows = list(engine.run(EventStream(...).batches()))  # doctest: +SKIP
    """

    def __init__(
        self,
        query,
        selection: str = "all",
        values_only: bool = False,
        schema=None,
        opt: str = "prefix",
    ) -> None:
        """``schema`` (a ``Dtd`` or ``LearnedSchema``) enables the rewrites of ``opt``
        (``xcep.xseq.optimize``: ``none`` or ``prefix``)."""
        if not isinstance(query, Analysis):
            parsed = parse_query(query) if isinstance(query, str) else query
            query = analyze(optimize(parsed, schema, opt))
        self.analysis = query
        self.selection = selection
        self.values_only = values_only
        self.program = Program(self.analysis, values_only)
        self.router = None
        if self.analysis.partition is not None:
            element_path, self.partition_attribute = self.analysis.partition
            route = analyze(A.Query(element_path, None, None, None, self.analysis.query.text))
            self.router = Program(route, router=True)

    @property
    def vpa(self) -> Vpa:
        return self.program.vpa

    def explain(self) -> str:
        """The parsed query (variables, conditions, partition) and the automaton, as text."""
        analysis = self.analysis
        lines = [f"query: {' '.join(analysis.query.text.split())}", f"mode: {analysis.mode}"]
        for name in analysis.variables:
            group = analysis.kleene.get(name)
            where = f"under Kleene-* group {group}" if group is not None else "one node"
            lines.append(f"variable ${name}: {where}")
        for group, conjuncts in sorted(analysis.iteration.items()):
            for conjunct in conjuncts:
                text = A.to_text(conjunct.cond)
                lines.append(f"condition at every iteration of group {group}: {text}")
        for conjunct in analysis.per_match:
            lines.append(f"condition per match: {A.to_text(conjunct.cond)}")
        if analysis.partition is not None:
            path, attribute = analysis.partition
            lines.append(f"partition by: {A.to_text(path)}@{attribute}")
        lines.append(f"path run by the automaton: {A.to_text(analysis.path)}")
        lines += ["", f"automaton ({len(self.vpa.states)} states):", self.vpa.describe()]
        return "\n".join(lines)

    def run(self, batches: Iterable[EventBatch], final: bool = True) -> Iterator[list]:
        """The output rows, each as soon as it is known (aggregates at the end).

        ``final=False``: the input is only a prefix of the stream; give the rows known
        after it and stop, without the rows that only the end of the stream decides
        (aggregates, matches a longer one might still replace). A later run over a longer
        prefix gives these rows again, first, in the same order.
        """
        rows: list = []
        emitter = Emitter(self.analysis, self.selection, self.values_only, rows.append)
        stream = _Stream(self, emitter) if self.router is not None else _Documents(self, emitter)
        tag = attrs = opened = None  # an open tag waiting for its attributes
        open_ = text = close = None
        queue = emitter.queue
        for batch in batches:
            names = batch.symbols.names
            for number, start, end in batch.document_runs():
                if tag is not None:  # the open tag's attributes ended with its document
                    open_(tag, attrs, opened, stream.doc)
                    tag = None
                if number != stream.doc:
                    stream.start_document(number)
                    open_, text, close = stream.open, stream.text, stream.close
                part = slice(start, end)
                for kind, name, value, ident in zip(
                    batch.kinds[part],
                    batch.names[part],
                    batch.values[part],
                    batch.nodes[part],
                    strict=True,
                ):
                    if kind == ATTR:
                        attrs.append((names[name], value, ident))
                        continue
                    if tag is not None:
                        open_(tag, attrs, opened, number)
                        tag = None
                    if kind == OPEN:
                        tag, attrs, opened = names[name], [], ident
                    elif kind == TEXT:
                        text(value, ident)
                    else:
                        close()
                        if queue:
                            emitter.pump()
                            if rows:
                                yield from rows
                                rows.clear()
        if tag is not None:
            open_(tag, attrs, opened, stream.doc)
        if not final:
            return
        stream.start_document(None)
        emitter.finish(list(stream.partitions) if self.router is not None else None)
        yield from rows


class _Documents:
    """Hands the events of each document to a run of its own (no partition by)."""

    def __init__(self, engine: XSeqEngine, emitter: Emitter) -> None:
        self.engine = engine
        self.emitter = emitter
        self.run: Run | None = None
        self.doc = None

    def start_document(self, number) -> None:
        """A new document begins (``None``: the stream ended); drop what a broken one left."""
        if self.run is not None and (len(self.run.frames) > 1 or self.run.skip):
            self.emitter.abandon(self.run)  # its root never closed: the document was malformed
        self.doc = number
        if number is not None:
            self.run = Run(self.engine.program, self.emitter, Node(ROOT, None, number, -1))
            self.open, self.text, self.close = self.run.open, self.run.text, self.run.close


class _Stream:
    """Routes the events of the stream to the runs: one per document, or one per partition."""

    def __init__(self, engine: XSeqEngine, emitter: Emitter) -> None:
        self.engine = engine
        self.emitter = emitter
        self.partitions: dict = {}
        self.hits: list = []
        self.routing: list = []  # (depth, run) of the partitioned elements open now
        self.router: Run | None = None  # finds the partitioned elements (partition by)
        self.doc = None
        self.depth = 0  # of the open elements: not 0 at a document change if it was malformed

    def start_document(self, number) -> None:
        """A new document begins (``None``: the stream ended); drop what a broken one left."""
        if self.depth:
            for _, target in reversed(self.routing):
                while len(target.frames) > 1 or target.skip:
                    target.close()
                if target.suspended:
                    target.resume()
        self.routing.clear()
        self.doc, self.depth = number, 0
        if number is None:
            return
        self.router = Run(self.engine.router, _Collector(self.hits), Node(ROOT, None, number, -1))

    def open(self, tag, attrs, ident, number) -> None:
        self.depth += 1
        self.router.open(tag, attrs, ident, number)
        if self.hits:
            self.hits.clear()
            attribute = self.engine.partition_attribute
            key = next((v for n, v, _ in attrs if n == attribute), None)
            if key is not None:
                target = self.partitions.get(key)
                if target is None:
                    root = Node(ROOT, None, -1, -1)
                    target = Run(self.engine.program, self.emitter, root, key)
                    self.partitions[key] = target
                if len(target.frames) > 1 or target.skip:
                    target.suspend()
                self.routing.append((self.depth, target))
        if self.routing:
            self.routing[-1][1].open(tag, attrs, ident, number)

    def text(self, value, ident) -> None:
        if self.routing:
            self.routing[-1][1].text(value, ident)

    def close(self) -> None:
        self.router.close()
        if self.routing:
            self.routing[-1][1].close()
            if self.routing[-1][0] == self.depth:
                _, target = self.routing.pop()
                if target.suspended:
                    target.resume()
        self.depth -= 1


class _Collector:
    """The emitter of the partition router: it only notes that a partitioned element opened."""

    def __init__(self, hits: list) -> None:
        self.hits = hits

    def add(self, run: Run, matches: list) -> None:
        self.hits.extend(matches)
