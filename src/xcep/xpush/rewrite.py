"""Rewrite rules over filter trees, each a small pure function.

The AFA only moves down the tree, so ``..`` is rewritten away first:

- ``s/..`` inside a path (``s`` a child, attribute or text step) is the node
  that has an ``s``: it becomes ``.[s]``;
- a predicate that looks at the parent, ``x[Q(.., …)]`` reached from ``p``,
  is a condition on ``p``: with R the parent conditions in Q,
  ``∃x Q(x, R) = OR over truth values b of R ( R = b and ∃x Q(x, b) )``.
  The step becomes ``p[OR_b (R=b and x[Q_b]/rest)]`` — the rest of the path
  moves into the predicate, which is exact because a filter is a boolean.
  Each ``..`` moves one level up, so ``../../x`` is rewritten twice. A ``..``
  above the document node selects nothing.

Parent conditions per step are limited to ``MAX_PARENT_CONDITIONS`` (the case
split doubles per condition).
"""

from __future__ import annotations

import operator
from itertools import product

from xcep.errors import QueryError
from xcep.xpush.ast import (
    CHILD,
    DESCENDANT,
    PARENT,
    SELF,
    And,
    Compare,
    Const,
    Exists,
    Expr,
    Not,
    Or,
    Path,
    Step,
)

MAX_PARENT_CONDITIONS = 4


class UnsupportedFilter(QueryError):
    """A filter this engine cannot run (the message says what and why)."""

    code = "XCEP0003"
    language = "filter"

    def __str__(self) -> str:  # the reason: who reports it says where (FilterError)
        return self.message


def simplify(expr: Expr) -> Expr:
    """Fold constants through and/or/not; flatten nested and/or. What is already simple
    comes back as it is (the same object, not a copy)."""
    if isinstance(expr, Not):
        item = simplify(expr.item)
        if isinstance(item, Const):
            return Const(not item.value)
        if isinstance(item, Not):
            return item.item
        return expr if item is expr.item else Not(item)
    if isinstance(expr, And | Or):
        unit = isinstance(expr, And)  # the neutral element: true for and, false for or
        items: list[Expr] = []
        for item in map(simplify, expr.items):
            if isinstance(item, Const):
                if item.value != unit:
                    return Const(not unit)
                continue
            items.extend(item.items if type(item) is type(expr) else (item,))
        items = list(dict.fromkeys(items))
        if not items:
            return Const(unit)
        if len(items) == 1:
            return items[0]
        return expr if _same(items, expr.items) else type(expr)(tuple(items))
    return expr


def _same(items, before) -> bool:
    """Whether a rule left a node's children as they were (the same objects)."""
    return len(items) == len(before) and all(map(operator.is_, items, before))


def _parent_refs(expr: Expr) -> list[Expr]:
    """The Exists/Compare leaves of ``expr`` whose path starts with ``..``."""
    if isinstance(expr, And | Or):
        return [ref for item in expr.items for ref in _parent_refs(item)]
    if isinstance(expr, Not):
        return _parent_refs(expr.item)
    if isinstance(expr, Exists | Compare) and expr.path.steps[0].test == PARENT:
        return [expr]
    return []


def _substitute(expr: Expr, values: dict[Expr, bool]) -> Expr:
    if expr in values:
        return Const(values[expr])
    if isinstance(expr, And | Or):
        return type(expr)(tuple(_substitute(item, values) for item in expr.items))
    if isinstance(expr, Not):
        return Not(_substitute(expr.item, values))
    return expr


def _up(ref: Expr) -> Expr:
    """A parent condition as seen from the parent: drop the leading ``..``."""
    first, *rest = ref.path.steps
    steps = tuple(rest) or (Step(CHILD, SELF),)
    if first.predicates:
        steps = (Step(CHILD, SELF, None, first.predicates), *rest)
    path = Path(steps)
    return _hoist(Exists(path) if isinstance(ref, Exists) else Compare(path, ref.op, ref.value))


def _hoist(expr: Expr) -> Expr:
    """``.[C]/rest`` used as a condition is ``C and rest`` (exposes ``..`` inside C)."""
    if isinstance(expr, And | Or):
        return type(expr)(tuple(map(_hoist, expr.items)))
    if isinstance(expr, Not):
        return Not(_hoist(expr.item))
    if isinstance(expr, Exists | Compare):
        first = expr.path.steps[0]
        if first.test == SELF and first.axis == CHILD and first.predicates:
            rest = expr.path.steps[1:] or (Step(CHILD, SELF),)
            inner = (
                Exists(Path(rest))
                if isinstance(expr, Exists)
                else Compare(Path(rest), expr.op, expr.value)
            )
            return And((*map(_hoist, first.predicates), inner))
    return expr


def _expr(expr: Expr) -> Expr:
    if isinstance(expr, And | Or):
        return type(expr)(tuple(map(_expr, expr.items)))
    if isinstance(expr, Not):
        return Not(_expr(expr.item))
    if isinstance(expr, Exists):
        return _hoist(Exists(rewrite_path(expr.path)))
    if isinstance(expr, Compare):
        compared, moved = _rewrite(expr.path, lambda rest: Compare(rest, expr.op, expr.value))
        if moved:  # the comparison moved into a predicate with the compared step
            return _hoist(Exists(compared))
        return _hoist(Compare(compared, expr.op, expr.value))
    return expr


def rewrite_path(path: Path) -> Path:
    """Remove every ``..`` from a path (see the module docstring)."""
    return _rewrite(path, Exists)[0]


def _rewrite(path: Path, leaf) -> tuple[Path, bool]:
    """``rewrite_path``, where ``leaf`` makes the condition on the path's end when it
    moves into a predicate: ``Exists``, or for a compared path the comparison (``rest
    = 2``, not ``rest``); and whether the end moved (the path then ends before it)."""
    moved_end = False
    steps = [
        Step(s.axis, s.test, s.name, tuple(simplify(_expr(q)) for q in s.predicates))
        for s in path.steps
    ]
    steps = _remove_inner_parents(steps)
    j = len(steps) - 1
    while j >= 0:
        step = steps[j]
        refs = list(dict.fromkeys(r for q in step.predicates for r in _parent_refs(q)))
        if not refs or step.test == PARENT:
            j -= 1
            continue
        if step.test == SELF:  # `prev/.[Q]` is `prev[Q]`: Q's `..` is prev's parent
            if j > 0 and step.axis == CHILD:
                steps = [*steps[: j - 1], _merge(steps[j - 1], step), *steps[j + 1 :]]
            j -= 1  # at the start: the document node's parent, or the caller's business
            continue
        if len(refs) > MAX_PARENT_CONDITIONS:
            raise UnsupportedFilter(
                f"more than {MAX_PARENT_CONDITIONS} conditions on '..' in one step"
            )
        branches = []
        for values in product((True, False), repeat=len(refs)):
            assignment = dict(zip(refs, values, strict=True))
            conditions = [_up(r) if v else Not(_up(r)) for r, v in assignment.items()]
            moved = Step(
                CHILD,
                step.test,
                step.name,
                tuple(_substitute(q, assignment) for q in step.predicates),
            )
            rest = Path((moved, *steps[j + 1 :]))
            branches.append(And((*conditions, Exists(rest) if moved_end else leaf(rest))))
        moved_end = True
        condition = simplify(Or(tuple(branches)))
        holder = Step(step.axis, SELF, None, (condition,))
        if j > 0 and step.axis == CHILD:  # merge into the previous step: prev[condition]
            prev = steps[j - 1]
            steps = [*steps[: j - 1], _with(prev, condition)]
            j -= 1  # the condition may still look further up
            continue
        steps = [*steps[:j], holder]
        j -= 1
    if path.absolute and steps and steps[0].axis == CHILD and steps[0].test == SELF:
        # conditions on the document node: its parent does not exist
        first = steps[0]
        above = {r: False for q in first.predicates for r in _parent_refs(q)}
        steps[0] = Step(
            CHILD, SELF, None, tuple(simplify(_substitute(q, above)) for q in first.predicates)
        )
    for s in steps:
        for q in s.predicates:
            if _parent_refs(q) and not (s is steps[0] and not path.absolute):
                raise UnsupportedFilter(
                    "'..' here would need the parent of a '//' step's start; not supported"
                )
    if path.absolute:
        steps = [_drop_parent_leftovers(s) for s in steps]
    return Path(tuple(steps), path.absolute), moved_end


def _drop_parent_leftovers(step: Step) -> Step:
    if step.test == PARENT:
        raise UnsupportedFilter("'..' above the document node selects nothing")
    return step


def _merge(step: Step, self_step: Step) -> Step:
    return Step(step.axis, step.test, step.name, (*step.predicates, *self_step.predicates))


def _with(step: Step, condition: Expr) -> Step:
    return Step(step.axis, step.test, step.name, (*step.predicates, condition))


def _remove_inner_parents(steps: list[Step]) -> list[Step]:
    """``s/..`` → ``.[s]`` for child, attribute and text steps ``s``."""
    out: list[Step] = []
    for step in steps:
        while (
            step.test == PARENT
            and len(out) > 1
            and out[-1].test == SELF
            and out[-1].axis == CHILD
            and out[-2].test != PARENT
        ):  # s/.[C]/.. is s[C]/..
            prev = out.pop()
            out[-1] = _merge(out[-1], prev)
        if step.test == PARENT and out and out[-1].test != PARENT:
            prev = out.pop()
            if prev.axis == DESCENDANT:
                raise UnsupportedFilter("'..' after a '//' step is not supported")
            if prev.test == SELF and not prev.predicates:  # ./.. is ..
                out.append(Step(prev.axis, PARENT, None, step.predicates))
                continue
            if prev.test == SELF:  # .[C]/.. first: as a condition it is `C and ..` (_hoist)
                out += [prev, step]
                continue
            inner = _expr(Exists(Path((prev,))))  # its own '..' (s[..]/..) rewritten too
            out.append(Step(CHILD, SELF, None, (inner, *step.predicates)))
            continue
        out.append(step)
    return out


def _parent_steps(node, or_hoisted: bool = False) -> bool:
    """Whether ``node`` has a ``..`` step; with ``or_hoisted``, or a predicate's path
    starting ``.[C]`` (which ``rewrite_path`` hoists: ``C and rest``) — whether the
    rewrite does more than ``_simplify_path`` will (most filters: it would rebuild the
    whole tree to change nothing)."""
    if isinstance(node, Path):
        return any(
            s.test == PARENT or any(_parent_steps(q, or_hoisted) for q in s.predicates)
            for s in node.steps
        )
    if isinstance(node, And | Or):
        return any(_parent_steps(item, or_hoisted) for item in node.items)
    if isinstance(node, Not):
        return _parent_steps(node.item, or_hoisted)
    if isinstance(node, Exists | Compare):
        first = node.path.steps[0]
        hoisted = or_hoisted and first.test == SELF and first.predicates != ()
        return hoisted or _parent_steps(node.path, or_hoisted)
    return False


def _simplify_path(path: Path) -> Path | None:
    """Simplify every predicate; ``None`` when a step's predicate is false (no match). A
    path with nothing to simplify comes back as it is (most filters: no tree rebuilt)."""
    steps = []
    for step in path.steps:
        predicates = []
        for q in step.predicates:
            q = _simplify_deep(q)
            if isinstance(q, Const):
                if not q.value:
                    return None
                continue
            predicates.append(q)
        if not _same(predicates, step.predicates):
            step = Step(step.axis, step.test, step.name, tuple(predicates))
        steps.append(step)
    return path if _same(steps, path.steps) else Path(tuple(steps), path.absolute)


def _simplify_deep(expr: Expr) -> Expr:
    if isinstance(expr, And | Or):
        items = list(map(_simplify_deep, expr.items))
        if not _same(items, expr.items):
            expr = type(expr)(tuple(items))
    elif isinstance(expr, Not):
        item = _simplify_deep(expr.item)
        if item is not expr.item:
            expr = Not(item)
    elif isinstance(expr, Exists | Compare):
        path = _simplify_path(expr.path)
        if path is None:
            return Const(False)
        steps = path.steps
        alone = len(steps) == 1 and steps[0].test == SELF and steps[0].axis == CHILD
        if isinstance(expr, Exists) and alone:  # `.[Q]` as a condition is Q
            return simplify(And(steps[0].predicates)) if steps[0].predicates else Const(True)
        if path is not expr.path:
            expr = Exists(path) if isinstance(expr, Exists) else Compare(path, expr.op, expr.value)
    return simplify(expr)


def normalize(path: Path, plain: bool = False) -> Path:
    """All rules, in order: the tree the AFA compiler accepts. ``plain``: the tree is known
    to have no ``..`` step and no ``.[C]`` or ``self::node()[C]`` step (its text has no
    ``.`` and no ``::``), so nothing for ``rewrite_path`` to do or to refuse."""
    plain = plain or not _parent_steps(path, or_hoisted=True)
    result = path if plain else rewrite_path(path)
    simplified = _simplify_path(result)
    # a filter that can never match keeps a predicate that says so
    result = simplified or Path((Step(CHILD, SELF, None, (Const(False),)),), True)
    if not plain and _parent_steps(result):
        raise UnsupportedFilter("this use of '..' is not supported")
    return result
