"""The XQuery syntax tree: FLWOR clauses, constructors, patterns; XPath stays XPath.

Everything that is not a FLWOR, a constructor or a comma sequence is an
``XPath`` node: its text is handed to elementpath's XPath 3.1 parser.  FLWORs
and constructors found *inside* such an expression are parsed by us and
stand in the XPath text as placeholder variables (``$_xq1``), evaluated
first under the same bindings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Expr:
    """Base class of expressions."""


@dataclass
class XPath(Expr):
    text: str  # XPath 3.1 text, placeholders substituted
    pos: int  # offset of the expression in the query
    placeholders: list[tuple[str, Expr]] = field(default_factory=list)
    token: Any = None  # elementpath's compiled expression
    fast: Any = None  # the fast-path closure (False: none), made on first use
    atoms: Any = None  # the same for its atomized value (Evaluator.atoms)
    from_root: Any = None  # for /a/b/*: its fast path from the document node (False: none)
    focus: Any = None  # does it read the context item (streaming.reads_focus), made on first use


@dataclass
class Sequence(Expr):
    items: list[Expr]


@dataclass
class Element(Expr):
    """A direct element constructor; content parts are strings or expressions."""

    name: str
    attributes: list[tuple[str, list]]
    content: list
    pos: int


@dataclass
class If(Expr):
    """``if (C) then A else B`` whose branches hold a FLWOR or a constructor (the others
    stay XPath): only the branch taken is evaluated."""

    condition: Expr
    then: Expr
    otherwise: Expr
    pos: int


@dataclass
class Typeswitch(Expr):
    """``typeswitch (E) case $v as T | U return R … default $d return D``: ``cases`` are
    (variable or None, [SequenceType], expression)."""

    operand: Expr
    cases: list
    default_var: str | None
    default: Expr
    pos: int


@dataclass
class Computed(Expr):
    """A computed constructor: ``element``, ``attribute``, ``text``, ``comment`` or
    ``document``; ``name`` a QName as written, an expression (``element {E} {…}``) or
    None; ``content`` an expression (None: ``{}``)."""

    kind: str
    name: object
    content: Expr | None
    pos: int


@dataclass
class Prolog(Expr):
    """A prolog's declarations around the body: the variables (name, value, declared
    type), bound in order, and the functions' ``runtime`` (the evaluator that runs their
    bodies, and the variables, which function bodies see too)."""

    runtime: dict
    variables: list
    body: Expr


@dataclass
class External(Expr):
    """``declare variable $name external (:= default)?``: the value the caller binds
    (``--var name=value``), else the default, else error XPDY0002."""

    name: str
    default: Expr | None
    pos: int


@dataclass
class FLWOR(Expr):
    clauses: list
    result: Expr
    pos: int


# -- clauses ---------------------------------------------------------------


@dataclass
class SequenceType:
    item: ItemType | None  # None: empty-sequence()
    occurrence: str = ""

    def __str__(self) -> str:
        return "empty-sequence()" if self.item is None else f"{self.item}{self.occurrence}"


@dataclass
class For:
    var: str
    position: str | None
    expr: Expr
    type: SequenceType | None = None
    allowing_empty: bool = False  # an empty sequence gives one tuple, $var bound to ()


@dataclass
class Let:
    var: str
    expr: Expr
    type: SequenceType | None = None


@dataclass
class Where:
    expr: Expr


@dataclass
class Count:
    var: str


@dataclass
class GroupSpec:
    var: str | None  # None: an anonymous key (``group by $a/user``, the seed's form)
    expr: Expr | None  # None: group by the variable's current value
    type: SequenceType | None = None  # ``group by $k as xs:string := ...``


@dataclass
class GroupBy:
    specs: list[GroupSpec]


@dataclass
class OrderSpec:
    expr: Expr
    descending: bool = False
    empty_greatest: bool = False


@dataclass
class OrderBy:
    specs: list[OrderSpec]
    stable: bool = False


@dataclass
class WindowCondition:
    current: str | None = None
    position: str | None = None
    previous: str | None = None
    next: str | None = None
    when: Expr | None = None

    def names(self) -> list[str]:
        return [v for v in (self.current, self.position, self.previous, self.next) if v]


@dataclass
class Window:
    sliding: bool
    var: str
    expr: Expr
    start: WindowCondition
    end: WindowCondition | None
    only_end: bool = False
    type: SequenceType | None = None


# -- the pattern clause ----------------------------------------------------


@dataclass
class ItemType:
    """A SequenceType's item type: ``kind`` is item, node, element, attribute,
    text, document-node or atomic; ``name`` the element/attribute name or the
    atomic type's local name (``None`` or ``*``: any)."""

    kind: str
    name: str | None = None

    def __str__(self) -> str:
        if self.kind == "atomic":
            return f"xs:{self.name}"
        return f"{self.kind}({self.name or ''})"


@dataclass
class PatternVar:
    name: str
    item_type: ItemType
    occurrence: str  # "", "?", "*" or "+"
    when: Expr
    before: str | None = None
    after: str | None = None
    all: str | None = None
    pprev: str | None = None
    pcur: str | None = None
    nested: str | None = None
    pos: int = 0

    @property
    def min(self) -> int:
        return 0 if self.occurrence in ("?", "*") else 1

    @property
    def max(self) -> int | None:
        return 1 if self.occurrence in ("", "?") else None

    def bound_names(self) -> list[str]:
        names = (self.before, self.after, self.all, self.pprev, self.pcur, self.nested)
        return [n for n in names if n]


@dataclass
class RVar:
    name: str
    pos: int = 0


@dataclass
class RSeq:
    items: list


@dataclass
class RAlt:
    options: list


@dataclass
class Pattern:
    var: str
    sliding: bool
    selection: str  # "maximal", "incremental" or "allmatch"
    expr: Expr
    regex: Any  # RVar | RSeq | RAlt
    variables: list[PatternVar]
    pos: int = 0


def regex_vars(regex) -> list[RVar]:
    """The variable references of a pattern's regular expression, left to right."""
    if isinstance(regex, RVar):
        return [regex]
    parts = regex.items if isinstance(regex, RSeq) else regex.options
    return [v for part in parts for v in regex_vars(part)]


def regex_text(regex) -> str:
    if isinstance(regex, RVar):
        return f"${regex.name}"
    if isinstance(regex, RSeq):  # 'or' binds loosest: an alternative inside is parenthesized
        return " ".join(
            f"({regex_text(p)})" if isinstance(p, RAlt) else regex_text(p) for p in regex.items
        )
    return " or ".join(f"({regex_text(p)})" for p in regex.options)
