"""Rewrite backward steps of a from path into forward steps with predicates (seed §4.1).

A stream cannot go back to a node it has passed, so ``parent`` and
``ancestor`` steps become conditions on the nodes the path reaches forward,
the way the seed's "Handling backward axes" turns them into predicates:

- ``P/x[q]/parent::t[r]``  =  ``P/self::t[r][x[q]]``
- ``P//x[q]/parent::t[r]`` =  ``P/descendant-or-self::t[r][x[q]]``
- ``P/x[q]/ancestor::t[r]``  =  ``P/self::t[r][x[q]]``  ∪  ``P[x[q]]/ancestor::t[r]``
- ``P//x[q]/ancestor::t[r]`` =  ``P/descendant-or-self::t[r][.//x[q]]``
                                ∪  ``P[.//x[q]]/ancestor::t[r]``

applied until no backward step is left (``P`` empty is the document node,
which has no ancestors). Inside a union or intersect operand that does not
start the path, ``P`` empty is the operand's start node, whose ancestors a
stream has passed: an ancestor step there is rejected. The step before a backward step moves into a
predicate, so it cannot bind a variable; ``preceding_sibling`` and backward
steps after sibling axes have no forward form in a stream and are rejected.
Each rule is a small pure function over the AST.
"""

from __future__ import annotations

from xcep.xseq import ast as A
from xcep.xseq.parser import QuerySyntaxError

_NOTHING = A.Step(A.SELF, A.ELEMENT, "\x00none")  # selects nothing: no element has this name


def without_backward_steps(path, text: str, nested: bool = False):
    """``path`` with its parent/ancestor steps rewritten into forward steps and predicates
    (``nested``: ``path`` starts at a node of the path, not at the document node)."""
    if isinstance(path, A.Step):
        return _sequence((path,), text, nested)
    if isinstance(path, A.Seq):
        return _sequence(path.items, text, nested)
    if isinstance(path, A.Union):
        items = tuple(without_backward_steps(p, text, nested) for p in path.items)
        return A.Union(items, path.pos)
    if isinstance(path, A.Intersect):
        items = tuple(without_backward_steps(p, text, nested) for p in path.items)
        return A.Intersect(items, path.pos, path.group)
    return path  # a Kleene-* body has no backward steps (analyze checks it)


def _sequence(items: tuple, text: str, nested: bool):
    items = tuple(
        item if isinstance(item, A.Step) else without_backward_steps(item, text, nested or i > 0)
        for i, item in enumerate(items)
    )
    for i, item in enumerate(items):
        if isinstance(item, A.Step) and item.axis in A.BACKWARD_AXES:
            prefix, before = items[: i - 1], items[i - 1] if i else None
            replaced = _backward(prefix, before, item, text, nested)
            return without_backward_steps(A.Seq((replaced, *items[i + 1 :])), text, nested)
    return items[0] if len(items) == 1 else A.Seq(items)


def _backward(prefix: tuple, before, step: A.Step, text: str, nested: bool = False):
    """The forward form of ``prefix / before / step`` (``step`` a backward step)."""
    if step.axis == A.PRECEDING_SIBLING:
        raise QuerySyntaxError(
            "the preceding_sibling axis is supported in the reference evaluator only, not in a "
            "stream",
            text,
            step.pos,
        )
    if before is None:  # the document node has no parent and no ancestor
        if nested:
            raise QuerySyntaxError(
                f"a {step.axis} step in a union or intersect operand must follow a step of "
                "that operand: its start node's ancestors are behind the stream",
                text,
                step.pos,
            )
        return _NOTHING
    if not isinstance(before, A.Step) or before.axis not in (A.CHILD, A.DESCENDANT, A.SELF):
        raise QuerySyntaxError(
            f"a {step.axis} step must follow a /, // or self step to run in a stream",
            text,
            step.pos,
        )
    if before.var:
        raise QuerySyntaxError(
            f"${before.var} cannot be followed by a {step.axis} step (it would become a "
            "predicate, which binds nothing)",
            text,
            step.pos,
        )
    if before.axis == A.SELF:  # P/s/self::x[q]/parent::t = P/s[self::x[q]]/parent::t
        if not prefix or not isinstance(prefix[-1], A.Step):
            return _backward(prefix[:-1], prefix[-1] if prefix else None, step, text, nested)
        merged = _with_pred(prefix[-1], A.RelPath(before, before.pos))
        return _backward(prefix[:-1], merged, step, text, nested)
    child = A.Step(A.CHILD, before.kind, before.name, before.preds, None, before.pos)
    target = A.Step(A.SELF, _kind(step), step.name, step.preds, None, step.pos)
    if before.axis == A.CHILD:
        here = A.RelPath(child, before.pos)
        this = _with_pred(target, here)
        if step.axis == A.PARENT:
            return A.Seq((*prefix, this))
        upward = _ancestors(prefix, here, step, text, nested)
        return A.Union((A.Seq((*prefix, this)), upward), step.pos)
    below = A.Step(A.DESCENDANT, before.kind, before.name, before.preds, None, before.pos)
    if step.axis == A.PARENT:
        around = A.Step(A.DESCENDANT_OR_SELF, _kind(step), step.name, step.preds, None, step.pos)
        return A.Seq((*prefix, _with_pred(around, A.RelPath(child, before.pos))))
    around = A.Step(A.DESCENDANT_OR_SELF, _kind(step), step.name, step.preds, None, step.pos)
    inside = A.Seq((*prefix, _with_pred(around, A.RelPath(below, before.pos))))
    upward = _ancestors(prefix, A.RelPath(below, before.pos), step, text, nested)
    return A.Union((inside, upward), step.pos)


def _ancestors(prefix: tuple, condition, step: A.Step, text: str, nested: bool):
    """``P[condition]/ancestor::t[r]`` where ``P`` is ``prefix``: recurse on P's last step."""
    if not prefix:
        if nested:
            raise QuerySyntaxError(
                "an ancestor step in a union or intersect operand must follow a step that "
                "keeps it below the operand's start node (whose ancestors are behind the stream)",
                text,
                step.pos,
            )
        return _NOTHING
    last = prefix[-1]
    if not isinstance(last, A.Step):
        raise QuerySyntaxError(
            "an ancestor step must follow plain steps to run in a stream", text, step.pos
        )
    guarded = A.Step(last.axis, last.kind, last.name, (*last.preds, condition), last.var, last.pos)
    return _backward(prefix[:-1], guarded, step, text, nested)


def _kind(step: A.Step) -> str:
    return A.ELEMENT if step.kind == A.NODE else step.kind


def _with_pred(step: A.Step, pred) -> A.Step:
    return A.Step(step.axis, step.kind, step.name, (*step.preds, pred), step.var, step.pos)
