"""One run of the XSeq pushdown automaton (the VPA) over the event stream, in one pass.

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

from collections.abc import Callable, Iterator
from functools import partial
from itertools import product

from xcep.xseq.dom import ELEMENT, TEXT_NODE, Node, test_matches
from xcep.xseq.evaluate import holds
from xcep.xseq.machine import SHARED, Machine, TransitionCache
from xcep.xseq.matches import (
    Binding,
    make_env,
)
from xcep.xseq.program import (
    ALL,
    PENDING,
    TEXT,
    Check,
    MemberCheck,
    Program,
    Verdicts,
    merge_reads,
)

_NONE = ()  # no run waits in this list yet
SKIPPING = "skipping"  # ``open``, ``close``, ``quiet``: inside a subtree no run waits in
MAYBE_QUIET = "maybe quiet"  # ``open``, ``close``: ask ``quiet`` what the events next need


class Frame:
    """The stack entry of an open element: runs waiting among its children, its node.

    No ``__slots__``: most frames keep the class defaults below (nothing waits
    in them), and setting fewer attributes makes the push cheaper.
    """

    node: Node | None = None
    keep = None  # what of its subtree is kept (``program.merge_reads``): None, nothing
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

    stretches = False  # whether ``close`` says what the events after it need (``quiet``)

    def __init__(self, machine: Machine, outputs, root: Node, key=None) -> None:
        self.m = machine.ready()
        self.outputs = outputs  # .add(run, slot, matches): the matches of the query in slot
        self.key = key
        self.joins: dict = {}  # intersect: (group, binding, node) -> {operand: checks}
        self.skip = 0  # depth inside a subtree no run waits in
        self.suspended: list = []  # stacks of enclosing elements of the same partition
        self.new_matches: dict = {}  # slot -> [(end node, binding, checks)]
        # a template's members decided at a binding (``Program.decide_at``), for its match
        # in the same event: id(binding) -> (binding, the members whose conditions hold)
        self.decided: dict = {}
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

    def capture(self, node: Node, frame: Frame, reads=ALL) -> None:
        """Keep what ``reads`` says of the subtree of the open element ``node`` (its frame
        is ``frame``): all of it, or the children of some names and what of theirs."""
        if not node.closed:
            frame.keep = merge_reads(frame.keep, reads)

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
        self.suspended.append((self.frames, self.skip))
        self.frames, self.skip = [self.frames[0]], 0

    def resume(self) -> None:
        self.frames, self.skip = self.suspended.pop()

    # events: ``open`` and ``close`` say what the events after them need (``quiet``)
    def open(self, tag: str, attrs: list, ident: int, doc: int):
        if self.skip:
            self.skip += 1
            return SKIPPING
        frames = self.frames
        parent = frames[-1]
        tests = self.m.tests
        found = []
        keep = None  # what of this element is kept: its parent keeps it, or nothing
        if parent.__class__ is Light:
            dchain, dtchain, dkey, dnames = parent[4:]
        else:
            kept = parent.keep
            if kept is not None:
                keep = kept if kept is ALL else kept.get(tag)
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
        if found and self.m.guarded:  # predicates the open tag's attributes decide: failing
            guards = self.m.guards  # threads die here
            found = [t for t in found if (guard := guards[t[0]]) is None or guard(attrs)]
        if not (found or keep is not None):
            if dchain or dtchain:
                frames.append((tag, attrs, ident, doc, dchain, dtchain, dkey, dnames))
                return None if dtchain or not self.stretches else MAYBE_QUIET
            self.skip = 1  # nothing can happen below: skip the subtree
            return SKIPPING
        if parent.__class__ is Light:
            parent = self._real(len(frames) - 1)
        frame = Frame(tag, attrs, ident, doc, parent, dchain, dtchain, dkey, dnames)
        frames.append(frame)
        if keep is not None:
            frame.keep = keep
            node = self.node_of(frame)
            node.parent.children.append(node)
        if found:
            if self.joins:
                self.joins.clear()
            self.closure(found, frame, parent, None)
            self.flush_matches()
        return MAYBE_QUIET if self.stretches and not frame.keep else None

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
        # a Light entry keeps nothing (kept elements get frames); only its dtchain
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
        kept = None if light else frame.keep
        if kept is ALL or (kept is not None and TEXT in kept):
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

    def close(self):
        if self.skip:
            self.skip -= 1
            return SKIPPING if self.skip else MAYBE_QUIET if self.stretches else None
        frame = self.frames.pop()
        if frame.__class__ is Light:
            return None  # (a Light below it would be read in Python up to the next open)
        if frame.node is not None:
            frame.node.closed = True
        if frame.waiting:
            for check in frame.waiting:
                check.node_closed()
        if frame.wake:
            active = self.outputs.active
            for emitter in frame.wake:
                active[emitter] = None
        if not self.stretches:
            return None
        top = self.frames[-1]
        return MAYBE_QUIET if top.__class__ is Light or not top.keep else None

    def quiet(self):
        """What the events below the top of the stack need, when only some of them can
        move a run (the others, their texts and closes change nothing but the stack: a
        quiet stretch, read by ``xcep.xseq._quiet``): ``(names, attributes, child
        names)``, the elements that may — at any depth, those of the names the
        descendant waiters wait for, or with an attribute a waiter for any element needs
        (``//*[@id = 'x']``); among the top element's children, those of the names its
        child waiters wait for — or ``SKIPPING`` inside a skipped subtree; None when
        every event may matter (a waiter for any element, for text, for the next
        sibling; a subtree captured)."""
        if self.skip:
            return SKIPPING
        top = self.frames[-1]
        if top.__class__ is Light:
            if top[5]:
                return None
            dchain, dnames, waiting = top[4], top[7], _NONE
        else:
            if top.nxt or top.txt or top.dtxt or top.keep:  # (keep: its children are kept)
                return None
            dchain, dtchain, _, dnames = top.chains(self.m.cache, self.m.tests)
            if dtchain:
                return None
            waiting = top.any
        if dnames is not None and not waiting:
            return dnames, _NONE, _NONE
        children, child_attributes = self._wanted((waiting,))
        if children is None:
            return None
        names, attributes = (dnames, set()) if dnames is not None else self._wanted(dchain)
        if names is None:
            return None
        return frozenset(names), frozenset(attributes | child_attributes), frozenset(children)

    def _wanted(self, groups: tuple) -> tuple:
        """The names the waiters in ``groups`` wait for, and the attributes those for any
        element need; (None, None) when one waits for any element at all."""
        tests, required = self.m.tests, self.m.required
        names, attributes = set(), set()
        for group in groups:
            for thread in group:
                name, target = tests[thread[0]]
                if name is not None:
                    names.add(name)
                elif required[target]:  # any element with this attribute (and others)
                    attributes.add(min(required[target]))
                else:
                    return None, None
        return names, attributes

    def stretched(self, quiet, popped: int, opened: list) -> None:
        """A quiet stretch was read outside Python: ``popped`` entries of the stack closed,
        ``opened`` (tag, attrs, node id, document) elements are open below the top."""
        if quiet is SKIPPING:
            self.skip += len(opened) - popped
            return
        frames = self.frames
        if popped:
            del frames[-popped:]
        top = frames[-1]  # a Light entry's chains are its parent's
        chains = top[4:] if top.__class__ is Light else top.chains(self.m.cache, self.m.tests)
        if opened and not (chains[0] or chains[1]):  # nothing waits below: they are skipped
            self.skip = len(opened)
            return
        frames += [(*element, *chains) for element in opened]

    def light_top(self) -> int:
        """How many ``Light`` entries the top of the stack has in a row."""
        count = 0
        for entry in reversed(self.frames):
            if entry.__class__ is not Light:
                break
            count += 1
        return count

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
        here = node  # the current node: the element of ``child`` once a state needs it
        while stack:
            item = stack.pop()
            count = len(seen)
            seen.add(item)
            if len(seen) == count:  # seen before (one hash, not two)
                continue
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
            if here is None:
                here = self.node_of(child)
            if kind == "match":
                step = state.step
                if state.test_here and not test_matches(step, here):
                    continue
                if step.preds:
                    checks = self.predicates(state_id, here, child, checks)
                    if checks is None:
                        continue
                if step.var:
                    p = programs[state.owner]
                    binding = binding.bind(p.index[step.var], here, step.var in p.kleene)
                    reads = p.captured_vars.get(step.var)
                    if reads is not None and here.kind == ELEMENT:
                        self.capture(here, child, reads)
                    result = self.check_bound(p, binding, checks, done)
                    if result is None:
                        continue
                    checks, done = result
                    if p.decide_at == p.index[step.var]:
                        passed = p.conditions.decide(make_env(p.analysis, binding, False, True))
                        if not passed:
                            continue  # no member of the template wants this match
                        self.decided[id(binding)] = (binding, passed)
            elif kind == "begin":
                binding = programs[state.owner].empty
            elif kind == "split" and state_id in machine.fanout:  # indexed attribute predicates
                targets, index = machine.fanout[state_id]
                for position in index.passing(_attributes_of(here)):
                    stack.append((targets[position], binding, checks, done))
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
                # every operand's arrivals at this node, each with its pending checks: an
                # operand may reach it on several paths (a Kleene-* taken or not), each a
                # different condition, so every combination goes on (the emitter keeps
                # them as alternatives: any one that holds is the match)
                key = (state.owner, state.group, binding.slots, binding.entries[state.group], here)
                reached = self.joins.setdefault(key, {})
                arrivals = reached.setdefault(state.mode, [])
                if checks in arrivals:
                    continue
                arrivals.append(checks)
                if len(reached) < programs[state.owner].join_width[state.group]:
                    continue
                others = [found for mode, found in reached.items() if mode != state.mode]
                for combination in product(*others):
                    joined = checks + tuple(c for found in combination for c in found)
                    for target in state.next:
                        stack.append((target, binding, joined, done))
                continue
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

    def predicates(self, state_id: int, here, child, checks: tuple):
        """The checks after the step's predicates on ``here`` (those that read the subtree
        of an open element become pending checks); None if one fails."""
        for pred, deep, fast in self.m.preds[state_id]:
            if fast is not None and here.raw is not None:  # decided by its attributes
                if not fast.test(here.raw):
                    return None
            elif deep and not here.closed:
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
        known = self.decided.get(id(binding)) if p.decide_at is not None else None
        if known is not None and known[0] is binding:
            passed = known[1]
        elif conditional:
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
        if self.decided:
            self.decided = {}


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


def _no_values(expr) -> list:
    return []


def _attributes_of(node) -> Callable:
    """An index's reader of the attribute values of ``node`` (an ``@name`` at most once)."""
    if node.kind != ELEMENT:
        return _no_values

    def read(expr) -> list:
        value = node.attribute(expr.path.name)
        return [] if value is None else [value]

    return read
