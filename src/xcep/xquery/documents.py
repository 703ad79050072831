"""ElementTree documents built from xcep's event stream (XML or JSON, parsed securely)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, EventBatch


def documents_from_batches(batches: Iterable[EventBatch]) -> Iterator[ET.ElementTree]:
    """One ``ElementTree`` per complete document; a malformed one is dropped."""
    builder = None
    doc = None
    pending = None  # an open tag waiting for its attributes: [name, attributes]
    depth = 0
    for batch in batches:
        if batch is None:  # a pause (xcep.events.stepping)
            yield None
            continue
        names = batch.symbols.names
        for d, kind, name, value in zip(
            batch.docs, batch.kinds, batch.names, batch.values, strict=True
        ):
            if d != doc:  # a new document (a malformed one before it never closed)
                builder, doc, pending, depth = ET.TreeBuilder(), d, None, 0
            if kind == ATTR:
                pending[1][names[name]] = value
                continue
            if pending is not None:
                builder.start(*pending)
                pending = None
            if kind == OPEN:
                pending = [names[name], {}]
                depth += 1
            elif kind == CLOSE:
                builder.end(names[name])
                depth -= 1
                if depth == 0:
                    yield ET.ElementTree(builder.close())
                    doc = None
            else:
                builder.data(value)
