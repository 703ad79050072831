"""Filters of the counted form as plans (issue 20; ``counting.py`` compiles and runs them).

A plan is a filter's *head* (the names from the document node to its anchor), its
*atoms* (a path of names below the anchor and a test: an atomic predicate, existence,
or ``SUB``: an inner anchor's plan holds there) and its *formula* over them (postfix
code). ``plan_of`` makes it from a parsed and rewritten filter, ``conjunction`` from
the plans of its conjuncts; a ``Template`` is a filter shape's plan, for every filter of
the shape (its constants by place, its names renamed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from xcep.xpush.ast import (
    ATTRIBUTE,
    CHILD,
    ELEMENT,
    SELF,
    WILDCARD,
    And,
    Compare,
    Const,
    Exists,
    Not,
    Or,
    Path,
)
from xcep.xpush.ast import TEXT as TEXT_TEST

# formula operators (postfix; an atom is its number, >= 0)
TRUE, FALSE, NOT, AND, OR = -1, -2, -3, -4, -5
TEXT_LABEL = "#text"
# an atom that an inner anchor's plan holds below (its constant: that plan; see plan_of)
SUB = "sub"


@dataclass(frozen=True, slots=True)
class Plan:
    """A filter as its head, atoms and formula (the module's docstring)."""

    head: tuple[str, ...]
    atoms: tuple[tuple[tuple[str, ...], str | None, object], ...]  # (labels, op, constant)
    formula: tuple[int, ...]

    def renamed(self, names: dict) -> Plan:
        """The plan with its names replaced as ``names`` says (a filter of the same shape)."""

        def label(text: str) -> str:
            if text[0] == "@":
                return "@" + names.get(text[1:], text[1:])
            return text if text == TEXT_LABEL else names.get(text, text)

        atoms = tuple(
            (tuple(map(label, labels)), op, value.renamed(names) if op == SUB else value)
            for labels, op, value in self.atoms
        )
        return Plan(tuple(map(label, self.head)), atoms, self.formula)


def evaluate(code, true) -> bool:
    """A postfix formula's value, ``true(atom)`` the value of each atom."""
    stack: list[bool] = []
    for op in code:
        if op >= 0:
            stack.append(true(op))
        elif op in (TRUE, FALSE):
            stack.append(op == TRUE)
        elif op == NOT:
            stack.append(not stack.pop())
        else:
            right = stack.pop()
            stack[-1] = (stack[-1] and right) if op == AND else (stack[-1] or right)
    return stack[0]


class Template:
    """The plan of a filter shape, for every filter of the shape (``workload._Shape``): the
    first filter's plan, where each atom's constant is among the shape's constants
    (``places``), the plan with other names made once per combination of names, and
    what does not depend on the constants: the formula's value with no atom true and the
    sets of atoms a filter may be found by (``CountedFilters.access``)."""

    __slots__ = (
        "_renamed", "choices", "counted", "default", "inner", "names", "places", "plan"
    )  # fmt: skip

    def __init__(self, plan: Plan, places: tuple, names: tuple, inner: Template | None = None):
        self.plan, self.places, self.names = plan, places, names
        self.inner = inner  # the template of its SUB atom's plan (an inner anchor's), if any
        self.default, self.choices = _formula_facts(plan.formula)
        # counted only where it tests a value: paths alone make no new machine states
        # (filters differ in names, not in constants), and the machine caches their
        # answers by state where counting makes each document's anew
        self.counted = any(op not in (None, SUB) for _, op, _ in plan.atoms) or bool(
            inner and inner.counted
        )
        self._renamed = {names: plan}

    @classmethod
    def of(cls, plan: Plan, constants: tuple, names: tuple) -> Template | None:
        """The template of a shape whose first filter (its ``constants`` and ``names``)
        has ``plan``; None where a constant is not one of the filter's (the rewrite's). A
        SUB atom's constant is the key of its filter's inner plan, which follows the
        filter's constants (``CountedFilters``)."""
        places, inner = [], None
        for _, op, value in plan.atoms:
            if op is None:
                places.append(-1)
            elif op == SUB:
                places.append(len(constants))
                inner = cls.of(value, constants, names)
                if inner is None:
                    return None
            elif value in constants:
                places.append(constants.index(value))
            else:
                return None
        return cls(plan, tuple(places), names, inner)

    def named(self, names: tuple) -> Plan:
        """The plan with the names of a filter of the shape (its constants the first's)."""
        plan = self._renamed.get(names)
        if plan is None:
            plan = self.plan.renamed(dict(zip(self.names, names, strict=True)))
            self._renamed[names] = plan
        return plan

    def plan_for(self, constants: tuple, names: tuple) -> Plan:
        """The plan of the filter of the shape with ``constants`` and ``names``."""
        plan = self.named(names)
        atoms = tuple(
            (
                labels,
                op,
                self.inner.plan_for(constants, names)
                if op == SUB
                else None
                if place < 0
                else constants[place],
            )
            for (labels, op, _), place in zip(plan.atoms, self.places, strict=True)
        )
        return Plan(plan.head, atoms, plan.formula)


CHOICES_LIMIT = 16


@lru_cache(maxsize=4_096)
def _formula_facts(code: tuple[int, ...]) -> tuple[bool, tuple | None]:
    """(a formula's value with no atom true, its ``_choices``): thousands of shapes share a
    few hundred formulas (``a and b``, ``a and not(b)``, …)."""
    return evaluate(code, lambda atom: False), _choices(code)


def _choices(code) -> tuple[tuple[int, ...], ...] | None:
    """The sets of atoms a formula holds only if one of holds (one set to choose from each
    filter by its atoms' costs: ``CountedFilters.access``); None where it may hold with
    none true (``not(…)``, ``true()``) or where there would be too many sets."""
    stack: list = []
    for op in code:
        if op >= 0:
            stack.append(((op,),))
        elif op == FALSE:
            stack.append(((),))  # never true: found by nothing
        elif op in (TRUE, NOT):
            if op == NOT:
                stack.pop()
            stack.append(None)
        else:
            right, left = stack.pop(), stack.pop()
            if op == AND:  # one of either's sets
                both = (left or ()) + (right or ())
                stack.append(both if left is not None or right is not None else None)
            elif left is None or right is None:
                stack.append(None)
            else:  # a set of each
                stack.append(tuple(tuple(sorted({*x, *y})) for x in left for y in right))
            if stack[-1] is not None and len(stack[-1]) > CHOICES_LIMIT:
                stack[-1] = None
    return stack[0]


class _NotCounted(Exception):
    pass


def plan_of(path) -> Plan | None:
    """The plan of a parsed and rewritten filter, or None when it is not of the form.

    Where predicates stand on more than one step (``/a[P]/b[Q]/c``) each such step is an
    anchor: the innermost one's plan is as above (``/a/b[Q and c]``), and each outer
    one's has a SUB atom more, true where the inner plan holds at the node its labels
    reach (``/a[P and b⟨/a/b[Q and c]⟩]``). An inner plan must be false with no atom
    true: its filter is evaluated only where an atom touched it."""
    if type(path) is not Path or not path.absolute:
        return None
    steps = path.steps
    anchors = []
    for k, step in enumerate(steps):
        if step.axis != CHILD or step.name == WILDCARD:
            return None
        last = k == len(steps) - 1
        if step.test != ELEMENT and not (step.test in (ATTRIBUTE, TEXT_TEST) and last):
            return None
        if step.predicates:
            if step.test != ELEMENT:
                return None
            anchors.append(k)
    if not anchors:  # no predicate: the last element is the anchor
        anchor = max((k for k, s in enumerate(steps) if s.test == ELEMENT), default=None)
        if anchor is None:
            return None
        anchors = [anchor]
    plan = None  # the plan of the anchor inside the one being made
    for j in reversed(range(len(anchors))):
        anchor = anchors[j]
        conditions = list(steps[anchor].predicates)
        end = anchors[j + 1] + 1 if plan is not None else len(steps)
        if plan is None and anchor + 1 < end:
            conditions.append(Exists(Path(steps[anchor + 1 : end])))
        atoms: dict = {}
        code: list[int] = []
        try:
            if conditions:
                condition = conditions[0] if len(conditions) == 1 else And(tuple(conditions))
                _emit(condition, atoms, code)
            else:
                code.append(TRUE)
        except _NotCounted:
            return None
        if plan is not None:  # the inner anchor's plan holds below, too
            if evaluate(plan.formula, lambda atom: False):
                return None
            labels = tuple(step.name for step in steps[anchor + 1 : end])
            code += (atoms.setdefault((labels, SUB, plan), len(atoms)), AND)
        head = tuple(step.name for step in steps[: anchor + 1])
        plan = Plan(head, tuple(atoms), tuple(code))
    return plan


def _labels(path: Path) -> tuple[str, ...]:
    """The labels of a relative path of names (``.`` alone: none)."""
    steps = path.steps
    if path.absolute:
        raise _NotCounted
    if len(steps) == 1 and steps[0].test == SELF and not steps[0].predicates:
        return ()
    labels = []
    for k, step in enumerate(steps):
        if step.axis != CHILD or step.predicates or step.name == WILDCARD:
            raise _NotCounted
        if step.test == ELEMENT:
            labels.append(step.name)
        elif step.test in (ATTRIBUTE, TEXT_TEST) and k == len(steps) - 1:
            labels.append(step.label)
        else:
            raise _NotCounted
    return tuple(labels)


def _emit(expr, atoms: dict, code: list) -> None:
    """Append ``expr`` as postfix code; its atoms numbered in ``atoms``."""
    kind = type(expr)
    if kind is And or kind is Or:
        _emit(expr.items[0], atoms, code)
        for item in expr.items[1:]:
            _emit(item, atoms, code)
            code.append(AND if kind is And else OR)
    elif kind is Not:
        _emit(expr.item, atoms, code)
        code.append(NOT)
    elif kind is Const:
        code.append(TRUE if expr.value else FALSE)
    elif kind is Exists or kind is Compare:
        op, value = (None, None) if kind is Exists else (expr.op, expr.value)
        code.append(atoms.setdefault((_labels(expr.path), op, value), len(atoms)))
    else:
        raise _NotCounted


def conjunction(plans: list[Plan]) -> Plan | None:
    """``HEAD[C1 and C2 …]`` from the plans of ``HEAD[C1]``, ``HEAD[C2]``, … (None where
    their heads differ)."""
    head = plans[0].head
    atoms: dict = {}
    code: list[int] = []
    for k, plan in enumerate(plans):
        if plan.head != head:
            return None
        number = [atoms.setdefault(atom, len(atoms)) for atom in plan.atoms]
        code += (op if op < 0 else number[op] for op in plan.formula)
        if k:
            code.append(AND)
    return Plan(head, tuple(atoms), tuple(code))
