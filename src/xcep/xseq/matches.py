"""Matches, bindings and output rows: what the engine and the reference evaluator share.

A binding holds, per variable, its node (``None`` when unbound) or, for a
variable under a Kleene-*, the tuple of its nodes in match order; and, per
Kleene-* group, the node the path stood on when the group was first entered
(``prev()`` of the first iteration). A match is a binding plus the node the
path ends at; its *start* is its earliest bound node (the end node when it
binds none).
"""

from __future__ import annotations

from xcep.xseq import ast as A
from xcep.xseq.dom import ELEMENT, ROOT, Node
from xcep.xseq.evaluate import holds, ref_nodes, values
from xcep.xseq.semantics import Analysis
from xcep.xseq.values import Aggregate, format_number


class Binding:
    """Variable slots and group entry nodes; immutable, hashable, ordered like the query."""

    __slots__ = ("_hash", "entries", "slots")

    def __init__(self, slots: tuple, entries: tuple) -> None:
        self.slots = slots
        self.entries = entries
        self._hash = hash((slots, entries))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self.slots == other.slots and self.entries == other.entries

    @classmethod
    def empty(cls, analysis: Analysis) -> Binding:
        slots = tuple(() if v in analysis.kleene else None for v in analysis.variables)
        return cls(slots, (None,) * analysis.query.groups)

    def bind(self, index: int, node: Node, kleene: bool) -> Binding:
        slots = list(self.slots)
        slots[index] = (*slots[index], node) if kleene else node
        return Binding(tuple(slots), self.entries)

    def enter(self, group: int, node: Node) -> Binding:
        if self.entries[group] is not None:
            return self
        entries = list(self.entries)
        entries[group] = node
        return Binding(self.slots, tuple(entries))

    def nodes(self, indexes: tuple | None = None) -> list[Node]:
        """The bound nodes (of the slots at ``indexes`` only, given them)."""
        out = []
        slots = self.slots if indexes is None else [self.slots[i] for i in indexes]
        for slot in slots:
            if isinstance(slot, tuple):
                out.extend(slot)
            elif slot is not None:
                out.append(slot)
        return out

    def sort_key(self) -> tuple:
        return tuple(
            tuple(n.key for n in slot) if isinstance(slot, tuple) else (slot.key if slot else ())
            for slot in self.slots
        )

    def match_key(self) -> tuple:
        """What makes two matches the same: the bound nodes (entries do not count)."""
        return tuple(
            tuple(map(id, slot)) if isinstance(slot, tuple) else id(slot) for slot in self.slots
        )


def make_env(analysis: Analysis, binding: Binding, iteration: bool, memo: bool = False):
    """The variable lookup for conditions and outputs over ``binding``.

    ``iteration``: inside a per-iteration condition, a bare Kleene-* variable
    is its latest node; elsewhere it is all of its nodes. ``memo``: the values
    of each reference object are computed once (``env.memo``, read by
    ``evaluate.values``; many conditions over the same binding share them).
    """
    return Env(analysis.index, analysis.kleene, binding, iteration, {} if memo else None)


class Env:
    """``env(ref)``: the nodes a variable reference names in a binding (``make_env``); an
    object, not a closure, so that a pending check holding one can be saved."""

    __slots__ = ("binding", "index", "iteration", "kleene", "memo")

    def __init__(self, index, kleene, binding: Binding, iteration: bool, memo) -> None:
        self.index, self.kleene, self.binding = index, kleene, binding
        self.iteration, self.memo = iteration, memo

    def __call__(self, ref: A.VarRef) -> list[Node]:
        binding = self.binding
        slot = binding.slots[self.index[ref.var]]
        if ref.var not in self.kleene:
            return [slot] if slot is not None else []
        if ref.func is None:
            return list(slot[-1:]) if self.iteration else list(slot)
        if ref.func == "first":
            return list(slot[:1])
        if ref.func == "last":
            return list(slot[-1:])
        if len(slot) >= 2:
            return [slot[-2]]
        entry = binding.entries[self.kleene[ref.var]]
        return [entry] if slot and entry is not None and entry.kind != ROOT else []


def conditions_hold(analysis: Analysis, conjuncts, binding: Binding, iteration: bool) -> bool:
    env = make_env(analysis, binding, iteration)
    return all(holds(c.cond, None, env) for c in conjuncts)


def match_start(binding: Binding, end: Node, indexes: tuple | None = None) -> tuple:
    """Where a match starts: its first bound node (of the slots at ``indexes``: the
    query's own variables, not those lifting added), else its end."""
    nodes = binding.nodes(indexes)
    return min(n.key for n in nodes) if nodes else end.key


def node_output(node: Node, values_only: bool):
    if node.kind == ELEMENT and not values_only:
        return node.serialize()
    return node.string_value()


def term_values(analysis: Analysis, expr, binding: Binding, values_only: bool) -> list:
    """The values of one output expression for one match."""
    env = make_env(analysis, binding, iteration=False)
    if isinstance(expr, A.VarRef) and not _is_field(expr.path):
        return [node_output(n, values_only) for n in ref_nodes(expr, env)]
    return [format_number(v) if isinstance(v, float) else v for v in values(expr, None, env)]


def _is_field(path) -> bool:
    """Whether a reference's path is one named attribute (its values are its strings)."""
    return type(path) is A.Step and path.axis == A.ATTRIBUTE and path.name != A.WILDCARD


def _single(analysis: Analysis, expr) -> bool:
    """Whether an output term names one node per match (a plain variable, first(), last())."""
    if isinstance(expr, A.VarRef):
        return expr.var not in analysis.kleene or expr.func is not None
    return True


def output_row(analysis: Analysis, binding: Binding, end: Node, values_only: bool) -> list:
    """The JSON row of one match (``mode`` rows or nodes)."""
    if analysis.mode == "nodes":
        return [node_output(end, values_only)]
    return [term_output(analysis, term, binding, values_only) for term in analysis.query.returns]


def term_output(analysis: Analysis, term: A.OutTerm, binding: Binding, values_only: bool):
    """One plain output term of a match: a term that yields one value (or none: null) is that
    value; a Kleene-* variable, or a path yielding several values, is an array."""
    found = term_values(analysis, term.expr, binding, values_only)
    if _single(analysis, term.expr) and len(found) <= 1:
        return found[0] if found else None
    return found


class Aggregator:
    """The rows of an aggregate (or mixed) return clause: one per partition, or one in all."""

    def __init__(self, analysis: Analysis, values_only: bool) -> None:
        self.analysis = analysis
        self.values_only = values_only
        self.groups: dict = {}  # partition key -> [aggregates, first match's plain values]

    def add(self, key, binding: Binding) -> None:
        terms = self.analysis.query.returns
        group = self.groups.get(key)
        if group is None:
            firsts = [
                None if t.aggregate else term_output(self.analysis, t, binding, self.values_only)
                for t in terms
            ]
            group = self.groups[key] = [[Aggregate(t.aggregate) for t in terms], firsts]
        for aggregate, term in zip(group[0], terms, strict=True):
            if term.aggregate == "count" and isinstance(term.expr, A.VarRef):
                env = make_env(self.analysis, binding, iteration=False)
                aggregate.count += len(ref_nodes(term.expr, env))  # count nodes, print none
            elif term.aggregate is not None:
                aggregate.add(term_values(self.analysis, term.expr, binding, self.values_only))

    def add_values(self, key, found: list) -> None:
        """One match given as the values of each term (``count($X)``: one per node)."""
        terms = self.analysis.query.returns
        group = self.groups.get(key)
        if group is None:
            firsts = [
                None if t.aggregate else v[0] if len(v) == 1 else list(v) if v else None
                for t, v in zip(terms, found, strict=True)
            ]
            group = self.groups[key] = [[Aggregate(t.aggregate) for t in terms], firsts]
        for aggregate, term, term_found in zip(group[0], terms, found, strict=True):
            if term.aggregate == "count":
                aggregate.count += len(term_found)
            elif term.aggregate is not None:
                aggregate.add(term_found)

    def add_counts(self, key, counts: list[list[int]]) -> None:
        """Matches of a return clause of ``count(…)`` terms only, each given as its counts."""
        group = self.groups.get(key)
        if group is None:
            terms = self.analysis.query.returns
            group = self.groups[key] = [[Aggregate(t.aggregate) for t in terms], []]
        for counts_of_match in counts:
            for aggregate, count in zip(group[0], counts_of_match, strict=True):
                aggregate.count += count

    def rows(self, order: list | None = None) -> list[list]:
        """One row per group; ``order`` lists the partition keys in order of appearance."""
        if order is not None:
            rank = {key: i for i, key in enumerate(order)}
            self.groups = dict(sorted(self.groups.items(), key=lambda kv: rank[kv[0]]))
        if not self.groups and self.analysis.partition is None:
            self.groups[None] = [[Aggregate(t.aggregate) for t in self.analysis.query.returns], []]
        out = []
        for aggregates, firsts in self.groups.values():
            row = []
            for i, (aggregate, term) in enumerate(
                zip(aggregates, self.analysis.query.returns, strict=True)
            ):
                row.append(
                    aggregate.result() if term.aggregate else (firsts[i] if firsts else None)
                )
            out.append(row)
        return out


SELECTIONS = ("all", "maximal", "skip-past-last")


def pick(policy: str, start, ends: list, last_end) -> tuple[list[int], object]:
    """A policy's choice among the matches of one start (their ends, in match order), once
    no other match can start there: the positions it selects, and the end of the last
    match selected (skip-past-last's, carried from group to group; else as given).
    maximal: every match that ends last; skip-past-last: the first of those, unless
    ``start`` is not past ``last_end``."""
    if not ends:
        return [], last_end
    best = max(ends)
    if policy == "maximal":
        return [i for i, end in enumerate(ends) if end == best], last_end
    if last_end is None or start > last_end:
        return [ends.index(best)], best
    return [], last_end


def check_selection(policy: str) -> str:
    """``policy`` if it is a selection policy; else a ValueError naming them."""
    if policy not in SELECTIONS:
        raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}, not {policy!r}")
    return policy


def select_matches(matches: list, policy: str) -> list:
    """Apply a match-selection policy to ``matches``: (start key, end key, order key, item).

    all: every match. maximal: per start, the matches that end last.
    skip-past-last: non-overlapping, leftmost-longest: the earliest start's
    longest match (the first in order on a tie), then the next start after its
    end, and so on. The result keeps the input order.
    """
    if policy == "all":
        return matches
    if policy == "maximal":
        longest: dict = {}
        for start, end, _, _ in matches:
            longest[start] = max(longest.get(start, end), end)
        return [m for m in matches if m[1] == longest[m[0]]]
    check_selection(policy)
    chosen, last_end = [], None
    for start in sorted({m[0] for m in matches}):
        if last_end is not None and start <= last_end:
            continue
        candidates = [m for m in matches if m[0] == start]
        best = max(m[1] for m in candidates)
        pick = min((m for m in candidates if m[1] == best), key=lambda m: m[2])
        chosen.append(pick)
        last_end = best
    return sorted(chosen, key=lambda m: m[2])
