"""Conditions and values over DOM nodes: step predicates and where-clause conditions.

Used by the reference evaluator on whole documents and by the streaming
engine on the subtrees it captured, so that both decide a condition by the
same code. Variables are looked up through an ``env`` callable
``env(ref) -> list[Node]`` (``None`` inside step predicates, which have none).
"""

from __future__ import annotations

from collections.abc import Callable

from xcep.xseq import ast as A
from xcep.xseq.dom import Node, axis_nodes, test_matches
from xcep.xseq.values import arith, compare, compare_one

Env = Callable[[A.VarRef], list] | None


def select(path, node: Node) -> list[Node]:
    """The nodes a variable-free relative ``path`` selects from ``node``, in document order."""
    if path.__class__ is A.Step:  # one step from one node: in order already (``axis_nodes``)
        return _select(path, [node])
    return _ordered(_select(path, [node]))


def _select(path, nodes: list[Node]) -> list[Node]:
    if isinstance(path, A.Step):
        if path.axis == A.ATTRIBUTE and path.name != "*" and not path.preds:
            return [a for node in nodes for a in node.attrs if a.tag == path.name]
        out = []
        for node in nodes:
            for candidate in axis_nodes(node, path.axis, path.kind):
                if test_matches(path, candidate) and all(
                    holds(pred, candidate) for pred in path.preds
                ):
                    out.append(candidate)
        return out if len(nodes) == 1 else _ordered(out)
    if isinstance(path, A.Seq):
        for item in path.items:
            nodes = _select(item, nodes)
        return nodes
    if isinstance(path, A.Union):
        return _ordered([n for item in path.items for n in _select(item, nodes)])
    if isinstance(path, A.Intersect):
        sets = [_select(item, nodes) for item in path.items]
        common = set.intersection(*(set(map(id, found)) for found in sets))
        return [n for n in sets[0] if id(n) in common]
    if isinstance(path, A.Star):
        result, frontier = list(nodes), list(nodes)
        seen = set(map(id, nodes))
        while frontier:
            frontier = [n for n in _select(path.body, frontier) if id(n) not in seen]
            seen.update(map(id, frontier))
            result.extend(frontier)
        return _ordered(result)
    raise TypeError(f"not a path: {path!r}")


def _ordered(nodes: list[Node]) -> list[Node]:
    unique = {id(node): node for node in nodes}
    return sorted(unique.values(), key=lambda n: n.key)


def values(expr, node: Node | None, env: Env = None) -> list:
    """The values of an operand: strings from nodes, numbers from constants and arithmetic."""
    if isinstance(expr, A.Const):
        return [expr.value]
    if isinstance(expr, A.RelPath):
        return [n.string_value() for n in select(expr.path, node)]
    if isinstance(expr, A.VarRef):
        memo = getattr(env, "memo", None)
        if memo is not None:  # many conditions over one binding: each reference read once
            found = memo.get(id(expr))
            if found is None:
                found = memo[id(expr)] = _ref_values(expr, env)
            return found
        return _ref_values(expr, env)
    if isinstance(expr, A.Tag):
        return [n.tag for n in env(expr.ref) if n.tag is not None]
    if isinstance(expr, A.Arith):
        return arith(expr.op, values(expr.left, node, env), values(expr.right, node, env))
    return [holds(expr, node, env)]  # a condition used as a value


def _ref_values(expr: A.VarRef, env: Env) -> list:
    path = expr.path
    if type(path) is A.Step and path.axis == A.ATTRIBUTE and path.name != "*":
        found = (n.attribute(path.name) for n in env(expr))  # the common case, made short
        return [value for value in found if value is not None]
    return [n.string_value() for n in ref_nodes(expr, env)]


def ref_nodes(ref: A.VarRef, env: Env) -> list[Node]:
    """The nodes of ``$X``/``first($X)``… followed by the reference's relative path, if any."""
    nodes = env(ref)
    if ref.path is None:
        return nodes
    return _ordered([found for n in nodes for found in select(ref.path, n)])


def holds(cond, node: Node | None, env: Env = None) -> bool:
    """The effective boolean value of a condition on ``node``."""
    if cond.__class__ is A.Compare:  # the common case first
        return compare(cond.op, values(cond.left, node, env), values(cond.right, node, env))
    if isinstance(cond, A.And):
        return holds(cond.left, node, env) and holds(cond.right, node, env)
    if isinstance(cond, A.Or):
        return holds(cond.left, node, env) or holds(cond.right, node, env)
    if isinstance(cond, A.Not):
        return not holds(cond.arg, node, env)
    if isinstance(cond, A.Compare):
        return compare(cond.op, values(cond.left, node, env), values(cond.right, node, env))
    if isinstance(cond, A.RelPath):
        return bool(select(cond.path, node))
    if isinstance(cond, A.VarRef):
        return bool(ref_nodes(cond, env))
    if isinstance(cond, A.VarTest):
        return any(holds(cond.cond, n, None) for n in ref_nodes(cond.ref, env))
    if isinstance(cond, A.Tag):
        return bool(env(cond.ref))
    if isinstance(cond, A.Const):
        return bool(cond.value)
    if isinstance(cond, A.Arith):
        return bool(values(cond, node, env))
    raise TypeError(f"not a condition: {cond!r}")


class AttributeTest:
    """A condition that reads nothing but the element's own attributes, as a test of the
    open tag's attribute list ``[(name, value, id)]``: ``holds`` on that element without
    a node built for it (the automaton decides such predicates at the open tag). Pickles
    as its condition (``attribute_test`` compiles it again)."""

    __slots__ = ("cond", "test")

    def __init__(self, cond, test: Callable) -> None:
        self.cond, self.test = cond, test

    def __reduce__(self):
        return attribute_test, (self.cond,)


def attribute_test(cond) -> AttributeTest | None:
    """``cond`` compiled to an ``AttributeTest``, or None when it reads more than the
    element's attributes (children, text, ancestors, functions, arithmetic)."""
    test = _attribute_test(cond)
    return None if test is None else AttributeTest(cond, test)


def _attribute_test(cond) -> Callable | None:
    make = _ATTRIBUTE_TESTS.get(cond.__class__)
    return None if make is None else make(cond)


def attribute_name(expr) -> str | None:
    """The name of a plain ``@name`` operand (no ``@*``, no predicate), else None."""
    if expr.__class__ is not A.RelPath:
        return None
    step = expr.path
    if step.__class__ is not A.Step or step.axis != A.ATTRIBUTE or step.name == "*" or step.preds:
        return None
    return step.name


def _attribute_values(expr) -> Callable | None:
    """The values of an operand as a function of the attribute list, or None."""
    if expr.__class__ is A.Const:
        constant = [expr.value]
        return lambda raw: constant
    name = attribute_name(expr)
    if name is None:
        return None
    return lambda raw: [value for key, value, _ in raw if key == name]


def _compare_test(cond: A.Compare) -> Callable | None:
    op, name = cond.op, attribute_name(cond.left)
    if name is not None and cond.right.__class__ is A.Const:  # @a op constant: the usual one
        constant = cond.right.value

        def attribute_op_constant(raw) -> bool:
            for key, value, _ in raw:
                if key == name:
                    return compare_one(op, value, constant)
            return False

        return attribute_op_constant
    left, right = _attribute_values(cond.left), _attribute_values(cond.right)
    if left is None or right is None:
        return None
    return lambda raw: compare(op, left(raw), right(raw))


def _both(make_pair: Callable) -> Callable:
    def make(cond) -> Callable | None:
        left, right = _attribute_test(cond.left), _attribute_test(cond.right)
        return None if left is None or right is None else make_pair(left, right)

    return make


def _negated(cond: A.Not) -> Callable | None:
    inner = _attribute_test(cond.arg)
    return None if inner is None else lambda raw: not inner(raw)


def _has_attribute(cond: A.RelPath) -> Callable | None:
    name = attribute_name(cond)
    return None if name is None else lambda raw: any(key == name for key, _, _ in raw)


_ATTRIBUTE_TESTS = {
    A.Compare: _compare_test,
    A.And: _both(lambda left, right: lambda raw: left(raw) and right(raw)),
    A.Or: _both(lambda left, right: lambda raw: left(raw) or right(raw)),
    A.Not: _negated,
    A.RelPath: _has_attribute,
}


def required_attributes(cond) -> frozenset:
    """The attributes without which ``cond`` is false on an element (an ``AttributeTest``'s
    condition): ``@a = 1`` needs a, ``@a or @b`` neither for sure, ``not(@a)`` none."""
    cls = cond.__class__
    if cls is A.Compare:
        names = (attribute_name(cond.left), attribute_name(cond.right))
        return frozenset(name for name in names if name is not None)
    if cls is A.RelPath:
        name = attribute_name(cond)
        return frozenset(() if name is None else (name,))
    if cls is A.And:
        return required_attributes(cond.left) | required_attributes(cond.right)
    if cls is A.Or:
        return required_attributes(cond.left) & required_attributes(cond.right)
    return frozenset()
