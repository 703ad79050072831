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

from dataclasses import dataclass, field

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
