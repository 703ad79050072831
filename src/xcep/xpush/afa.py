"""Alternating finite automata for filters (the seed's §3.2, step 1).

One ``AFA`` holds the states of a whole workload. A state is OR, AND or NOT:

- an OR *step* state has one labelled transition (a child label, ``*``,
  ``@name``, ``@*`` or ``#text``): it matches a node with such a child that
  matches the target;
- an OR *loop* state (``//``) has a ``*`` transition to itself and an
  ε-move to the step after it;
- an OR *leaf* state carries an atomic predicate (or ``True``): it matches a
  node whose value satisfies it (any node for ``True``);
- AND, OR and NOT *combinators* have only ε-moves (NOT exactly one).

A node's value is its string value: an attribute's or text node's value, or
for an element the concatenation of the text below it. Text nodes are
children of their element (``#text``), so mixed content needs no special rule.

States are numbered so that every ε-successor has a larger number than its
state: evaluating states from the largest number down sees successors first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xcep.xpush.ast import (
    ATTRIBUTE,
    DESCENDANT,
    ELEMENT,
    SELF,
    TEXT,
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
from xcep.xpush.predicates import Predicate

OR, AND, NOT = 0, 1, 2
TRUE = True  # the predicate of a leaf that matches every node


@dataclass
class AFA:
    kind: list[int] = field(default_factory=list)
    eps: list[tuple[int, ...]] = field(default_factory=list)
    label: list[str | None] = field(default_factory=list)  # transition label (step/loop)
    target: list[int | None] = field(default_factory=list)  # transition target
    predicate: list[Predicate | bool | None] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)  # the filter a state belongs to
    initial: dict[int, int] = field(default_factory=dict)  # filter number → initial state
    removed: set[int] = field(default_factory=set)  # filter numbers taken out

    def new(self, kind: int, owner: int) -> int:
        self.kind.append(kind)
        self.eps.append(())
        self.label.append(None)
        self.target.append(None)
        self.predicate.append(None)
        self.owner.append(owner)
        return len(self.kind) - 1

    def __len__(self) -> int:
        return len(self.kind)

    def add_filter(self, number: int, path: Path) -> int:
        """Compile one (rewritten, ``..``-free) filter; returns its initial state."""
        state = _Compiler(self, number).path(path.steps, _true_leaf)
        self.initial[number] = state
        return state

    def eps_parents(self) -> list[list[int]]:
        parents: list[list[int]] = [[] for _ in self.kind]
        for s, successors in enumerate(self.eps):
            for t in successors:
                parents[t].append(s)
        return parents


def _true_leaf(compiler: _Compiler) -> int:
    state = compiler.afa.new(OR, compiler.owner)
    compiler.afa.predicate[state] = TRUE
    return state


class _Compiler:
    def __init__(self, afa: AFA, owner: int) -> None:
        self.afa = afa
        self.owner = owner

    def path(self, steps: tuple[Step, ...], final) -> int:
        """A state matching node x iff ``steps`` from x reach a node matched by ``final``."""
        if not steps:
            return final(self)
        step, rest = steps[0], steps[1:]
        if step.axis == DESCENDANT:
            afa = self.afa
            loop = afa.new(OR, self.owner)
            afa.label[loop], afa.target[loop] = "*", loop
            inner = self.step(step, rest, final)
            afa.eps[loop] = (inner,)
            return loop
        return self.step(step, rest, final)

    def step(self, step: Step, rest: tuple[Step, ...], final) -> int:
        afa = self.afa
        if step.test == SELF:
            return self.conjunction(step.predicates, lambda: self.path(rest, final))
        if step.test not in (ELEMENT, ATTRIBUTE, TEXT):
            raise ValueError(f"cannot compile a {step.test} step (rewrite it first)")
        state = afa.new(OR, self.owner)
        afa.label[state] = step.label
        afa.target[state] = self.conjunction(step.predicates, lambda: self.path(rest, final))
        return state

    def conjunction(self, predicates: tuple[Expr, ...], then) -> int:
        if not predicates:
            return then()
        state = self.afa.new(AND, self.owner)
        successors = [self.expr(q) for q in predicates]
        successors.append(then())
        self.afa.eps[state] = tuple(successors)
        return state

    def expr(self, expr: Expr) -> int:
        afa = self.afa
        if isinstance(expr, And | Or):
            state = afa.new(AND if isinstance(expr, And) else OR, self.owner)
            afa.eps[state] = tuple(self.expr(item) for item in expr.items)
            return state
        if isinstance(expr, Not):
            state = afa.new(NOT, self.owner)
            afa.eps[state] = (self.expr(expr.item),)
            return state
        if isinstance(expr, Const):
            state = afa.new(OR, self.owner)  # an OR with nothing never matches
            if expr.value:
                afa.predicate[state] = TRUE
            return state
        if isinstance(expr, Exists):
            return self.path(expr.path.steps, _true_leaf)
        if isinstance(expr, Compare):
            predicate = Predicate(expr.op, expr.value)

            def leaf(compiler: _Compiler) -> int:
                state = compiler.afa.new(OR, compiler.owner)
                compiler.afa.predicate[state] = predicate
                return state

            return self.path(expr.path.steps, leaf)
        raise TypeError(f"not a filter expression: {expr!r}")
