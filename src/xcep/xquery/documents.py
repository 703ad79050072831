"""ElementTree documents built from xcep's event stream (XML or JSON, parsed securely)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, TEXT, EventBatch


class ElementBuilder:
    """An ElementTree element built from events, one at a time (a start tag waits for its
    attributes); ``add`` gives the element when the event closes its outermost one."""

    def __init__(self) -> None:
        self.builder = ET.TreeBuilder()
        self.pending = None  # an open tag waiting for its attributes: [name, attributes]
        self.depth = 0

    def add(self, kind: int, name: str | None, value) -> ET.Element | None:
        if kind == ATTR:
            self.pending[1][name] = value
            return None
        if self.pending is not None:
            self.builder.start(*self.pending)
            self.pending = None
        if kind == OPEN:
            self.pending = [name, {}]
            self.depth += 1
        elif kind == CLOSE:
            self.builder.end(name)
            self.depth -= 1
            if self.depth == 0:
                return self.builder.close()
        else:
            self.builder.data(value)
        return None


def documents_from_batches(batches: Iterable[EventBatch]) -> Iterator[ET.ElementTree]:
    """One ``ElementTree`` per complete document; a malformed one is dropped."""
    element = None
    doc = None
    for batch in batches:
        if batch is None:  # a pause (xcep.events.stepping)
            yield None
            continue
        names = batch.symbols.names
        for d, kind, name, value in zip(
            batch.docs, batch.kinds, batch.names, batch.values, strict=True
        ):
            if d != doc:  # a new document (a malformed one before it never closed)
                element, doc = ElementBuilder(), d
            root = element.add(kind, None if kind == TEXT else names[name], value)
            if root is not None:
                yield ET.ElementTree(root)
                doc = None
