"""The automaton the engine runs: the union of the VPAs of one or more queries.

Every program (a query, or a template shared by several: ``Program.members``
in the engine) keeps its own states (their ``owner`` is the program's slot).
The leading states that bind nothing are shared among the programs whose
prefixes are the same, as a trie: the same wait (axis and node test), then the
same match (node test and predicates), and so on until a query binds a
variable or enters a Kleene-* group. A thousand queries under
``/site/people/person`` read that prefix once, with one thread. A shared
thread carries the ``SHARED`` binding; the edge from a shared state into a
program's own states goes through that program's ``begin`` state, which gives
the thread its empty binding. Shared states have ``owner`` None. A shared wait
with several targets fans out through a ``split``; a split to many steps
``name[@a = 'v' and @b > 3 …]`` indexes their attribute comparisons
(``xcep.xseq.counting``): an open element reads each attribute once and goes
on to the targets whose comparisons it satisfies (``fanout``); their other
predicates are theirs to check (``preds``).

Programs come and go (``add``, ``remove``): removing one unlinks its begin
states and the shared states no other program uses. The tables the runs read
(``tests``, ``fanout``, predicates reading subtrees) are rebuilt by ``ready``
before the next run; ``TransitionCache`` determinizes the descendant waiters'
open transition lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from xcep.xseq import ast as A
from xcep.xseq.counting import CountingIndex, attribute_atom
from xcep.xseq.evaluate import attribute_test, required_attributes
from xcep.xseq.matches import Binding
from xcep.xseq.vpa import State

SHARED = Binding((), ())  # the binding of a thread in shared states: nothing bound yet


class Machine:
    """States of the union automaton, the per-wait test table, and the queries' programs."""

    FANOUT_ATOMS = 8  # a split indexes its targets' attribute predicates from this many on

    def __init__(self) -> None:
        self.states: list[State] = []
        self.programs: list = []  # slot -> Program (None once removed)
        self.start: list[int] = []
        self.tests: list = []  # wait state -> (name or None for any, the state it goes to)
        self.preds: dict = {}  # state -> ((predicate, reads the subtree, AttributeTest), ...)
        # match state -> the test of its predicates decided by the open tag's attributes
        # alone (None: none is): a thread that fails it dies at the open, with no node built
        self.guards: list = []
        self.required: list = []  # match state -> the attributes its guard cannot pass without
        self.guarded = False  # whether any state has a guard
        self._residual: set = set()  # split targets whose preds are those their split leaves
        self._trie: dict = {}  # (parent shared state or None, key) -> shared state
        self._users: dict = {}  # shared state -> slots of the queries through it
        self._parent: dict = {}  # shared state -> its parent (None: a start state)
        self._key: dict = {}  # shared state -> its trie key
        self._begins: dict = {}  # slot -> {parent or None: its begin state}
        self.removed: set = set()  # shared states no query uses any more
        self._stale = True
        self.cache = TransitionCache()
        self.fanout: dict = {}  # split -> (its targets, their attribute predicates' index)
        self.dead = self._new(State(0, "split", owner=None))  # where a wait with no target goes
        self._splits: dict = {}  # shared wait -> the split that fans its targets out

    def add(self, program, share: bool = True) -> int:
        """Add a query's program; its slot. ``share=False`` shares no state with others."""
        slot = len(self.programs)
        self.programs.append(program)
        self._begins[slot] = {}
        vpa = program.vpa
        own: dict = {}  # the query's state -> its copy

        def owned(sid: int) -> int:
            todo = [sid]
            while todo:
                s = todo.pop()
                if s in own:
                    continue
                own[s] = self._new(replace(vpa.states[s], owner=slot, next=[]))
                todo += vpa.states[s].next
            for s, copy in own.items():
                self.states[copy].next = [own[t] for t in vpa.states[s].next]
            return own[sid]

        # attach the VPA's states below the shared ones, depth first (a loop: a path
        # may have any number of steps)
        todo: list = [(None, iter(vpa.start))]
        while todo:
            parent, sids = todo[-1]
            sid = next(sids, None)
            if sid is None:
                todo.pop()
                continue
            state = vpa.states[sid]
            key = _share_key(state) if share else None
            if key is None:
                begin = self._begins[slot].get(parent)
                if begin is None:
                    begin = self._new(State(0, "begin", owner=slot))
                    self._begins[slot][parent] = begin
                    self._link(parent, begin)
                if owned(sid) not in self.states[begin].next:
                    self.states[begin].next.append(own[sid])
                continue
            shared = self._trie.get((parent, key))
            if shared is None:
                shared = self._new(replace(state, owner=None, next=[]))
                self._trie[(parent, key)] = shared
                self._key[shared] = (parent, key)
                self._parent[shared] = parent
                self._users[shared] = set()
                self._link(parent, shared)
            self._users[shared].add(slot)
            todo.append((shared, iter(state.next)))

        self._stale = True  # the tables are rebuilt once, before the next run (``ready``)
        return slot

    def remove(self, slot: int) -> None:
        """Unlink a query: its begin states and the shared states only it used."""
        self.programs[slot] = None
        for parent, begin in self._begins.pop(slot).items():
            self._unlink(parent, begin)
        for shared in sorted(self._users, reverse=True):  # children before their parents
            users = self._users[shared]
            users.discard(slot)
            if not users:
                del self._users[shared]
                self.removed.add(shared)
                parent = self._parent.pop(shared)
                self._unlink(parent, shared)
                del self._trie[self._key.pop(shared)]
        self._stale = True
        self.ready()  # runs are live: their next event must see the new tables

    def shared_states(self) -> int:
        """The states several queries may share (the prefix trie's)."""
        return len(self._users)

    def live_states(self) -> int:
        """The states some query still uses."""
        programs = self.programs
        owned = sum(1 for s in self.states if s.owner is not None and programs[s.owner])
        splits = sum(1 for wait in self._splits if wait in self._users)
        return owned + len(self._users) + splits

    def owners(self) -> list[int]:
        return [slot for slot, program in enumerate(self.programs) if program is not None]

    # internals
    def _new(self, state: State) -> int:
        state.id = len(self.states)
        self.states.append(state)
        return state.id

    def _link(self, parent: int | None, target: int) -> None:
        if parent is None:
            self.start.append(target)
            return
        state = self.states[parent]
        if state.kind == "wait" and state.next:  # a wait goes to one state: fan out by a split
            first = self.states[state.next[0]]
            if first.kind != "split":
                split = self._new(State(0, "split", next=[first.id], owner=None))
                self._splits[parent] = split
                state.next = [split]
                first = self.states[split]
            first.next.append(target)
            return
        state.next.append(target)

    def _unlink(self, parent: int | None, target: int) -> None:
        if parent is None:
            self.start.remove(target)
            return
        state = self.states[parent]
        if target in state.next:
            state.next.remove(target)
        elif state.next and self.states[state.next[0]].kind == "split":
            self.states[state.next[0]].next.remove(target)

    def ready(self) -> Machine:
        """Rebuild the tables the runs read if queries were added or removed."""
        if self._stale:
            self._stale = False
            self._index()
        return self

    def _index(self) -> None:
        states = self.states
        self.tests = [
            (None if s.step.name == "*" else s.step.name, s.next[0] if s.next else self.dead)
            if s.kind == "wait"
            else None
            for s in states
        ]
        self.cache.clear()  # the targets may have changed
        for state in self._residual:  # a target its split decided before: all its own again
            self.preds[state] = _predicates(states[state].step.preds)
        self._residual = set()
        for state in states:
            if state.step is not None and state.id not in self.preds:
                self.preds[state.id] = _predicates(state.step.preds)
        self.fanout = {}
        for split in self._splits.values():
            targets = list(states[split].next)
            index = CountingIndex([_split_conjunctions(states[t]) for t in targets], attribute_atom)
            if index.atoms < self.FANOUT_ATOMS:
                continue
            self.fanout[split] = (targets, index)
            for target, rest in zip(targets, index.rest, strict=True):
                if _split_conjunctions(states[target]):
                    self.preds[target] = _predicates(rest)
                    self._residual.add(target)
        self._make_guards()

    def _make_guards(self) -> None:
        """Per state, the test a thread entering it at an open tag must pass: a match
        state's attribute predicates, seen through the begin state before it."""
        preds, states = self.preds, self.states
        guarded = [s.kind == "match" and s.id in preds for s in states]
        guards = [_guard(preds[s.id]) if g else None for s, g in zip(states, guarded, strict=True)]
        required = [
            frozenset().union(*(required_attributes(p) for p, _, fast in preds[s.id] if fast))
            if g
            else frozenset()
            for s, g in zip(states, guarded, strict=True)
        ]
        for s in states:
            if s.kind == "begin" and len(s.next) == 1:
                guards[s.id], required[s.id] = guards[s.next[0]], required[s.next[0]]
        self.guards, self.required = guards, required
        self.guarded = any(guard is not None for guard in guards)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["guards"] = state["required"] = None  # made again from the predicates
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._make_guards()


def _predicates(preds) -> tuple:
    """(predicate, whether it reads the subtree, its ``AttributeTest`` or None) for each."""
    return tuple((pred, needs_subtree(pred), attribute_test(pred)) for pred in preds)


def _guard(preds: tuple) -> Callable | None:
    """The test of an open tag's attributes that the predicates decided by them make."""
    tests = [fast.test for _, _, fast in preds if fast is not None]
    if len(tests) < 2:
        return tests[0] if tests else None
    return lambda raw: all(test(raw) for test in tests)


def _split_conjunctions(state: State) -> list:
    """The conjuncts of a split target's predicates that its split may decide: those of a
    step that binds nothing (any other target is passed on as it is)."""
    if state.kind != "match" or state.step.var or not state.step.preds:
        return []
    return [c for pred in state.step.preds for c in A.conjuncts(pred)]


class TransitionCache:
    """The open transition of the descendant waiters, determinized lazily (RE2's shape).

    The threads that wait for a descendant of the open elements (``//`` steps) sit in
    the ``desc`` lists of their frames; a child sees them all. Which of them move on an
    open tag, and to which state, depends only on their wait states, in order, and on
    the tag: the waiters' states are named once per frame (``key``: an int for the
    tuple of states, when there are at least ``MIN_THREADS``) and each (name, tag) →
    [(list, position, target state)] is computed on first use. After warm-up an open
    costs a dictionary lookup, plus the threads' registers (bindings) carried over.
    Past ``budget`` entries the table is flushed; names are never reused, so a frame
    holding an old name just misses.
    """

    MIN_THREADS = 4  # fewer waiters are tested one by one: as cheap as a lookup

    def __init__(self, budget: int = 100_000) -> None:
        self.budget = budget
        self.names: dict = {}  # tuple of wait states -> name
        self.table: dict = {}  # (name, tag) -> moves
        self.hits = self.misses = self.flushes = 0
        self._next = 0

    def key(self, chain: tuple) -> int | None:
        if sum(map(len, chain)) < self.MIN_THREADS:
            return None
        states = tuple(tuple(t[0] for t in group) for group in chain)
        name = self.names.get(states)
        if name is None:
            if len(self.names) >= self.budget:
                self.names.clear()
            name = self.names[states] = self._next
            self._next += 1
        return name

    def moves(self, name: int, tag: str, chain: tuple, tests: list) -> tuple:
        moves = self.table.get((name, tag))
        if moves is not None:
            self.hits += 1
            return moves
        self.misses += 1
        found = []
        for g, group in enumerate(chain):
            for i, thread in enumerate(group):
                test, target = tests[thread[0]]
                if test is None or test == tag:
                    found.append((g, i, target))
        if len(self.table) >= self.budget:
            self.table.clear()
            self.flushes += 1
        moves = self.table[(name, tag)] = tuple(found)
        return moves

    def clear(self) -> None:
        self.table.clear()
        self.names.clear()

    def stats(self) -> dict:
        lookups = self.hits + self.misses
        return {
            "entries": len(self.table),
            "hits": self.hits,
            "misses": self.misses,
            "hit ratio": round(self.hits / lookups, 4) if lookups else None,
            "flushes": self.flushes,
        }


def _share_key(state: State):
    """What makes two queries' states the same, for states that bind nothing; else None."""
    step = state.step
    if state.kind == "wait":
        return ("wait", state.mode, state.frame, step.kind, step.name)
    if state.kind == "match" and step.var is None:
        return ("match", state.test_here, step)
    return None


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
