"""A counting matcher: the baseline of content-based publish/subscribe (issue 20).

The counting algorithm of Siena- and Gryphon-style matchers (and the leaf level
of BE-Tree, Sadoghi & Jacobsen 2011), for XPush's subscription filters
``/message[formula]`` (or ``/json/message[formula]``), the formula an
and/or/not of atomic predicates on child paths (``name = 'x'``,
``profile/@income > 5000``, ``starts-with(…)``, ``contains(…)``, a path that
exists):

- compiling: every distinct atom gets an id and an entry in an index per
  (message name, path) — equality by dictionary (strings, and numbers by
  value), ranges by sorted constants, ``starts-with`` by prefix, the rest
  (``!=``, ``contains``) in a list tested one by one; each atom lists the
  filters that use it;
- matching a message: lxml parses it; each node's string value is looked up in
  its path's index (the satisfied atoms), and every filter that uses a
  satisfied atom — or whose formula can hold with none (a ``not`` at the top) —
  has its formula evaluated on the satisfied set.

Filters of other shapes (``//``, ``*``, predicates above the message's
element, predicates in paths) are counted as ``unsupported`` and left out. The answers are the
filters of ``xcep filter``'s: ``bench/xpush_families.py`` checks them against
lxml on a sample and reports this baseline's compile and matching rates.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from lxml import etree

from xcep.xpush.ast import ATTRIBUTE, CHILD, ELEMENT, TEXT, And, Compare, Const, Exists, Not, Or
from xcep.xpush.predicates import Predicate, xpath_number
from xcep.xpush.workload import compile_filter

RANGES = ("<", "<=", ">", ">=")


class CountingMatcher:
    def __init__(self, filters: dict) -> None:
        self.names: list = []  # filter number -> id
        self.formulas: list = []  # filter number -> its formula over atom ids
        self.atoms: dict = {}  # (message, labels, op, value) -> atom id
        self.users: list[list[int]] = []  # atom id -> the filters that use it
        self.index: dict = {}  # (message, labels) -> _PathIndex
        self.always: dict = {}  # message -> filters whose formula holds with no atom
        self.unsupported = 0
        for fid, text in filters.items():
            steps = compile_filter(text).steps
            number = len(self.formulas)
            try:
                message = _context(steps)
                formula = _And([self._formula(message, p, number) for p in steps[-1].predicates])
            except _Unsupported:
                self.unsupported += 1
                continue
            self.names.append(fid)
            self.formulas.append(formula)
            if formula.value(frozenset()):
                self.always.setdefault(message, []).append(number)
        for index in self.index.values():
            index.ready()
        self.contexts = sorted({message for message, _ in self.index} | set(self.always))

    def _formula(self, message: str, expr, number: int):
        if isinstance(expr, And):
            return _And([self._formula(message, e, number) for e in expr.items])
        if isinstance(expr, Or):
            return _Or([self._formula(message, e, number) for e in expr.items])
        if isinstance(expr, Not):
            return _Not(self._formula(message, expr.item, number))
        if isinstance(expr, Const):
            return _Const(expr.value)
        if isinstance(expr, Exists | Compare):
            labels = _labels(expr.path)
            op, value = ("exists", None) if isinstance(expr, Exists) else (expr.op, expr.value)
            key = (message, labels, op, value)
            atom = self.atoms.get(key)
            if atom is None:
                atom = self.atoms[key] = len(self.users)
                self.users.append([])
                index = self.index.get((message, labels))
                if index is None:
                    index = self.index[(message, labels)] = _PathIndex()
                index.add(op, value, atom)
            if not self.users[atom] or self.users[atom][-1] != number:
                self.users[atom].append(number)
            return _Atom(atom)
        raise _Unsupported

    def match(self, document: bytes) -> list:
        """The ids of the filters that match one message."""
        root = etree.fromstring(document)
        matched: set = set()
        for message in self.contexts:
            elements = [root] if root.tag == message[0] else []
            for name in message[1:]:
                elements = [c for e in elements for c in e if c.tag == name]
            for element in elements:  # each decides the filters on its own
                matched.update(self._match(message, element))
        return [self.names[n] for n in sorted(matched)]

    def _match(self, message: tuple, element) -> list[int]:
        satisfied: set = set()
        for labels, value in _nodes(element):
            index = self.index.get((message, labels))
            if index is not None:
                index.satisfied(value, satisfied)
        users, formulas = self.users, self.formulas
        touched = set(self.always.get(message, ()))
        for atom in satisfied:
            touched.update(users[atom])
        found = frozenset(satisfied)
        return [n for n in touched if formulas[n].value(found)]


class _Unsupported(Exception):
    pass


def _context(steps) -> tuple:
    """The names down to the element the predicates are on (``/json/person[…]``)."""
    if any(s.axis != CHILD or s.test != ELEMENT or s.name == "*" for s in steps):
        raise _Unsupported
    if any(s.predicates for s in steps[:-1]):
        raise _Unsupported
    return tuple(s.name for s in steps)


def _labels(path) -> tuple:
    labels = []
    for step in path.steps:
        if step.axis != CHILD or step.predicates or step.name == "*":
            raise _Unsupported
        if step.test == ELEMENT:
            labels.append(step.name)
        elif step.test == ATTRIBUTE:
            labels.append("@" + step.name)
        elif step.test == TEXT:
            labels.append("#text")
        else:
            raise _Unsupported
    return tuple(labels)


def _nodes(root):
    """(labels below the message, string value) of every element, attribute and text."""
    todo = [(root, ())]
    while todo:
        element, labels = todo.pop()
        for name, value in element.attrib.items():
            yield (*labels, "@" + name), value
        for child in element:
            if isinstance(child.tag, str):
                here = (*labels, child.tag)
                yield here, "".join(child.itertext())
                todo.append((child, here))
        texts = [element.text] + [c.tail for c in element]
        for text in texts:
            if text:
                yield (*labels, "#text"), text


class _PathIndex:
    """One path's atoms: which hold on a value, without testing each."""

    def __init__(self) -> None:
        self.exists: list = []
        self.equal_string: dict = {}
        self.equal_number: dict = {}
        self.ranges: dict = {op: [] for op in RANGES}  # op -> [(constant, atom)], sorted
        self.prefixes: dict = {}  # starts-with constant -> atoms
        self.others: list = []  # (Predicate, atom): != and contains, tested one by one

    def add(self, op: str, value, atom: int) -> None:
        if op == "exists":
            self.exists.append(atom)
        elif op == "=" and isinstance(value, str):
            self.equal_string.setdefault(value, []).append(atom)
        elif op == "=":
            self.equal_number.setdefault(value, []).append(atom)
        elif op in RANGES:
            number = value if isinstance(value, float) else xpath_number(value)
            self.ranges[op].append((number, atom))
        elif op == "starts-with":
            self.prefixes.setdefault(value, []).append(atom)
        else:
            self.others.append((Predicate(op, value), atom))

    def ready(self) -> None:
        self.cuts = {}
        for op, entries in self.ranges.items():
            entries.sort(key=lambda e: e[0])
            self.cuts[op] = [c for c, _ in entries]
        self.lengths = sorted({len(p) for p in self.prefixes})

    def satisfied(self, value: str, out: set) -> None:
        out.update(self.exists)
        out.update(self.equal_string.get(value, ()))
        number = xpath_number(value)
        if number == number:  # not NaN: numeric comparisons can hold
            out.update(self.equal_number.get(number, ()))
            for op, cut in self.cuts.items():
                if not cut:
                    continue
                entries = self.ranges[op]
                if op == "<":  # x < c
                    chosen = entries[bisect_right(cut, number) :]
                elif op == "<=":
                    chosen = entries[bisect_left(cut, number) :]
                elif op == ">":
                    chosen = entries[: bisect_left(cut, number)]
                else:
                    chosen = entries[: bisect_right(cut, number)]
                out.update(atom for _, atom in chosen)
        for length in self.lengths:
            if length > len(value):
                break
            out.update(self.prefixes.get(value[:length], ()))
        for predicate, atom in self.others:
            if predicate.holds(value):
                out.add(atom)


class _Atom:
    __slots__ = ("atom",)

    def __init__(self, atom: int) -> None:
        self.atom = atom

    def value(self, satisfied) -> bool:
        return self.atom in satisfied


class _And:
    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items

    def value(self, satisfied) -> bool:
        return all(item.value(satisfied) for item in self.items)


class _Or(_And):
    def value(self, satisfied) -> bool:
        return any(item.value(satisfied) for item in self.items)


class _Not:
    __slots__ = ("item",)

    def __init__(self, item) -> None:
        self.item = item

    def value(self, satisfied) -> bool:
        return not self.item.value(satisfied)


class _Const:
    __slots__ = ("truth",)

    def __init__(self, truth: bool) -> None:
        self.truth = truth

    def value(self, satisfied) -> bool:
        return self.truth
