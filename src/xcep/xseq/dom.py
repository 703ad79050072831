"""A small DOM for XSeq: nodes built from the event stream, navigation by axis, serialization.

The reference evaluator builds whole documents with it; the streaming engine
builds only the subtrees it must look into (captures), whose ancestors are
stubs carrying tag and attributes. Node ids are the event stream's pre-order
node numbers, so both see the same identities and the same document order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from xcep.events import ATTR, CLOSE, OPEN, TEXT, Event
from xcep.xmltext import escape, quoteattr
from xcep.xseq import ast as A

ROOT, ELEMENT, ATTRIBUTE, TEXT_NODE = "root", "element", "attribute", "text"


class Node:
    """An element, attribute, text or root (document) node."""

    __slots__ = ("_attrs", "children", "closed", "doc", "id", "kind", "parent", "raw", "tag")
    __slots__ += ("value",)

    def __init__(
        self, kind: str, tag: str | None, doc: int, ident: int, parent: Node | None = None
    ) -> None:
        self.kind = kind
        self.tag = tag
        self.doc = doc
        self.id = ident
        self.parent = parent
        self._attrs: list[Node] | None = []
        self.raw: list | None = None  # attributes as (name, value, id), made nodes on demand
        self.children: list[Node] = []
        self.value: str | None = None
        self.closed = kind != ELEMENT  # an element is complete once its close was seen

    @property
    def key(self) -> tuple:
        """The node's place in the stream: (document, pre-order number)."""
        return (self.doc, self.id)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.tag} {self.doc}:{self.id}>"

    @classmethod
    def element(cls, tag: str, doc: int, ident: int, parent: Node | None, raw: list) -> Node:
        """An element whose attributes, ``(name, value, id)`` triples, become nodes when read."""
        node = cls(ELEMENT, tag, doc, ident, parent)
        node._attrs = None
        node.raw = raw
        return node

    @property
    def attrs(self) -> list[Node]:
        if self._attrs is None:
            self._attrs = []
            for name, value, ident in self.raw:
                attr = Node(ATTRIBUTE, name, self.doc, ident, self)
                attr.value = value
                self._attrs.append(attr)
        return self._attrs

    @attrs.setter
    def attrs(self, nodes: list[Node]) -> None:
        self._attrs = nodes

    def attribute(self, name: str) -> str | None:
        if self._attrs is None:
            for key, value, _ in self.raw:
                if key == name:
                    return value
            return None
        for attr in self._attrs:
            if attr.tag == name:
                return attr.value
        return None

    def string_value(self) -> str:
        if self.kind in (ATTRIBUTE, TEXT_NODE):
            return self.value or ""
        return "".join(node.value for node in self.iter() if node.kind == TEXT_NODE)

    def iter(self) -> Iterator[Node]:
        """This node and its descendants (not attributes) in document order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def serialize(self) -> str:
        if self.kind == ATTRIBUTE:
            return self.value or ""
        if self.kind == TEXT_NODE:
            return escape(self.value or "")
        if self.kind == ROOT:
            return "".join(child.serialize() for child in self.children)
        if self.value is not None:  # an element's value caches its serialization once closed
            return self.value
        raw = self.raw if self._attrs is None else [(a.tag, a.value, 0) for a in self._attrs]
        attrs = "".join([f" {name}={quoteattr(value or '')}" for name, value, _ in raw])
        if not self.children:
            xml = f"<{self.tag}{attrs}/>"
        else:
            inner = "".join([child.serialize() for child in self.children])
            xml = f"<{self.tag}{attrs}>{inner}</{self.tag}>"
        if self.closed:
            self.value = xml
        return xml


class TreeBuilder:
    """Adds events under an open node: ``open``/``attr``/``text``/``close`` as they arrive."""

    __slots__ = ("doc", "stack")

    def __init__(self, top: Node) -> None:
        self.stack = [top]
        self.doc = top.doc

    def open(self, tag: str, ident: int) -> Node:
        parent = self.stack[-1]
        node = Node(ELEMENT, tag, self.doc, ident, parent)
        parent.children.append(node)
        self.stack.append(node)
        return node

    def attr(self, name: str, value: str, ident: int) -> None:
        top = self.stack[-1]
        node = Node(ATTRIBUTE, name, self.doc, ident, top)
        node.value = value
        top.attrs.append(node)

    def text(self, value: str, ident: int) -> None:
        top = self.stack[-1]
        node = Node(TEXT_NODE, None, self.doc, ident, top)
        node.value = value
        top.children.append(node)

    def close(self) -> Node:
        node = self.stack.pop()
        node.closed = True
        return node

    def add(self, event: Event) -> None:
        if event.kind == OPEN:
            self.open(event.name, event.node)
        elif event.kind == ATTR:
            self.attr(event.name, event.value, event.node)
        elif event.kind == TEXT:
            self.text(event.value, event.node)
        else:
            self.close()


def clone(node: Node, parent: Node | None, leave_out: set = frozenset()) -> Node:
    """A deep copy of ``node``'s subtree (same ids) hung under ``parent``, without the
    descendants whose ``id()`` is in ``leave_out``."""
    copy = Node(node.kind, node.tag, node.doc, node.id, parent)
    copy.value = node.value
    copy.closed = node.closed
    copy.attrs = [clone(attr, copy) for attr in node.attrs]
    copy.children = [
        clone(child, copy, leave_out) for child in node.children if id(child) not in leave_out
    ]
    return copy


def build_documents(events: Iterable[Event]) -> list[Node]:
    """Document (root) nodes for a stream of events, one per complete document."""
    documents: list[Node] = []
    builder = None
    for event in events:
        if builder is None or builder.doc != event.doc:
            root = Node(ROOT, None, event.doc, -1)
            builder = TreeBuilder(root)
            documents.append(root)
        builder.add(event)
        if event.kind == CLOSE and event.depth == 1:
            builder.stack[0].closed = True
    return [doc for doc in documents if doc.closed]


# navigation


def elements(nodes: Iterable[Node]) -> list[Node]:
    return [node for node in nodes if node.kind == ELEMENT]


def siblings_after(node: Node) -> list[Node]:
    if node.parent is None or node.kind != ELEMENT:
        return []
    family = elements(node.parent.children)
    return family[family.index(node) + 1 :] if node in family else []


def siblings_before(node: Node) -> list[Node]:
    if node.parent is None or node.kind != ELEMENT:
        return []
    family = elements(node.parent.children)
    return family[: family.index(node)] if node in family else []


def axis_nodes(node: Node, axis: str, kind: str) -> list[Node]:
    """The nodes on ``axis`` from ``node``, in document order; ``kind`` is the step's node kind
    (text() steps see text children, element and node() steps see elements)."""
    if axis == A.SELF:
        return [node]
    if axis == A.ATTRIBUTE:
        return list(node.attrs)
    if axis in (A.CHILD, A.FIRST_CHILD):
        if kind == A.TEXT:
            return [child for child in node.children if child.kind == TEXT_NODE]
        children = elements(node.children)
        return children[:1] if axis == A.FIRST_CHILD else children
    if axis in (A.DESCENDANT, A.DESCENDANT_OR_SELF):
        below = [n for n in node.iter() if n is not node]
        below = [n for n in below if n.kind == (TEXT_NODE if kind == A.TEXT else ELEMENT)]
        return [node, *below] if axis == A.DESCENDANT_OR_SELF else below
    if axis == A.FOLLOWING_SIBLING:
        return siblings_after(node)
    if axis == A.NEXT_SIBLING:
        return siblings_after(node)[:1]
    if axis == A.PRECEDING_SIBLING:
        return siblings_before(node)
    if axis == A.PARENT:  # elements only: the document node is nobody's parent here
        return [node.parent] if node.parent is not None and node.parent.kind == ELEMENT else []
    if axis == A.ANCESTOR:
        out = []
        up = node.parent
        while up is not None and up.kind == ELEMENT:
            out.append(up)
            up = up.parent
        return out[::-1]
    raise ValueError(f"unknown axis {axis}")


def test_matches(step: A.Step, node: Node) -> bool:
    """The node test of ``step`` (name, *, text(), node()) on ``node``."""
    if step.axis == A.ATTRIBUTE:
        return node.kind == ATTRIBUTE and (step.name == "*" or node.tag == step.name)
    if step.kind == A.NODE:
        return True
    if step.kind == A.TEXT:
        return node.kind == TEXT_NODE
    return node.kind == ELEMENT and (step.name == "*" or node.tag == step.name)
