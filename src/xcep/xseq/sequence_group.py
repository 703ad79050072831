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
on as many companies try a few per element, not all. The plan of many queries
(``xcep/plans/xseq.py``) puts the flat sequence patterns of a query file in groups.
"""

from __future__ import annotations

from xcep.xseq.sequence import ListReader, SequenceRun


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

    def start(self) -> SequenceGroupRun:
        return SequenceGroupRun(self)


class SequenceGroupRun:
    """One pass of a group: ``feed(batch)`` and ``end(final)`` give ``(member index, row)``
    rows, each member's in its own order, member after member; a member removed
    (``mute``) is read on and reports nothing more."""

    def __init__(self, group: SequenceGroup) -> None:
        patterns = group.patterns
        keep_raw = any(not p.count_only for p in patterns)
        self.reader = ListReader(patterns[0], keep_raw)
        self.runs = [
            SequenceRun(p, group.values_only, group.selection, self.reader) for p in patterns
        ]
        self.partitioned = patterns[0].partition_attribute is not None
        self.muted: set[int] = set()
        # the members to try on an element: those without a start equality, those whose
        # equality its field's value satisfies (field -> value -> members), and those with
        # a live partial match in the list (list key -> members)
        self.always: set[int] = set()
        self.keyed: dict[int, dict[str, list[int]]] = {}
        for i, pattern in enumerate(patterns):
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

    def feed(self, batch) -> list[tuple[int, list]]:
        self.reader.read(batch, self.take, self.mark)
        return self._rows([run.rows for run in self.runs], clear=True)

    def end(self, final: bool) -> list[tuple[int, list]]:
        return self._rows([run.end(final) for run in self.runs])

    def _rows(self, found: list[list], clear: bool = False) -> list[tuple[int, list]]:
        rows = [(i, row) for i, some in enumerate(found) if i not in self.muted for row in some]
        if clear:
            for run in self.runs:
                run.rows = []
        return rows

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
