"""Flat sequence patterns of several queries that read one list alike, on one list reader.

A file of CEP queries often holds many flat sequence patterns over the same list —
``/stocks/$Z \\ $X … partition by /stocks/transaction@company`` with other constants
and conditions. Each on its own runtime reads every batch again: the events at the
list's depth picked by numpy, each element's attributes read and their numbers parsed,
before its step function does the query's own work. A ``SequenceGroup`` holds the
patterns of one list shape (``SequencePattern.shape``: the list's path, the partition
attribute), compiled with one set of fields, and its run reads each batch once
(``ListReader``) and steps each element in every pattern's lists; each pattern keeps
its own partial matches, selection and rows. The plan of many queries
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
        self.muted: set[int] = set()
        takes = [run.take for run in self.runs]
        marks = [run.mark for run in self.runs]

        def take(key, element: list) -> None:
            for member in takes:
                member(key, element)

        def mark(what: str) -> None:
            for member in marks:
                member(what)

        self.take, self.mark = take, mark

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
        return self
