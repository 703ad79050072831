"""A workload compiled for the XPush machine: what the runtime needs of the AFA
(back tables, watchers, the predicate index, filters by rank), precomputed once per
workload, and the compiled core built over it (``CompiledWorkload.new_kernel``).

``SetStore`` is the Python reference of the core's interned sets of AFA states.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, chain, compress
from json.encoder import encode_basestring

from xcep.idlines import id_key
from xcep.xpush.afa import AFA, AND, NOT, TRUE
from xcep.xpush.counting import CountedFilters, offsets
from xcep.xpush.predicates import Predicate, PredicateIndex
from xcep.xpush.workload import Workload

id_json = json.JSONEncoder(ensure_ascii=False).encode  # a filter id as JSON text


def ids_json(ids: list) -> list[str]:
    """Each id as JSON text (``id_json``): where all are strings or all integers, without
    the encoder's call per id (its integers go through its iterator: a second for a
    million)."""
    kinds = set(map(type, ids))
    if kinds <= {str}:
        return list(map(encode_basestring, ids))
    return list(map(int.__repr__ if kinds <= {int} else id_json, ids))


try:
    from xcep.xpush._states import StateKernel, watch_lists
except ImportError:  # built without a C compiler: the Python machine does it all
    StateKernel = watch_lists = None


@dataclass(frozen=True)
class MachineOptions:
    top_down: bool = True
    order: bool = False
    early: bool = False
    max_entries: int = 10_000_000
    compiled: bool = True  # the compiled core (xcep.xpush._states) if built
    counting: bool = True  # filters of the counted form beside the machine (counting.py)

    def __post_init__(self) -> None:
        if self.early and not self.top_down:
            raise ValueError("early notification needs top-down pruning (top_down=True)")


@dataclass
class CompiledWorkload:
    """What the runtime needs of the AFA, precomputed once per workload."""

    afa: AFA
    # ε-predecessors to decide when the state matches (None where the core has them: ``lists``)
    watchers: list[tuple[int, ...]] | None
    true_leaves: frozenset[int]
    not_states: frozenset[int]
    index: PredicateIndex
    initial: dict[int, tuple[int, ...]]  # initial state → filters (their ranks)
    ids: list  # rank → filter id: filters are known by their position in ascending id order
    early: dict[int, tuple[int, ...]] = field(default_factory=dict)  # early state → filters
    prec: dict[int, tuple[frozenset[int], ...]] = field(default_factory=dict)
    needs_element_values: bool = False
    size: int = 0  # AFA states compiled here (a workload's AFA grows as filters are added)
    # the ε-lists and the watchers as the core reads them, made in C (``watch_lists``)
    lists: tuple | None = None
    counted: CountedFilters | None = None  # the filters whose values are counted, by rank

    @property
    def predicate_states(self) -> frozenset[int]:
        return self.index.states

    @cached_property
    def back(self) -> list[dict[str, tuple[int, ...]] | None]:
        """State → {label: states stepping into it} (the compiled core builds its own from
        the steps: millions of dicts are what a large workload would otherwise hold)."""
        afa = self.afa
        back: list[dict | None] = [None] * self.size
        for s in range(self.size):
            label = afa.label[s]
            if label is not None:
                by_label = back[afa.target[s]]
                if by_label is None:
                    by_label = back[afa.target[s]] = {}
                by_label[label] = (*by_label.get(label, ()), s)
        return back

    @cached_property
    def json_ids(self) -> tuple[bytes, bytes, bool, int]:
        """Every id as JSON text (UTF-8), by rank, in a 16-byte slot each or (a long one)
        where it is in the texts of the long ones (``json_slots``); those texts; whether
        all are ASCII; the longest: what ``json_list`` joins into an answer."""
        from xcep.xpush._states import json_slots

        pieces = ids_json(self.ids)
        text = "".join(pieces)
        blob = text.encode()
        ascii = len(blob) == len(text)
        lengths = list(map(len, pieces)) if ascii else [len(p.encode()) for p in pieces]
        slots = json_slots(blob, array("q", accumulate(lengths)))
        return slots, blob, ascii, max(lengths, default=0)

    @cached_property
    def early_states(self) -> frozenset[int]:
        return frozenset(self.early)

    @cached_property
    def proving_states(self) -> frozenset[int]:
        """The states that prove filters at the document node: initial and early ones."""
        return frozenset(self.initial) | frozenset(self.early)

    def new_kernel(self):
        """A new compiled core over this AFA (``xcep.xpush._states``): the machine's interned sets,
        eval, t_pop, t_add, t_accept and the table walk; None if it is not built."""
        if StateKernel is None:
            return None
        states = range(self.size)
        prec = None
        if self.prec:  # (precondition sets per state, states per set), sets numbered here
            sets = list({p for groups in self.prec.values() for p in groups})
            number = {p: k for k, p in enumerate(sets)}
            groups = [[number[p] for p in self.prec.get(s, ())] for s in states]
            prec = (offsets(groups), offsets([sorted(p) for p in sets]))
        eps, watchers = self.lists or (offsets(self.afa.eps[: self.size]), offsets(self.watchers))
        return StateKernel(
            bytes(self.afa.kind[: self.size]),
            array("i", sorted(self.true_leaves)),
            eps,
            watchers,
            sparse_offsets(self.early, self.size),
            sparse_offsets(self.initial, self.size),
            len(self.ids),
            (self.afa.label[: self.size], self.afa.target[: self.size]),
            prec,
        )


def compile_workload(
    workload: Workload, options: MachineOptions, order_facts=None
) -> CompiledWorkload:
    afa = workload.compile(unique_early=options.early, counting=options.counting)
    n = len(afa)
    predicates = {s: p for s, p in enumerate(afa.predicate) if isinstance(p, Predicate)}
    lists = watchers = None
    if options.compiled and watch_lists is not None:  # for the core, in C
        values = bytearray(n)
        for s in predicates:
            values[s] = 1
        lists = watch_lists(bytes(afa.kind), afa.eps, afa.target, values)
    else:
        watchers = _watchers(afa)
    numbers = _ranked(workload.numbers, workload.names_of)  # rank → filter number
    ids = list(map(workload.names_of.__getitem__, numbers))
    rank: list[int] = []  # filter number → rank (removed ones: 0, unread)
    if afa.initial or afa.early:  # (none where all are counted)
        rank = [0] * len(workload.names_of)
        for k, number in enumerate(numbers):
            rank[number] = k
    initial = _by_state(afa.initial, rank)
    compiled = CompiledWorkload(
        afa=afa,
        watchers=watchers,
        lists=lists,
        true_leaves=frozenset(s for s in range(n) if afa.predicate[s] is TRUE),
        not_states=frozenset(s for s in range(n) if afa.kind[s] == NOT),
        index=PredicateIndex(predicates),
        initial=initial,
        ids=ids,
        early=_by_state(afa.early, rank),
        needs_element_values=bool(predicates),
        size=n,
    )
    if options.counting and workload.counted:  # their columns by rank
        templates = workload.templates
        is_counted = [templates[number] is not None for number in numbers]
        counted = list(compress(numbers, is_counted))
        compiled.counted = CountedFilters(
            array("i", compress(range(len(numbers)), is_counted)),
            *(
                list(map(column.__getitem__, counted))
                for column in (templates, workload.constants, workload.names)
            ),
            compiled=options.compiled,
        )
    if options.order and order_facts is not None:
        parents: list[list[int]] = [[] for _ in range(n)]
        for s, successors in enumerate(afa.eps):
            for t in successors:
                parents[t].append(s)
        compiled.prec = _order_preconditions(afa, parents, compiled.back, initial, order_facts)
    return compiled


def sparse_offsets(lists: dict[int, tuple[int, ...]], n: int) -> tuple[array, array]:
    """``offsets`` of ``n`` lists given as {index: its items}, the others empty."""
    at = array("i", bytes(4 * (n + 1)))
    for s, items in lists.items():
        at[s + 1] = len(items)
    items = chain.from_iterable(map(lists.get, sorted(lists)))
    return array("i", accumulate(at)), array("i", items)


def _ranked(numbers: dict, names_of: list) -> list:
    """The filter numbers (``numbers``: id → number) in ``id_key`` order of their ids
    (``names_of``: number → id): as Python sorts the ids where they are all integers or
    all strings (the same order, without a key per id). The numbers are sorted by their
    ids, not the ids sorted and each one's number then looked up: a million lookups in
    the order of the ids are a million cache misses."""
    kinds = set(map(type, numbers))
    by_id = names_of.__getitem__
    if kinds <= {int} or kinds <= {str}:
        return sorted(numbers.values(), key=by_id)
    return sorted(numbers.values(), key=lambda number: id_key(by_id(number)))


class SetStore:
    """Interned sets of AFA states (frozensets), known by their ids: the Python reference
    of the compiled core's SetStore."""

    def __init__(self) -> None:
        self._sets: list = []
        self._ids: dict = {}
        self.held = 0  # elements of all sets plus one per set (the memory measure)

    def intern(self, states) -> int:
        key = states if isinstance(states, frozenset) else frozenset(states)
        ident = self._ids.get(key)
        if ident is None:
            ident = self._ids[key] = len(self._sets)
            self._sets.append(key)
            self.held += len(key) + 1
        return ident

    def __getitem__(self, ident: int):
        return self._sets[ident]

    def __len__(self) -> int:
        return len(self._sets)


def _by_state(filters: dict[int, int], rank: list[int]) -> dict[int, tuple[int, ...]]:
    """{filter number: state} → {state: ranks of its filters}."""
    out: dict[int, list[int]] = {}
    for f, s in filters.items():  # (a list per state: thousands of filters may share one)
        found = out.get(s)
        if found is None:
            out[s] = [rank[f]]
        else:
            found.append(rank[f])
    return {s: tuple(ranks) for s, ranks in out.items()}


def _watchers(afa: AFA) -> list[tuple[int, ...]]:
    """OR and NOT predecessors always; an AND only through one successor, the one least
    likely to match: not a NOT if it has another (a NOT holds unless its predicate does),
    one that tests values if any (structure matches most documents), then the least
    shared (``fan_in``: how many states have it as an ε-successor).
    Most states watch nothing: their lists are made only for those that do (millions of
    empty lists would be the largest thing a big workload's compile holds). The core's
    are made in C (``watch_lists``), the same lists."""
    fan_in = array("i", bytes(4 * len(afa)))  # state -> how many states have it as ε-successor
    for successors in afa.eps:
        for t in successors:
            fan_in[t] += 1
    kind = afa.kind
    tests_values = [isinstance(p, Predicate) for p in afa.predicate]
    for s in range(len(afa)):  # successors and targets have smaller numbers, except loops
        target = afa.target[s]
        if target is not None and target != s and tests_values[target]:
            tests_values[s] = True
        if any(tests_values[t] for t in afa.eps[s]):
            tests_values[s] = True
    watching: dict[int, list[int]] = {}
    for s, successors in enumerate(afa.eps):
        if not successors:
            continue
        if afa.kind[s] == AND:
            watch = min(
                successors, key=lambda t: (kind[t] == NOT, not tests_values[t], fan_in[t], -t)
            )
            watching.setdefault(watch, []).append(s)
        else:
            for t in successors:
                watching.setdefault(t, []).append(s)
    return [tuple(watching.pop(t)) if t in watching else () for t in range(len(afa))]


def _order_preconditions(afa: AFA, parents, back, initial, order_facts) -> dict:
    """For the order optimization: step state → one set per AND above it.

    A step state ``c`` under an AND may be dropped from a node's state while,
    for every AND it is under, some sibling that must come before it (by the
    DTD) has not matched there yet: that AND can no longer be satisfied. A
    state with any other use (reached by a transition, under an OR or NOT,
    an initial state, one AND where nothing must precede it) is never dropped.
    """
    prec = {}
    for c in range(len(afa)):
        label = afa.label[c]
        if (
            label is None
            or afa.eps[c]
            or label in ("*", "@*", "#text")
            or back[c] is not None
            or c in initial
            or not parents[c]
        ):
            continue
        sets = []
        for a in parents[c]:
            if afa.kind[a] != AND:
                break
            before = frozenset(
                d
                for d in afa.eps[a]
                if d != c
                and afa.label[d] is not None
                and afa.label[d] not in ("*", "@*", "#text")
                and order_facts.precedes(afa.label[d], label)
            )
            if not before:
                break
            sets.append(before)
        else:
            prec[c] = tuple(sets)
    return prec
