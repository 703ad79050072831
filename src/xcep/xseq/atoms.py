"""Step predicates as atoms decided a whole event batch at a time, for the path runtime.

A predicate such as ``[@company = 'DAGM']``, ``[price > 100 and not(@sold)]``
or ``[note/text() = 'ok']`` is a boolean formula over *atoms*: an existence
test or a comparison with a constant of one relative path — child element
steps, then optionally ``text()`` or ``@name``, or ``.`` alone. Each atom is
decided for every open element of a batch by numpy (the attributes, texts or
elements the path ends on, walked up to the element the step tests), the
atom's truths become bits of a *mask*, and the lazy DFA of ``paths.py`` moves
on (name, mask) instead of the name alone: the formula itself is evaluated
once per DFA transition it creates, never per element.

An atom on the element's own attributes is decided at its open tag; one that
reads below it (children, text, ``.``) is decided at its close, so a batch
that ends inside such an element is held back until the element closes (the
caller's business: ``subtree`` says which atoms need it).

Comparisons follow ``xcep.xseq.values`` (existential, numeric when both sides
read as numbers), specialized to the constant (``comparison``).
"""

from __future__ import annotations

import functools

import numpy as np

from xcep.events import ATTR, CLOSE, TEXT
from xcep.xseq import ast as A
from xcep.xseq.semantics import NotFast
from xcep.xseq.values import COMPARISONS, as_string, to_number

_ATTR, _TEXT, _CLOSE = int(ATTR), int(TEXT), int(CLOSE)
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
ELEMENT, TEXT_END = "element", "text"  # what an atom's path ends on (else "@name")


class Atom:
    """One existence test or comparison of a relative path, on elements named ``on``."""

    __slots__ = ("const", "end", "on", "op", "steps", "subtree", "test")

    def __init__(self, on, steps: tuple, end: str, op: str | None, const) -> None:
        self.on = on  # the name the predicated step tests, None for '*'
        self.steps = steps  # child element names (None: any) from that element
        self.end = end  # ELEMENT (the last step's element, or '.'), TEXT_END or '@name'
        self.op, self.const = op, const
        self.subtree = bool(steps) or not end.startswith("@")  # decided at the close
        self.test = None if op is None else comparison(op, const)

    def key(self) -> tuple:
        return (self.on, self.steps, self.end, self.op, self.const)

    def holds(self, values: list) -> np.ndarray:
        """For each value (a string or None), whether the comparison holds."""
        test = self.test
        return np.array([test(value or "") for value in values], dtype=bool)


def comparison(op: str, const):
    """``value -> compare_one(op, value, const)`` for string values, made short: with a
    constant that is not a number the comparison is of strings; with a number it is
    numeric when the value reads as one."""
    number = to_number(const)
    if number is None:
        text = as_string(const)
        return functools.partial(COMPARISONS[FLIPPED[op]], text)  # text op' value
    compare = COMPARISONS[op]

    def test(value: str) -> bool:
        try:
            found = float(value)
        except ValueError:
            return compare(value, as_string(const))
        if found - found != 0 or "_" in value:  # inf, nan, 1_000: not numbers here
            return compare(value, as_string(const))
        return compare(found, number)

    return test


class Guards:
    """The atoms of a query's step predicates, and each step's guard over their mask."""

    def __init__(self) -> None:
        self.atoms: list[Atom] = []
        self._ids: dict = {}

    def guard(self, step: A.Step):
        """A function of a mask: whether ``step``'s predicates all hold (None: no predicates)."""
        if not step.preds:
            return None
        on = None if step.name == A.WILDCARD else step.name
        tests = [self._compile(pred, on) for pred in step.preds]
        guard = tests[0] if len(tests) == 1 else _all(tests)
        guard.subtree = any(t.subtree for t in tests)
        return guard

    def _compile(self, cond, on):
        compile_ = _COMPILERS.get(cond.__class__)
        if compile_ is None:
            raise NotFast(f"the predicate [{A.to_text(cond)}]")
        return compile_(self, cond, on)

    def _connective(self, cond, on):
        if cond.__class__ is A.Not:
            inner = self._compile(cond.arg, on)
            test = _not(inner)
            test.subtree = inner.subtree
            return test
        left, right = self._compile(cond.left, on), self._compile(cond.right, on)
        test = (_and if cond.__class__ is A.And else _or)(left, right)
        test.subtree = left.subtree or right.subtree
        return test

    def _exists(self, cond: A.RelPath, on):
        return self._atom(on, cond.path, None, None, cond)

    def _compare(self, cond: A.Compare, on):
        left, right, op = cond.left, cond.right, cond.op
        if left.__class__ is A.Const and right.__class__ is A.RelPath:
            left, right, op = right, left, FLIPPED[op]
        if left.__class__ is not A.RelPath or right.__class__ is not A.Const:
            raise NotFast(f"the predicate [{A.to_text(cond)}]")
        return self._atom(on, left.path, op, right.value, cond)

    def _atom(self, on, path, op, const, cond):
        steps, end = relative_path(path, cond)
        atom = Atom(on, steps, end, op, const)
        index = self._ids.get(atom.key())
        if index is None:
            index = self._ids[atom.key()] = len(self.atoms)
            self.atoms.append(atom)
        bit = 1 << index

        def test(mask: int) -> bool:
            return bool(mask & bit)

        test.subtree = atom.subtree
        return test


_COMPILERS = {
    A.And: Guards._connective,
    A.Or: Guards._connective,
    A.Not: Guards._connective,
    A.RelPath: Guards._exists,
    A.Compare: Guards._compare,
}


def _all(tests: list):
    return lambda mask: all(test(mask) for test in tests)


def _not(test):
    return lambda mask: not test(mask)


def _and(left, right):
    return lambda mask: left(mask) and right(mask)


def _or(left, right):
    return lambda mask: left(mask) or right(mask)


def relative_path(path, cond) -> tuple:
    """(child element names, end) of a predicate's relative path, or NotFast."""
    items = list(path.items) if isinstance(path, A.Seq) else [path]
    if len(items) == 1 and _is(items[0], A.SELF, A.NODE):
        return (), ELEMENT
    end = ELEMENT
    last = items[-1]
    if _is(last, A.CHILD, A.TEXT):
        end, items = TEXT_END, items[:-1]
    elif _is(last, A.ATTRIBUTE, A.ELEMENT) and last.name != A.WILDCARD:
        end, items = "@" + last.name, items[:-1]
    if not all(_is(item, A.CHILD, A.ELEMENT) and not item.var for item in items):
        raise NotFast(f"the predicate [{A.to_text(cond)}]")
    return tuple(None if s.name == A.WILDCARD else s.name for s in items), end


def _is(step, axis: str, kind: str) -> bool:
    return isinstance(step, A.Step) and step.axis == axis and step.kind == kind and not step.preds


def masks(atoms: list[Atom], batch, arrays, opens, parents) -> np.ndarray:
    """The mask of every open element of ``batch``: bit i set when ``atoms[i]`` holds on it.
    ``arrays`` = (kinds, depths, names) as numpy; ``parents[j]`` = the position in ``opens``
    of open j's parent (-1: it opened in an earlier batch)."""
    mask = np.zeros(len(opens), dtype=np.int64)
    for index, atom in enumerate(atoms):
        owners, keep, values = reach(atom, batch, arrays, opens, parents, atom.op is not None)
        if values is not None:
            keep &= atom.holds(values)
        mask[owners[keep]] |= 1 << index
    return mask


def reach(path, batch, arrays, opens, parents, with_values: bool) -> tuple:
    """The nodes ``path`` (an ``Atom`` or a ``Field``: ``on``, ``steps``, ``end``) ends on
    in ``batch``: for each, the position in ``opens`` of the element the path starts from
    (``owners``), whether it is reached (``keep``), and (``with_values``) its value."""
    kinds, depths, names = arrays
    open_names = names[opens]
    symbols = batch.symbols
    ids = [None if s is None else symbols.get(s) for s in path.steps]
    on = None if path.on is None else symbols.get(path.on)
    end = path.end
    values = None
    if (
        not len(opens)
        or (path.on is not None and on is None)
        or any(s is not None and i is None for s, i in zip(path.steps, ids, strict=True))
        or (end.startswith("@") and symbols.get(end[1:]) is None)
    ):  # a name the stream never had: no element has the path
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.astype(bool), [] if with_values else None
    if end.startswith("@"):
        found = np.flatnonzero((kinds == _ATTR) & (names == symbols.get(end[1:])))
        owners = np.searchsorted(opens, found) - 1  # an attribute follows its open
        values = _values(batch.values, found) if with_values else None
    elif end == TEXT_END:
        found = np.flatnonzero(kinds == _TEXT)
        owners = _owner(opens, depths, found)
        values = _values(batch.values, found) if with_values else None
    else:  # the elements themselves: the last step's, or the predicated one (.)
        owners = _named(open_names, ids[-1] if ids else on)
        values = string_values(batch, kinds, opens[owners]) if with_values else None
    keep = owners >= 0
    for name in reversed(ids):  # from the owner up to the element the path starts from
        owners = np.where(keep, owners, 0)
        if name is not None:
            keep &= open_names[owners] == name
        owners = np.where(keep, parents[owners], -1)
        keep &= owners >= 0
    if on is not None:
        keep &= open_names[np.maximum(owners, 0)] == on
    return owners, keep, values


def _named(open_names: np.ndarray, name) -> np.ndarray:
    return np.arange(len(open_names)) if name is None else np.flatnonzero(open_names == name)


def _owner(opens: np.ndarray, depths: np.ndarray, found: np.ndarray) -> np.ndarray:
    """For each text event, the position in ``opens`` of its parent (-1: an earlier batch)."""
    owner = np.searchsorted(opens, found) - 1  # the last open before it: parent, or a
    done = owner >= 0  # sibling's descendant that closed; walk up to depth - 1
    owner = np.where(done, owner, 0)
    want = depths[found] - 1
    at = depths[opens[owner]]
    wrong = done & (at != want)
    if wrong.any():  # after a closed sibling: the last open at the parent's depth
        open_depths = depths[opens]
        for d in np.unique(want[wrong]).tolist():
            level = np.flatnonzero(open_depths == d)
            mine = np.flatnonzero(wrong & (want == d))
            spot = np.searchsorted(opens[level], found[mine]) - 1
            owner[mine] = np.where(spot >= 0, level[np.maximum(spot, 0)], -1)
    return np.where(done, owner, -1)


def _values(values: list, found: np.ndarray) -> list:
    return [values[i] for i in found.tolist()]


def string_values(batch, kinds: np.ndarray, at: np.ndarray) -> list:
    """The string value of the elements opened at event positions ``at`` (closed in the
    batch): their descendant texts, joined. A leaf is read without a loop."""
    values, size = batch.values, len(kinds)
    out = [""] * len(at)
    nxt = np.minimum(at + 1, size - 1)
    after = np.minimum(at + 2, size - 1)
    leaf = (kinds[nxt] == _TEXT) & (kinds[after] == _CLOSE) & (at + 2 < size)
    for j, i in zip(np.flatnonzero(leaf).tolist(), at[leaf].tolist(), strict=True):
        out[j] = values[i + 1] or ""
    empty = kinds[nxt] == _CLOSE
    for j in np.flatnonzero(~leaf & ~empty).tolist():
        out[j] = _joined_text(values, kinds, int(at[j]))
    return out


def _joined_text(values: list, kinds: np.ndarray, start: int) -> str:
    parts, depth = [], 0
    for i in range(start + 1, len(kinds)):
        kind = kinds[i]
        if kind == _TEXT:
            parts.append(values[i] or "")
        elif kind == _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif kind != _ATTR:
            depth += 1
    return "".join(parts)
