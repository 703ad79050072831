"""Atomic predicates on data values, and the shared index that finds the true ones.

Comparison rules are XPath 1.0's, for a node value ``v`` (a string) and a constant:

- ``=`` and ``!=`` with a *string* constant compare strings exactly;
- ``=`` and ``!=`` with a *number* constant compare ``number(v)`` with it;
- ``<``, ``<=``, ``>``, ``>=`` always compare numbers: ``number(v)`` with
  ``number(constant)``;
- ``number(v)`` is the XPath number of the string: optional whitespace, an
  optional ``-``, digits with an optional fraction; anything else is NaN.
  NaN compares false with everything, except that ``NaN != x`` is true;
- ``starts-with(path, s)`` and ``contains(path, s)`` test the string value.

The index answers "which predicates hold on v" without looking at each
predicate: hashing for string and numeric equality, sorted constants with
binary search for ranges, a prefix trie for ``starts-with`` and an
Aho–Corasick automaton for ``contains``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, partial

from xcep.dicts import hashed_dict

# XPath 1.0's Number, between XML white space (ASCII digits only: a full-width or
# Arabic-Indic digit is not a digit of XPath, nor NBSP or \x1c white space)
_NUMBER = re.compile(r"[ \t\r\n]*(-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))[ \t\r\n]*\Z")
NAN = math.nan


def xpath_number(value: str) -> float:
    """XPath 1.0 ``number()`` of a string."""
    match = _NUMBER.match(value)
    return float(match.group(1)) if match else NAN


@dataclass(frozen=True, slots=True)
class Predicate:
    op: str  # = != < <= > >= starts-with contains
    value: str | float

    @property
    def numeric(self) -> bool:
        return self.op in ("<", "<=", ">", ">=") or (
            self.op in ("=", "!=") and isinstance(self.value, float)
        )

    def number(self) -> float:
        return self.value if isinstance(self.value, float) else xpath_number(self.value)

    def holds(self, value: str) -> bool:
        """The obviously correct test (the index must agree with it)."""
        op = self.op
        if op == "starts-with":
            return value.startswith(self.value)
        if op == "contains":
            return self.value in value
        if not self.numeric:
            return (value == self.value) == (op == "=")
        x, c = xpath_number(value), self.number()
        return {
            "=": x == c,
            "!=": x != c,
            "<": x < c,
            "<=": x <= c,
            ">": x > c,
            ">=": x >= c,
        }[op]

    def __str__(self) -> str:
        value = repr(self.value) if isinstance(self.value, str) else f"{self.value:g}"
        return f"{self.op} {value}"


class _Trie:
    """Patterns in a trie: ``prefixes_of(text)`` gives those that start ``text``."""

    def __init__(self, patterns: dict[str, list[int]]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.ends: list[list[int]] = [[]]
        for pattern, states in patterns.items():
            node = 0
            for ch in pattern:
                nxt = self.goto[node].get(ch)
                if nxt is None:
                    nxt = len(self.goto)
                    self.goto[node][ch] = nxt
                    self.goto.append({})
                    self.ends.append([])
                node = nxt
            self.ends[node] = self.ends[node] + states

    def prefixes_of(self, text: str) -> set[int]:
        found = set(self.ends[0])
        node = 0
        for ch in text:
            node = self.goto[node].get(ch)
            if node is None:
                break
            found.update(self.ends[node])
        return found


class _AhoCorasick(_Trie):
    """All patterns occurring anywhere in a text, in one pass over the text."""

    def __init__(self, patterns: dict[str, list[int]]) -> None:
        super().__init__(patterns)
        self.fail = [0] * len(self.goto)
        self.out = [list(e) for e in self.ends]
        queue = deque(self.goto[0].values())
        while queue:
            node = queue.popleft()
            for ch, child in self.goto[node].items():
                queue.append(child)
                f = self.fail[node]
                while f and ch not in self.goto[f]:
                    f = self.fail[f]
                target = self.goto[f].get(ch, 0)
                self.fail[child] = target if target != child else 0
                self.out[child] = self.out[child] + self.out[self.fail[child]]

    def search(self, text: str) -> set[int]:
        found = set(self.out[0])
        node = 0
        goto, fail, out = self.goto, self.fail, self.out
        for ch in text:
            while node and ch not in goto[node]:
                node = fail[node]
            node = goto[node].get(ch, 0)
            if out[node]:
                found.update(out[node])
        return found


class PredicateIndex:
    """Maps a value to the set of AFA states whose predicate holds on it."""

    def __init__(self, predicates: dict[int, Predicate]) -> None:
        self.predicates: dict[int, Predicate] | None = predicates
        values = predicates.values()
        self._index(list(predicates), [p.op for p in values], [p.value for p in values])

    @classmethod
    def of_tests(cls, states: list[int], ops: Iterable[str], values: Iterable) -> PredicateIndex:
        """The index of tests given as columns (states, their ops, their constants), with
        no ``Predicate`` made (the counted filters' value atoms, by the hundred thousand;
        no ``restricted`` then)."""
        index = cls.__new__(cls)
        index.predicates = None
        index._index(states, ops, values)
        return index

    def _index(self, states: list[int], ops: Iterable[str], values: Iterable) -> None:
        self.count = len(states)
        self.states = frozenset(states)
        self.string_eq: dict[str, list[int]] = hashed_dict(partial(defaultdict, list))
        self.string_ne: dict[str, list[int]] = hashed_dict(partial(defaultdict, list))
        self.number_eq: dict[float, list[int]] = defaultdict(list)
        self.number_ne: dict[float, list[int]] = defaultdict(list)
        self.all_string_ne: set[int] = set()
        self.all_number_ne: set[int] = set()
        ranges: dict[str, list[tuple[float, int]]] = defaultdict(list)
        prefixes: dict[str, list[int]] = defaultdict(list)
        infixes: dict[str, list[int]] = defaultdict(list)
        for state, op, value in zip(states, ops, values, strict=True):  # (100,000s: inline)
            if op == "starts-with":
                prefixes[value].append(state)
            elif op == "contains":
                infixes[value].append(state)
            elif type(value) is str and (op == "=" or op == "!="):  # not numeric
                (self.string_eq if op == "=" else self.string_ne)[value].append(state)
                if op == "!=":
                    self.all_string_ne.add(state)
            else:
                number = value if type(value) is float else xpath_number(value)
                if op == "!=":
                    self.all_number_ne.add(state)
                    self.number_ne[number].append(state)  # NaN keys never match: always true
                elif number == number:  # a NaN constant is never equal/ordered
                    if op == "=":
                        self.number_eq[number].append(state)
                    else:
                        ranges[op].append((number, state))
        ordered = {op: sorted(items) for op, items in ranges.items()}
        self.range_keys = {op: [c for c, _ in items] for op, items in ordered.items()}
        self.range_states = {op: [s for _, s in items] for op, items in ordered.items()}
        self.numeric = bool(self.number_eq or self.range_keys or self.all_number_ne)
        self.patterns = (prefixes, infixes)  # starts-with's and contains' (for the C twin)
        self.tests_text = bool(prefixes or infixes)

    @cached_property
    def prefixes(self) -> _Trie | None:
        """The starts-with constants in a trie (built when Python tests a value: the
        compiled core has its own)."""
        return _Trie(self.patterns[0]) if self.patterns[0] else None

    @cached_property
    def infixes(self) -> _AhoCorasick | None:
        return _AhoCorasick(self.patterns[1]) if self.patterns[1] else None

    def restricted(self, states) -> PredicateIndex:
        """The index of the predicates of ``states`` only (those enabled at a node)."""
        return PredicateIndex({s: self.predicates[s] for s in self.states.intersection(states)})

    def true_states(self, value: str) -> set[int]:
        """The states whose predicate holds on ``value``."""
        true: set[int] = set(self.string_eq.get(value, ()))
        if self.all_string_ne:
            true |= self.all_string_ne.difference(self.string_ne.get(value, ()))
        if self.numeric:
            x = xpath_number(value)
            if self.all_number_ne:
                true |= self.all_number_ne.difference(self.number_ne.get(x, ()))
            if not math.isnan(x):
                true.update(self.number_eq.get(x, ()))
                for op, keys in self.range_keys.items():
                    states = self.range_states[op]  # in the order of their constants
                    if op == "<":  # x < c: the constants above x
                        true.update(states[bisect_right(keys, x) :])
                    elif op == "<=":
                        true.update(states[bisect_left(keys, x) :])
                    elif op == ">":  # x > c: the constants below x
                        true.update(states[: bisect_left(keys, x)])
                    else:
                        true.update(states[: bisect_right(keys, x)])
        if self.tests_text:
            true |= self.text_states(value)
        return true

    def text_states(self, value: str) -> set[int]:
        """The states of ``starts-with`` and ``contains`` predicates that hold on ``value``."""
        true: set[int] = set()
        if self.prefixes is not None:
            true |= self.prefixes.prefixes_of(value)
        if self.infixes is not None:
            true |= self.infixes.search(value)
        return true

    def compiled(self, limit: int):
        """This index tested in C (``xcep.xpush._states.ValueIndex``, over states below
        ``limit``), or None when the compiled core is not built."""
        try:
            from xcep.xpush._states import TextMatcher, ValueIndex
        except ImportError:
            return None
        ranges = {op: (keys, self.range_states[op]) for op, keys in self.range_keys.items()}
        text = None
        if self.tests_text:
            prefixes, infixes = (
                {p.encode("utf-8", "surrogatepass"): states for p, states in patterns.items()}
                for patterns in self.patterns
            )
            text = TextMatcher(limit, prefixes, infixes)
        return ValueIndex(
            limit,
            self.string_eq,
            self.string_ne,
            self.all_string_ne,
            self.number_eq,
            self.number_ne,
            self.all_number_ne,
            ranges,
            text,
            xpath_number,
        )
