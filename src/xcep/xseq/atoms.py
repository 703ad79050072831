"""Step predicates as atoms decided a whole event batch at a time, for the path runtime.

A predicate such as ``[@company = 'DAGM']``, ``[price > 100 and not(@sold)]``
or ``[note/text() = 'ok']`` is a boolean formula over *atoms*: an existence
test or a comparison with a constant of one relative path — child element
steps, then optionally ``text()`` or ``@name``, or ``.`` alone. The atoms that
compare one path are an *operand* (``Operand``): for every open element of a
batch, numpy finds the attributes, texts or elements the path ends on, walked up
to the element the step tests, and each value is *coded* once by where it falls
among the operand's constants (two binary searches, however many constants: a
thousand queries' thresholds on ``@price``). The lazy DFA of ``paths.py`` moves
on (name, codes) instead of the name alone; a code tells which atoms hold (a
*mask*), so the formula itself is evaluated once per DFA transition it
creates, never per element. Atoms of predicates nested in an atom's path
(``bidder[increase > 10]``) are decided first, one at a time, as bits of an
int64 mask (``masks``).

An atom on the element's own attributes is decided at its open tag; one that
reads below it (children, text, ``.``) is decided at its close, so a batch
that ends inside such an element is held back until the element closes (the
caller's business: ``subtree`` says which atoms need it).

Comparisons follow ``xcep.xseq.values`` (existential, numeric when both sides
read as numbers), specialized to the constant (``comparison``).
"""

from __future__ import annotations

import bisect
import functools
from itertools import repeat
from typing import NamedTuple

import numpy as np

from xcep.events import ATTR, CLOSE, TEXT
from xcep.xseq import ast as A
from xcep.xseq.semantics import NotFast
from xcep.xseq.values import COMPARISONS, as_string, to_number

try:
    from xcep.events._tokenizer import mapped as _mapped
    from xcep.events._tokenizer import number_places as _number_places
except ImportError:  # built without a C compiler
    _mapped = _number_places = None

_ATTR, _TEXT, _CLOSE = int(ATTR), int(TEXT), int(CLOSE)
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
MAX_INNER = 62  # atoms of nested predicates: the bits of an int64 mask
# what an atom's path ends on (else "@name"): an element, its text children, its texts
ELEMENT, TEXT_END, DEEP_TEXT = "element", "text", "//text"


class Atom:
    """One existence test or comparison of a relative path, on elements named ``on``."""

    __slots__ = ("const", "end", "on", "op", "steps", "subtree", "test")

    def __init__(self, on, steps: tuple, end: str, op: str | None, const) -> None:
        self.on = on  # the name the predicated step tests, None for '*'
        self.steps = steps  # PathSteps from that element down
        self.end = end  # ELEMENT (the last step's element, or '.'), TEXT_END, DEEP_TEXT, '@a'
        self.op, self.const = op, const
        self.subtree = bool(steps) or not end.startswith("@")  # decided at the close
        self.test = None if op is None else comparison(op, const)

    def key(self) -> tuple:
        steps = tuple((step.axis, step.name, step.text) for step in self.steps)
        return (self.on, steps, self.end, self.op, self.const)

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


class Operand:
    """The atoms that compare one relative path (``on``, ``steps``, ``end``), decided
    together: each value the path reaches is read once and coded by where it falls among
    the constants the atoms compare it with (``code``), an element's code is its value's
    (or, for several values, the set of their codes), and every atom's truth is read from
    a code (``truths``). A thousand thresholds on ``@price`` cost one read of the price
    and two binary searches, and a value's code tells the same truths as its value does:
    elements whose values differ but fall between the same constants share a code.

    A code is (numeric, a, b, e, c, d, f): ``numeric`` whether the value reads as a
    number; ``a``, ``b`` how many of the numeric constants the atoms order it against
    (``<``, ``>``, …) are below it and at most it — as numbers when it reads as one, else
    their strings as strings (XSeq's rule, ``values.py``); ``e`` which numeric constant
    it equals (for ``=`` and ``!=``, by the same rule; -1: none); ``c``, ``d``, ``f`` the
    same for the constants that are not numbers, always compared as strings. Code 0 is
    an element without a value; codes are numbered from 1 as they are first met."""

    __slots__ = (
        "_by_place",
        "_codes",
        "_equal_codes",
        "_keys",
        "_numeric",
        "_tables",
        "_truths",
        "atoms",
        "end",
        "memo",
        "on",
        "steps",
        "subtree",
        "values",
    )

    MEMO = 1 << 16  # values remembered with their codes (then started afresh)

    def __init__(self, atom: Atom) -> None:
        self.on, self.steps, self.end = atom.on, atom.steps, atom.end
        self.subtree = atom.subtree
        self.atoms: list = []  # (bit, op, const)
        self.values = False  # whether an atom compares the values (else: existence only)
        self._tables = None
        self._numeric = True  # whether a numeric constant is compared (``_constants``)
        self._equal_codes = None  # (string constant -> its code, the code of none): ``codes``
        self._by_place = None  # ``_places``: the codes of numbers by their place, or False
        self._codes: dict = {}  # a code's key -> its number
        self._keys: list = [None]  # a code's number -> its key (a tuple, or a frozenset)
        self.memo: dict = {}  # value -> its code
        self._truths: list = [0]  # a code's number -> the mask of the atoms that hold

    def add(self, atom: Atom, index: int) -> None:
        self.atoms.append((index, atom.op, atom.const))
        self.values = self.values or atom.op is not None
        self._tables = self._equal_codes = self._by_place = None

    def size(self) -> int:
        """The codes numbered so far, 0 included."""
        return len(self._keys)

    def _constants(self) -> tuple:
        """Sorted constants and lookup tables, and each comparison atom's place in them."""
        ordered_n, ordered_t, equal_n, equal_t, ordered_s, equal_s = (set() for _ in range(6))
        for _, op, const in self.atoms:
            if op is None:
                continue
            number = to_number(const)
            order = op not in ("=", "!=")
            if number is None:
                (ordered_s if order else equal_s).add(as_string(const))
            else:
                (ordered_n if order else equal_n).add(number)
                (ordered_t if order else equal_t).add(as_string(const))
        lists = [sorted(found) for found in (ordered_n, ordered_t, ordered_s)]
        equal = [{v: i for i, v in enumerate(sorted(f))} for f in (equal_n, equal_t, equal_s)]
        # what of a value its code needs: whether it reads as a number, and where it falls
        # among the numeric constants (none: the code leaves them out, no number is read)
        self._numeric = bool(ordered_n or equal_n)
        places = []
        for bit, op, const in self.atoms:
            if op is None:
                places.append((bit, None, None, None))
                continue
            number = to_number(const)
            text = as_string(const)
            if op in ("=", "!="):
                if number is None:
                    place = (None, equal[2][text])
                else:
                    place = (equal[0][number], equal[1][text])
            elif number is None:
                place = (None, bisect.bisect_left(lists[2], text))
            else:
                place = (
                    bisect.bisect_left(lists[0], number),
                    bisect.bisect_left(lists[1], text),
                )
            places.append((bit, op, number is None, place))
        self._tables = (lists, equal, places)
        return self._tables

    def code(self, value) -> int:
        """The number of ``value``'s code (a string; None reads as '')."""
        found = self.memo.get(value)
        if found is not None:
            return found
        lists, equal, _ = self._tables or self._constants()
        text = value or ""
        texts = self._text_parts(text, lists[2], equal[2])
        if not self._numeric:  # only constants that are no numbers: compared as strings
            key = (False, 0, 0, -1, *texts)
        else:  # a number among the numeric constants, else its text among their texts
            number = to_number(text)
            numeric = number is not None
            n_list, n_equal, n_key = (
                (lists[0], equal[0], number) if numeric else (lists[1], equal[1], text)
            )
            below, upto = bisect.bisect_left(n_list, n_key), bisect.bisect_right(n_list, n_key)
            key = (numeric, below, upto, n_equal.get(n_key, -1), *texts)
        found = self._number(key)
        if len(self.memo) >= self.MEMO:
            self.memo.clear()
        self.memo[value] = found
        return found

    @staticmethod
    def _text_parts(text: str, ordered: list, equal: dict) -> tuple:
        """The parts of a value's code for the constants that are no numbers."""
        if not ordered:
            return 0, 0, equal.get(text, -1)
        below, upto = bisect.bisect_left(ordered, text), bisect.bisect_right(ordered, text)
        return below, upto, equal.get(text, -1)

    def codes_at(self, values: list, at: np.ndarray) -> np.ndarray:
        """``codes`` of the batch's ``values`` at positions ``at`` (an attribute's or a
        text's), looked up in C: in the table of the constants where they are all strings
        compared for equality, else in the memo, the values it lacks coded by ``codes``."""
        equal = self._equal_table()
        if equal is not None:
            return mapped(values, at, *equal)
        by_place = self._places()
        if by_place:  # a number's code by its place among the numeric constants
            ordered, equals, table = by_place
            at = np.ascontiguousarray(at, dtype=np.int64)
            places = np.frombuffer(_number_places(values, at, ordered, equals), dtype=np.int64)
            found = np.where(places >= 0, table[np.maximum(places, 0)], -1)
        else:
            found = mapped(values, at, self.memo, -1)  # (codes are never negative)
        missing = np.flatnonzero(found < 0)
        if len(missing):
            found[missing] = made = self.codes([values[i] for i in at[missing].tolist()])
            if by_place:  # the places met for the first time: their codes kept
                placed = places[missing]
                table[placed[placed >= 0]] = made[placed >= 0]
        return found

    def _places(self):
        """Where every constant is a number (and some is): (the ordered comparisons'
        constants, the equalities', as sorted float64 bytes; the code of each place, -1
        while none was met), for ``_tokenizer.number_places``; else False. A number's
        code is where it falls among them (``code``: the strings' parts are the same for
        all), so its place tells its code with no memo."""
        if self._by_place is None:
            self._by_place = False
            lists, equal, _ = self._tables or self._constants()
            equals = sorted(equal[0])
            size = (2 * len(lists[0]) + 1) * (len(equals) + 1)
            numbers_only = self._numeric and not (lists[2] or equal[2])
            if _number_places is not None and numbers_only and size <= self.MEMO:
                ordered = np.array(lists[0], dtype=np.float64).tobytes()
                numbers = np.array(equals, dtype=np.float64).tobytes()
                self._by_place = (ordered, numbers, np.full(size, -1, dtype=np.int64))
        return self._by_place

    def _equal_table(self) -> tuple | None:
        """Where the constants are all strings compared for equality: ({text: the code of
        the one it equals}, the code of none), else None."""
        lists, equal, _ = self._tables or self._constants()
        if self._numeric or lists[2]:
            return None
        if self._equal_codes is None:
            found = {text: self._number((False, 0, 0, -1, 0, 0, i)) for text, i in equal[2].items()}
            if "" in found:  # an element without text reads as ''
                found[None] = found[""]
            self._equal_codes = (found, self._number((False, 0, 0, -1, 0, 0, -1)))
        return self._equal_codes

    def codes(self, values: list) -> np.ndarray:
        """``code`` of each of ``values``: where the constants are all strings compared for
        equality, the code of the one each value equals (or of none), looked up in C;
        else those met before from the memo, and the others made."""
        equal = self._equal_table()
        if equal is not None:
            by_text, other = equal
            return np.fromiter(map(by_text.get, values, repeat(other)), np.int64, len(values))
        memo = self.memo
        try:  # most values were met before
            return np.fromiter(map(memo.get, values), np.int64, len(values))
        except TypeError:  # (one met for the first time: None)
            pass
        new = set(values).difference(memo)  # coded once each, then all read from the memo
        if len(memo) + len(new) >= self.MEMO:
            memo.clear()
            new = set(values)
        if len(new) >= self.MEMO:  # more than the memo holds: one by one
            return np.fromiter(map(self.code, values), np.int64, len(values))
        for value in new:
            self.code(value)
        return np.fromiter(map(memo.get, values), np.int64, len(values))

    def code_of_set(self, codes) -> int:
        """The number of the code of an element with several values (their codes)."""
        return self._number(frozenset(codes))

    def _number(self, key) -> int:
        found = self._codes.get(key)
        if found is None:
            found = self._codes[key] = len(self._keys)
            self._keys.append(key)
            self._truths.append(None)
        return found

    def truths(self, code: int) -> int:
        """The mask (bits of ``Guards.atoms``) of the atoms that hold on an element whose
        code is ``code``: none for 0 (no value), existence tests for every other."""
        found = self._truths[code]
        if found is None:
            key = self._keys[code]
            if key.__class__ is frozenset:  # several values: an atom holds on any of them
                found = 0
                for one in key:
                    found |= self.truths(one)
            else:
                found = self._decide(key)
            self._truths[code] = found
        return found

    def _decide(self, key: tuple) -> int:
        numeric, n_below, n_upto, n_equal, s_below, s_upto, s_equal = key
        places = (self._tables or self._constants())[2]
        mask = 0
        for bit, op, text_const, place in places:
            if op is None:
                holds = True
            elif op in ("=", "!="):
                equal = place[1] == s_equal if text_const else place[not numeric] == n_equal
                holds = equal if op == "=" else not equal
            else:
                if text_const:
                    index, below, upto = place[1], s_below, s_upto
                else:
                    index, below, upto = place[0 if numeric else 1], n_below, n_upto
                holds = _ORDERED[op](index, below, upto)
            if holds:
                mask |= 1 << bit
        return mask


# value op constant, from the constant's place among the sorted constants (``index``) and
# how many constants are below the value and at most the value
_ORDERED = {
    ">": lambda index, below, upto: index < below,
    ">=": lambda index, below, upto: index < upto,
    "<": lambda index, below, upto: index >= upto,
    "<=": lambda index, below, upto: index >= below,
}


class Test(NamedTuple):
    """A predicate compiled: a Python expression over the mask ``m``, whether an atom of
    it reads the element's subtree (decided at its close), and, for a conjunction of
    atoms, the mask of their bits (it holds iff ``m & required == required``)."""

    text: str
    subtree: bool
    required: int | None = None


class Guards:
    """The atoms of a query's step predicates, and each step's guard over their mask."""

    def __init__(self) -> None:
        self.atoms: list[Atom] = []  # the steps' own predicates' atoms: bit i is atoms[i]
        self.inner: list[Atom] = []  # those of predicates nested in an atom's or field's path
        self.operands: list[Operand] = []  # the atoms by the path they compare (``Operand``)
        self._ids: dict = {}
        self._operands: dict = {}
        self._nesting = 0  # > 0 while a nested predicate compiles

    def guard(self, step: A.Step):
        """A function of a mask: whether ``step``'s predicates all hold (None: no predicates).
        It is one Python expression over the mask's bits (a DFA transition of many queries
        evaluates thousands of guards), made from the predicates' atoms and connectives."""
        if not step.preds:
            return None
        on = None if step.name == A.WILDCARD else step.name
        tests = [self._compile(pred, on) for pred in step.preds]
        text = " and ".join(f"({test.text})" for test in tests)
        guard = eval(f"lambda m: bool({text})", {})  # bit numbers and connectives only
        guard.subtree = any(test.subtree for test in tests)
        conjunction = all(test.required is not None for test in tests)
        guard.required = _or_all(test.required for test in tests) if conjunction else None
        return guard

    def _compile(self, cond, on):
        compile_ = _COMPILERS.get(cond.__class__)
        if compile_ is None:
            raise NotFast(f"the predicate [{A.to_text(cond)}]")
        return compile_(self, cond, on)

    def _connective(self, cond, on) -> Test:
        if cond.__class__ is A.Not:
            inner = self._compile(cond.arg, on)
            return Test(f"not ({inner.text})", inner.subtree)
        left, right = self._compile(cond.left, on), self._compile(cond.right, on)
        word = "and" if cond.__class__ is A.And else "or"
        required = None
        if word == "and" and left.required is not None and right.required is not None:
            required = left.required | right.required
        text = f"({left.text}) {word} ({right.text})"
        return Test(text, left.subtree or right.subtree, required)

    def _exists(self, cond: A.RelPath, on):
        return self._atom(on, cond.path, None, None, cond)

    def _compare(self, cond: A.Compare, on):
        left, right, op = cond.left, cond.right, cond.op
        if left.__class__ is A.Const and right.__class__ is A.RelPath:
            left, right, op = right, left, FLIPPED[op]
        if left.__class__ is not A.RelPath or right.__class__ is not A.Const:
            raise NotFast(f"the predicate [{A.to_text(cond)}]")
        return self._atom(on, left.path, op, right.value, cond)

    def relative(self, path, cond) -> tuple:
        """(PathSteps, end) of a relative path: child (``a/b``) and descendant (``.//b``,
        ``a//b``) element steps, names or ``*``, each with its own predicates, then
        optionally ``text()``, ``//text()`` or ``@name``; ``.`` alone. Else NotFast."""
        items = list(path.items) if isinstance(path, A.Seq) else [path]
        while items and _is(items[0], A.SELF, A.NODE):  # '.': the element itself
            items = items[1:]
        end = ELEMENT
        if items and _is(items[-1], A.CHILD, A.TEXT):
            end, items = TEXT_END, items[:-1]
        elif items and _is(items[-1], A.DESCENDANT, A.TEXT):
            end, items = DEEP_TEXT, items[:-1]
        elif items and _is(items[-1], A.ATTRIBUTE, A.ELEMENT) and items[-1].name != A.WILDCARD:
            end, items = "@" + items[-1].name, items[:-1]
        steps = []
        for item in items:
            if not (
                isinstance(item, A.Step)
                and item.axis in (A.CHILD, A.DESCENDANT)
                and item.kind == A.ELEMENT
                and not item.var
            ):
                raise NotFast(f"the predicate [{A.to_text(cond)}]")
            name = None if item.name == A.WILDCARD else item.name
            self._nesting += 1  # nested predicates: inner atoms, decided first
            try:
                guard = self.guard(item)
            finally:
                self._nesting -= 1
            text = "".join(f"[{A.to_text(p)}]" for p in item.preds)
            steps.append(PathStep(item.axis, name, guard, text))
        return tuple(steps), end

    def _atom(self, on, path, op, const, cond):
        steps, end = self.relative(path, cond)
        atom = Atom(on, steps, end, op, const)
        inner = self._nesting > 0
        key = (inner, atom.key())
        index = self._ids.get(key)
        if index is None:
            found = self.inner if inner else self.atoms
            index = self._ids[key] = len(found)
            found.append(atom)
            if inner and index >= MAX_INNER:
                raise NotFast(f"more than {MAX_INNER} nested predicate atoms")
            if not inner:
                operand = self._operands.get(key[1][:3])
                if operand is None:
                    operand = self._operands[key[1][:3]] = Operand(atom)
                    self.operands.append(operand)
                operand.add(atom, index)
        return Test(f"m & {1 << index}", atom.subtree, 1 << index)


def _or_all(bits) -> int:
    found = 0
    for bit in bits:
        found |= bit
    return found


_COMPILERS = {
    A.And: Guards._connective,
    A.Or: Guards._connective,
    A.Not: Guards._connective,
    A.RelPath: Guards._exists,
    A.Compare: Guards._compare,
}


class PathStep:
    """One element step of an atom's path: child or descendant, a name (None: any), a
    guard over the element's mask (its own predicates) or None."""

    __slots__ = ("axis", "guard", "name", "text")

    def __init__(self, axis: str, name, guard, text: str) -> None:
        self.axis, self.name, self.guard, self.text = axis, name, guard, text


def _is(step, axis: str, kind: str) -> bool:
    return isinstance(step, A.Step) and step.axis == axis and step.kind == kind and not step.preds


def masks(atoms: list[Atom], batch, arrays, opens, parents) -> np.ndarray:
    """The mask of every open element of ``batch``: bit i set when ``atoms[i]`` holds on it.
    ``arrays`` = (kinds, depths, names) as numpy; ``parents[j]`` = the position in ``opens``
    of open j's parent (-1: it opened in an earlier batch)."""
    mask = np.zeros(len(opens), dtype=np.int64)
    for index, atom in enumerate(atoms):  # a step's own predicates come before the atom
        found = reach(atom, batch, arrays, opens, parents, atom.op is not None, mask)
        owners, keep, values, _ = found
        if values is not None:
            keep &= atom.holds(values)
        mask[owners[keep]] |= 1 << index
    return mask


def element_codes(operands: list, batch, arrays, opens, parents, inner) -> list[np.ndarray]:
    """For each operand (``Operand``), the code of every open element of ``batch`` (0: no
    value). ``inner``: the opens' masks of the nested predicates' atoms (``masks``)."""
    columns = []
    for operand in operands:
        column = np.zeros(len(opens), dtype=np.int64)
        # an attribute's or a text's values are the batch's: coded where they are
        at_events = operand.values and operand.end != ELEMENT
        owners, keep, values, at = reach(
            operand, batch, arrays, opens, parents, operand.values and not at_events, inner
        )
        owners = owners[keep]
        if not len(owners):
            columns.append(column)
            continue
        if at_events:
            found = operand.codes_at(batch.values, at[keep])
        elif values is None:  # existence tests only
            column[owners] = operand.code(None)
            columns.append(column)
            continue
        else:
            if len(owners) < len(keep):
                values = [v for v, kept in zip(values, keep.tolist(), strict=True) if kept]
            found = operand.codes(values)
        column[owners] = found
        if (owners[1:] > owners[:-1]).all():  # one value each (an attribute's, say)
            columns.append(column)
            continue
        several = np.flatnonzero(np.bincount(owners, minlength=len(opens)) > 1)
        if len(several):  # elements with several values: the set of their codes
            which = np.isin(owners, several)
            sets: dict = {}
            for owner, one in zip(owners[which].tolist(), found[which].tolist(), strict=True):
                sets.setdefault(owner, set()).add(one)
            for owner, codes in sets.items():
                column[owner] = codes.pop() if len(codes) == 1 else operand.code_of_set(codes)
        columns.append(column)
    return columns


def mapped(values: list, at: np.ndarray, table: dict, missing: int) -> np.ndarray:
    """``table.get(values[i], missing)`` for each position ``i`` in ``at``, as int64: by
    the events kernel (``_tokenizer.mapped``) where it is built."""
    at = np.ascontiguousarray(at, dtype=np.int64)
    if _mapped is not None:
        return np.frombuffer(_mapped(values, at, table, missing), dtype=np.int64)
    found = map(table.get, map(values.__getitem__, at.tolist()), repeat(missing))
    return np.fromiter(found, np.int64, len(at))


def reach(path, batch, arrays, opens, parents, with_values: bool, mask=None) -> tuple:
    """The nodes ``path`` (an ``Atom`` or a ``Field``: ``on``, ``steps``, ``end``) ends on
    in ``batch``, each paired with an element the path starts from: (``owners``, the
    positions in ``opens`` of those elements; ``keep``, whether the pair holds; ``values``,
    with ``with_values``, each pair's value; ``order``, each pair's node in document
    order). ``mask``: the masks so far, for the steps' own predicates."""
    kinds, depths, names = arrays
    open_names = names[opens]
    symbols = batch.symbols
    ids = [None if s.name is None else symbols.get(s.name) for s in path.steps]
    on = None if path.on is None else symbols.get(path.on)
    end = path.end
    empty = np.zeros(0, dtype=np.int64)
    nothing = (empty, empty.astype(bool), [] if with_values else None, empty)
    if (
        not len(opens)
        or (path.on is not None and on is None)
        or any(s.name is not None and i is None for s, i in zip(path.steps, ids, strict=True))
        or (end.startswith("@") and symbols.get(end[1:]) is None)
    ):  # a name the stream never had: no element has the path
        return nothing
    if end.startswith("@"):
        found = np.flatnonzero((kinds == _ATTR) & (names == symbols.get(end[1:])))
        owners = np.searchsorted(opens, found) - 1  # an attribute follows its open
        values = _values(batch.values, found) if with_values else None
    elif end in (TEXT_END, DEEP_TEXT):
        found = np.flatnonzero(kinds == _TEXT)
        owners = _owner(opens, depths, found)
        values = _values(batch.values, found) if with_values else None
    else:  # the elements themselves: the last step's, or the predicated one (.)
        owners = _named(open_names, ids[-1] if ids else on)
        found = opens[owners]
        values = string_values(batch, kinds, found) if with_values else None
    order = np.arange(len(owners))  # index into found/values
    if end == DEEP_TEXT:  # the text's parent, or any element above it
        owners, order = _and_above(owners, order, parents)
    for step, name in zip(reversed(path.steps), reversed(ids), strict=True):
        keep = owners >= 0
        if name is not None:
            keep &= open_names[np.maximum(owners, 0)] == name
        if step.guard is not None and keep.any():
            keep[keep] = _holds(step.guard, mask[owners[keep]])
        owners, order = owners[keep], order[keep]
        owners = parents[owners]
        if step.axis == A.DESCENDANT:  # the step's element is any descendant
            owners, order = _and_above(owners, order, parents)
    keep = owners >= 0
    if on is not None:
        keep &= open_names[np.maximum(owners, 0)] == on
    if values is not None:
        values = [values[i] for i in order.tolist()]
    return owners, keep, values, found[order] if len(found) else order


def _and_above(owners: np.ndarray, order: np.ndarray, parents: np.ndarray) -> tuple:
    """Each (owner, node) pair, and a pair of the node with each of the owner's ancestors
    that opened in this batch."""
    all_owners, all_order = [owners], [order]
    while True:
        live = owners >= 0
        owners, order = parents[owners[live]], order[live]
        live = owners >= 0
        if not live.any():
            break
        owners, order = owners[live], order[live]
        all_owners.append(owners)
        all_order.append(order)
    return np.concatenate(all_owners), np.concatenate(all_order)


def _holds(guard, masks: np.ndarray) -> np.ndarray:
    """``guard`` on each mask, evaluated once per distinct mask."""
    unique, inverse = np.unique(masks, return_inverse=True)
    return np.array([guard(int(m)) for m in unique.tolist()], dtype=bool)[inverse.reshape(-1)]


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
