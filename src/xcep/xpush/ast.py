"""The abstract syntax of XPush filters (the XPath fragment of the seed's Fig. 1).

A filter is a ``Path``; predicates are ``Expr``s. All nodes are frozen
dataclasses, so rewrite rules are small pure functions returning new trees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# Node tests
ELEMENT, ATTRIBUTE, TEXT, SELF, PARENT = "element", "attribute", "text", "self", "parent"
# Axes
CHILD, DESCENDANT = "child", "descendant"  # `/` and `//` (descendant-or-self::node()/child)
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class Step:
    axis: str  # CHILD or DESCENDANT
    test: str  # ELEMENT, ATTRIBUTE, TEXT, SELF or PARENT
    name: str | None = None  # the label, or WILDCARD; None for text(), ., ..
    predicates: tuple[Expr, ...] = ()

    @property
    def label(self) -> str:
        """The label the machine sees: ``name``, ``@name``, ``*``, ``@*`` or ``#text``."""
        if self.test == ELEMENT:
            return self.name
        if self.test == ATTRIBUTE:
            return "@" + self.name
        if self.test == TEXT:
            return "#text"
        raise ValueError(f"{self.test} step has no label")


@dataclass(frozen=True, slots=True)
class Path:
    steps: tuple[Step, ...]
    absolute: bool = False


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: Expr


@dataclass(frozen=True, slots=True)
class Exists:
    """A path used as a boolean: true iff it selects a node."""

    path: Path


@dataclass(frozen=True, slots=True)
class Compare:
    """``path op constant``, or ``starts-with(path, s)`` / ``contains(path, s)``."""

    path: Path
    op: str  # = != < <= > >= starts-with contains
    value: str | float


@dataclass(frozen=True, slots=True)
class Const:
    """``true()`` / ``false()``; also what a rewrite leaves behind."""

    value: bool


Expr = And | Or | Not | Exists | Compare | Const


def to_text(node, existential: bool = False, extra: str = "") -> str:
    """A tree back as filter text. With ``existential``, ``starts-with(p, s)`` is
    written ``p[starts-with(., s)]`` (true if *some* node of p qualifies, which is
    xcep's reading; XPath 1.0 looks at the first node only)."""
    if isinstance(node, Path):
        out = []
        for i, step in enumerate(node.steps):
            sep = "//" if step.axis == DESCENDANT else "/"
            if i > 0 or node.absolute:
                out.append(sep)
            elif step.axis == DESCENDANT:
                out.append(".//")
            last = i == len(node.steps) - 1
            out.append(_step_text(step, existential, extra if last else ""))
        return "".join(out)
    if isinstance(node, And | Or):
        word = " and " if isinstance(node, And) else " or "
        return "(" + word.join(to_text(item, existential) for item in node.items) + ")"
    if isinstance(node, Not):
        return f"not({to_text(node.item, existential)})"
    if isinstance(node, Const):
        return "true()" if node.value else "false()"
    if isinstance(node, Exists):
        return to_text(node.path, existential)
    if isinstance(node, Compare):
        value = _constant(node.value)
        if node.op in ("starts-with", "contains"):
            if existential:
                return to_text(node.path, existential, f"{node.op}(., {value})")
            return f"{node.op}({to_text(node.path, existential)}, {value})"
        return f"{to_text(node.path, existential)} {node.op} {value}"
    raise TypeError(node)


def _constant(value) -> str:
    if isinstance(value, float):
        return f"{value:.15f}".rstrip("0").rstrip(".")
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _step_text(step: Step, existential: bool, extra: str = "") -> str:
    predicates = [to_text(q, existential) for q in step.predicates] + ([extra] if extra else [])
    head = {
        ELEMENT: step.name,
        ATTRIBUTE: f"@{step.name}",
        TEXT: "text()",
        SELF: "self::node()" if predicates else ".",
        PARENT: "parent::node()" if predicates else "..",
    }[step.test]
    return head + "".join(f"[{q}]" for q in predicates)


def walk(node) -> Iterator:
    """Every node of a filter's tree (steps and expressions), children before parents."""
    for child in _CHILDREN[type(node)](node):
        yield from walk(child)
    yield node


_CHILDREN = {
    Path: lambda n: n.steps,
    Step: lambda n: n.predicates,
    And: lambda n: n.items,
    Or: lambda n: n.items,
    Not: lambda n: (n.item,),
    Exists: lambda n: (n.path,),
    Compare: lambda n: (n.path,),
    Const: lambda n: (),
}
