"""The per-match conditions of a template's member queries, decided together.

Members of a template (queries with the same path and other constants) often
differ only in thresholds: ``$A/current/text() > 40``, ``… > 75``, ``… > 120``.
Checking each member's comparison on every match costs one comparison per
member. Here the comparisons of a value with a numeric constant are indexed, as
XPush indexes atomic predicates: per (value expression, operator) the
constants are sorted, and one match's value selects the passing members by
binary search (``=`` by a dictionary). Other conjuncts are checked per member.

The value expressions are the members' interned references, so ``values``
reads each once per match (``make_env(memo=True)``). A value that does not
read as a number compares as a string (docs/xseq.md, comparisons): the index
then falls back to checking each member's conjunct.
"""

from __future__ import annotations

import bisect
from collections import Counter

from xcep.xseq import ast as A
from xcep.xseq.evaluate import holds, values
from xcep.xseq.values import to_number

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


class MemberConditions:
    """``decide(env)``: the slots of the members whose conditions hold on a match."""

    def __init__(self) -> None:
        self.members: dict = {}  # slot -> [conjunct]
        self._index = None

    def set(self, slot: int, conjuncts: list) -> None:
        if conjuncts:
            self.members[slot] = list(conjuncts)
        else:
            self.members.pop(slot, None)
        self._index = None

    def drop(self, slot: int) -> None:
        self.members.pop(slot, None)
        self._index = None

    def decide(self, env) -> set:
        if self._index is None:
            self._index = _Index(self.members)
        return self._index.decide(env)


class _Index:
    def __init__(self, members: dict) -> None:
        self.ranges: dict = {}  # (expression, op) -> sorted [(constant, slot, conjunct)]
        self.equal: dict = {}  # expression -> {constant: [(slot, conjunct)]}
        self.needed: dict = {}  # slot -> the number of its indexed conjuncts
        self.others: list = []  # (slot, [conjuncts checked one by one])
        for slot, conjuncts in members.items():
            rest = []
            for conjunct in conjuncts:
                found = _threshold(conjunct.cond)
                if found is None:
                    rest.append(conjunct)
                    continue
                expr, op, constant = found
                self.needed[slot] = self.needed.get(slot, 0) + 1
                if op == "=":
                    self.equal.setdefault(expr, {}).setdefault(constant, []).append(
                        (slot, conjunct)
                    )
                else:
                    self.ranges.setdefault((expr, op), []).append((constant, slot, conjunct))
            self.others.append((slot, rest))
        for entries in self.ranges.values():
            entries.sort(key=lambda e: e[0])
        self.constants = {key: [e[0] for e in entries] for key, entries in self.ranges.items()}

    def decide(self, env) -> set:
        held: Counter = Counter()
        for (expr, op), entries in self.ranges.items():
            numbers = _numbers(values(expr, None, env))
            if numbers is None:  # strings: each member's comparison as written
                held.update(s for _, s, c in entries if holds(c.cond, None, env))
            elif numbers:
                cut = self.constants[(expr, op)]
                if op == ">":  # some value > c: c < max
                    chosen = entries[: bisect.bisect_left(cut, max(numbers))]
                elif op == ">=":
                    chosen = entries[: bisect.bisect_right(cut, max(numbers))]
                elif op == "<":  # some value < c: c > min
                    chosen = entries[bisect.bisect_right(cut, min(numbers)) :]
                else:
                    chosen = entries[bisect.bisect_left(cut, min(numbers)) :]
                held.update(s for _, s, _ in chosen)
        for expr, by_constant in self.equal.items():
            numbers = _numbers(values(expr, None, env))
            if numbers is None:
                held.update(
                    s
                    for group in by_constant.values()
                    for s, c in group
                    if holds(c.cond, None, env)
                )
            else:
                for number in set(numbers):
                    held.update(s for s, _ in by_constant.get(number, ()))
        return {
            slot
            for slot, rest in self.others
            if held[slot] == self.needed.get(slot, 0)
            and all(holds(c.cond, None, env) for c in rest)
        }


def _numbers(found: list):
    """The values as numbers; [] for none; None when one does not read as a number."""
    numbers = []
    for value in found:
        number = value if isinstance(value, float | int) else to_number(value)
        if number is None:
            return None
        numbers.append(number)
    return numbers


def _threshold(cond):
    """(value expression, op, number) for ``expr op number`` or ``number op expr`` where
    the expression reads one variable reference; None otherwise."""
    if not isinstance(cond, A.Compare) or cond.op not in _FLIP:
        return None
    for expr, const, op in ((cond.left, cond.right, cond.op), (cond.right, cond.left, None)):
        if (
            isinstance(const, A.Const)
            and isinstance(const.value, float | int)
            and isinstance(expr, A.VarRef)
        ):
            return expr, op or _FLIP[cond.op], float(const.value)
    return None
