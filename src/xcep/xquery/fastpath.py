"""A fast path for the small XPath expressions that CEP conditions are made of.

``compile_fast`` turns an elementpath expression tree into a Python closure
over the variables when every part of it is in a small subset: variables,
literals, ``$v/@a``, ``$v/child``, ``$v/text()``, value and general
comparisons, ``and``/``or``, ``+ - *``, and the functions ``not true false
empty exists count name string``.  The closure raises ``Fallback`` whenever
a value is outside what it handles exactly (an error to report, a type it
does not know, a cast that might fail); the caller then evaluates the same
expression with elementpath.  Tests compare the two on random expressions.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from decimal import Decimal

from elementpath import datatypes as D
from elementpath.xpath_nodes import XPathNode

from xcep.xquery.values import as_sequence, ebv


class Fallback(Exception):
    """This value or expression is outside the fast path: ask elementpath."""


Closure = Callable[[dict], list]
_DOUBLE = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
_COMPARE = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_GENERAL = {"=": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_NUMBERS = (int, float, Decimal)


def compile_fast(token) -> Closure | None:
    """A closure for ``token`` (elementpath's parsed expression), or ``None``."""
    try:
        return _compile(token)
    except _Unsupported:
        return None


def compile_atoms(token) -> Closure | None:
    """A closure for the atomized value of ``token`` (``$v/@a`` read straight from the
    element, no attribute node made), or ``None``."""
    try:
        return _atoms(token)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    pass


def _compile(tok) -> Closure:
    symbol = tok.symbol
    if symbol == "$":
        name = tok[0].value
        return lambda env: as_sequence(_lookup(env, name))
    if symbol in ("(string)", "(integer)", "(float)", "(decimal)"):
        value = [tok.value]
        return lambda env: value
    if symbol == "(" and len(tok) == 1:  # (expr)
        return _compile(tok[0])
    if symbol == ":" and tok[0].value == "fn":
        return _compile(tok[1])
    if symbol == "/" and len(tok) == 2:
        return _step(_compile(tok[0]), tok[1])
    if symbol == "[" and len(tok) == 2:  # E[3], E[last()]: one item by its position
        return _positional(_compile(tok[0]), tok[1])
    if symbol in _COMPARE or symbol in _GENERAL:
        special = _attribute_test(tok)
        if special is not None:
            return special
    if symbol in _COMPARE:
        return _value_comparison(_COMPARE[symbol], _atoms(tok[0]), _atoms(tok[1]))
    if symbol in _GENERAL:
        return _general_comparison(_COMPARE[_GENERAL[symbol]], _atoms(tok[0]), _atoms(tok[1]))
    if symbol in ("and", "or") and len(tok) == 2:
        left, right = _compile(tok[0]), _compile(tok[1])
        if symbol == "and":
            return lambda env: [ebv(left(env)) and ebv(right(env))]
        return lambda env: [ebv(left(env)) or ebv(right(env))]
    if symbol in _ARITHMETIC and len(tok) == 2:
        return _arithmetic(_ARITHMETIC[symbol], _atoms(tok[0]), _atoms(tok[1]))
    if tok.label == "function":
        return _function(symbol, [_compile(arg) for arg in tok])
    raise _Unsupported(symbol)


def _positional(items: Closure, predicate) -> Closure:
    if predicate.symbol == "(integer)":
        index = predicate.value - 1
        if index < 0:
            return lambda env: []
        return lambda env: (lambda xs: xs[index : index + 1])(items(env))
    if predicate.symbol == "last" and len(predicate) == 0:
        return lambda env: items(env)[-1:]
    raise _Unsupported("[")


def _attribute_comparison(tok):
    """``$v/@a OP literal``, the commonest condition: ``(v, a, op, literal, general)``,
    or ``None`` for any other shape (or one the fast path leaves to elementpath)."""
    if tok.symbol not in _COMPARE and tok.symbol not in _GENERAL:
        return None
    left, right = tok[0], tok[1]
    if not (
        left.symbol == "/"
        and len(left) == 2
        and left[0].symbol == "$"
        and left[1].symbol == "@"
        and left[1][0].symbol == "(name)"
        and ":" not in left[1][0].value
        and right.symbol in ("(string)", "(integer)", "(float)")
    ):
        return None
    general = tok.symbol in _GENERAL
    if not isinstance(right.value, str) and not general:
        return None  # untypedAtomic eq number is a type error: elementpath reports it
    op = _COMPARE[_GENERAL.get(tok.symbol, tok.symbol)]
    return left[0][0].value, left[1][0].value, op, right.value, general


def _attribute_test(tok) -> Closure | None:
    """``$v/@a OP literal`` in one closure."""
    parts = _attribute_comparison(tok)
    if parts is None:
        return None
    var, name, op, literal, general = parts
    numeric = not isinstance(literal, str)

    def test(env):
        node = env.get(var)
        elem = getattr(node, "elem", None)
        if elem is None or node.node_kind != "element":
            raise Fallback
        value = elem.get(name)
        if value is None:
            return [False] if general else []
        return [op(_to_double(value) if numeric else value, literal)]

    return test


Column = Callable[[list], list]


def item_column(token, var: str) -> Column | None:
    """For a condition on the one element ``$var`` made of attribute comparisons with
    literals (``$x/@t eq 'A'``, joined by ``and``/``or``): a function from a list of
    ElementTree elements (``None``: skip, false) to the condition's truth for each,
    computed in one pass; it raises ``Fallback`` for a value it cannot compare
    exactly.  ``None`` when the condition has another shape."""
    if token.symbol in ("and", "or") and len(token) == 2:
        left, right = item_column(token[0], var), item_column(token[1], var)
        if left is None or right is None:
            return None
        if token.symbol == "and":
            return lambda elems: [a and b for a, b in zip(left(elems), right(elems), strict=True)]
        return lambda elems: [a or b for a, b in zip(left(elems), right(elems), strict=True)]
    if token.symbol == "(" and len(token) == 1:
        return item_column(token[0], var)
    parts = _attribute_comparison(token)
    if parts is None or parts[0] != var:
        return None
    _, name, op, literal, _ = parts
    if isinstance(literal, str) and op is operator.eq:  # the commonest: one comparison each
        return lambda elems: [e is not None and e.get(name) == literal for e in elems]
    if isinstance(literal, str):
        return lambda elems: [
            e is not None and (v := e.get(name)) is not None and op(v, literal) for e in elems
        ]
    return lambda elems: [
        e is not None and (v := e.get(name)) is not None and op(_to_double(v), literal)
        for e in elems
    ]


def root_path(token) -> Callable | None:
    """``/a/b/*``, child steps by name or ``*`` from the document node: a function from
    the document node to the selected elements in document order; ``None`` for any
    other expression."""
    steps: list[str | None] = []
    while token.symbol == "/" and len(token) == 2:
        steps.append(_child_name(token[1]))
        token = token[0]
    if token.symbol != "/" or len(token) != 1 or _UNSUPPORTED in steps:
        return None
    steps.append(_child_name(token[0]))
    if _UNSUPPORTED in steps:
        return None
    steps.reverse()

    def select(document) -> list:
        nodes = [document]
        for name in steps:
            nodes = [
                c
                for n in nodes
                for c in n.children
                if c.node_kind == "element" and (name is None or c.name == name)
            ]
        return nodes

    return select


_UNSUPPORTED = ":"  # not a name a child step can have


def _child_name(step) -> str | None:
    if step.symbol == "*" and len(step) == 0:
        return None
    if step.symbol == "(name)" and ":" not in step.value:
        return _element_name(step)
    return _UNSUPPORTED


def _element_name(step) -> str:
    """An unprefixed element name test's name: in the default element namespace when
    the query declares one."""
    uri = step.parser.default_namespace
    return f"{{{uri}}}{step.value}" if uri else step.value


def _lookup(env: dict, name: str):
    try:
        return env[name]
    except KeyError:
        raise Fallback from None  # elementpath reports the unknown variable


def _step(left: Closure, step) -> Closure:
    """``left/@name``, ``left/name``, ``left/text()`` over at most one node."""
    if step.symbol == "@" and step[0].symbol == "(name)" and ":" not in step[0].value:
        name = step[0].value

        def attribute(env):
            node = _single_node(left(env))
            if node is None:
                return []
            return [a for a in node.attributes if a.name == name] if node.attributes else []

        return attribute
    if step.symbol == "(name)" and ":" not in step.value:
        name = _element_name(step)

        def child(env):
            node = _single_node(left(env))
            if node is None or node.node_kind not in ("element", "document"):
                return []
            return [c for c in node.children if c.node_kind == "element" and c.name == name]

        return child
    if step.symbol == "text" and len(step) == 0:

        def text(env):
            node = _single_node(left(env))
            if node is None or node.node_kind not in ("element", "document"):
                return []
            return [c for c in node.children if c.node_kind == "text"]

        return text
    raise _Unsupported(step.symbol)


def _single_node(items: list):
    if not items:
        return None
    if len(items) > 1 or not isinstance(items[0], XPathNode):
        raise Fallback  # several nodes: document order and duplicates are elementpath's job
    return items[0]


class _Untyped(str):
    """An untypedAtomic value inside the fast path (documents here are never typed)."""

    __slots__ = ()


def _atomize(items: list) -> list:
    out = []
    for item in items:
        if isinstance(item, XPathNode):
            if item.node_kind not in ("element", "attribute", "text", "document"):
                raise Fallback
            out.append(_Untyped(item.string_value))
        else:
            out.append(item)
    return out


def _atoms(tok) -> Closure:
    """A closure giving the atomized value of ``tok``; ``$v/@a`` and ``$v/name`` read
    the element itself (``_element_reader``: no nodes made)."""
    found = _element_reader(tok)
    if found is None:
        inner = _compile(tok)
        return lambda env: _atomize(inner(env))
    left, read = _compile(found[0]), found[1]

    def from_element(env):
        node = _single_node(left(env))
        if node is None:
            return []
        elem = getattr(node, "elem", None)
        if elem is None or node.node_kind != "element":
            raise Fallback
        return read(elem)

    return from_element


def _element_reader(tok):
    """(the left operand, what to read from its element) for ``left/@name`` (the
    attribute's value) and ``left/name`` (the children's string values), else None."""
    if tok.symbol != "/" or len(tok) != 2:
        return None
    step = tok[1]
    if step.symbol == "@" and step[0].symbol == "(name)" and ":" not in step[0].value:
        name = step[0].value
        return tok[0], lambda elem: [] if (v := elem.get(name)) is None else [_Untyped(v)]
    if step.symbol == "(name)" and ":" not in step.value:
        name = _element_name(step)
        return tok[0], lambda elem: [_Untyped("".join(c.itertext())) for c in elem if c.tag == name]
    return None


_KINDS = {_Untyped: "untyped", str: "string", int: "number", float: "number"}
_KINDS.update({Decimal: "number", bool: "boolean"})


def _kind(value) -> str:
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, D.UntypedAtomic):
        return "untyped"
    if isinstance(value, str) and not isinstance(value, D.AnyURI):
        return "string"
    if isinstance(value, _NUMBERS):
        return "number"
    raise Fallback


def _to_double(text: str) -> float:
    if not _DOUBLE.fullmatch(text):
        raise Fallback  # INF, NaN or a failing cast: elementpath knows the rules
    return float(text)


def _compare_atoms(op, a, b) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka == "untyped":
        a, ka = str(a), "string"
    if kb == "untyped":
        b, kb = str(b), "string"
    if ka != kb or _mixed(a, b):
        raise Fallback  # a type error (XPTY0004), or decimal/double promotion
    return op(a, b)


def _mixed(a, b) -> bool:
    """A decimal with a double: XPath promotes to double, Python compares exactly."""
    return (isinstance(a, Decimal) and isinstance(b, float)) or (
        isinstance(a, float) and isinstance(b, Decimal)
    )


def _value_comparison(op, left: Closure, right: Closure) -> Closure:
    def compare(env):
        a, b = left(env), right(env)
        if len(a) > 1 or len(b) > 1:
            raise Fallback  # a type error
        if not a or not b:
            return []
        return [_compare_atoms(op, a[0], b[0])]

    return compare


def _general_comparison(op, left: Closure, right: Closure) -> Closure:
    def compare(env):
        xs, ys = left(env), right(env)
        for a in xs:
            for b in ys:
                ka, kb = _kind(a), _kind(b)
                x, y = a, b
                if ka == "untyped" and kb == "number":
                    x = _to_double(str(a))
                elif kb == "untyped" and ka == "number":
                    y = _to_double(str(b))
                elif ka == "untyped" or kb == "untyped":
                    if {ka, kb} - {"untyped", "string"}:
                        raise Fallback
                    x, y = str(a), str(b)
                elif ka != kb or _mixed(x, y):
                    raise Fallback
                if op(x, y):
                    return [True]
        return [False]

    return compare


def _arithmetic(op, left: Closure, right: Closure) -> Closure:
    def compute(env):
        a, b = left(env), right(env)
        if len(a) != 1 or len(b) != 1:
            raise Fallback  # empty, or a type error: elementpath knows which
        x, y = (_number(v) for v in (a[0], b[0]))
        if type(x) is not type(y):
            raise Fallback  # int with float: promotion rules are elementpath's
        return [op(x, y)]

    return compute


def _number(value):
    if isinstance(value, (_Untyped, D.UntypedAtomic)):
        return _to_double(str(value))
    if isinstance(value, bool) or type(value) not in (int, float):
        raise Fallback
    return value


def _function(name: str, args: list[Closure]) -> Closure:
    if name in ("true", "false") and not args:
        value = [name == "true"]
        return lambda env: value
    if name == "not" and len(args) == 1:
        (arg,) = args
        return lambda env: [not ebv(arg(env))]
    if name in ("empty", "exists") and len(args) == 1:
        (arg,) = args
        want = name == "exists"
        return lambda env: [bool(arg(env)) == want]
    if name == "count" and len(args) == 1:
        (arg,) = args
        return lambda env: [len(arg(env))]
    if name in ("name", "local-name") and len(args) == 1:
        (arg,) = args

        def node_name(env):
            node = _single_node(arg(env))
            if node is None:
                return [""]
            if node.node_kind not in ("element", "attribute") or "{" in (node.name or "{"):
                raise Fallback
            return [node.name]

        return node_name
    if name == "string" and len(args) == 1:
        (arg,) = args

        def string(env):
            items = arg(env)
            if not items:
                return [""]
            if len(items) > 1 or not isinstance(items[0], (XPathNode, str)):
                raise Fallback
            item = items[0]
            return [item.string_value if isinstance(item, XPathNode) else str(item)]

        return string
    raise _Unsupported(name)
