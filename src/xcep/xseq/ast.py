"""The XSeq abstract syntax tree (see docs/xseq.md for the grammar).

Paths are trees of ``Step``, ``Seq`` (concatenation), ``Union``,
``Intersect`` and ``Star`` (Kleene-*). Conditions (step predicates and the
where clause) are trees of ``Or``, ``And``, ``Not``, ``Compare``, ``Arith``,
``Const``, ``RelPath`` (a relative path from the predicate's node),
``VarRef`` (``$X``, ``first($X)``, ``last($X)``, ``prev($X)``, optionally
followed by a relative path such as ``@price`` or ``/salary/text()``),
``Tag`` (``tag($X)``) and ``VarTest`` (``$X[condition]``). Every node keeps
``pos``, its 0-based offset in the query text, for error messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# axes
SELF = "self"
CHILD = "child"
DESCENDANT = "descendant"
DESCENDANT_OR_SELF = "descendant-or-self"
PARENT = "parent"
ANCESTOR = "ancestor"
FOLLOWING_SIBLING = "following-sibling"
PRECEDING_SIBLING = "preceding-sibling"
NEXT_SIBLING = "next-sibling"  # '\'  immediately following sibling
FIRST_CHILD = "first-child"  # '/\' immediately first child
ATTRIBUTE = "attribute"

FORWARD_AXES = (SELF, CHILD, DESCENDANT, DESCENDANT_OR_SELF, FOLLOWING_SIBLING, NEXT_SIBLING)
FORWARD_AXES += (FIRST_CHILD, ATTRIBUTE)
BACKWARD_AXES = (PARENT, ANCESTOR, PRECEDING_SIBLING)

# node kinds a step selects
ELEMENT, TEXT, NODE = "element", "text", "node"
WILDCARD = "*"

AGGREGATES = ("max", "min", "count", "sum", "avg")
SEQUENCE_FUNCTIONS = ("first", "last", "prev")


@dataclass(frozen=True, slots=True)
class Step:
    """``axis::test[preds]``; ``var`` is set for a ``$X`` step (any element, bound to X)."""

    axis: str
    kind: str  # ELEMENT, TEXT or NODE (attributes: axis ATTRIBUTE, kind ELEMENT)
    name: str  # a name or WILDCARD
    preds: tuple = ()
    var: str | None = None
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple


@dataclass(frozen=True, slots=True)
class Union:
    items: tuple
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Intersect:
    items: tuple
    pos: int = field(default=0, compare=False)
    group: int = 0  # numbered with the Kleene-* groups: the engine keeps its context node


@dataclass(frozen=True, slots=True)
class Star:
    body: object
    group: int  # the Kleene-* group number, 0-based in order of appearance
    pos: int = field(default=0, compare=False)


# conditions and values


@dataclass(frozen=True, slots=True)
class Or:
    left: object
    right: object


@dataclass(frozen=True, slots=True)
class And:
    left: object
    right: object


@dataclass(frozen=True, slots=True)
class Not:
    arg: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: object
    right: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Arith:
    op: str  # + - * div
    left: object
    right: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Const:
    value: object  # str or float


@dataclass(frozen=True, slots=True)
class RelPath:
    """A path relative to the node a predicate is on (``@a``, ``year``, ``a/b/text()``, ``.``)."""

    path: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class VarRef:
    """``$X``, ``first($X)``, ``last($X)`` or ``prev($X)`` (func), then a relative path or none."""

    var: str
    func: str | None = None
    path: object = None
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Tag:
    ref: VarRef
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class VarTest:
    """``$X[condition]`` in the where clause: the condition holds on the node of ``$X``."""

    ref: VarRef
    cond: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class OutTerm:
    """One output term: an aggregate (``aggregate`` set) or a per-match value expression."""

    expr: object
    aggregate: str | None = None
    text: str = ""
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Query:
    path: object
    returns: tuple | None = None  # OutTerms, None for a plain path (node-set semantics)
    partition: object = None  # (Path, attribute name) or None
    where: object = None
    text: str = ""
    groups: int = 0  # number of Kleene-* groups
    variables: tuple = ()  # variable names in order of first appearance in the path


def walk(node):
    """Every AST node under ``node`` (itself included), depth first."""
    yield node
    for name in getattr(node, "__slots__", ()):
        value = getattr(node, name)
        if isinstance(value, tuple):
            for item in value:
                if hasattr(item, "__slots__"):
                    yield from walk(item)
        elif hasattr(value, "__slots__"):
            yield from walk(value)


def conjuncts(cond) -> list:
    """``a and b and c`` as ``[a, b, c]``."""
    if isinstance(cond, And):
        return conjuncts(cond.left) + conjuncts(cond.right)
    return [cond]


def map_condition(cond, fn):
    """``cond`` rebuilt with ``fn`` applied to its nodes, top down: a node for which
    ``fn`` returns something other than None is replaced by it (and not entered); the
    others are rebuilt from their mapped operands (and/or, comparisons, arithmetic,
    not, and the variable reference of tag() and $X[…])."""
    mapped = fn(cond)
    if mapped is not None:
        return mapped
    if isinstance(cond, And | Or | Compare | Arith):
        left, right = map_condition(cond.left, fn), map_condition(cond.right, fn)
        if left is cond.left and right is cond.right:
            return cond
        return replace(cond, left=left, right=right)
    if isinstance(cond, Not):
        arg = map_condition(cond.arg, fn)
        return cond if arg is cond.arg else replace(cond, arg=arg)
    if isinstance(cond, Tag | VarTest):
        ref = map_condition(cond.ref, fn)
        return cond if ref is cond.ref else replace(cond, ref=ref)
    return cond


_AXIS_TEXT = {
    "child": "/",
    "descendant": "//",
    "first-child": "/\\",
    "next-sibling": "\\",
    "following-sibling": " ",
    "attribute": "@",
}


def to_text(node) -> str:
    """XSeq text for an AST node (paths and conditions), for --explain and messages."""
    if isinstance(node, Step):
        test = f"${node.var}" if node.var else {TEXT: "text()"}.get(node.kind, node.name)
        if node.var and node.name != WILDCARD:  # a node test the optimizer gave it
            test += f"({node.name})"
        if node.kind == NODE and not node.var:
            test = "node()"
        axis = _AXIS_TEXT.get(node.axis, f"/{node.axis}::")
        preds = "".join(f"[{to_text(p)}]" for p in node.preds)
        return f"{axis}{test}{preds}".strip()
    if isinstance(node, Seq):
        out = ""
        for item in node.items:
            text = to_text(item)
            out += text if not out or text[:1] in "/@" else f" {text}"
        return out
    if isinstance(node, Union | Intersect):
        word = " union " if isinstance(node, Union) else " intersect "
        return "(" + word.join(to_text(item) for item in node.items) + ")"
    if isinstance(node, Star):
        return f"({to_text(node.body)})*"
    if isinstance(node, Or | And):
        word = " or " if isinstance(node, Or) else " and "
        return f"{to_text(node.left)}{word}{to_text(node.right)}"
    if isinstance(node, Not):
        return f"not({to_text(node.arg)})"
    if isinstance(node, Compare | Arith):
        return f"{to_text(node.left)} {node.op} {to_text(node.right)}"
    if isinstance(node, Const):
        if isinstance(node.value, str):
            return repr(node.value)
        return f"{node.value:g}"
    if isinstance(node, RelPath):
        return to_text(node.path)
    if isinstance(node, VarRef):
        base = f"{node.func}(${node.var})" if node.func else f"${node.var}"
        return base + (to_text(node.path) if node.path is not None else "")
    if isinstance(node, Tag):
        return f"tag({to_text(node.ref)})"
    if isinstance(node, VarTest):
        return f"{to_text(node.ref)}[{to_text(node.cond)}]"
    return repr(node)
