"""Flat sequence patterns of several queries that read one list alike, on one list reader.

A file of CEP queries often holds many flat sequence patterns over the same list —
``/stocks/$Z \\ $X … partition by /stocks/transaction@company`` with other constants
and conditions. Each on its own runtime reads every batch again: the events at the
list's depth picked by numpy, each element's attributes read and their numbers parsed,
before its step function does the query's own work. A ``SequenceGroup`` holds the
patterns of one list shape (``SequencePattern.shape``: the list's path, the partition
attribute), compiled with one set of fields, and its run reads each batch once
(``ListReader``) and steps each element in the patterns' lists; each pattern keeps
its own partial matches, selection and rows. An element is stepped only in the lists
of the patterns that have a live partial match there or that it can start: patterns
whose first element must satisfy an equality (``$Z@company = 'IBM'``,
``SequencePattern.start_equality``) are indexed by its value, so a thousand queries
on as many companies try a few per element, not all.

*Templates*: under the ``all`` selection, fixed-length patterns (no Kleene-*) that
differ only in comparisons of their variables' attributes with constants — in step
predicates or the where clause: ``$Z[@company = 'IBM'] \\ $X[@price > 98]`` — and in
their return clauses share one run of the pattern without
those comparisons; each match it finds goes to the members whose comparisons hold,
found for all of them at once by an index of the constants
(``conditions.MemberConditions``, the counting algorithm), and each member makes its
rows and aggregates from it. The plan of many queries (``xcep/plans/xseq.py``) puts
the flat sequence patterns of a query file in groups. A template is used where an
element would otherwise be tried on eight or more of its queries (``TEMPLATE``): a
thousand queries on five companies, not a hundred on as many buyers.
"""

from __future__ import annotations

from dataclasses import replace

from xcep.xseq import ast as A
from xcep.xseq.conditions import MemberConditions
from xcep.xseq.counting import attribute_atom, reference_atom
from xcep.xseq.matches import Aggregator, make_env, output_row
from xcep.xseq.program import template_key
from xcep.xseq.semantics import Conjunct
from xcep.xseq.sequence import (
    ListReader,
    SequencePattern,
    SequenceRun,
    attribute_reader,
    attribute_row,
)

# a template's queries share one run when an element would otherwise be stepped in this
# many of their lists (a shared run costs a binding and an index lookup per match, an own
# one a call of its step function per element it is tried on)
TEMPLATE = 8


class SequenceGroup:
    """The flat sequence patterns of some queries (``(id, pattern)`` in order), of one
    list shape and compiled with one set of fields (``SequencePattern(analysis,
    fields_by_shape)``)."""

    def __init__(self, members: list[tuple], values_only: bool, selection: str) -> None:
        shapes = {pattern.shape for _, pattern in members}
        fields = {id(pattern.fields) for _, pattern in members}
        if len(shapes) != 1 or len(fields) != 1 or next(iter(shapes))[2]:
            raise ValueError("a group's patterns read one list (not under //) alike")
        self.ids = [qid for qid, _ in members]
        self.patterns = [pattern for _, pattern in members]
        self.values_only = values_only
        self.selection = selection
        # the runs' patterns, each with the queries it serves (indexes): a pattern alone,
        # or a template's with its members and their comparisons
        by_template: dict = {}
        lifted = [_lift_comparisons(p) if selection == "all" else None for p in self.patterns]
        for i, found in enumerate(lifted):
            key = ("alone", i) if found is None else template_key(found[0])
            by_template.setdefault(key, []).append(i)
        self.units: list[tuple] = []  # (pattern, [query index], [its comparisons] or None)
        for indexes in by_template.values():
            if _tries([self.patterns[i] for i in indexes]) < TEMPLATE:
                self.units += [(self.patterns[i], [i], None) for i in indexes]
                continue
            first = self.patterns[indexes[0]]
            shared = {first.shape: first.fields}  # (its matches are bindings: nodes kept)
            template = SequencePattern(lifted[indexes[0]][0], shared, nodes=True)
            self.units.append((template, indexes, [lifted[i][1] for i in indexes]))

    def start(self) -> SequenceGroupRun:
        return SequenceGroupRun(self)


def _tries(patterns: list[SequencePattern]) -> float:
    """How many of ``patterns`` an element is tried on, about (``SequenceGroupRun.take``):
    every one without a start equality, and of those with one, as many as share a
    constant (values spread evenly over the constants)."""
    equalities = [p.start_equality() for p in patterns]
    keyed = [found for found in equalities if found is not None]
    return len(patterns) - len(keyed) + (len(keyed) / len(set(keyed)) if keyed else 0)


def _lift_comparisons(pattern: SequencePattern) -> tuple | None:
    """(the pattern's analysis without its comparisons of a variable's attribute with a
    constant, those comparisons as per-match conjuncts) for a fixed-length pattern whose
    per-match conditions are all such comparisons; None for others."""
    analysis = pattern.analysis
    if any(item.star for item in pattern.items) or not isinstance(analysis.path, A.Seq):
        return None
    if any(reference_atom(c.cond) is None for c in analysis.per_match):
        return None
    lifted = list(analysis.per_match)
    items = []
    for step in analysis.path.items:
        if not isinstance(step, A.Step) or step.var is None:
            items.append(step)
            continue
        kept = []
        for pred in step.preds:
            if attribute_atom(pred) is None:
                kept.append(pred)
                continue
            left, right = (
                A.VarRef(step.var, None, side.path) if isinstance(side, A.RelPath) else side
                for side in (pred.left, pred.right)
            )
            lifted.append(Conjunct(A.Compare(pred.op, left, right), None, frozenset({step.var})))
        items.append(replace(step, preds=tuple(kept)))
    path = replace(analysis.path, items=tuple(items))
    return replace(analysis, path=path, per_match=[]), lifted


class _TemplateRun(SequenceRun):
    """The run of a template's pattern (its members' comparisons left out): each match
    goes to the members whose comparisons hold on it (``rows``: per member)."""

    def __init__(self, pattern, members: list, conds: list, values_only: bool, reader):
        super().__init__(pattern, values_only, "all", reader)
        self.step = pattern.make_listing_step(self.emit)
        self.served = members  # the members' own patterns
        self.conditions = MemberConditions()
        self.always = []  # the members without comparisons
        for i, conjuncts in enumerate(conds):
            if conjuncts:
                self.conditions.set(i, conjuncts)
            else:
                self.always.append(i)
        self.aggregators = [
            Aggregator(m.analysis, values_only) if m.analysis.mode != "rows" else None
            for m in members
        ]
        self.row_ofs = [attribute_row(m) for m in members]
        self._reader = False  # ``reader_of_conditions``, once asked
        self.rows = [[] for _ in members]

    def emit(self, lst, found: list, ordered: bool = False) -> None:
        if not ordered:
            found = self.in_order(found)
        analysis, decide = self.p.analysis, self.conditions.decide
        conditional = bool(self.conditions.members)
        reader = self.reader_of_conditions()
        for regs in found:
            binding = None  # (made when something reads nodes)
            passed = self.always
            if reader is not None:  # the members' conditions read attributes only
                passed = [*passed, *decide(None, reader(regs))]
            elif conditional:
                binding = self.binding(lst, regs)
                passed = [*passed, *decide(make_env(analysis, binding, False, memo=True))]
            made: dict = {}  # a row of attributes, once for the members that return it
            for i in passed:
                aggregator = self.aggregators[i]
                row_of = self.row_ofs[i]
                if row_of is None and binding is None:
                    binding = self.binding(lst, regs)
                if aggregator is not None:
                    aggregator.add(lst.key, binding)
                elif row_of is not None:
                    row = made.get(row_of.terms)
                    if row is None:
                        row = made[row_of.terms] = row_of(regs)
                    self.rows[i].append(row.copy())  # (each its own list)
                else:
                    row = output_row(self.served[i].analysis, binding, None, self.values_only)
                    self.rows[i].append(row)

    def reader_of_conditions(self):
        """fn(regs) -> read(reference): the members' conditions' values read from a
        match's elements (``attribute_reader``), where they are all attributes of
        elements and all decided by the index; else None (nodes are made)."""
        if self._reader is False:
            found = None
            conditions = self.conditions
            if conditions.members and conditions.indexed():
                found = attribute_reader(self.p, conditions.references())
            self._reader = found
        return self._reader

    def taken(self) -> list[list]:
        """The rows found since, per member."""
        rows, self.rows = self.rows, [[] for _ in self.served]
        return rows

    def end(self, final: bool) -> list[list]:
        """Per member, its rows and, at the end, its aggregates' (``SequenceRun.end``)."""
        rows = self.taken()
        if final:
            order = list(self.lists) if self.p.partition_attribute is not None else None
            for i, aggregator in enumerate(self.aggregators):
                if aggregator is not None:
                    rows[i] += aggregator.rows(order)
        return rows

    def state(self) -> dict:
        groups = [None if a is None else a.groups for a in self.aggregators]
        return {**super().state(), "groups": groups}

    def restore(self, state: dict) -> _TemplateRun:
        super().restore({**state, "groups": None})
        for aggregator, groups in zip(self.aggregators, state["groups"], strict=True):
            if aggregator is not None:
                aggregator.groups = groups
        return self


class SequenceGroupRun:
    """One pass of a group: ``feed(batch)`` and ``end(final)`` give ``(member index, its
    rows)`` pairs, member after member (each member's rows in its own order); a member
    removed (``mute``) is read on and reports nothing more."""

    def __init__(self, group: SequenceGroup) -> None:
        patterns = group.patterns
        # (a template's matches are bindings of nodes, which read their raw attributes)
        keep_raw = any(not p.count_only or c is not None for p, _, c in group.units)
        self.reader = ListReader(patterns[0], keep_raw)
        self.runs: list[SequenceRun] = []  # one per unit (``SequenceGroup.units``)
        self.members = [indexes for _, indexes, _ in group.units]
        for pattern, indexes, conds in group.units:
            if conds is None:
                run = SequenceRun(pattern, group.values_only, group.selection, self.reader)
            else:
                served = [patterns[i] for i in indexes]
                run = _TemplateRun(pattern, served, conds, group.values_only, self.reader)
            self.runs.append(run)
        self.partitioned = patterns[0].partition_attribute is not None
        self.muted: set[int] = set()
        # the members to try on an element: those without a start equality, those whose
        # equality its field's value satisfies (field -> value -> members), and those with
        # a live partial match in the list (list key -> members)
        self.always: set[int] = set()
        self.keyed: dict[int, dict[str, list[int]]] = {}
        for i, (pattern, _, _) in enumerate(group.units):
            found = pattern.start_equality()
            if found is None:
                self.always.add(i)
            else:
                self.keyed.setdefault(found[0], {}).setdefault(found[1], []).append(i)
        self.active: dict = {}
        self.seen: set = set()  # the partitions met (lists are made in that order)

    def take(self, key, element: list) -> None:
        """Step a list element in the lists of the members it can concern."""
        runs = self.runs
        if self.partitioned and key not in self.seen:  # each member's list, in order
            self.seen.add(key)
            tried = range(len(runs))
        else:
            tried = self.always | self.active.get(key, set())
            fields = element[3]
            for at, members in self.keyed.items():
                value = fields[at]
                if value is not None:
                    tried = tried.union(members.get(value[0], ()))
        active = self.active.setdefault(key, set())
        for i in tried:
            run = runs[i]
            lst = run.list_for(key)
            run.step(lst, element)
            if lst.threads:
                active.add(i)
            else:
                active.discard(i)

    def mark(self, what: str) -> None:
        """A parent's list begins or ends: every member's (no partial match lives on)."""
        for run in self.runs:
            run.mark(what)
        self.active.clear()

    def feed(self, batch) -> list[tuple[int, list[list]]]:
        self.reader.read(batch, self.take, self.mark)
        return self._rows([self._taken(run) for run in self.runs])

    def end(self, final: bool) -> list[tuple[int, list[list]]]:
        return self._rows([self._taken(run, run.end(final)) for run in self.runs])

    @staticmethod
    def _taken(run: SequenceRun, ended: list | None = None) -> list[list]:
        """A run's rows since, per query it serves (a template's are so already)."""
        if isinstance(run, _TemplateRun):
            return ended if ended is not None else run.taken()
        rows, run.rows = (run.rows if ended is None else ended), []
        return [rows]

    def _rows(self, found: list[list[list]]) -> list[tuple[int, list[list]]]:
        """(query index, its rows) from the runs' rows, each run's per query it serves."""
        return [
            (i, rows)
            for indexes, per_member in zip(self.members, found, strict=True)
            for i, rows in zip(indexes, per_member, strict=True)
            if rows and i not in self.muted
        ]

    def mute(self, member: int) -> None:
        self.muted.add(member)

    def state(self) -> dict:
        return {"runs": [run.state() for run in self.runs], "muted": self.muted}

    def restore(self, state: dict) -> SequenceGroupRun:
        for run, saved in zip(self.runs, state["runs"], strict=True):
            run.restore(saved)
        self.muted = set(state["muted"])
        for i, run in enumerate(self.runs):  # what the index knows, from the lists
            lists = run.lists.items() if self.partitioned else [(None, run.current)]
            for key, lst in lists:
                self.seen.add(key)
                if lst is not None and lst.threads:
                    self.active.setdefault(key, set()).add(i)
        return self
