"""Step predicates lifted into the where clause, so that many queries share a template.

Run alone, a query is fastest with its conditions *in* its steps (Opt-3 moves
them there): a run stops at the first element that fails them. Run among
thousands, the same queries differ mostly in constants —
``//transaction[@company = 'IBM']/note[text() = 'n867']/text()``,
``… = 'ORCL']/note[text() = 'n12']/text()`` — and a constant in a step makes
each query an automaton of its own: a thousand threads per element. With the
predicates lifted out (``//$·0(transaction)/$·1(note)/text() where $·0@company =
'IBM' and $·1/text() = 'n867'``) they are one template: one thread per
element, and at each match the members' conditions are decided together by
the counting index (``xcep.xseq.conditions``). ``XSeqMultiEngine`` compiles
its queries this way.

A step's predicates are lifted when the end node of a match fixes the step's
node: every later step is a child or attribute step (so each end node has one
binding of it, and a condition on it per match is the predicate on the step).
Queries with Kleene-*, unions, intersections or ``partition by`` are kept as
they are. The variables it adds are named ``·N``, which no query can write.
"""

from __future__ import annotations

from dataclasses import replace

from xcep.xseq import ast as A

HIDDEN = "·"  # the prefix of the variables lifting adds


def lift_predicates(query: A.Query) -> A.Query:
    """``query`` with the predicates of its liftable steps in its where clause."""
    if query.partition is not None:
        return query
    items = list(query.path.items) if isinstance(query.path, A.Seq) else [query.path]
    if not all(isinstance(item, A.Step) for item in items):
        return query
    conditions = []
    for i in range(len(items) - 1, -1, -1):
        step = items[i]
        lifted = _liftable(step)
        if lifted:
            var = step.var or f"{HIDDEN}{i}"
            kept = tuple(p for p in step.preds if p not in lifted)
            items[i] = replace(step, var=var, preds=kept)
            conditions = [_about(var, pred) for pred in lifted] + conditions
        if step.axis not in (A.CHILD, A.ATTRIBUTE):  # an earlier step's node is not fixed
            break
    if not conditions:
        return query
    where = query.where
    for cond in conditions:
        where = cond if where is None else A.And(where, cond)
    path = A.Seq(tuple(items)) if len(items) > 1 else items[0]
    variables = tuple(item.var for item in items if item.var)
    return replace(query, path=path, where=where, variables=variables)


def _liftable(step: A.Step) -> list:
    """The predicates of an element step that can be conditions on its variable."""
    if step.kind != A.ELEMENT or step.axis not in (A.CHILD, A.DESCENDANT):
        return []
    return [pred for pred in step.preds if not _reads_backward(pred)]


def _reads_backward(pred) -> bool:
    return any(
        isinstance(node, A.Step) and node.axis in A.BACKWARD_AXES for node in A.walk(pred)
    ) or any(isinstance(node, A.VarRef | A.Tag | A.VarTest) for node in A.walk(pred))


def _about(var: str, pred):
    """The predicate as a condition on ``$var``: its relative paths read from the node."""

    def from_node(node):
        if isinstance(node, A.RelPath):
            return A.VarRef(var, None, node.path, node.pos)
        return None

    return A.map_condition(pred, from_node)
