"""Many conjunctions of atomic comparisons, decided together (the counting algorithm).

Many queries that share a path differ in constants: ``transaction[@company =
'IBM' and @price > 98]``, ``… = 'ORCL' and @price > 101]``, a member's ``$A/current
> 40``. Testing each query's predicate on every node costs a comparison per query;
here the *atoms* — ``expression op constant``, ``op`` one of ``= < <= > >=`` —
are indexed by value, as content-based publish/subscribe matchers do (Siena's
and Gryphon's counting algorithm; BE-Tree's partitions, Sadoghi & Jacobsen 2011):

- keys whose conjunction has an equality on the most common expression are
  *partitioned* by its constant (a dictionary), each partition an index of
  their other atoms, recursively;
- the other keys' atoms are grouped by expression and operator with their
  constants sorted: a value selects the atoms it satisfies by binary search,
  and a key passes when every one of its atoms is satisfied (counted).

A node costs a lookup per expression and time proportional to what it
satisfies, not to the number of keys. Comparisons are XSeq's
(``xcep.xseq.values``): numeric when both sides read as numbers, else strings
by code point, existential over several values — so a numeric constant keeps
two sorted orders (as a number, and as XSeq writes it, for values that are not
numbers). Conjuncts that are not atoms are the caller's to check (``rest``).

>>> from xcep.xseq import ast as A
>>> price = A.RelPath(A.Step(A.ATTRIBUTE, A.ELEMENT, "price"))
>>> conjunctions = [[A.Compare(">", price, A.Const(float(c)))] for c in (10, 20, 30)]
>>> index = CountingIndex(conjunctions, attribute_atom)
>>> index.passing(lambda expr: ["25"])
[0, 1]
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from xcep.xseq import ast as A
from xcep.xseq.evaluate import attribute_name
from xcep.xseq.values import as_string, to_number

FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}  # c op e  ==  e FLIP[op] c

# an expression the index reads, an operator, a constant; or None: not an atom
AtomOf = Callable[[object], "tuple | None"]


def attribute_atom(cond):
    """``(@name, op, constant)`` for ``@name op constant`` (either way round); else None."""
    return _atom(cond, _is_attribute)


def reference_atom(cond):
    """``($X…, op, constant)`` for a comparison of a variable reference with a constant."""
    return _atom(cond, lambda expr: isinstance(expr, A.VarRef))


def _is_attribute(expr) -> bool:
    return attribute_name(expr) is not None


def _atom(cond, readable: Callable):
    if cond.__class__ is not A.Compare or cond.op not in FLIP:
        return None
    for expr, const, op in ((cond.left, cond.right, cond.op), (cond.right, cond.left, None)):
        if isinstance(const, A.Const) and _constant(const.value) and readable(expr):
            return expr, op or FLIP[cond.op], const.value
    return None


def _constant(value) -> bool:
    """A string, or a finite number (XSeq's constants)."""
    if isinstance(value, str):
        return True
    return isinstance(value, float | int) and to_number(float(value)) is not None


class CountingIndex:
    """``passing(read)``: the positions of the conjunctions whose atoms all hold.

    ``conjunctions[k]`` is a list of conditions; those ``atom_of`` recognizes are
    indexed, the others are ``rest[k]``, left to the caller. ``read(expr)`` gives an
    expression's values on the node at hand (a list, empty when it has none).
    """

    def __init__(self, conjunctions: Iterable[list], atom_of: AtomOf) -> None:
        atoms: dict = {}
        self.rest: list = []
        for position, conds in enumerate(conjunctions):
            found = [(cond, atom_of(cond)) for cond in conds]
            atoms[position] = [atom for _, atom in found if atom is not None]
            self.rest.append([cond for cond, atom in found if atom is None])
        self.atoms = sum(len(a) for a in atoms.values())
        self._root = _Node(atoms)

    def passing(self, read: Callable) -> list[int]:
        found = self._root.passing(read, {})
        found.sort()
        return found


class _Node:
    """Keys with their atoms: a partition by one expression's equality, the rest counted."""

    def __init__(self, atoms: dict) -> None:
        self.always: list = [k for k, own in atoms.items() if not own]
        self.expr = _most_equal(atoms)
        self.by_string: dict = {}  # partition: constant that is not a number -> _Node
        self.by_number: dict = {}  # partition: numeric constant -> _Node
        counted = {}
        if self.expr is not None:
            parts: dict = {}
            for key, own in atoms.items():
                equal = next((a for a in own if a[0] == self.expr and a[1] == "="), None)
                if equal is None:
                    counted[key] = own
                    continue
                rest = list(own)
                rest.remove(equal)
                parts.setdefault(_equality_key(equal[2]), {})[key] = rest
            for (numeric, constant), part in parts.items():
                (self.by_number if numeric else self.by_string)[constant] = _Node(part)
        else:
            counted = atoms
        self.need = {k: len(own) for k, own in counted.items() if own}
        self.groups: dict = {}  # expression -> _Atoms
        for key, own in counted.items():
            for expr, op, constant in own:
                group = self.groups.get(expr)
                if group is None:
                    group = self.groups[expr] = _Atoms()
                group.add(op, constant, key)
        for group in self.groups.values():
            group.ready()

    def passing(self, read: Callable, memo: dict) -> list:
        found = list(self.always)
        if self.expr is not None:
            for value in _read(read, self.expr, memo):
                part = self.by_string.get(as_string(value))
                if part is not None:
                    found += part.passing(read, memo)
                number = to_number(value)
                part = self.by_number.get(number) if number is not None else None
                if part is not None:
                    found += part.passing(read, memo)
            if len(found) > 1:
                found = list(dict.fromkeys(found))  # several values, one partition each
        need = self.need
        if need:
            counts: dict = {}
            for expr, group in self.groups.items():
                for keys in group.satisfied(_read(read, expr, memo)):
                    for key in keys:
                        counts[key] = counts.get(key, 0) + 1
            found += [k for k, n in counts.items() if n == need[k]]
        return found


def _read(read: Callable, expr, memo: dict) -> list:
    """``read(expr)``, once per expression object (by identity: hashing an expression
    walks its tree)."""
    found = memo.get(id(expr))
    if found is None:
        found = memo[id(expr)] = read(expr)
    return found


def _equality_key(constant) -> tuple:
    number = to_number(constant)
    return (True, number) if number is not None else (False, as_string(constant))


def _most_equal(atoms: dict):
    """The expression most keys compare with ``=`` (at least two of them), or None."""
    counts: dict = {}
    for own in atoms.values():
        for expr in {a[0] for a in own if a[1] == "="}:
            counts[expr] = counts.get(expr, 0) + 1
    best = max(counts, key=counts.get, default=None)
    return best if best is not None and counts[best] >= 2 else None


class _Atoms:
    """One expression's atoms not partitioned on: the keys each atom holds for.

    Each (operator, kind of constant) keeps its constants sorted, so that a value
    selects its satisfied atoms as a slice. A numeric constant's atom is in two
    orders (as a number, and as written); an atom is counted once per node,
    however many of the expression's values satisfy it.
    """

    def __init__(self) -> None:
        self.equal_string: dict = {}  # constant that is not a number -> keys
        self.equal_number: dict = {}  # number -> keys
        self.sorted: dict = {}  # (op, "number" | "numeral" | "string") -> ([constant], [keys])
        self._atoms: dict = {}  # (op, constant) -> keys: an atom's one list
        self._entries: dict = {}  # (op, kind) -> {constant: [keys of an atom]}

    def add(self, op: str, constant, key) -> None:
        number = to_number(constant)
        if op == "=":
            if number is None:
                self.equal_string.setdefault(as_string(constant), []).append(key)
            else:
                self.equal_number.setdefault(number, []).append(key)
            return
        keys = self._atoms.get((op, constant))
        if keys is not None:
            keys.append(key)
            return
        keys = self._atoms[(op, constant)] = [key]
        kinds = [("string", as_string(constant))] if number is None else []
        if number is not None:  # compared as a number with numbers, as written with others
            kinds = [("number", number), ("numeral", as_string(constant))]
        for kind, sort_key in kinds:
            self._entries.setdefault((op, kind), {}).setdefault(sort_key, []).append(keys)

    def ready(self) -> None:
        for kind, entries in self._entries.items():
            constants = sorted(entries)
            self.sorted[kind] = (constants, [entries[c] for c in constants])
        self._entries = {}
        self._atoms = {}

    def satisfied(self, found: list) -> list:
        """The key lists of the atoms some value in ``found`` satisfies, each once."""
        if not found:
            return []
        lists = []
        spans: dict = {}  # (op, kind) -> (low, high) of the union of the values' slices
        for value in found:
            text = as_string(value)
            number = to_number(value)
            keys = self.equal_string.get(text)
            if keys is not None:
                lists.append(keys)
            if number is not None:
                keys = self.equal_number.get(number)
                if keys is not None:
                    lists.append(keys)
            for (op, kind), (constants, _) in self.sorted.items():
                if kind == "number":
                    if number is None:
                        continue
                    probe = number
                elif kind == "numeral" and number is not None:
                    continue
                else:
                    probe = text
                low, high = _slice(op, constants, probe)
                if low < high:
                    span = spans.get((op, kind))
                    spans[(op, kind)] = (
                        (low, high) if span is None else (min(span[0], low), max(span[1], high))
                    )
        for kind, (low, high) in spans.items():
            for atoms in self.sorted[kind][1][low:high]:
                lists += atoms
        if len(found) > 1:  # an atom two values satisfy (as a number and as written) once
            lists = list({id(keys): keys for keys in lists}.values())
        return lists


def _slice(op: str, constants: list, value) -> tuple:
    """The positions of the sorted constants ``c`` with ``value op c``."""
    if op == ">":
        return 0, bisect.bisect_left(constants, value)
    if op == ">=":
        return 0, bisect.bisect_right(constants, value)
    if op == "<":
        return bisect.bisect_right(constants, value), len(constants)
    return bisect.bisect_left(constants, value), len(constants)
