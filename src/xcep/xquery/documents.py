"""ElementTree documents built from xcep's event stream (XML or JSON, parsed securely)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, TEXT, EventBatch


def documents_from_batches(batches: Iterable[EventBatch]) -> Iterator[ET.ElementTree]:
    """One ``ElementTree`` per complete document; a malformed one is dropped."""
    stack: list[ET.Element] = []
    root = None
    doc = None
    for batch in batches:
        names = batch.symbols.names
        for d, kind, name, value in zip(
            batch.docs, batch.kinds, batch.names, batch.values, strict=True
        ):
            if d != doc:
                stack, root, doc = [], None, d  # a new document (the last one did not close)
            if kind == OPEN:
                elem = ET.Element(names[name])
                if stack:
                    stack[-1].append(elem)
                else:
                    root = elem
                stack.append(elem)
            elif kind == ATTR:
                stack[-1].set(names[name], value)
            elif kind == TEXT:
                top = stack[-1]
                if len(top):
                    top[-1].tail = (top[-1].tail or "") + value
                else:
                    top.text = (top.text or "") + value
            elif kind == CLOSE:
                stack.pop()
                if not stack:
                    yield ET.ElementTree(root)
                    doc = None
