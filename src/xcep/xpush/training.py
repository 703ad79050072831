"""Training documents for a workload (the seed's §5, "Training the XPush machine").

One document per filter: labels become elements and attributes, atomic
predicates become values that satisfy them, ``*`` and ``//`` are expanded with
the DTD when there is one (otherwise ``*`` becomes an element ``_`` and
``//`` a direct child), and boolean connectors are ignored: every branch of
the filter is built. With a DTD, children are put in the order it requires.
Running the lazy machine over these documents first computes many of the
states that real documents will need.
"""

from __future__ import annotations

from collections import deque

from xcep.xmltext import escape, quoteattr
from xcep.xpush.ast import (
    ATTRIBUTE,
    DESCENDANT,
    ELEMENT,
    SELF,
    TEXT,
    WILDCARD,
    And,
    Compare,
    Exists,
    Not,
    Or,
    Path,
)
from xcep.xpush.predicates import xpath_number


class _Node:
    def __init__(self, name: str | None) -> None:
        self.name = name  # None for the document node
        self.attributes: dict[str, str] = {}
        self.children: list = []  # _Node or str

    def xml(self) -> str:
        attrs = "".join(f" {n}={quoteattr(v)}" for n, v in self.attributes.items())
        body = "".join(c.xml() if isinstance(c, _Node) else escape(c) for c in self.children)
        return f"<{self.name}{attrs}>{body}</{self.name}>"


def satisfying_value(op: str, value) -> str:
    """A string on which the atomic predicate ``op value`` holds."""
    if op == "starts-with":
        return value + "x"
    if op == "contains":
        return "x" + value + "x"
    number = value if isinstance(value, float) else xpath_number(value)
    if op in ("=", "!=") and isinstance(value, str):
        return value if op == "=" else value + "_"
    if number != number:  # NaN: no number satisfies it
        return "0"
    shift = {"=": 0, "<=": 0, ">=": 0, "<": -1, ">": 1, "!=": 1}[op]
    result = number + shift
    return str(int(result)) if result == int(result) else repr(result)


class _Builder:
    def __init__(self, dtd=None) -> None:
        self.dtd = dtd

    def element(self, parent: _Node, name: str) -> _Node:
        if name == WILDCARD:
            options = self.dtd.children(parent.name) if (self.dtd and parent.name) else []
            name = options[0] if options else "_"
        node = _Node(name)
        parent.children.append(node)
        return node

    def descend(self, parent: _Node, name: str) -> _Node:
        """``//name`` below ``parent``: the shortest DTD path, or a direct child."""
        if self.dtd is None or parent.name is None or name == WILDCARD:
            return parent
        seen = {parent.name: None}
        queue = deque([parent.name])
        while queue:
            current = queue.popleft()
            if name in self.dtd.children(current):
                chain = []
                while current != parent.name:
                    chain.append(current)
                    current = seen[current]
                for step in reversed(chain):
                    parent = self.element(parent, step)
                return parent
            for child in self.dtd.children(current):
                if child not in seen:
                    seen[child] = current
                    queue.append(child)
        return parent

    def path(self, node: _Node, path: Path, final: str | None) -> None:
        for i, step in enumerate(path.steps):
            last = i == len(path.steps) - 1
            if step.axis == DESCENDANT and step.test == ELEMENT:
                node = self.descend(node, step.name)
            if step.test == ELEMENT:
                if node.name is None and node.children:  # one root element per document
                    root = node.children[0]
                    if step.name not in (WILDCARD, root.name):
                        return
                    node = root
                else:
                    node = self.element(node, step.name)
            elif step.test in (ATTRIBUTE, TEXT) and (node.name is None or not last):
                return  # the document node has neither; attributes and text have no children
            elif step.test == ATTRIBUTE:
                name = step.name
                if name == WILDCARD:
                    declared = self.dtd.attributes(node.name) if self.dtd and node.name else []
                    name = declared[0] if declared else "a"
                node.attributes.setdefault(name, final if (last and final) else "1")
                continue  # predicates on attributes only carry values
            elif step.test == TEXT:
                node.children.append(final if (last and final) else "1")
                continue
            for q in step.predicates:
                self.expr(node, q)
            if last and final is not None and step.test in (ELEMENT, SELF) and node.name:
                node.children.append(final)

    def expr(self, node: _Node, expr) -> None:
        if isinstance(expr, And | Or):
            for item in expr.items:
                self.expr(node, item)
        elif isinstance(expr, Not):
            self.expr(node, expr.item)
        elif isinstance(expr, Exists):
            self.path(node, expr.path, None)
        elif isinstance(expr, Compare):
            self.path(node, expr.path, satisfying_value(expr.op, expr.value))

    def order(self, node: _Node) -> None:
        if self.dtd is not None and node.name is not None:
            rank = {name: i for i, name in enumerate(self.dtd.children(node.name))}
            node.children.sort(
                key=lambda c: rank.get(c.name, len(rank)) if isinstance(c, _Node) else -1
            )
        for child in node.children:
            if isinstance(child, _Node):
                self.order(child)


def training_documents(paths, dtd=None) -> list[str]:
    """One XML document per (rewritten) filter path."""
    builder = _Builder(dtd)
    out = []
    for path in paths:
        document = _Node(None)
        builder.path(document, path, None)
        roots = [c for c in document.children if isinstance(c, _Node)]
        if not roots:
            continue
        builder.order(roots[0])
        out.append(roots[0].xml())
    return out
