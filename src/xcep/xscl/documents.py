"""Documents for XSCL: element and attribute nodes numbered in pre-order, string values.

Node ids follow the seed (§1, Figs. 1-2): the root element is 0, then every
element in document order; an element's attributes are numbered right
after it. Text is not numbered; it makes the string values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, EventBatch
from xcep.xmltext import escape, quoteattr

ELEMENT, ATTRIBUTE = "element", "attribute"


class Node:
    __slots__ = (
        "_string",
        "_xml",
        "attrs",
        "children",
        "end",
        "id",
        "kind",
        "name",
        "parent",
        "parts",
    )

    def __init__(self, ident: int, kind: str, name: str, parent: Node | None) -> None:
        self.id = ident
        self.kind = kind
        self.name = name
        self.parent = parent
        self.children: list[Node] = []  # element children
        self.attrs: list[Node] = []
        self.parts: list = []  # text strings and element children, in order (value for attributes)
        self.end = ident  # the largest id in the subtree
        self._string: str | None = None
        self._xml: str | None = None  # serialize(), kept: a document does not change

    @property
    def string_value(self) -> str:
        if self._string is None:
            self._fill("_string", Node._own_string)
        return self._string

    def serialize(self) -> str:
        """The node as XML (an attribute as ``name="value"``); kept once made."""
        if self._xml is None:
            self._fill("_xml", Node._own_xml)
        return self._xml

    def _fill(self, slot: str, make) -> None:
        """Set ``slot`` of this node and of the elements below it that lack it, children
        first, without recursion (documents may nest as deep as --max-depth)."""
        stack = [(self, False)]
        while stack:
            node, children_done = stack.pop()
            if getattr(node, slot) is not None:
                continue
            if children_done:
                setattr(node, slot, make(node))
                continue
            stack.append((node, True))
            stack.extend(
                (part, False)
                for part in node.parts
                if not isinstance(part, str) and getattr(part, slot) is None
            )

    def _own_string(self) -> str:
        return "".join(p if isinstance(p, str) else p._string for p in self.parts)

    def _own_xml(self) -> str:
        if self.kind == ATTRIBUTE:
            return f"{self.name}={quoteattr(self.string_value)}"
        attrs = "".join(f" {a.name}={quoteattr(a.string_value)}" for a in self.attrs)
        if not self.parts:
            return f"<{self.name}{attrs}/>"
        body = "".join(escape(p) if isinstance(p, str) else p._xml for p in self.parts)
        return f"<{self.name}{attrs}>{body}</{self.name}>"

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name} #{self.id}>"


class Document:
    """One document of a stream: its nodes by id, its root."""

    def __init__(self, index: int, nodes: list[Node]) -> None:
        self.index = index
        self.nodes = nodes
        self.root = nodes[0]
        self.by_name: dict[tuple[str, str], list[Node]] = {}
        for node in nodes:
            self.by_name.setdefault((node.kind, node.name), []).append(node)

    def named(self, kind: str, name: str) -> list[Node]:
        if name == "*":
            return [n for n in self.nodes if n.kind == kind]
        return self.by_name.get((kind, name), [])


def documents_from_batches(batches: Iterable[EventBatch]) -> Iterator[Document]:
    """One ``Document`` per complete document of the stream (malformed ones are dropped)."""
    stack: list[Node] = []
    nodes: list[Node] = []
    doc = None
    for batch in batches:
        if batch is None:  # a pause (xcep.events.stepping)
            yield None
            continue
        names = batch.symbols.names
        for d, kind, name, value in zip(
            batch.docs, batch.kinds, batch.names, batch.values, strict=True
        ):
            if d != doc:
                stack, nodes, doc = [], [], d
            if kind == OPEN:
                parent = stack[-1] if stack else None
                node = Node(len(nodes), ELEMENT, names[name], parent)
                nodes.append(node)
                if parent is not None:
                    parent.children.append(node)
                    parent.parts.append(node)
                stack.append(node)
            elif kind == ATTR:
                owner = stack[-1]
                attr = Node(len(nodes), ATTRIBUTE, names[name], owner)
                attr.parts.append(value)
                nodes.append(attr)
                owner.attrs.append(attr)
            elif kind == CLOSE:
                node = stack.pop()
                node.end = len(nodes) - 1
                if not stack:
                    yield Document(d, nodes)
                    doc = None
            else:
                stack[-1].parts.append(value)
