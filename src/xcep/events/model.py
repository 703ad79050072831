"""The nested word: events, interned names and columnar batches.

Every input becomes one stream of events ``open(tag)``, ``attr(name, value)``,
``text(value)`` and ``close(tag)``. Each event carries the 0-based index of
its document in the stream, its depth (the root element has depth 1; its
attributes and text have depth 2) and the pre-order index of its node inside
the document (the root element is node 0; attributes and text nodes are
numbered too; a close event carries the index of the element it closes).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

try:
    from xcep.events._tokenizer import depth_facts
except ImportError:  # the events kernel is not built: Python counts
    depth_facts = None


class Kind(IntEnum):
    """The four kinds of event of a nested word."""

    OPEN = 0
    ATTR = 1
    TEXT = 2
    CLOSE = 3

    def __str__(self) -> str:
        return self.name.lower()


OPEN, ATTR, TEXT, CLOSE = Kind.OPEN, Kind.ATTR, Kind.TEXT, Kind.CLOSE
NO_NAME = -1  # the name id of a text event


class Event(NamedTuple):
    """One event, with its name resolved to a string (``None`` for text)."""

    doc: int
    kind: Kind
    name: str | None
    value: str | None
    depth: int
    node: int

    def to_dict(self) -> dict:
        """The JSON form used by ``xcep events --format jsonl``."""
        out: dict = {"doc": self.doc, "kind": str(self.kind)}
        if self.name is not None:
            out["name"] = self.name
        if self.value is not None:
            out["value"] = self.value
        out["depth"] = self.depth
        out["node"] = self.node
        return out


class Symbols(dict):
    """Tag and attribute names interned to small integers, one table per stream.

    ``symbols[name]`` returns the id of ``name`` (adding it when new);
    ``symbols.names[id]`` is the name back.
    """

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __missing__(self, name: str) -> int:
        ident = len(self.names)
        self.names.append(name)
        self[name] = ident
        return ident

    def name(self, ident: int) -> str | None:
        return None if ident == NO_NAME else self.names[ident]


@dataclass(slots=True)
class EventBatch:
    """A run of consecutive events of one stream, stored column by column.

    ``kinds``, ``names`` (interned ids, ``NO_NAME`` for text), ``depths``,
    ``nodes`` and ``docs`` are ``array`` columns; ``values`` is a list holding
    the attribute/text value or ``None``. A batch may span documents, and a
    large document spans batches. A document is complete when its root element
    closes (a close event at depth 1). A document whose events stop before its
    root closes was found malformed: consumers discard what they saw of it.
    """

    symbols: Symbols
    docs: array
    kinds: array
    names: array
    values: list
    depths: array
    nodes: array

    def __len__(self) -> int:
        return len(self.kinds)

    def depth_facts(self) -> tuple[int, int]:
        """(the largest depth, how many documents end here: closes at depth 1), in the
        events kernel where it is built."""
        if depth_facts is not None:
            return depth_facts(self.kinds, self.depths)
        return max(self.depths, default=0), sum(
            1
            for kind, depth in zip(self.kinds, self.depths, strict=True)
            if kind == CLOSE and depth == 1
        )

    def document_runs(self) -> Iterator[tuple[int, int, int]]:
        """(document, first, end) for each run of one document's events in the batch."""
        docs = self.docs
        if not docs:
            return
        if docs[0] == docs[-1]:
            yield docs[0], 0, len(docs)
            return
        start = 0
        for i in range(1, len(docs)):
            if docs[i] != docs[start]:
                yield docs[start], start, i
                start = i
        yield docs[start], start, len(docs)

    def pieces(self, documents: int) -> Iterator[EventBatch]:
        """The batch cut into pieces of ``documents`` documents' events each (the last
        one may be short): a consumer that gives output per document hands it out
        sooner, and holds less of it at once."""
        runs = list(self.document_runs())
        if len(runs) <= documents:
            yield self
            return
        for at in range(0, len(runs), documents):
            group = runs[at : at + documents]
            yield self.slice(group[0][1], group[-1][2])

    @staticmethod
    def join(batches: list) -> EventBatch:
        """Consecutive batches of one stream as one batch."""
        first = batches[0]
        joined = EventBatch(
            first.symbols, array("q"), array("B"), array("i"), [], array("i"), array("q")
        )
        for batch in batches:
            joined.docs.extend(batch.docs)
            joined.kinds.extend(batch.kinds)
            joined.names.extend(batch.names)
            joined.values.extend(batch.values)
            joined.depths.extend(batch.depths)
            joined.nodes.extend(batch.nodes)
        return joined

    def slice(self, start: int, end: int) -> EventBatch:
        """The events ``start:end`` as a batch of their own (same symbols)."""
        part = slice(start, end)
        return EventBatch(
            self.symbols,
            self.docs[part],
            self.kinds[part],
            self.names[part],
            self.values[part],
            self.depths[part],
            self.nodes[part],
        )

    def __iter__(self) -> Iterator[Event]:
        name_of = self.symbols.names
        kinds = tuple(Kind)
        for doc, kind, name, value, depth, node in zip(
            self.docs, self.kinds, self.names, self.values, self.depths, self.nodes, strict=True
        ):
            yield Event(
                doc, kinds[kind], None if name == NO_NAME else name_of[name], value, depth, node
            )


@dataclass(slots=True)
class EventBuilder:
    """Collects events into columns (arrays, and a list of values) and cuts them
    into ``EventBatch``es.

    Events of the document being read are held back until the document is
    complete, so that a malformed document can be dropped whole
    (``abandon_document``); only when more than ``batch_size`` events of one
    document are pending are they released early.
    """

    symbols: Symbols = field(default_factory=Symbols)
    batch_size: int = 8192
    docs: array = field(default_factory=lambda: array("q"))
    kinds: array = field(default_factory=lambda: array("B"))
    names: array = field(default_factory=lambda: array("i"))
    values: list = field(default_factory=list)
    depths: array = field(default_factory=lambda: array("i"))
    nodes: array = field(default_factory=lambda: array("q"))
    complete: int = 0  # events before this index belong to complete documents
    doc_start: int = 0  # index of the first pending event of the current document

    def columns(self) -> tuple:
        """The six columns, as the compiled kernels append to them."""
        return (self.docs, self.kinds, self.names, self.values, self.depths, self.nodes)

    def begin_document(self) -> None:
        self.doc_start = len(self.kinds)

    def end_document(self) -> None:
        self.complete = len(self.kinds)

    def abandon_document(self) -> None:
        """Drop the pending events of the current (malformed) document, if any."""
        cut = max(self.doc_start, self.complete)
        for column in (self.docs, self.kinds, self.names, self.values, self.depths, self.nodes):
            del column[cut:]
        self.complete = min(self.complete, cut)

    def take(self, force: bool = False) -> EventBatch | None:
        """The events ready to be delivered, or ``None``.

        Complete documents are delivered whenever there are some; the pending
        part of an incomplete document only when it is large or ``force``.
        """
        n = len(self.kinds)
        upto = n if (force or n - self.complete >= self.batch_size) else self.complete
        if upto == 0:
            return None
        batch = EventBatch(
            self.symbols,
            self.docs[:upto],
            self.kinds[:upto],
            self.names[:upto],
            self.values[:upto],
            self.depths[:upto],
            self.nodes[:upto],
        )
        for column in (self.docs, self.kinds, self.names, self.values, self.depths, self.nodes):
            del column[:upto]
        self.complete = max(0, self.complete - upto)
        self.doc_start = max(0, self.doc_start - upto)
        return batch
