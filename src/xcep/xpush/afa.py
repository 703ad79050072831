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

**Common subexpressions are shared.** A state's meaning ("matches node x")
depends only on the sub-filter it stands for, so equal sub-filters of
different filters get one state (hash-consing, children first). Every filter
that ends in ``/emailaddress`` shares that state, every ``price > 100`` one
leaf: the machine's state sets stay small however many filters there are.
For early notification each filter's first branching state is kept its own
(keyed by the whole filter), so that reaching it proves that filter — and
the filters equal to it — and no other.

ε-successors are built before their state, so they have smaller numbers:
evaluating states in increasing order decides successors first.
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
    initial: dict[int, int] = field(default_factory=dict)  # filter number → initial state
    early: dict[int, int] = field(default_factory=dict)  # filter number → first branching state
    shared: dict[tuple, int] = field(default_factory=dict)  # structural key → state

    def __len__(self) -> int:
        return len(self.kind)

    def state(self, key: tuple | None, kind: int, eps=(), label=None, target=None, predicate=None):
        """The state for ``key`` (a new one when unseen, or when ``key`` is None)."""
        if key is not None:
            found = self.shared.get(key)
            if found is not None:
                return found
        self.kind.append(kind)
        self.eps.append(tuple(eps))
        self.label.append(label)
        self.target.append(target)
        self.predicate.append(predicate)
        state = len(self.kind) - 1
        if key is not None:
            self.shared[key] = state
        return state

    def add_filter(self, number: int, path: Path, unique_early: bool = False) -> int:
        """Compile one (rewritten, ``..``-free) filter; returns its initial state."""
        compiler = _Compiler(self, ("early", path) if unique_early else None)
        state = compiler.path(path.steps, _true_leaf, main=True)
        self.initial[number] = state
        if compiler.early is not None:
            self.early[number] = compiler.early
        return state


def _true_leaf(compiler: _Compiler, unique: bool = False) -> int:
    key = compiler.owner if unique else ("true",)
    return compiler.afa.state(key, OR, predicate=TRUE)


class _Compiler:
    def __init__(self, afa: AFA, owner: tuple | None) -> None:
        self.afa = afa
        # the key of the filter's first branching state when it must be its own
        # (equal filters share it: they are proven together)
        self.owner = owner
        self.early: int | None = None

    def _unique(self, main: bool) -> bool:
        return main and self.owner is not None and self.early is None

    def path(self, steps: tuple[Step, ...], final, main: bool = False) -> int:
        """A state matching node x iff ``steps`` from x reach a node matched by ``final``."""
        if not steps:
            if self._unique(main):
                self.early = final(self, True)
                return self.early
            return final(self)
        step, rest = steps[0], steps[1:]
        inner = self.step(step, rest, final, main)
        if step.axis != DESCENDANT:
            return inner
        key, eps = ("loop", inner), (inner,)
        if step.test == SELF:  # //. is descendant-or-self::node(): text nodes too
            text = self.afa.state(("step", "#text", inner), OR, label="#text", target=inner)
            key, eps = ("loop-or-text", inner), (inner, text)
        loop = self.afa.state(key, OR, eps=eps, label="*")
        self.afa.target[loop] = loop
        return loop

    def step(self, step: Step, rest: tuple[Step, ...], final, main: bool) -> int:
        if step.test == SELF:
            return self.conjunction(step.predicates, lambda: self.path(rest, final, main), main)
        if step.test not in (ELEMENT, ATTRIBUTE, TEXT):
            raise ValueError(f"cannot compile a {step.test} step (rewrite it first)")
        target = self.conjunction(step.predicates, lambda: self.path(rest, final, main), main)
        return self.afa.state(("step", step.label, target), OR, label=step.label, target=target)

    def conjunction(self, predicates: tuple[Expr, ...], then, main: bool = False) -> int:
        if not predicates:
            return then()
        unique = self._unique(main)
        if unique:
            self.early = -1  # claimed: the states inside are ordinary
        successors = [self.expr(q) for q in predicates]
        successors.append(then())
        # `x and true()` is x: leaves that match every node add nothing
        successors = tuple(sorted({t for t in successors if self.afa.predicate[t] is not TRUE}))
        if unique:  # (with nothing left to check, the filter's own true leaf)
            if successors:
                self.early = self.afa.state(self.owner, AND, eps=successors)
            else:
                self.early = _true_leaf(self, unique=True)
            return self.early
        if not successors:
            return _true_leaf(self)
        if len(successors) == 1:
            return successors[0]
        return self.afa.state(("and", successors), AND, eps=successors)

    def expr(self, expr: Expr) -> int:
        afa = self.afa
        if isinstance(expr, And | Or):
            kind = AND if isinstance(expr, And) else OR
            items = tuple(sorted({self.expr(item) for item in expr.items}))
            if kind == AND:
                items = tuple(t for t in items if afa.predicate[t] is not TRUE)
            elif any(afa.predicate[t] is TRUE for t in items):
                return _true_leaf(self)
            if len(items) == 1:
                return items[0]
            if not items:
                return _true_leaf(self)
            return afa.state(("and" if kind == AND else "or", items), kind, eps=items)
        if isinstance(expr, Not):
            item = self.expr(expr.item)
            return afa.state(("not", item), NOT, eps=(item,))
        if isinstance(expr, Const):
            if expr.value:
                return _true_leaf(self)
            return afa.state(("false",), OR)  # an OR with nothing never matches
        if isinstance(expr, Exists):
            return self.path(expr.path.steps, _true_leaf)
        if isinstance(expr, Compare):
            predicate = Predicate(expr.op, expr.value)

            def leaf(compiler: _Compiler, unique: bool = False) -> int:
                return compiler.afa.state(("leaf", predicate), OR, predicate=predicate)

            return self.path(expr.path.steps, leaf)
        raise TypeError(f"not a filter expression: {expr!r}")


def describe(afa: AFA, state: int, _memo: dict | None = None) -> str:
    """A state as the sub-filter it stands for, in filter syntax (for traces and tests)."""
    memo = {} if _memo is None else _memo
    if state in memo:
        return memo[state]
    kind, eps, label, predicate = (
        afa.kind[state],
        afa.eps[state],
        afa.label[state],
        afa.predicate[state],
    )
    if label is not None and afa.target[state] == state:  # a // loop
        text = "//" + describe(afa, eps[0], memo).lstrip("/")
    elif label is not None:
        head = {"#text": "text()"}.get(label, label)
        target = afa.target[state]
        rest = describe(afa, target, memo)
        if afa.predicate[target] is TRUE:
            text = head
        elif isinstance(afa.predicate[target], Predicate):
            text = f"{head} {rest}"
        elif afa.kind[target] == AND:
            text = head + rest
        else:
            text = f"{head}/{rest}".replace("/[", "[")
    elif predicate is TRUE:
        text = "true()"
    elif isinstance(predicate, Predicate):
        text = str(predicate)
    elif kind == NOT:
        text = f"not({describe(afa, eps[0], memo)})"
    elif not eps:
        text = "false()"
    else:
        parts = []
        for t in eps:
            part = describe(afa, t, memo)
            inner = afa.kind[t] in (AND, OR) and not afa.label[t] and part.startswith("[")
            parts.append(part[1:-1] if inner else part)
        word = " and " if kind == AND else " or "
        text = "[" + word.join(parts) + "]"
    memo[state] = text
    return text
