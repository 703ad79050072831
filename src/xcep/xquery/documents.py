"""ElementTree documents built from xcep's event stream (XML or JSON, parsed securely)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, TEXT, EventBatch
from xcep.xquery.values import XML_NAMESPACE, XML_SCOPE, expanded_name

XML_PREFIXED = f"{{{XML_NAMESPACE}}}"


class ElementBuilder:
    """An ElementTree element built from events, one at a time (a start tag waits for its
    attributes); ``add`` gives the element when the event closes its outermost one.

    With ``prefixes`` (a dict, namespace URI → the first prefix seen for it, filled in
    as documents declare them) names are resolved as XML Namespaces 1.0 says, from the
    namespace declarations the event source reports as attributes (``namespaces=True``):
    ``p:a`` becomes ``{uri}a``, an unprefixed element name takes the default namespace,
    and the declarations are not attributes. A prefix no declaration binds keeps its
    name as spelled."""

    def __init__(self, prefixes: dict | None = None) -> None:
        self.builder = ET.TreeBuilder()
        self.pending = None  # an open tag waiting for its attributes: [name, attributes]
        self.depth = 0
        self.prefixes = prefixes
        self.scopes: list[dict] = [XML_SCOPE]  # prefix ('' default) → URI

    def _start(self, name: str, attributes: dict) -> None:
        if self.prefixes is None:
            self.builder.start(name, attributes)
            return
        scope = self.scopes[-1]
        declared = [k for k in attributes if k[:5] == "xmlns" and k[5:6] in ("", ":")]
        if declared:
            scope = dict(scope)
            for key in declared:
                prefix, uri = key[6:], attributes.pop(key)
                scope[prefix] = uri
                if uri:
                    self.prefixes.setdefault(uri, prefix)
        self.scopes.append(scope)
        resolved = {expanded_name(k, scope, False): v for k, v in attributes.items()}
        self.builder.start(expanded_name(name, scope, True), resolved)

    def add(self, kind: int, name: str | None, value) -> ET.Element | None:
        if kind == ATTR:
            if name[:4] == "xml:":  # the one prefix bound everywhere
                name = XML_PREFIXED + name[4:]
            self.pending[1][name] = value
            return None
        if self.pending is not None:
            self._start(*self.pending)
            self.pending = None
        if kind == OPEN:
            self.pending = [name, {}]
            self.depth += 1
        elif kind == CLOSE:
            self.builder.end(name)
            self.depth -= 1
            if self.prefixes is not None:
                self.scopes.pop()
            if self.depth == 0:
                return self.builder.close()
        else:
            self.builder.data(value)
        return None


def documents_from_batches(
    batches: Iterable[EventBatch], prefixes: dict | None = None
) -> Iterator[ET.ElementTree]:
    """One ``ElementTree`` per complete document; a malformed one is dropped. Names are
    resolved with the documents' namespace declarations given ``prefixes``
    (``ElementBuilder``)."""
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
                element, doc = ElementBuilder(prefixes), d
            root = element.add(kind, None if kind == TEXT else names[name], value)
            if root is not None:
                yield ET.ElementTree(root)
                doc = None
