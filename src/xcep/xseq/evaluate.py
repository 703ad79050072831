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
from xcep.xseq.values import arith, compare

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
