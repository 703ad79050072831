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
from dataclasses import replace
from functools import partial

from xcep.errors import StateError
from xcep.events import ATTR, OPEN, TEXT, EventBatch
from xcep.xseq import ast as A
from xcep.xseq.conditions import MemberConditions
from xcep.xseq.dom import ELEMENT, ROOT, TEXT_NODE, Node, test_matches
from xcep.xseq.evaluate import holds
from xcep.xseq.machine import SHARED, Machine, TransitionCache, needs_subtree
from xcep.xseq.matches import (
    Aggregator,
    Binding,
    check_selection,
    make_env,
    match_start,
    output_row,
)
from xcep.xseq.optimize import optimize
from xcep.xseq.parser import parse_query
from xcep.xseq.paths import PlainPath, PlainPathRun
from xcep.xseq.runs import XSeqRun
from xcep.xseq.runs import load as load_run
from xcep.xseq.semantics import Analysis, NotFast, analyze
from xcep.xseq.sequence import SequencePattern, SequenceRun
from xcep.xseq.vpa import Vpa, compile_to_vpa

PENDING = None


class Check:
    """A condition waiting for subtrees to close; ``state`` becomes True or False."""

    __slots__ = ("count", "decide", "nodes", "state")

    def __init__(self, decide: Callable[[], bool], nodes: list) -> None:
        self.decide = decide
        self.nodes = nodes  # the open nodes it waits for
        self.count = len(nodes)
        self.state = PENDING

    def node_closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.state = bool(self.decide())
            self.decide = self.nodes = None


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
    """A compiled query: its analysis, its automaton and what the runtime needs to know."""

    def __init__(self, analysis: Analysis, router: bool = False) -> None:
        self.analysis = analysis
        self.vpa: Vpa = compile_to_vpa(analysis)
        self.empty = Binding.empty(analysis)
        self.index = analysis.index
        self.kleene = analysis.kleene
        self.set_per_match(analysis.per_match)
        self.iteration = {
            g: (items, [r for c in items for r in _subtree_refs(c.cond)])
            for g, items in analysis.iteration.items()
        }
        self.captured_vars = _captured_vars(analysis)
        self.members: dict | None = None  # a template's queries: slot -> Member
        self.interned: dict = {}  # a template's members' variable references
        self.conditions = MemberConditions()  # its members' per-match conditions
        self.member_refs: dict = {}  # id -> the references those read subtrees through
        self.shared_output = None  # a template's TemplateEmitter key, when it has one
        # prev() of a first iteration is the group's entry node: capture it when read deeply
        self.captured_entries = {
            g for g, (items, refs) in self.iteration.items() if any(r.func == "prev" for r in refs)
        }
        self.capture_end = analysis.mode == "nodes" and not router  # a router prints nothing
        self.join_width = {
            n.group: len(n.items) for n in A.walk(analysis.path) if isinstance(n, A.Intersect)
        }

    def set_per_match(self, conjuncts: list) -> None:
        """The per-match conjuncts this automaton checks, each as early as it can."""
        self.per_match = list(conjuncts)
        self.conjunct_refs = [_subtree_refs(c.cond) for c in self.per_match]
        self.conjunct_vars = [[self.index[v] for v in c.variables] for c in self.per_match]
        self.conjunct_kleene = [any(v in self.kleene for v in c.variables) for c in self.per_match]

    def join(self, slot: int, analysis: Analysis) -> None:
        """Make the query of ``analysis`` a member of this template. The template checks
        (early) the per-match conjuncts all its members have; each member checks the rest
        when a match completes."""
        if not self.members:
            self.set_per_match(analysis.per_match)
        common = [c for c in self.per_match if c in analysis.per_match]
        demoted = [c for c in self.per_match if c not in common]
        if demoted:
            self.set_per_match(common)
            for other, member in self.members.items():
                member.add_conditions(demoted, self.interned)
                self.conditions.set(other, member.per_match)
        member = Member(analysis, [c for c in analysis.per_match if c not in common], self.interned)
        self.members[slot] = member
        self.conditions.set(slot, member.per_match)
        self.captured_vars |= member.captured_vars
        for reading in self.members.values() if demoted else (member,):
            self.member_refs.update((id(r), r) for r in reading.refs)

    def leave(self, slot: int) -> None:
        del self.members[slot]
        self.conditions.drop(slot)


def _captured_vars(analysis: Analysis) -> set[str]:
    """The variables whose subtrees conditions or outputs read: their nodes are kept."""
    captured: set[str] = set()
    for conjunct in analysis.per_match + [c for cs in analysis.iteration.values() for c in cs]:
        captured.update(r.var for r in _subtree_refs(conjunct.cond))
    if analysis.query.returns:
        for term in analysis.query.returns:
            for ref in A.walk(term.expr):
                if isinstance(ref, A.VarRef) and _ref_needs_subtree(ref, as_value=True):
                    captured.add(ref.var)
    return captured


class Member:
    """A query run by a template's automaton (``Program.members``): queries that differ
    only in their per-match conditions share one automaton, one thread per partial match;
    each member checks its own conditions when a match is complete. Its variable
    references are interned in the template's table, so that the members' conditions
    read each value once per match (``make_env(memo=True)``)."""

    def __init__(self, analysis: Analysis, conjuncts: list, refs: dict) -> None:
        self.analysis = analysis
        self.per_match: list = []
        self.refs: list = []
        self.add_conditions(conjuncts, refs)
        self.captured_vars = _captured_vars(analysis)

    def add_conditions(self, conjuncts: list, refs: dict) -> None:
        for conjunct in conjuncts:
            conjunct = replace(conjunct, cond=_intern_refs(conjunct.cond, refs))
            self.per_match.append(conjunct)
            self.refs += _subtree_refs(conjunct.cond)


def _intern_refs(node, table: dict):
    """``node`` with each variable reference replaced by the equal one of ``table``."""
    return A.map_condition(
        node, lambda n: table.setdefault(n, n) if isinstance(n, A.VarRef) else None
    )


class Verdicts(Check):
    """One pending decision for all members of a template on one match: ``passed`` is the
    set of members whose conditions hold."""

    __slots__ = ("passed",)

    def __init__(self, decide: Callable[[], set], nodes: list) -> None:
        super().__init__(decide, nodes)
        self.passed = None

    def node_closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.passed = self.decide()
            self.state = True
            self.decide = None


class MemberCheck:
    """A member's view of ``Verdicts``: a check like the others."""

    __slots__ = ("slot", "verdicts")

    def __init__(self, verdicts: Verdicts, slot: int) -> None:
        self.verdicts = verdicts
        self.slot = slot

    @property
    def state(self):
        passed = self.verdicts.passed
        return PENDING if passed is None else self.slot in passed

    @property
    def nodes(self) -> list:
        return self.verdicts.nodes


def template_key(analysis: Analysis) -> tuple:
    """Queries with the same key can share a template: all but their per-match conditions
    and outputs are the same."""
    iteration = tuple(
        (g, tuple(c.cond for c in cs)) for g, cs in sorted(analysis.iteration.items())
    )
    return (analysis.path, analysis.variables, iteration, analysis.mode == "nodes")


def single_machine(program: Program) -> Machine:
    """The automaton of one query."""
    machine = Machine()
    machine.add(program)
    return machine


_NONE = ()  # no run waits in this list yet


class Frame:
    """The stack entry of an open element: runs waiting among its children, its node.

    No ``__slots__``: most frames keep the class defaults below (nothing waits
    in them), and setting fewer attributes makes the push cheaper.
    """

    node: Node | None = None
    capture = False
    waiting: list | None = None  # checks waiting for this element to close
    wake: list | None = None  # emitters whose next row waits for this element to close
    # the waiting runs, by wait mode; a list once a run waits here
    any = nxt = desc = txt = dtxt = _NONE

    _chains = None  # what its children inherit, once the first one opens

    def __init__(
        self, tag, attrs, ident: int, doc: int, parent, dchain=(), dtchain=(), dkey=None, dnames=()
    ) -> None:
        self.tag = tag
        self.attrs = attrs  # [(name, value, node id)]
        self.ident = ident
        self.doc = doc
        self.parent = parent
        self.dchain = dchain  # the desc lists of the frames above: they see opens here too
        self.dtchain = dtchain  # the same for descendant text
        self.dkey = dkey  # the transition cache's name for the states waiting in dchain
        self.dnames = dnames  # the names they wait for (None: one waits for any element)

    def chains(self, cache: TransitionCache, tests: list) -> tuple:
        """The (dchain, dtchain, dkey, dnames) a child of this frame inherits (its desc
        list is complete once a child opens: waits are added when their frame opens)."""
        chains = self._chains
        if chains is None:
            dchain, dkey, dnames = self.dchain, self.dkey, self.dnames
            if self.desc:
                dchain = (*dchain, self.desc)
                dkey = cache.key(dchain)
                names = {tests[t[0]][0] for t in self.desc}
                dnames = None if dnames is None or None in names else frozenset(dnames) | names
            dtchain = (*self.dtchain, self.dtxt) if self.dtxt else self.dtchain
            chains = self._chains = (dchain, dtchain, dkey, dnames)
        return chains

    def threads(self) -> Iterator:
        yield from self.any
        yield from self.nxt
        yield from self.desc
        yield from self.txt
        yield from self.dtxt


# A stack entry for an element nothing waits in: a plain tuple
# (tag, attrs, ident, doc, dchain, dtchain, dkey, dnames). Most elements of a document are
# such; it becomes a ``Frame`` only when a run must wait in it or read its node.
Light = tuple


class Run:
    """One automaton run over one context: a document or a partition's virtual document."""

    def __init__(self, machine: Machine, outputs, root: Node, key=None) -> None:
        self.m = machine.ready()
        self.outputs = outputs  # .add(run, slot, matches): the matches of the query in slot
        self.key = key
        self.capturing = 0
        self.joins: dict = {}  # intersect: (group, binding, node) -> {operand: checks}
        self.skip = 0  # depth inside a subtree no run waits in
        self.suspended: list = []  # stacks of enclosing elements of the same partition
        self.new_matches: dict = {}  # slot -> [(end node, binding, checks)]
        self.root = root
        root_frame = Frame(None, [], root.id, root.doc, None)
        root_frame.node = root
        self.frames = [root_frame]
        self.closure([(s, SHARED, (), 0) for s in machine.start], root_frame, None, root)
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

    def wait_for(self, decide: Callable, nodes: list[Node], kind=Check) -> Check:
        check = kind(decide, nodes)
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
        tests = self.m.tests
        found = []
        if parent.__class__ is Light:
            dchain, dtchain, dkey, dnames = parent[4:]
        else:
            dchain, dtchain, dkey, dnames = parent.chains(self.m.cache, tests)
            waiting = parent.nxt
            if waiting:
                parent.nxt = _NONE
            if waiting or parent.any:
                for group in (waiting, parent.any):
                    for thread in group:
                        test, target = tests[thread[0]]
                        if test is None or test == tag:
                            found.append((target, *thread[1:]))
        if not dchain or (dnames is not None and tag not in dnames):
            pass  # no descendant waiter waits for this name
        elif dkey is not None:  # many descendant waiters: the cached transition
            for g, i, target in self.m.cache.moves(dkey, tag, dchain, tests):
                found.append((target, *dchain[g][i][1:]))
        else:
            for group in dchain:
                for thread in group:
                    test, target = tests[thread[0]]
                    if test is None or test == tag:
                        found.append((target, *thread[1:]))
        if not (found or self.capturing):
            if dchain or dtchain:
                frames.append((tag, attrs, ident, doc, dchain, dtchain, dkey, dnames))
            else:
                self.skip = 1  # nothing can happen below: skip the subtree
            return
        if parent.__class__ is Light:
            parent = self._real(len(frames) - 1)
        frame = Frame(tag, attrs, ident, doc, parent, dchain, dtchain, dkey, dnames)
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
            entry = Frame(*entry[:4], self._real(index - 1), *entry[4:])
            self.frames[index] = entry
        return entry

    def text(self, value: str, ident: int) -> None:
        if self.skip:
            return
        frame = self.frames[-1]
        # a Light entry is never capturing (captured elements get frames); only its dtchain
        light = frame.__class__ is Light
        if light:
            groups = frame[5]
            if not groups:
                return
        else:
            groups = (frame.txt, frame.dtxt, *frame.dtchain)
        tests = self.m.tests
        found = [(tests[t[0]][1], *t[1:]) for group in groups for t in group]
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
        if frame.wake:
            active = self.outputs.active
            for emitter in frame.wake:
                active[emitter] = None

    def live_threads(self) -> Iterator:
        for frame in self._frames():
            yield from frame.threads()

    def _frames(self) -> Iterator[Frame]:
        for frames in (self.frames, *(stack for stack, *_ in self.suspended)):
            for frame in frames[1:] if frames is not self.frames else frames:
                if frame.__class__ is not Light:
                    yield frame

    def forget(self, owner: int) -> None:
        """Drop the threads of the automaton part ``owner`` (and of shared states now dead)."""
        states, dead = self.m.states, self.m.removed
        for frame in self._frames():
            for name in _LISTS.values():
                waiting = getattr(frame, name)
                if waiting:
                    kept = [t for t in waiting if states[t[0]].owner != owner and t[0] not in dead]
                    setattr(frame, name, kept)
            frame._chains = None  # its next children see the lists without them

    # the ε-closure
    def closure(self, items: list, child: Frame | None, sibling: Frame | None, node) -> None:
        """Follow the automaton from ``items`` at the current node.

        ``child`` is the frame of the current node's children (its own frame),
        ``sibling`` the frame it sits in; ``node`` is the current node when it
        is not the element of ``child``.
        """
        machine = self.m
        states = machine.states
        programs = machine.programs
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
                if step.preds:
                    checks = self.predicates(state_id, step, here, child, checks)
                    if checks is None:
                        continue
                if step.var:
                    p = programs[state.owner]
                    binding = binding.bind(p.index[step.var], here, step.var in p.kleene)
                    if step.var in p.captured_vars and here.kind == ELEMENT:
                        self.capture(here, child)
                    result = self.check_bound(p, binding, checks, done)
                    if result is None:
                        continue
                    checks, done = result
            elif kind == "begin":
                binding = programs[state.owner].empty
            elif kind == "split" and state_id in machine.fanout:  # many @a = 'v' predicates
                by_attribute, others = machine.fanout[state_id]
                targets = list(others)
                for attribute, by_value in by_attribute.items():
                    value = here.attribute(attribute) if here.kind == ELEMENT else None
                    targets += by_value.get(value, ())
                for target in targets:
                    stack.append((target, binding, checks, done))
                continue
            elif kind == "enter":
                if state.group in programs[state.owner].captured_entries and here.kind == ELEMENT:
                    self.capture(here, child)
                binding = binding.enter(state.group, here)
            elif kind == "iter":
                p = programs[state.owner]
                items_refs = p.iteration.get(state.group)
                if items_refs:
                    checks = self.check(p, items_refs[0], items_refs[1], binding, checks, True)
                    if checks is None:
                        continue
            elif kind == "ienter":
                entries = list(binding.entries)
                entries[state.group] = here  # the context node of this intersect
                binding = Binding(binding.slots, tuple(entries))
            elif kind == "join":
                key = (state.owner, state.group, binding.slots, binding.entries[state.group], here)
                reached = self.joins.setdefault(key, {})
                if state.mode in reached:
                    continue
                reached[state.mode] = checks
                if len(reached) < programs[state.owner].join_width[state.group]:
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
                p = programs[state.owner]
                remaining = [c for i, c in enumerate(p.per_match) if not done >> i & 1]
                if remaining:
                    refs = [
                        r
                        for i, refs in enumerate(p.conjunct_refs)
                        if not done >> i & 1
                        for r in refs
                    ]
                    checks = self.check(p, remaining, refs, binding, checks, False)
                    if checks is None:
                        continue
                if p.members is not None:
                    self.accept_members(p, here, child, binding, checks)
                    continue
                if p.capture_end and here.kind == ELEMENT:
                    self.capture(here, child)
                matches = self.new_matches.get(state.owner)
                if matches is None:
                    matches = self.new_matches[state.owner] = []
                matches.append((here, binding, checks))
                continue
            for target in state.next:
                stack.append((target, binding, checks, done))

    def predicates(self, state_id: int, step: A.Step, here, child, checks: tuple):
        """The checks after the step's predicates on ``here`` (those that read the subtree
        of an open element become pending checks); None if one fails."""
        deeps = self.m.pred_subtree[state_id]
        for pred, deep in zip(step.preds, deeps, strict=True):
            if deep and not here.closed:
                self.capture(here, child)
                check = self.wait_for(partial(holds, pred, here), [here])
                checks = (*checks, check)
            elif not holds(pred, here):
                return None
        return checks

    def accept_members(self, p: Program, here, child, binding: Binding, checks: tuple) -> None:
        """A template's match: each member query checks its own per-match conditions, all
        at once (one pending decision, each value read once)."""
        members = p.members
        conditional = p.conditions.members  # slot -> its conjuncts, for those with some
        verdicts = None
        if conditional:
            env = make_env(p.analysis, binding, False, memo=True)
            decide = partial(p.conditions.decide, env)

            open_nodes = {}
            for ref in p.member_refs.values():
                for n in env(ref):
                    if n.kind == ELEMENT and not n.closed:
                        open_nodes[id(n)] = n
            if open_nodes:
                verdicts = self.wait_for(decide, list(open_nodes.values()), Verdicts)
                passed = None
            else:
                passed = decide()
        if p.capture_end and here.kind == ELEMENT:
            self.capture(here, child)
        new_matches = self.new_matches
        if p.shared_output is not None:  # one entry for all members (TemplateEmitter)
            if conditional:
                if verdicts is None:
                    if not passed and len(conditional) == len(members):
                        return
                    verdicts = Verdicts(None, [])
                    verdicts.passed, verdicts.state = passed, True
                checks = (*checks, verdicts)
            matches = new_matches.get(p.shared_output)
            if matches is None:
                matches = new_matches[p.shared_output] = []
            matches.append((here, binding, checks))
            return
        for slot, member in members.items():
            found = checks
            if member.per_match:
                if verdicts is not None:
                    found = (*checks, MemberCheck(verdicts, slot))
                elif slot not in passed:
                    continue
            matches = new_matches.get(slot)
            if matches is None:
                matches = new_matches[slot] = []
            matches.append((here, binding, found))

    def check_bound(self, p: Program, binding: Binding, checks: tuple, done: int):
        """Check the per-match conjuncts over plain variables that are now all bound."""
        for i, conjunct in enumerate(p.per_match):
            if done >> i & 1 or p.conjunct_kleene[i]:
                continue
            if any(binding.slots[v] is None for v in p.conjunct_vars[i]):
                continue
            done |= 1 << i
            checks = self.check(p, [conjunct], p.conjunct_refs[i], binding, checks, False)
            if checks is None:
                return None
        return checks, done

    def check(self, p: Program, conjuncts, refs, binding: Binding, checks: tuple, iteration: bool):
        """Decide ``conjuncts`` now, or add a pending check: the new checks, None if false."""
        env = make_env(p.analysis, binding, iteration)
        open_nodes = []
        for ref in refs:
            for n in env(ref):
                if n.kind == ELEMENT and not n.closed and n not in open_nodes:
                    open_nodes.append(n)
        decide = partial(_all_hold, conjuncts, env)
        if not open_nodes:
            return checks if decide() else None
        return (*checks, self.wait_for(decide, open_nodes))

    def flush_matches(self) -> None:
        if self.new_matches:
            for slot, matches in self.new_matches.items():
                self.outputs.add(self, slot, matches)
            self.new_matches = {}


_LISTS = {"any": "any", "next": "nxt", "desc": "desc", "text": "txt", "dtext": "dtxt"}


def _all_hold(conjuncts, env) -> bool:
    return all(holds(c.cond, None, env) for c in conjuncts)


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
        self.owner = owner  # the machine's owner of the query's states
        self.last_end: dict = {}  # skip-past-last: per run, the end of the last match selected

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
                    match_start(t[1], None)
                    for t in run.live_threads()
                    if t[1].nodes() and states[t[0]].owner == self.owner
                ]
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
                elif winners and (run not in self.last_end or first > self.last_end[run]):
                    min((e for e in winners if e.end.key == best), key=_order).selected = True
                    self.last_end[run] = best
                entries[:] = [e for e in entries if e.start != first]
            if not entries:
                del self.runs[run]


class TemplateEmitter(Emitter):
    """The emitter of a template's member queries under selection ``all``: one entry per
    match of the template, in the one order they share; at its turn each member whose
    conditions held (``Verdicts``, the entry's last check) gets its row, through its
    own ``Emitter`` (in ``members``: its outputs and aggregates, never queued)."""

    def __init__(self, program: Program, owner: int) -> None:
        super().__init__(program.analysis, "all", False, None, owner)
        self.program = program
        self.members: dict[int, Emitter] = {}
        self.outputs: dict = {}  # return clauses of the members, interned

    def join(self, slot: int, emitter: Emitter) -> None:
        self.members[slot] = emitter
        emitter.returns = self.outputs.setdefault(emitter.analysis.query.returns, emitter)

    def add(self, run: Run, matches: list) -> None:
        super().add(run, matches)
        for entry in reversed(self.queue):
            if entry.verdicts is not None:
                break
            checks = entry.alternatives[0]
            entry.verdicts = checks[-1] if checks and checks[-1].__class__ is Verdicts else ()

    def emit(self, entry: _Entry) -> None:
        verdicts = entry.verdicts
        passed = verdicts.passed if verdicts else ()
        conditions = self.program.members
        rows: dict = {}  # members with the same return clause print the same row
        for slot, emitter in self.members.items():
            if slot in passed or not conditions[slot].per_match:
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
                del template.members[slot]
                if not template.members:
                    del self.emitters[key]
                    self.active.pop(template, None)


def _pump(active: dict) -> None:
    for emitter in list(active):
        emitter.pump()
        if not emitter.queue or emitter.park():
            del active[emitter]


class Driver:
    """Feeds the events of each batch to ``stream`` (a ``_Documents``, ``_Stream`` or
    ``_Live``) and gives the rows known after it. Between two batches it holds the
    automaton's whole state (the stream's runs, the emitters, an open tag whose
    attributes go on in the next batch), and pickles: a saved run."""

    def __init__(self, stream, active: dict, rows: list) -> None:
        self.stream = stream
        self.active = active  # emitters with queued entries
        self.rows = rows  # the rows the emitters give, taken out after each batch
        self.tag = self.attrs = self.opened = None  # an open tag waiting for its attributes

    def feed(self, batch: EventBatch) -> list:
        stream, active = self.stream, self.active
        tag, attrs, opened = self.tag, self.attrs, self.opened
        open_ = getattr(stream, "open", None)
        text, close = getattr(stream, "text", None), getattr(stream, "close", None)
        attr, opening, texts = int(ATTR), int(OPEN), int(TEXT)  # plain ints compare faster
        names = batch.symbols.names
        for number, start, end in batch.document_runs():
            if tag is not None:  # the open tag's attributes ended with its document
                open_(tag, attrs, opened, stream.doc)
                tag = None
            if number != stream.doc:
                stream.start_document(number)
                open_, text, close = stream.open, stream.text, stream.close
            whole = start == 0 and end == len(batch.kinds)
            columns = (batch.kinds, batch.names, batch.values, batch.nodes)
            if not whole:
                columns = tuple(column[start:end] for column in columns)
            for kind, name, value, ident in zip(*columns, strict=False):  # equal lengths
                if kind == attr:
                    attrs.append((names[name], value, ident))
                    continue
                if tag is not None:
                    open_(tag, attrs, opened, number)
                    tag = None
                if kind == opening:
                    tag, attrs, opened = names[name], [], ident
                elif kind == texts:
                    text(value, ident)
                else:
                    close()
                    if active:
                        _pump(active)
        self.tag, self.attrs, self.opened = tag, attrs, opened
        return self._taken()

    def finish(self, final: bool = True) -> list:
        """The stream ended (``final``) or stops here (a prefix of it): the rest."""
        if self.tag is not None:
            self.stream.open(self.tag, self.attrs, self.opened, self.stream.doc)
            self.tag = None
        if final:
            self.stream.start_document(None)
            self.stream.finish()
        return self._taken()

    def _taken(self) -> list:
        out = self.rows[:]
        self.rows.clear()
        return out


def _drive(batches: Iterable[EventBatch], driver: Driver, final: bool):
    """Feed ``batches`` to ``driver``; yield the rows as they are known."""
    for batch in batches:
        if batch is None:  # a pause (xcep.events.stepping): what is known is out
            yield None
            continue
        yield from driver.feed(batch)
    yield from driver.finish(final)


def _compile(query, schema, opt: str) -> Analysis:
    if isinstance(query, Analysis):
        return query
    parsed = parse_query(query) if isinstance(query, str) else query
    return analyze(optimize(parsed, schema, opt))


def compile_fast_path(analysis: Analysis):
    """A plain path or a flat sequence pattern for the query, or why neither takes it."""
    kinds = (PlainPath,) if analysis.mode == "nodes" else (PlainPath, SequencePattern)
    for kind in kinds:
        try:
            return kind(analysis)
        except NotFast as why:
            reason = str(why)
    return reason


class _Group:
    """Queries with the same ``partition by`` (or none): one machine, one pass."""

    def __init__(self, partition) -> None:
        self.partition = partition  # (element path, attribute) or None
        self.machine = Machine()
        self.templates: dict = {}  # template key -> owner in the machine
        self.router = None
        if partition is not None:
            element_path, self.attribute = partition
            route = analyze(A.Query(element_path, None, None, None, ""))
            self.router = single_machine(Program(route, router=True))

    def stream(self, outputs: Outputs):
        return _Stream(self, outputs) if self.router is not None else _Documents(self, outputs)


class XSeqEngine:
    """Runs one XSeq query over an event stream and yields its output rows.

    >>> import io
    >>> from xcep.events import EventStream
    >>> engine = XSeqEngine("/stocks/t[@price > 10]/@id")
    >>> data = io.BytesIO(b'<stocks><t id="a" price="12"/><t id="b" price="9"/></stocks>')
    >>> list(engine.run(EventStream([data]).batches()))
    [['a']]
    """

    def __init__(
        self,
        query,
        selection: str = "all",
        values_only: bool = False,
        schema=None,
        opt: str = "all",
        fast: bool = True,
    ) -> None:
        """``schema`` (a ``Dtd`` or ``LearnedSchema``) enables the rewrites of ``opt``
        (``xcep.xseq.optimize``: none, prefix, loops, where or all; where needs no schema).
        ``fast``: run a plain path (``xcep.xseq.paths``) or a flat sequence pattern
        (``xcep.xseq.sequence``) on its fast path when it qualifies (selection ``all``);
        False always runs the automaton."""
        self.analysis = _compile(query, schema, opt)
        check_selection(selection)
        self.selection = selection
        self.values_only = values_only
        self.program = Program(self.analysis)
        self.group = _Group(self.analysis.partition)
        self.group.machine.add(self.program)
        # a fast path (plain path, flat sequence pattern), or why the automaton runs the query
        if not fast:
            self.fast_path = "the fast path is off"
        elif selection != "all":
            self.fast_path = f"selection {selection} runs on the automaton"
        else:
            self.fast_path = compile_fast_path(self.analysis)

    @property
    def vpa(self) -> Vpa:
        return self.program.vpa

    def stats(self) -> dict:
        """Automaton states and the transition cache's entries, hits and hit ratio; on the
        fast path, the lists (partitions) and partial matches of the last run."""
        if isinstance(self.fast_path, SequencePattern):
            return {"evaluator": "flat-sequence runtime", **self.fast_path.stats()}
        if isinstance(self.fast_path, PlainPath):
            return {"evaluator": "path runtime", **self.fast_path.stats()}
        machine = self.group.machine
        return {
            "evaluator": "automaton",
            "states": len(self.vpa.states),
            "transition cache": machine.cache.stats(),
        }

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
        if isinstance(self.fast_path, SequencePattern):
            lines.append("evaluated on the flat-sequence runtime (docs/xseq.md)")
        elif isinstance(self.fast_path, PlainPath):
            lines.append("evaluated on the path runtime (docs/xseq.md)")
        else:
            lines.append(
                f"evaluated on the pushdown automaton (not on a runtime: {self.fast_path})"
            )
        lines += ["", f"automaton ({len(self.vpa.states)} states):", self.vpa.describe()]
        return "\n".join(lines)

    @property
    def resumable(self) -> bool:
        """Whether ``start``/``resume`` serve this query: every runtime's run is saved."""
        return True

    def fingerprint(self) -> tuple:
        """What a saved run must have been made by: the query and the options."""
        path = A.to_text(self.analysis.path)  # as the optimizer left it
        kind = type(self.fast_path).__name__
        return (self.analysis.query.text, path, self.selection, self.values_only, kind)

    def start(self) -> XSeqRun:
        """A run fed batch by batch, whose state ``snapshot()`` saves (``xseq/runs.py``)."""
        if isinstance(self.fast_path, PlainPath):
            return XSeqRun(self, PlainPathRun(self.fast_path, self.values_only))
        if isinstance(self.fast_path, SequencePattern):
            return XSeqRun(self, SequenceRun(self.fast_path, self.values_only))
        return XSeqRun(self, AutomatonRun(self))

    def resume(self, data: bytes) -> XSeqRun:
        """The run that ``XSeqRun.snapshot()`` saved, going on where it stopped."""
        return load_run(self, data)

    def run(self, batches: Iterable[EventBatch], final: bool = True) -> Iterator[list]:
        """The output rows, each as soon as it is known (aggregates at the end).

        ``final=False``: the input is only a prefix of the stream; give the rows known
        after it and stop, without the rows that only the end of the stream decides
        (aggregates, matches a longer one might still replace). A later run over a longer
        prefix gives these rows again, first, in the same order.
        """
        if isinstance(self.fast_path, SequencePattern | PlainPath):
            return self.fast_path.run(batches, self.values_only, final)
        return _drive(batches, AutomatonRun(self).driver, final)


class AutomatonRun:
    """The pushdown automaton as a runtime fed batch by batch (``XSeqRun``): its state —
    the machine (its lazily built transitions too), the runs of the open document or of
    every partition, the emitters' pending matches — is saved whole, by pickle."""

    def __init__(self, engine: XSeqEngine) -> None:
        rows: list = []
        active: dict = {}
        outputs = Outputs(active)
        outputs.emitters[0] = Emitter(
            engine.analysis, engine.selection, engine.values_only, rows.append
        )
        self.driver = Driver(engine.group.stream(outputs), active, rows)

    def feed(self, batch: EventBatch) -> list:
        return self.driver.feed(batch)

    def end(self, final: bool) -> list:
        return self.driver.finish(final)

    def state(self) -> Driver:
        return self.driver

    def restore(self, driver: Driver) -> None:
        self.driver = driver


class XSeqMultiEngine:
    """Many XSeq queries in one automaton, one pass: each row is ``[query id, *row]``.

    Queries with the same ``partition by`` (or none) share one union automaton
    (``xcep.xseq.machine``): common prefixes are shared, and queries that
    differ only in their per-match conditions and outputs (a template family:
    the same path and per-iteration conditions, other constants) share all of
    it, each checking its own conditions when a match completes. Queries can
    be subscribed and unsubscribed while a stream runs: a subscription takes
    effect at the next document of the stream (partitioned queries: from the
    next document on, in every partition), an unsubscription at once.

    >>> import io
    >>> from xcep.events import EventStream
    >>> engine = XSeqMultiEngine({"cheap": "//item[price < 10]/name/text()"})
    >>> engine.subscribe("names", "//person/name/text()")
    >>> item = b"<item><price>5</price><name>pen</name></item>"
    >>> data = io.BytesIO(b"<s>" + item + b"<person><name>Al</name></person></s>")
    >>> list(engine.run(EventStream([data]).batches()))
    [['cheap', 'pen'], ['names', 'Al']]
    """

    def __init__(
        self,
        queries=(),
        selection: str = "all",
        values_only: bool = False,
        schema=None,
        opt: str = "all",
    ) -> None:
        check_selection(selection)
        self.selection = selection
        self.values_only = values_only
        self.schema = schema
        self.opt = opt
        self.groups: dict = {}  # partition key -> _Group
        self.queries: dict = {}  # query id -> (group, owner, slot, analysis)
        self._slots = 0
        self._live = None  # while a stream runs: its _Live
        for qid, query in dict(queries).items():
            self.subscribe(qid, query)

    def subscribe(self, qid, query) -> None:
        """Add a query under ``qid`` (a new id; the text, a parsed query or an analysis)."""
        if qid in self.queries:
            raise ValueError(f"query id {qid!r} is already subscribed")
        analysis = _compile(query, self.schema, self.opt)
        self.queries[qid] = None  # taken; in the machine now, or at the next document
        if self._live is None:
            self._add(qid, analysis)
        else:
            self._live.pending.append((qid, analysis))

    def unsubscribe(self, qid) -> None:
        """Remove a query: it reports nothing more, at once."""
        if qid not in self.queries:
            raise KeyError(f"no query {qid!r} is subscribed")
        entry = self.queries.pop(qid)
        if entry is None:  # subscribed while running, not in the machine yet
            self._live.pending = [(q, a) for q, a in self._live.pending if q != qid]
            return
        group, owner, slot, _ = entry
        program = group.machine.programs[owner]
        program.leave(slot)
        if not program.members:
            group.machine.remove(owner)
            group.templates = {k: o for k, o in group.templates.items() if o != owner}
        if self._live is not None:
            self._live.forget(group, owner if not program.members else None, slot)

    def stats(self) -> dict:
        """Queries, templates and automaton states, per partition clause."""
        out = {}
        for key, group in self.groups.items():
            machine = group.machine
            owners = machine.owners()
            out["none" if key is None else f"{key[0]}@{key[1]}"] = {
                "queries": sum(len(machine.programs[o].members) for o in owners),
                "templates": len(owners),
                "states": machine.live_states(),
                "shared states": len(machine._users),
                "transition cache": machine.cache.stats(),
            }
        return out

    def _add(self, qid, analysis: Analysis, share: bool = True) -> tuple:
        key = _partition_key(analysis)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(analysis.partition)
        tkey = template_key(analysis)
        owner = group.templates.get(tkey) if share else None
        if owner is None:
            program = Program(replace(analysis, per_match=[]))
            program.members = {}
            owner = group.machine.add(program, share=share)
            if self.selection == "all":  # members' matches are selected alike: one queue
                program.shared_output = -1 - owner
            if share:
                group.templates[tkey] = owner
        slot = self._slots
        self._slots += 1
        group.machine.programs[owner].join(slot, analysis)
        self.queries[qid] = (group, owner, slot, analysis)
        return group, owner, slot

    def start(self) -> Driver:
        """A run fed a batch at a time (``feed``, then ``finish``); the engine and the
        driver, pickled together, save it (``xcep.plans``)."""
        if self._live is not None:
            raise StateError("this engine is already running a stream")
        rows: list = []
        live = self._live = _Live(self, rows)
        return Driver(live, live.active, rows)

    def run(self, batches: Iterable[EventBatch], final: bool = True) -> Iterator[list]:
        """The rows of every query, as ``[query id, *row]``, each as soon as it is known."""
        driver = self.start()
        try:
            yield from _drive(batches, driver, final)
        finally:
            self._live = None


def _partition_key(analysis: Analysis):
    partition = analysis.partition
    return None if partition is None else (A.to_text(partition[0]), partition[1])


class _Live:
    """The stream an ``XSeqMultiEngine`` runs: every group's stream, fed the same events;
    subscriptions made while it runs join at the next document."""

    def __init__(self, engine: XSeqMultiEngine, rows: list) -> None:
        self.engine = engine
        self.rows = rows
        self.active: dict = {}
        self.streams: dict = {}  # group -> its stream
        self.pending: list = []  # (query id, analysis) waiting for the next document
        self.doc = None
        for qid, entry in engine.queries.items():
            self._emitter(qid, *entry)

    def _emitter(self, qid, group: _Group, owner: int, slot: int, analysis: Analysis) -> None:
        stream = self.streams.get(group)
        if stream is None:
            stream = self.streams[group] = group.stream(Outputs(self.active))
        engine = self.engine

        emitter = Emitter(
            analysis, engine.selection, engine.values_only, _Tagged(self.rows, qid), owner
        )
        program = group.machine.programs[owner]
        if program.shared_output is None:
            stream.outputs.emitters[slot] = emitter
            return
        template = stream.outputs.emitters.get(program.shared_output)
        if template is None:
            template = TemplateEmitter(program, owner)
            stream.outputs.emitters[program.shared_output] = template
        template.join(slot, emitter)

    def forget(self, group: _Group, owner: int | None, slot: int) -> None:
        stream = self.streams.get(group)
        if stream is not None:
            stream.outputs.drop(slot)
            if owner is not None:
                for run in stream.runs():
                    run.forget(owner)

    def start_document(self, number) -> None:
        joined = []
        if number is not None and self.pending:
            pending, self.pending = self.pending, []
            for qid, analysis in pending:
                # partition runs outlive documents: a query joining them gets states of its
                # own, so that no partial match of the others carries over into it
                stream = self.streams.get(self.engine.groups.get(_partition_key(analysis)))
                share = not (isinstance(stream, _Stream) and stream.partitions)
                entry = self.engine._add(qid, analysis, share=share)
                self._emitter(qid, *entry, analysis)
                if not share:
                    joined.append((self.streams[entry[0]], entry[1]))
        for stream in self.streams.values():
            stream.start_document(number)
        self.doc = number
        for stream, owner in joined:
            stream.joined(owner)
        if len(self.streams) == 1:  # one group: its events go straight to it
            (only,) = self.streams.values()
            self.open, self.text, self.close = only.open, only.text, only.close
        else:
            self.open, self.text, self.close = self._open_all, self._text_all, self._close_all

    def _open_all(self, tag, attrs, ident, number) -> None:
        for stream in self.streams.values():
            stream.open(tag, attrs, ident, number)

    def _text_all(self, value, ident) -> None:
        for stream in self.streams.values():
            stream.text(value, ident)

    def _close_all(self) -> None:
        for stream in self.streams.values():
            stream.close()

    def finish(self) -> None:
        for stream in self.streams.values():
            stream.finish()


class _Tagged:
    """An emitter's sink in a run of many queries: its rows, tagged with the query's id."""

    __slots__ = ("qid", "rows")

    def __init__(self, rows: list, qid) -> None:
        self.rows = rows
        self.qid = qid

    def __call__(self, row) -> None:
        self.rows.append([self.qid, *row])


class _Documents:
    """Hands the events of each document to a run of its own (no partition by)."""

    def __init__(self, group: _Group, outputs: Outputs) -> None:
        self.group = group
        self.outputs = outputs
        self.run: Run | None = None
        self.doc = None

    def start_document(self, number) -> None:
        """A new document begins (``None``: the stream ended); drop what a broken one left."""
        if self.run is not None and (len(self.run.frames) > 1 or self.run.skip):
            self.outputs.abandon(self.run)  # its root never closed: the document was malformed
        self.doc = number
        self.run = None
        if number is not None:
            self.run = Run(self.group.machine, self.outputs, Node(ROOT, None, number, -1))
            self.open, self.text, self.close = self.run.open, self.run.text, self.run.close

    def runs(self) -> list:
        return [self.run] if self.run is not None else []

    def finish(self) -> None:
        self.outputs.finish(None)


class _Stream:
    """Routes the events of the stream to the runs: one per partition (partition by)."""

    def __init__(self, group: _Group, outputs: Outputs) -> None:
        self.group = group
        self.outputs = outputs
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
        self.router = Run(self.group.router, _Collector(self.hits), Node(ROOT, None, number, -1))

    def joined(self, owner: int) -> None:
        """A query was added between documents: it starts at every partition's root."""
        machine = self.group.machine.ready()
        starts = [s for s in machine.start if machine.states[s].owner == owner]
        for run in self.partitions.values():
            run.frames[0]._chains = None
            run.closure([(s, SHARED, (), 0) for s in starts], run.frames[0], None, run.root)
            run.flush_matches()

    def runs(self) -> list:
        return list(self.partitions.values())

    def finish(self) -> None:
        self.outputs.finish(list(self.partitions))

    def open(self, tag, attrs, ident, number) -> None:
        self.depth += 1
        self.router.open(tag, attrs, ident, number)
        if self.hits:
            self.hits.clear()
            attribute = self.group.attribute
            key = next((v for n, v, _ in attrs if n == attribute), None)
            if key is not None:
                target = self.partitions.get(key)
                if target is None:
                    root = Node(ROOT, None, -1, -1)
                    target = Run(self.group.machine, self.outputs, root, key)
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
    """The outputs of the partition router: it only notes that a partitioned element opened."""

    def __init__(self, hits: list) -> None:
        self.hits = hits

    def add(self, run: Run, slot: int, matches: list) -> None:
        self.hits.extend(matches)
