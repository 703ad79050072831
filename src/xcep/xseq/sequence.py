"""Flat sequence patterns: the XSeq engine's fast path for event sequences.

Many CEP queries walk one list of sibling elements with immediate-sibling
steps only — ``/stocks/$Z (\\ $X)* (\\ $Y)*``, usually with ``partition by`` —
and read nothing of an element but its attributes or its children's text
(JSON members): on such a list the visibly pushdown automaton never pushes
anything that matters, and it is a finite automaton over the list's
elements. ``SequencePattern`` recognises these queries (or raises ``NotFast``
naming what keeps a query off) and ``SequenceRun`` runs them directly:

- the list is found by depth and element names (the partition path, or the
  from path's leading child steps; when the first of those is ``//``, a list per
  open parent at any depth, inside one another), its elements read from the batch
  columns
  (numpy picks the events at the list's depth and above, and down to the
  children's text when the query reads it; the rest of an element's content
  costs nothing); what the query reads of each element (``@name``,
  ``name/text()``) is read once, as a string and a number (``ListReader``,
  which the queries of a sequence group share: ``sequence_group.py``);
- per list (each parent element, or each partition across the stream) the
  live partial matches are pairs ``(item, registers)``: the pattern item the
  match ends in and per variable its element (or, under a Kleene-*, first,
  last, count and the nodes as a linked list when something reads them all);
  the per-match conditions decidable at that item have held;
- an element advances each partial match by one item (iterating a Kleene-*,
  or moving on past empty ones): the step function tests names, step
  predicates and per-iteration conditions, and decides each per-match
  condition as soon as the variables it reads are final (so a partial match
  that can no longer match dies at once) — in C (``_lists.Stepper``, given the
  pattern as data by ``_StepProgram``), or generated per pattern as Python with
  the conditions inlined (``_StepSource``: without a C compiler, and the
  kernel's reference);
- matches, their order (end element, then binding), duplicates, the output
  rows and the aggregates are the engine's (``xcep.xseq.matches``); elements
  of a parent's list are stepped at their close, when the automaton emits
  the same rows.

Every selection policy runs here. Under ``maximal`` and ``skip-past-last``
a list holds its matches by start (the first element a query's variable
binds) until no live partial match of the list starts at or before it: then
the policy picks among them (the same rule as the engine's emitter, on the
same floor), and the run's queue hands rows out in the order ``all`` would,
each once the matches before it are decided. ``tests/test_xseq_sequence.py``
compares this path with the reference evaluator and with the automaton,
under every policy.

One module of about 1,800 lines, on purpose: the pattern's analysis, its step
function's generated source and the run that drives it are one compiler from a
query to that function; splitting them would pass its internals between modules.
"""

from __future__ import annotations

import functools
import operator
import re
from collections import deque
from collections.abc import Iterable, Iterator
from functools import cached_property
from heapq import heappop, heappush

import numpy as np

from xcep.events import ATTR, CLOSE, OPEN, TEXT
from xcep.xseq import ast as A
from xcep.xseq.dom import ROOT, TEXT_NODE, Node
from xcep.xseq.lifting import HIDDEN
from xcep.xseq.matches import Aggregator, Binding, check_selection, output_row, pick
from xcep.xseq.semantics import Analysis, NotFast
from xcep.xseq.values import COMPARISONS, as_string, to_number

try:
    from xcep.xseq import _lists
except ImportError:  # built without a C compiler: Python reads the lists and steps
    _lists = None
_Stepper = None if _lists is None else _lists.Stepper  # the step function in C

_OPEN, _ATTR, _TEXT, _CLOSE = int(OPEN), int(ATTR), int(TEXT), int(CLOSE)
_MISSING = object()


def _pair(value) -> tuple:
    """A value as (string, number or None): how comparisons see it (xcep.xseq.values)."""
    return (as_string(value), to_number(value))


def _string(pair: tuple) -> str:
    """A value's string, for a comparison of strings (an arithmetic result has none made:
    ``_arithmetic``)."""
    return pair[0] if pair[0] is not None else as_string(pair[1])


def _arithmetic(op: str):
    """``values.arith`` on two single values (pairs, or None: no value) -> a pair or None. A
    finite result's string is made only if a comparison of strings asks (``_string``)."""
    combine = _OPERATORS[op]

    def calculate(a, b):
        if a is None or b is None:
            return None
        x, y = a[1], b[1]
        if x is None or y is None or (op == "div" and not y):
            return None
        found = combine(x, y)
        return (None, found) if found - found == 0 else (as_string(found), None)

    return calculate


_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "div": operator.truediv}


def _compare(op, left: list, right: list) -> bool:
    """The general comparison of two operands' values (pairs): any pair that holds."""
    for a in left:
        for b in right:
            if a[1] is not None and b[1] is not None:
                if op(a[1], b[1]):
                    return True
            elif op(_string(a), _string(b)):
                return True
    return False


def _arithmetic_pair(number: float) -> tuple:
    """An arithmetic result (a float) as the pair ``_arithmetic`` gives for it."""
    return (None, number) if number - number == 0 else (as_string(number), None)


@functools.cache
def _compare_pairs(op: str):
    """The comparison of two single values (pairs) the step source inlines, as a function:
    numbers when both have one, else their strings (where an arithmetic result is not
    finite)."""
    test = COMPARISONS[op]

    def compare(a, b) -> bool:
        if a[1] is not None and b[1] is not None:
            return test(a[1], b[1])
        return test(_string(a), _string(b))

    return compare


def _first(values):
    """An operand's first value (arithmetic reads no other), or None."""
    return values[0] if values else None


def _one(value) -> tuple:
    """A single value (a pair, or None) as an operand's values."""
    return () if value is None else (value,)


class _Item:
    """One step of the pattern: the head child step, ``\\ step`` or ``(\\ step)*``."""

    __slots__ = ("conds", "group", "name", "preds", "slot", "star", "var")

    def __init__(self, step: A.Step, star: bool, slot, preds: list) -> None:
        self.name = None if step.name == A.WILDCARD else step.name
        self.var = step.var
        self.slot = slot  # the variable's register, or None
        self.star = star
        self.preds = preds  # step predicates (conditions on the element's attributes)
        self.conds: list = []  # per-iteration conditions (Kleene-* items)
        self.group = None  # the Kleene-* group of a star item


class SequencePattern:
    """A compiled flat sequence pattern (see the module docstring)."""

    def __init__(
        self, analysis: Analysis, fields_by_shape: dict | None = None, nodes: bool = False
    ) -> None:
        """``fields_by_shape``: {list shape: fields} the patterns of several queries share,
        so that those of one list shape read their elements alike (``SequenceGroup``);
        ``nodes``: keep every element of a Kleene-* variable (a template's members may
        read them)."""
        self.analysis = analysis
        self.anywhere = False  # the list's parent path starts with // (any depth)
        if analysis.mode == "nodes":
            raise NotFast("a plain path (no return clause)")
        self.kleene_slots = {analysis.index[v] for v in analysis.kleene}
        self.list_path, self.partition_attribute, steps = self._list(analysis)
        # what conditions and outputs read of an element: ("@", attribute) or ("/", child
        # element whose text() is read) -> slot in the element's values
        shared = {} if fields_by_shape is None else fields_by_shape
        self.fields: dict[tuple, int] = shared.setdefault(self.shape, {})
        self.items = self._items(steps)
        self.last_mandatory = max(i for i, item in enumerate(self.items) if not item.star)
        # the items a partial match can still move on from
        self.growing = {
            i for i, item in enumerate(self.items) if item.star or i + 1 < len(self.items)
        }
        self.varless = any(item.var is None for item in self.items)
        outputs = analysis.query.returns
        self.count_only = all(
            t.aggregate == "count" and isinstance(t.expr, A.VarRef) and t.expr.path is None
            for t in outputs
        )
        for term in outputs:  # only checked: rows and aggregates are made from real nodes
            self._check_output(term)
        self.keep_nodes = (
            nodes
            or not self.count_only
            or any(
                isinstance(n, A.VarRef) and n.var in analysis.kleene and n.func is None
                for c in analysis.per_match
                for n in A.walk(c.cond)
            )
        )
        for group, conjuncts in analysis.iteration.items():
            item = next(i for i in self.items if i.star and i.group == group)
            item.conds = [c.cond for c in conjuncts]
        decided = sorted(
            ((self._settled_at(c.cond), c.cond) for c in analysis.per_match), key=lambda p: p[0]
        )
        self.settle = [at for at, _ in decided]
        self.per_match = [cond for _, cond in decided]  # in the order they become decidable
        self.count_refs = [t.expr for t in outputs] if self.count_only else None
        self.program = _StepProgram(self)  # (which reads the fields in a fixed order)

    def start_equality(self) -> tuple | None:
        """(the field, its string) of an equality every match's first element satisfies —
        a step predicate of the head or a condition on it alone, ``$Z@company = 'IBM'``,
        with a constant that is no number (so that the comparison is of strings, and an
        index of the values finds it) — or None."""
        head = self.items[0]
        conjuncts = [(c, True) for c in head.preds]  # (condition, a step predicate)
        decided = zip(self.settle, self.per_match, strict=True)
        conjuncts += [(c, False) for at, c in decided if at == 0]
        while conjuncts:
            cond, pred = conjuncts.pop()
            if isinstance(cond, A.And):
                conjuncts += [(cond.left, pred), (cond.right, pred)]
                continue
            if not isinstance(cond, A.Compare) or cond.op != "=":
                continue
            for side, other in ((cond.left, cond.right), (cond.right, cond.left)):
                if not isinstance(other, A.Const) or to_number(other.value) is not None:
                    continue
                own = isinstance(side, A.RelPath) and pred
                own = own or (
                    isinstance(side, A.VarRef) and side.var == head.var and side.func is None
                )
                if own and side.path is not None:
                    try:
                        at = self._field(side.path)
                    except NotFast:
                        continue
                    if self._is_attribute(at):
                        return at, as_string(other.value)
        return None

    @property
    def shape(self) -> tuple:
        """What a list reader reads by: the list's path, the partition attribute and
        whether the list's parent is anywhere (``//``)."""
        return (tuple(self.list_path), self.partition_attribute, self.anywhere)

    @property
    def counts_in_place(self) -> bool:
        """Whether matches can be counted where they are found (only counts returned)."""
        return self.count_only and not self.varless

    def make_step(self, emit):
        """The step function ``step(list, element)`` (``_StepSource``), matches counted in
        place where only counts are returned, else handed to ``emit(list, found)``: the
        list kernel's ``Stepper`` where it is built, else the generated Python."""
        return self._step(emit, count_in_place=True)

    def make_listing_step(self, emit):
        """``make_step`` that lists every match it finds (``emit``), counts too: a
        selection policy picks among them before anything is counted."""
        return self._step(emit, count_in_place=False)

    def _step(self, emit, count_in_place: bool):
        if _Stepper is not None:
            return self.program.stepper(emit, count_in_place)
        return self._python_steps[count_in_place](emit)

    @cached_property
    def _python_steps(self) -> dict:
        """{count in place: make_step}: the generated Python step functions (made once)."""
        return {flag: _StepSource(self, flag).build()[1] for flag in (True, False)}

    # the shape of the from clause
    def _list(self, analysis: Analysis):
        """(names of the list's ancestors and, partitioned, of its elements; the partition
        attribute or None; the steps from the list's first element on)."""
        steps = list(analysis.path.items if isinstance(analysis.path, A.Seq) else (analysis.path,))
        if analysis.partition is not None:
            ppath, attribute = analysis.partition
            names = []
            for step in ppath.items if isinstance(ppath, A.Seq) else (ppath,):
                if step.axis != A.CHILD:
                    raise NotFast("a partition by path with a // step")
                names.append(step.name)
            return names, attribute, steps
        # the leading child steps (the first may be // : the list's parent anywhere): the
        # list's ancestors, then its first element
        self.anywhere = bool(steps) and _is_plain(steps[0], A.DESCENDANT)
        lead = 1 if self.anywhere else 0
        while lead < len(steps) and isinstance(steps[lead], A.Step) and steps[lead].axis == A.CHILD:
            lead += 1
        prefix = steps[: max(lead - 1, 0)]  # (none: the from clause begins otherwise)
        if not prefix or not all(_is_plain(s, s.axis) for s in prefix):
            raise NotFast("the from clause does not start with plain child steps to a list")
        return [*(s.name for s in prefix), A.WILDCARD], None, steps[lead - 1 :]

    def _items(self, steps: list) -> list[_Item]:
        items = []
        for i, node in enumerate(steps):
            star = isinstance(node, A.Star)
            step = node.body if star else node
            if not isinstance(step, A.Step) or step.kind != A.ELEMENT:
                raise NotFast(f"the path item {A.to_text(node)!r} is not one element step")
            axis = A.CHILD if i == 0 else A.NEXT_SIBLING
            if step.axis != axis or (i == 0 and star):
                raise NotFast(
                    "a flat sequence is a child step followed by \\ steps and (\\ step)*, "
                    f"not {A.to_text(node)!r}"
                )
            slot = self.analysis.index[step.var] if step.var else None
            item = _Item(step, star, slot, list(step.preds))
            item.group = node.group if star else None
            items.append(item)
        return items

    # conditions and values, compiled to closures fn(regs, element, pred)
    def _field(self, path) -> int:
        """The slot of ``@name`` or ``name/text()`` in an element's values."""
        steps = path.items if isinstance(path, A.Seq) else (path,)
        if all(isinstance(step, A.Step) and not step.preds for step in steps):
            if len(steps) == 1 and steps[0].axis == A.ATTRIBUTE and steps[0].name != "*":
                key = ("@", steps[0].name)
                return self.fields.setdefault(key, len(self.fields))
            if (
                len(steps) == 2
                and (steps[0].axis, steps[0].kind) == (A.CHILD, A.ELEMENT)
                and steps[0].name != "*"
                and (steps[1].axis, steps[1].kind) == (A.CHILD, A.TEXT)
            ):
                key = ("/", steps[0].name)
                return self.fields.setdefault(key, len(self.fields))
        raise NotFast(f"{A.to_text(path)!r} reads more of an element than @name or name/text()")

    def _is_attribute(self, slot: int) -> bool:
        return next(kind for (kind, _), at in self.fields.items() if at == slot) == "@"

    def _nodes(self, ref: A.VarRef, iteration: bool):
        """fn(regs, element, pred) -> the elements ``ref`` (without its path) names."""
        slot = self.analysis.index[ref.var]
        if slot not in self.kleene_slots:
            return lambda regs, e, p: [] if regs[slot] is None else [regs[slot]]
        if ref.func == "prev":
            return lambda regs, e, p: [] if regs[slot] is None else [p]
        if ref.func == "first":
            return lambda regs, e, p: [] if regs[slot] is None else [regs[slot][0]]
        if ref.func == "last" or iteration:
            return lambda regs, e, p: [] if regs[slot] is None else [regs[slot][1]]
        return lambda regs, e, p: [] if regs[slot] is None else _all(regs[slot][3])

    def _values(self, expr, iteration: bool):
        """fn(regs, element, pred) -> the operand's values as (string, number) pairs."""
        if isinstance(expr, A.Const):
            values = [_pair(expr.value)]
            return lambda regs, e, p: values
        if isinstance(expr, A.VarRef):
            if expr.path is None:
                raise NotFast(f"{A.to_text(expr)} as a value is its content (read @name)")
            at = self._field(expr.path)
            nodes = self._nodes(expr, iteration)
            if self._is_attribute(at):
                return lambda regs, e, p: [v for n in nodes(regs, e, p) if (v := n[3][at])]
            return lambda regs, e, p: [v for n in nodes(regs, e, p) for v in n[3][at]]
        if isinstance(expr, A.RelPath):  # a step predicate: the element's own field
            at = self._field(expr.path)
            if self._is_attribute(at):
                return lambda regs, e, p: [] if e[3][at] is None else [e[3][at]]
            return lambda regs, e, p: e[3][at]
        if isinstance(expr, A.Tag):
            nodes = self._nodes(expr.ref, iteration)
            return lambda regs, e, p: [_pair(n[2]) for n in nodes(regs, e, p)]
        if isinstance(expr, A.Arith):
            left, right = self._values(expr.left, iteration), self._values(expr.right, iteration)
            combine = _arithmetic(expr.op)  # on the first value of each side

            def calculate(regs, e, p):
                found = combine(_first(left(regs, e, p)), _first(right(regs, e, p)))
                return [] if found is None else [found]

            return calculate
        cond = self._condition(expr, iteration)  # a condition used as a value
        return lambda regs, e, p: [_pair(cond(regs, e, p))]

    def _condition(self, cond, iteration: bool):
        """fn(regs, element, pred) -> the effective boolean value of ``cond``."""
        if isinstance(cond, A.Compare):  # (the step source inlines one value a side)
            op = COMPARISONS[cond.op]
            left, right = self._values(cond.left, iteration), self._values(cond.right, iteration)
            return lambda regs, e, p: _compare(op, left(regs, e, p), right(regs, e, p))
        if isinstance(cond, A.And | A.Or):
            left = self._condition(cond.left, iteration)
            right = self._condition(cond.right, iteration)
            if isinstance(cond, A.And):
                return lambda regs, e, p: left(regs, e, p) and right(regs, e, p)
            return lambda regs, e, p: left(regs, e, p) or right(regs, e, p)
        if isinstance(cond, A.Not):
            arg = self._condition(cond.arg, iteration)
            return lambda regs, e, p: not arg(regs, e, p)
        if isinstance(cond, A.Const):
            value = bool(cond.value)
            return lambda regs, e, p: value
        if (isinstance(cond, A.VarRef) and cond.path is None) or isinstance(cond, A.Tag):
            nodes = self._nodes(cond if isinstance(cond, A.VarRef) else cond.ref, iteration)
            return lambda regs, e, p: bool(nodes(regs, e, p))
        if isinstance(cond, A.VarRef | A.RelPath | A.Arith):
            values = self._values(cond, iteration)
            return lambda regs, e, p: bool(values(regs, e, p))
        raise NotFast(f"the condition {A.to_text(cond)!r}")

    def _check_output(self, term: A.OutTerm) -> None:
        """Outputs are made by the engine's code from real nodes: check they read no content."""
        if term.aggregate == "count" and isinstance(term.expr, A.VarRef) and not term.expr.path:
            return  # counts nodes, prints none

        def check(node) -> None:
            if isinstance(node, A.Tag | A.Const):
                return
            if isinstance(node, A.VarRef) and node.path is not None:
                self._field(node.path)
            elif isinstance(node, A.Compare | A.Arith | A.And | A.Or):
                check(node.left)
                check(node.right)
            elif isinstance(node, A.Not):
                check(node.arg)
            else:
                raise NotFast(f"the output {A.to_text(term.expr)!r} reads an element's content")

        check(term.expr)

    def _settled_at(self, cond) -> int:
        """The first item index at which every variable ``cond`` reads is final."""
        at = 0
        for node in A.walk(cond):
            if isinstance(node, A.VarRef):
                index = next(i for i, item in enumerate(self.items) if item.var == node.var)
                final_after = self.items[index].star and node.func != "first"
                at = max(at, index + 1 if final_after else index)
        return at

    def run(
        self, batches, values_only: bool = False, final: bool = True, selection: str = "all"
    ) -> Iterator[list]:
        self.last_run = SequenceRun(self, values_only, selection)
        return self.last_run.run(batches, final)

    def stats(self) -> dict:
        """The lists (parents' or partitions) and live partial matches of the last run."""
        run = getattr(self, "last_run", None)
        if run is None:
            return {"lists": 0, "partial matches": 0}
        return {
            "lists": run.made,
            "partial matches": sum(len(lst.threads) for lst in run.lists.values()),
        }


def _is_plain(step, axis: str = A.CHILD) -> bool:
    """An element step on ``axis`` without predicates or a variable."""
    return (
        isinstance(step, A.Step)
        and step.axis == axis
        and step.kind == A.ELEMENT
        and not step.preds
        and not step.var
    )


def _count(ref: A.VarRef, regs: tuple, p: SequencePattern) -> int:
    """The number of nodes ``count(ref)`` counts in the match ``regs``."""
    reg = regs[p.analysis.index[ref.var]]
    if reg is None:
        return 0
    return reg[2] if ref.var in p.analysis.kleene and ref.func is None else 1


def _all(chain) -> list:
    """The nodes of a linked list (node, rest) in order."""
    out = []
    while chain is not None:
        out.append(chain[0])
        chain = chain[1]
    out.reverse()
    return out


class _List:
    """The live partial matches of one list (a parent element's children, or a partition)."""

    __slots__ = ("_root", "counts", "held", "key", "last_end", "pred", "threads")

    def __init__(self, key, counts: list) -> None:
        self.key = key
        self.counts = counts  # count-only return clauses: [matches, count of each term]
        self.threads: list = []
        self.pred = None  # the previous element of the list
        self._root = None
        self.held: dict = {}  # a selection policy's matches not yet decided: start -> _Helds
        self.last_end = None  # skip-past-last: the end of the last match selected

    @property
    def root(self) -> Node:
        """The parent of the nodes made for outputs (made when first needed)."""
        if self._root is None:
            self._root = Node(ROOT, None, -1, -1)
        return self._root


class _Held:
    """A match waiting for its selection: where it starts and ends, its registers, and
    whether it was selected (None: not decided yet)."""

    __slots__ = ("end", "lst", "regs", "selected", "start")

    def __init__(self, lst: _List, regs: tuple, start: tuple, end: tuple) -> None:
        self.lst, self.regs, self.start, self.end = lst, regs, start, end
        self.selected = None


_PARENT_OPENS = "parent opens"  # what ``ListReader`` marks between the elements
_LIST_ENDS = "list ends"


class ListReader:
    """Reads a batch's list elements for the flat-sequence runs of one list shape (the
    list's path and partition attribute; the fields they read, ``SequencePattern.fields``,
    shared by every run it serves): ``read(batch, take, mark)`` calls ``take(partition key
    or None, element)`` for each element when it is to be stepped, ``mark(_PARENT_OPENS)``
    where a parent's list begins and ``mark(_LIST_ENDS)`` where it ends (its close, a new
    document) — as it goes, so that an element no partial match keeps is let go at once.
    An element is ``[doc, ident, tag, fields, raw attributes, node, children]``; numpy
    picks the events at the list's depth and above (down to the children's text when a
    field is a child's), so the rest of an element's content costs nothing."""

    def __init__(self, pattern: SequencePattern, keep_raw: bool) -> None:
        self.list_path = pattern.list_path
        self.attribute = pattern.partition_attribute
        fields = pattern.fields.items()
        self.width = len(pattern.fields)
        self.attributes = {name: at for (kind, name), at in fields if kind == "@"}
        self.children = {name: at for (kind, name), at in fields if kind == "/"}
        self.keep_raw = keep_raw
        numbers: dict = {}  # attribute value -> to_number(value), a cache
        self.numbers = numbers

        def pair(value: str) -> tuple:
            number = numbers.get(value, _MISSING)
            if number is _MISSING:
                if len(numbers) > 4096:  # a bounded cache: repeated values hit it
                    numbers.clear()
                number = numbers[value] = to_number(value)
            return (value, number)

        self.pair = pair
        # the cursor: where the reader is in the stream
        self.ok = [True] * (len(self.list_path) + 1)  # the open element at depth d is on
        self.pending = None  # the open list element, stepped at its close
        self.pending_key = self.child = self.doc = None

    CURSOR = ("ok", "pending", "pending_key", "child", "doc")

    def state(self) -> dict:
        return {name: getattr(self, name) for name in self.CURSOR}

    def restore(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def read(self, batch, take, mark) -> None:
        if _lists is not None and not self.children:  # attributes only: read in C
            self._read_compiled(batch, take, mark)
            return
        names_path = self.list_path
        depth_of_list = len(names_path)
        attribute = self.attribute
        children = self.children
        deepest = depth_of_list + (2 if children else 0)  # down to the children's text
        at_close = attribute is None or bool(children)  # step an element at its close
        keep_raw = self.keep_raw
        ok = self.ok  # ok[d]: the open element at depth d is on the path
        pending, pending_key = self.pending, self.pending_key
        child, doc = self.child, self.doc
        pair, width = self.pair, self.width
        table = batch.symbols.names
        symbols = batch.symbols  # name ids: .get does not add a name
        key_id = symbols.get(attribute, -2) if attribute is not None else -2
        wanted_ids = {symbols[n]: at for n, at in self.attributes.items() if n in symbols}
        kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
        depths = np.frombuffer(batch.depths, dtype=np.int32)
        if children:
            wanted_kinds = kinds != _ATTR
        else:
            wanted_kinds = (kinds == _OPEN) | (kinds == _CLOSE) if at_close else kinds == _OPEN
        picked = np.flatnonzero((depths <= deepest) & wanted_kinds)
        kinds_, names, values, depths_ = batch.kinds, batch.names, batch.values, batch.depths
        docs, nodes = batch.docs, batch.nodes
        size = len(kinds_)
        # without raw attributes to keep, an element's key and fields are looked up by its
        # position in tables numpy made for the whole batch, not read attribute by attribute
        by_position = None if keep_raw else _attribute_tables(batch, kinds, key_id, wanted_ids)
        keys, fields = by_position if by_position is not None else (None, None)
        for i in picked.tolist():
            depth, kind = depths_[i], kinds_[i]
            if docs[i] != doc:  # a new document (the last may have been cut short)
                if attribute is None:
                    mark(_LIST_ENDS)  # its parent's list is over
                doc, pending, child = docs[i], None, None
            if depth > depth_of_list:  # inside a list element: the children's text
                if pending is None:
                    continue
                if depth == depth_of_list + 1:
                    if kind == _OPEN:
                        at = children.get(table[names[i]])
                        child = None if at is None else (at, table[names[i]], nodes[i], [])
                    elif kind == _CLOSE and child is not None:
                        pending[3][child[0]] += [pair(v) for v, _ in child[3]]
                        if keep_raw:
                            pending[6].append(child[1:])
                        child = None
                elif kind == _TEXT and child is not None:
                    child[3].append((values[i], nodes[i]))
                continue
            if kind == _TEXT:
                continue
            if kind == _CLOSE:
                if depth == depth_of_list:
                    if pending is not None:
                        take(pending_key, pending)
                        pending = None
                elif depth == depth_of_list - 1 and attribute is None:
                    mark(_LIST_ENDS)  # the parent's list is over
                continue
            name = table[names[i]]
            want = names_path[depth - 1]
            ok[depth] = ok[depth - 1] and (want == A.WILDCARD or want == name)
            if depth < depth_of_list:
                if depth == depth_of_list - 1 and attribute is None and ok[depth]:
                    mark(_PARENT_OPENS)
                continue
            if not ok[depth]:
                continue
            found, raw, key = [None] * width, [] if keep_raw else None, None
            if children:
                for at in children.values():
                    found[at] = []
            if by_position is not None:
                key = keys.get(i)
                for at, table_at in fields:
                    value = table_at.get(i)
                    if value is not None:
                        found[at] = pair(value)
                j = size
            else:
                j = i + 1
            while j < size and kinds_[j] == _ATTR:
                aid = names[j]
                if aid == key_id:
                    key = values[j]
                at = wanted_ids.get(aid)
                if at is not None:
                    found[at] = pair(values[j])
                if raw is not None:
                    raw.append((table[aid], values[j], nodes[j]))
                j += 1
            element = [doc, nodes[i], name, found, raw, None, []]
            if attribute is not None and key is None:
                continue  # in no partition
            if at_close:  # as the automaton emits then (and its children are read)
                pending, pending_key = element, key
            else:  # a partition's matches are kept if its document breaks
                take(key, element)
        self.pending, self.pending_key = pending, pending_key
        self.child, self.doc = child, doc

    def _read_compiled(self, batch, take, mark) -> None:
        """``read`` by the kernel (``xcep.xseq._lists``): the same calls, in C."""
        symbols, attribute = batch.symbols, self.attribute
        path = tuple(-1 if n == A.WILDCARD else symbols.get(n, -2) for n in self.list_path)
        key_id = symbols.get(attribute, -2) if attribute is not None else -2
        wanted = {symbols[n]: at for n, at in self.attributes.items() if n in symbols}
        self.pending, self.pending_key, self.doc = _lists.read(
            batch.kinds, batch.depths, batch.names, batch.docs, batch.nodes, batch.values,
            symbols.names, path, key_id, wanted, self.width, self.keep_raw,
            attribute is None, attribute is not None, self.ok, self.pending, self.pending_key,
            self.doc, take, mark, _PARENT_OPENS, _LIST_ENDS, self.numbers, to_number,
        )  # fmt: skip


class SequenceRun:
    """One pass of a ``SequencePattern`` over an event stream."""

    def __init__(
        self,
        pattern: SequencePattern,
        values_only: bool,
        selection: str = "all",
        reader: ListReader | None = None,
    ):
        """``reader``: the list reader the run shares with others (``SequenceGroup``), else
        its own."""
        self.p = pattern
        self.reader = reader or ListReader(pattern, keep_raw=not pattern.count_only)
        self.values_only = values_only
        self.selection = check_selection(selection)
        analysis = pattern.analysis  # where a match starts: the query's own variables
        own = [i for i, v in enumerate(analysis.variables) if not v.startswith(HIDDEN)]
        self.own_slots = tuple((i, i in pattern.kleene_slots) for i in own)
        head = pattern.items[0].slot  # a variable on the head binds each match's first element
        self.head_slot = head if head in own else None
        self.rows: list = []
        self.aggregator = (
            Aggregator(pattern.analysis, values_only)
            if pattern.analysis.mode in ("aggregate", "grouped")
            else None
        )
        self.row_of = None if self.aggregator is not None else attribute_row(pattern)
        self.lists: dict = {}  # partition key -> _List
        self.counts: dict = {}  # count-only return clauses: partition key -> the counts
        self.made = 0  # lists seen
        # lists inside lists (//): matches are released in the order of their ends, an
        # element's before those of the elements inside it (which close first)
        # a selection policy's matches, in the order of ``all``: a deque, or with lists
        # inside lists a heap of (end, seq, _Held) (seq: matches at one end in binding order)
        self.queue: deque | list = [] if pattern.anywhere else deque()
        self.seq = 0
        if selection == "all" and not pattern.anywhere:
            self.step = pattern.make_step(self.emit)
        elif selection == "all":
            self.step = pattern.make_listing_step(self.hold)
        else:
            stepped = pattern.make_listing_step(self.hold)

            def step(lst: _List, element: list) -> None:
                stepped(lst, element)
                if lst.held:
                    self.select(lst, final=False)

            self.step = step
        # the cursor: where the run is in the stream (and where its reader is)
        self.current: _List | None = None  # the list of the open parent (no partition by)
        self.doc = None  # (a list's parent anywhere)
        # a list's parent anywhere (//): per depth, the open element's name, the list of an
        # open parent, an open list element [element, its list], an open field child
        self.names_at: list = [None] * 8
        self.parents: dict = {}
        self.pending_at: dict = {}
        self.child_at: dict = {}
        self.anchors: list = []  # the depths of the open anchors (_picked)

    def new_list(self, key) -> _List:
        self.made += 1
        terms = len(self.p.count_refs or ())
        return _List(key, self.counts.setdefault(key, [0] * (terms + 1)))

    # events
    def run(self, batches: Iterable, final: bool) -> Iterator[list]:
        for batch in batches:
            yield from self.feed(batch)
        yield from self.end(final)

    CURSOR = ("current", "doc", "names_at", "parents", "pending_at", "child_at", "anchors")

    def cursor(self) -> dict:
        """Where the run is in the stream (plain data, with ``lists`` and ``counts``)."""
        return {name: getattr(self, name) for name in self.CURSOR}

    def state(self) -> dict:
        """What the run has read, as plain data."""
        return {
            "lists": self.lists,
            "counts": self.counts,
            "made": self.made,
            "queue": self.queue,
            "seq": self.seq,
            "cursor": self.cursor(),
            "reader": self.reader.state(),
            "groups": None if self.aggregator is None else self.aggregator.groups,
        }

    def restore(self, state: dict) -> SequenceRun:
        self.lists, self.counts, self.made = state["lists"], state["counts"], state["made"]
        self.queue, self.seq = state["queue"], state["seq"]
        for name, value in state["cursor"].items():
            setattr(self, name, value)
        self.reader.restore(state["reader"])
        if self.aggregator is not None:
            self.aggregator.groups = state["groups"]
        return self

    def feed(self, batch) -> list:
        """The rows known once ``batch`` is read."""
        if self.p.anywhere:
            return self.feed_anywhere(batch)
        take = self.take
        if self.p.partition_attribute is not None and _lists is not None:
            take = _lists.Taker(self.step, self.lists, self.new_list)  # take, in C
        self.reader.read(batch, take, self.mark)
        rows, self.rows = self.rows, []
        return rows

    def take(self, key, element: list) -> None:
        """Step a list element (``ListReader``) in its partition's list, or its parent's."""
        self.step(self.list_for(key), element)

    def list_for(self, key) -> _List:
        """The list an element of partition ``key`` (None: the open parent's) goes to."""
        if self.p.partition_attribute is None:
            return self.current
        lst = self.lists.get(key)
        if lst is None:
            lst = self.lists[key] = self.new_list(key)
        return lst

    def mark(self, what: str) -> None:
        """A parent's list begins (``_PARENT_OPENS``) or ends (``_LIST_ENDS``: its close,
        or a new document)."""
        if what is _PARENT_OPENS:
            self.current = self.new_list(None)
            return
        current = self.current
        if current is not None and current.held:
            self.select(current, final=True)
        self.current = None

    def feed_anywhere(self, batch) -> list:
        """``feed`` for a list whose parent path starts with ``//``: a list per open
        parent, at any depth and inside one another (an element can be a list element,
        a field child of one, and a parent: each role is kept by depth); each element is
        stepped in its parent's list at its close, as the automaton emits, and a
        parent's list is over at the parent's close."""
        p = self.p
        chain = p.list_path[:-1]  # the parent's names, the nearest last
        k = len(chain)
        named_at = [(j, want) for j, want in enumerate(chain) if want != A.WILDCARD] or None
        children = self.reader.children
        names_at, parents = self.names_at, self.parents
        pending_at, child_at, doc = self.pending_at, self.child_at, self.doc
        step, pair = self.step, self.reader.pair
        table = batch.symbols.names
        kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
        wanted = kinds != _ATTR if children else (kinds == _OPEN) | (kinds == _CLOSE)
        read = _ElementReader(self.reader, batch, kinds)
        kinds_, names, values, depths_ = batch.kinds, batch.names, batch.values, batch.depths
        docs, nodes = batch.docs, batch.nodes
        for i in self._picked(batch, kinds, wanted, 3 if children else 1):
            depth, kind = depths_[i], kinds_[i]
            if docs[i] != doc:  # a new document (the last may have been cut short)
                for lst in parents.values():
                    if lst.held:
                        self.select(lst, final=True)
                doc = docs[i]
                parents.clear(), pending_at.clear(), child_at.clear()
                if self.queue:
                    self.release()
            if kind == _OPEN:
                name = table[names[i]]
                if depth >= len(names_at):
                    names_at.extend([None] * len(names_at))
                names_at[depth] = name
                lst = parents.get(depth - 1)
                if lst is not None:  # a list element
                    pending_at[depth] = [read(i, doc, name), lst]
                owner = pending_at.get(depth - 1)
                if owner is not None and children:  # a field child of a list element
                    at = children.get(name)
                    if at is not None:
                        child_at[depth] = (at, name, nodes[i], [])
                if depth >= k and (
                    named_at is None
                    or all(names_at[depth - k + 1 + j] == want for j, want in named_at)
                ):
                    parents[depth] = self.new_list(None)
            elif kind == _CLOSE:
                names_at[depth] = None  # (an unseen element there later: not a name)
                child = child_at.pop(depth, None)
                if child is not None:
                    element = pending_at[depth - 1][0]
                    element[3][child[0]] += [pair(v) for v, _ in child[3]]
                    if element[4] is not None:
                        element[6].append(child[1:])
                lst = parents.pop(depth, None)
                if lst is not None and lst.held:
                    self.select(lst, final=True)  # the parent's list is over
                pending = pending_at.pop(depth, None)
                if pending is not None:
                    step(pending[1], pending[0])
                if self.queue:
                    self.release()
            else:  # text: of a field child
                child = child_at.get(depth - 1)
                if child is not None:
                    child[3].append((values[i], nodes[i]))
        self.doc = doc
        rows, self.rows = self.rows, []
        return rows

    def _picked(self, batch, kinds: np.ndarray, wanted: np.ndarray, below: int) -> list:
        """The positions ``feed_anywhere`` must see: every wanted event, or — when the
        parent path's ``//`` step names an element (its *anchor*: ``//a/b/…``) — the
        anchors' opens and closes and, between them, the wanted events at most ``k - 1 +
        below`` levels under the innermost open anchor (the rest of the parent path, the
        list elements, their field children, those children's text; ``k``: the parent
        path's length). Nothing else can be one of them: a list lies inside its anchor,
        and what an outer anchor's list reads inside an inner anchor is within as many
        levels of the inner one."""
        chain = self.p.list_path[:-1]
        if chain[0] == A.WILDCARD:
            return np.flatnonzero(wanted).tolist()
        below += len(chain) - 1
        pid = batch.symbols.get(chain[0], -1)
        names = np.frombuffer(batch.names, dtype=np.int32)
        depths = np.frombuffer(batch.depths, dtype=np.int32)
        events = np.flatnonzero((names == pid) & ((kinds == _OPEN) | (kinds == _CLOSE)))
        open_at = self.anchors  # the open anchors' depths (one a broken document left: more)
        picks, start = [], 0
        for q in [*events.tolist(), len(kinds)]:
            if open_at and q > start:
                under = depths[start:q] - open_at[-1]
                found = np.flatnonzero((under >= 1) & (under <= below) & wanted[start:q])
                picks.append(found + start)
            if q < len(kinds):
                picks.append(np.array([q]))
                if kinds[q] == _OPEN:
                    open_at.append(int(depths[q]))
                elif open_at:
                    open_at.pop()
            start = q + 1
        return np.concatenate(picks).tolist() if picks else []

    def end(self, final: bool) -> list:
        """The matches only the end decides and the aggregates, when the stream ends
        (``final``)."""
        if not final:
            return []
        lists = [*self.lists.values(), *([self.current] if self.current is not None else [])]
        lists += self.parents.values()
        for lst in lists:  # partitions (or a list the stream cut short): decided now
            if lst.held:
                self.select(lst, final=True)
        if self.p.anywhere:
            self.release(barrier=False)
        rows, self.rows = self.rows, []
        if self.aggregator is None:
            return rows
        for key, counts in self.counts.items():
            if counts[0]:  # a partition with matches
                self.aggregator.add_counts(key, [counts[1:]])
        order = list(self.lists) if self.p.partition_attribute is not None else None
        return rows + self.aggregator.rows(order)

    # outputs
    def in_order(self, found: list) -> list:
        """The matches that end at one element, without duplicates, in binding order."""
        if len(found) > 1:
            if self.p.varless:
                found = list({_identity(regs): regs for regs in found}.values())
            kleene = self.p.kleene_slots
            found.sort(key=lambda regs: _order(regs, kleene))
        return found

    def emit(self, lst: _List, found: list, ordered: bool = False) -> None:
        """The matches that end at one element: in binding order, without duplicates
        (``ordered``: they are)."""
        p = self.p
        if p.count_only:  # the order does not matter
            if len(found) > 1 and p.varless and not ordered:
                found = list({_identity(regs): regs for regs in found}.values())
            counts = lst.counts
            for regs in found:
                counts[0] += 1
                for i, ref in enumerate(p.count_refs):
                    counts[i + 1] += _count(ref, regs, p)
            return
        if not ordered:
            found = self.in_order(found)
        row_of = self.row_of
        if row_of is not None:  # rows of attributes: read from the elements as they are
            self.rows += [row_of(regs) for regs in found]
            return
        for regs in found:
            binding = self.binding(lst, regs)
            if self.aggregator is not None:
                self.aggregator.add(lst.key, binding)
            else:  # mode rows: the end node is not printed
                self.rows.append(output_row(p.analysis, binding, None, self.values_only))

    # selection policies
    def start_of(self, regs: tuple, end: tuple) -> tuple:
        """Where a match starts: the first element its own variables bind, else its end."""
        if self.head_slot is not None:  # the head's element: every match binds it first
            reg = regs[self.head_slot]
            return (reg[0], reg[1])
        starts = [
            (reg[0][0], reg[0][1]) if kleene else (reg[0], reg[1])
            for slot, kleene in self.own_slots
            if (reg := regs[slot]) is not None
        ]
        return min(starts) if starts else end

    def hold(self, lst: _List, found: list) -> None:
        """``emit`` under a selection policy: the matches wait in the list and the queue."""
        p = self.p
        end = (lst.pred[0], lst.pred[1])  # the element just stepped
        for regs in self.in_order(found):
            start = self.start_of(regs, end)
            held = _Held(lst, regs, start, end)
            if self.selection == "all":
                held.selected = True
            else:
                lst.held.setdefault(start, []).append(held)
            if p.anywhere:
                heappush(self.queue, (end, self.seq, held))
                self.seq += 1
            else:
                self.queue.append(held)

    def select(self, lst: _List, final: bool) -> None:
        """Decide the list's held matches that no live partial match can still join (all
        of them when ``final``), as the engine's emitter does, and let the queue go."""
        floor = None
        if not final:
            growing = self.p.growing  # (a partial match in the last item, no Kleene-*, is over)
            if self.head_slot is not None:  # the partial matches are in the order they began
                floor = next((self.start_of(r, None) for j, r in lst.threads if j in growing), None)
            else:
                starts = [
                    self.start_of(regs, None)
                    for j, regs in lst.threads
                    if j in growing and any(regs[slot] is not None for slot, _ in self.own_slots)
                ]
                floor = min(starts, default=None)
        held = lst.held  # start -> its matches, in order
        while held:
            first = min(held)
            if floor is not None and first >= floor:
                break
            group = held.pop(first)  # (in match order)
            for h in group:
                h.selected = False
            chosen, lst.last_end = pick(self.selection, first, [h.end for h in group], lst.last_end)
            for i in chosen:
                group[i].selected = True
        self.release()

    def release(self, barrier: bool = True) -> None:
        """Hand out the queue's matches that are decided, in order, up to the first that is
        not; with lists inside lists, only those that end before the outermost open list
        element (its own matches come first) unless not ``barrier``."""
        queue = self.queue
        if not self.p.anywhere:
            while queue and queue[0].selected is not None:
                h = queue.popleft()
                if h.selected:
                    self.emit(h.lst, [h.regs], ordered=True)
            return
        stop = None
        if barrier and self.pending_at:
            outer = self.pending_at[min(self.pending_at)][0]
            stop = (outer[0], outer[1])
        while queue:
            end, _, h = queue[0]
            if h.selected is None or (stop is not None and end >= stop):
                break
            heappop(queue)
            if h.selected:
                self.emit(h.lst, [h.regs], ordered=True)

    def binding(self, lst: _List, regs: tuple) -> Binding:
        slots = []
        for slot, reg in enumerate(regs):
            if slot in self.p.kleene_slots:
                slots.append(() if reg is None else tuple(self.node(lst, e) for e in _all(reg[3])))
            else:
                slots.append(None if reg is None else self.node(lst, reg))
        return Binding(tuple(slots), (None,) * self.p.analysis.query.groups)

    @staticmethod
    def node(lst: _List, element: list) -> Node:
        """The element as a node for the engine's output code: its attributes and the
        children whose text the query reads."""
        if element[5] is None:
            doc = element[0]
            node = element[5] = Node.element(element[2], doc, element[1], lst.root, element[4])
            for name, ident, texts in element[6]:
                child = Node.element(name, doc, ident, node, [])
                for value, text_ident in texts:
                    text = Node(TEXT_NODE, None, doc, text_ident, child)
                    text.value = value
                    child.children.append(text)
                node.children.append(child)
        return element[5]


class _ElementReader:
    """``read(i, doc, name)``: the list element that opens at event ``i`` of a batch, as
    the run keeps it: ``[doc, ident, tag, fields, raw attributes, node, children]``."""

    def __init__(self, reader: ListReader, batch, kinds: np.ndarray) -> None:
        symbols = batch.symbols
        self.wanted_ids = {symbols[n]: at for n, at in reader.attributes.items() if n in symbols}
        self.width, self.pair, self.batch = reader.width, reader.pair, batch
        self.children = list(reader.children.values())
        self.keep_raw = reader.keep_raw
        # without raw attributes to keep, fields come from tables numpy made for the batch
        self.fields = (
            None if self.keep_raw else _attribute_tables(batch, kinds, -2, self.wanted_ids)[1]
        )

    def __call__(self, i: int, doc, name: str) -> list:
        batch, pair = self.batch, self.pair
        found = [None] * self.width
        for at in self.children:
            found[at] = []
        raw = [] if self.keep_raw else None
        if self.fields is not None:
            for at, table_at in self.fields:
                value = table_at.get(i)
                if value is not None:
                    found[at] = pair(value)
            return [doc, batch.nodes[i], name, found, raw, None, []]
        kinds, names, values, nodes = batch.kinds, batch.names, batch.values, batch.nodes
        table, wanted_ids = batch.symbols.names, self.wanted_ids
        j = i + 1
        while j < len(kinds) and kinds[j] == _ATTR:
            at = wanted_ids.get(names[j])
            if at is not None:
                found[at] = pair(values[j])
            raw.append((table[names[j]], values[j], nodes[j]))
            j += 1
        return [doc, nodes[i], name, found, raw, None, []]


def _attribute_tables(batch, kinds: np.ndarray, key_id: int, wanted_ids: dict) -> tuple:
    """({open position: partition key}, [(field, {open position: value})]) for a batch:
    the attributes named ``key_id`` and those of ``wanted_ids``, by the position of the
    element they follow."""
    names = np.frombuffer(batch.names, dtype=np.int32)
    attrs = kinds == _ATTR
    opens = np.flatnonzero(kinds == _OPEN)
    values = batch.values

    def table(name_id: int) -> dict:
        found = np.flatnonzero(attrs & (names == name_id))
        if not len(found):
            return {}
        owners = opens[np.searchsorted(opens, found) - 1]  # an attribute follows its open
        return dict(zip(owners.tolist(), [values[i] for i in found.tolist()], strict=True))

    keys = table(key_id) if key_id >= 0 else {}
    return keys, [(at, table(aid)) for aid, at in wanted_ids.items()]


def _attribute_getter(pattern: SequencePattern, expr) -> tuple | None:
    """(slot, 0/1 for a Kleene-* run's first/last or None, attribute name) of a reference
    to one element's attribute (``$X@buyer``, ``first($T)@price``); None for others."""
    if not isinstance(expr, A.VarRef) or expr.func == "prev":
        return None
    path = expr.path
    if type(path) is not A.Step or path.axis != A.ATTRIBUTE or path.name == A.WILDCARD:
        return None
    slot = pattern.analysis.index[expr.var]
    at = {"first": 0, "last": 1}.get(expr.func) if slot in pattern.kleene_slots else None
    if slot in pattern.kleene_slots and at is None:
        return None  # all of a Kleene-* variable's elements
    return slot, at, path.name


def _attribute_of(regs: tuple, slot: int, at, name: str):
    """The attribute ``name`` of a match's element (its raw attributes), or None."""
    element = regs[slot]
    if element is not None and at is not None:
        element = element[at]
    if element is not None:
        for key, value, _ in element[4]:
            if key == name:
                return value
    return None


def attribute_row(pattern: SequencePattern):
    """fn(regs) -> the output row of a match, for a return clause of attributes of single
    elements (``$X@buyer``, ``first($T)@price``) read from its elements' raw attributes —
    what the engine's output code gives (``matches.output_row``: the first value, or null)
    without making nodes; None for other return clauses."""
    getters = []
    for term in pattern.analysis.query.returns:
        getter = None if term.aggregate is not None else _attribute_getter(pattern, term.expr)
        if getter is None:
            return None
        getters.append(getter)

    def row(regs: tuple) -> list:
        return [_attribute_of(regs, slot, at, name) for slot, at, name in getters]

    row.terms = tuple(getters)  # equal return clauses make equal rows
    return row


def attribute_reader(pattern: SequencePattern, refs):
    """fn(regs) -> read(ref): the values of each of ``refs`` (attribute references, as
    ``evaluate.values`` gives them: the value, or none) in a match, read from its
    elements' raw attributes without making nodes; None when one of them is another
    kind of reference."""
    getters = {}
    for ref in refs:
        getter = _attribute_getter(pattern, ref)
        if getter is None:
            return None
        getters[id(ref)] = getter

    def reader(regs: tuple):
        def read(ref) -> list:
            value = _attribute_of(regs, *getters[id(ref)])
            return [] if value is None else [value]

        return read

    return reader


def _identity(regs: tuple) -> tuple:
    """What makes two bindings the same match (bound elements, runs as first and length)."""
    return tuple(
        None if reg is None else (id(reg),) if reg.__class__ is list else (id(reg[0]), reg[2])
        for reg in regs
    )


def _order(regs: tuple, kleene: set) -> tuple:
    """The binding order of matches ending at one element (``Binding.sort_key``): a run of
    consecutive list elements compares as (its first element, its length)."""
    key = []
    for slot, reg in enumerate(regs):
        if reg is None:
            key.append(())
        elif slot in kleene:
            key.append(((reg[0][0], reg[0][1]), reg[2]))
        else:
            key.append((reg[0], reg[1]))
    return tuple(key)


_PYTHON_OPS = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _StepSource:
    """Python source for a pattern's step function, conditions inlined where they read one
    value a side (the others call the closures of ``SequencePattern._condition``).

    step(list, e) advances each partial match ``(item, regs)`` of the list by
    element ``e`` (``p`` is the list's previous element): for each item the match can
    move to, a block tests the name, the step predicates, binds the variable, checks the
    iteration conditions and the per-match conditions decidable there, keeps the new
    partial match and, when every later item is a Kleene-*, the match.
    """

    def __init__(self, pattern: SequencePattern, count_in_place: bool = True) -> None:
        self.p = pattern
        self.count_in_place = count_in_place and pattern.counts_in_place
        self.namespace: dict = {
            "_identity": _identity,
            "_string": _string,
            "_first": _first,
            "_one": _one,
            "_arithmetic_pair": _arithmetic_pair,
            "_deduplicate": _deduplicate,
        }
        self.constants: dict = {}  # (type, value) -> its name in the namespace
        self.lines: list[str] = []
        self.fresh = 0
        self.reads_match = False  # whether the condition just made reads the partial match
        self.hoisted: dict = {}  # a condition on e and p alone -> its variable, in one step
        self.hoisted_exprs: dict = {}  # its variable -> the condition's source
        self.in_loop = False  # making the blocks of the loop over the partial matches
        self.binds_e = None

    def build(self):
        p = self.p
        out = self.lines
        out += ["def make_step(emit):", "    def step(lst, e):", "        p = lst.pred"]
        out += ["        new = []", "        found = []", "        new_append = new.append"]
        out += ["        found_append = found.append", "        #hoisted"]
        out += ["        for j, regs in lst.threads:"]
        self.in_loop = True
        n = len(p.items)
        for j in range(n):
            targets = _targets(p.items, j)
            if not targets:
                continue
            out.append(f"            {'if' if j == 0 else 'elif'} j == {j}:")
            branch = len(out)
            for k in targets:
                self.block(j, k, "regs", "                ")
            if len(out) == branch:  # every block can never pass: the match ends here
                out.append("                pass")
        out.append("            pass")
        self.in_loop = False
        at = out.index("        #hoisted")  # computed once, before the partial matches
        hoisted = [
            f"            {name} = bool({expr})" for name, expr in self.hoisted_exprs.items()
        ]
        out[at : at + 1] = ["        if lst.threads:", *hoisted] if hoisted else ["        pass"]
        empty = self.constant(tuple(None for _ in p.analysis.variables))
        self.block(-1, 0, empty, "        ")  # (when it can never pass, no new match starts)
        if p.varless:
            out.append("        if len(new) > 1:")
            out.append("            new = _deduplicate(new)")
        out += ["        lst.threads = new", "        lst.pred = e", "        if found:"]
        out += ["            emit(lst, found)", "    return step"]
        source = "\n".join(out) + "\n"
        exec(compile(source, "<xseq flat sequence>", "exec"), self.namespace)
        return source, self.namespace["make_step"]

    def known(self, after: int) -> dict:
        """Per variable slot, whether a partial match that ends in item ``after`` has bound
        it: "yes", "no" or "maybe" (a Kleene-* passed over may be empty)."""
        known = {}
        for i, item in enumerate(self.p.items):
            if item.slot is not None:
                if item.star:
                    known[item.slot] = "yes" if i == after else "maybe" if i < after else "no"
                else:
                    known[item.slot] = "yes" if i <= after else "no"
        return known

    def moved(self, before: dict, j: int, k: int) -> dict:
        """What is bound once a partial match moves from item ``j`` to item ``k``: what was
        before, none of the Kleene-* items passed over (an empty run: a condition on its
        first or last is false, and the block is dead code), and ``k``'s variable."""
        state = dict(before)
        for i in range(j + 1, k):
            if self.p.items[i].slot is not None:
                state[self.p.items[i].slot] = "no"
        if self.p.items[k].slot is not None:
            state[self.p.items[k].slot] = "yes"
        return state

    def block(self, j: int, k: int, regs: str, pad: str) -> None:
        """The code that moves a partial match ``regs``, which ends in item ``j`` (-1: a new
        one), to item ``k`` with ``e``. The per-match conditions that became decidable on
        the way are checked (those decidable at ``j`` held already)."""
        p = self.p
        item = p.items[k]
        out = self.lines
        first_line = len(out)  # a block that can never pass is left out altogether
        self.binds_e = None  # (the partial match's name, the slot it binds to e), once made
        out.append(f"{pad}while True:")
        pad += "    "
        if item.name is not None:
            out.append(f"{pad}if e[2] != {item.name!r}:")
            out.append(f"{pad}    break")
        self.state = self.known(j)
        for pred in item.preds:
            if not self.test(self.fresh_condition(pred, True, regs), pad):
                del out[first_line:]
                return
        before = self.state
        self.state = self.moved(before, j, k)
        bound = f"r{k}" if item.slot is not None else regs
        later = []  # the conditions that read the partial match: after it is made
        for cond in item.conds:  # those on e and p alone first: a failed one costs no tuple
            expr = self.fresh_condition(cond, True, bound)
            if self.reads_match:
                later.append(expr)
            elif not self.test(expr, pad):
                del out[first_line:]
                return
        if item.slot is not None:
            slot, width = item.slot, len(p.analysis.variables)
            if item.star:
                chain = "(e, q[3])" if p.keep_nodes else "None"
                new = f"(e, e, 1, {'(e, None)' if p.keep_nodes else 'None'})"
                more = f"(q[0], e, q[2] + 1, {chain})"
                if before[slot] != "no":
                    out.append(f"{pad}q = {regs}[{slot}]")
                value = {"no": new, "yes": more}.get(
                    before[slot], f"({new} if q is None else {more})"
                )
            else:
                value = "e"
            fields = [
                value if i == slot else "None" if before[i] == "no" else f"{regs}[{i}]"
                for i in range(width)
            ]
            out.append(f"{pad}{bound} = ({', '.join(fields)},)")
            self.binds_e = (bound, slot)
        for expr in later:
            self.reads_match = True
            if not self.test(expr, pad):
                del out[first_line:]
                return
        held = sum(1 for at in p.settle if at <= j)
        settled = sum(1 for at in p.settle if at <= k)
        for c in range(held, settled):
            if not self.test(self.fresh_condition(p.per_match[c], False, bound), pad):
                del out[first_line:]
                return
        out.append(f"{pad}new_append(({k}, {bound}))")
        if k >= p.last_mandatory:
            rest = [self.condition(c, False, bound) for c in p.per_match[settled:]]
            rest = [r for r in rest if r != "True"]
            inner = pad
            if "False" in rest:
                out.append(f"{pad}break")  # no match can end here
                return
            if rest:
                out.append(f"{pad}if {' and '.join(f'({r})' for r in rest)}:")
                inner += "    "
            if self.count_in_place:  # a match: add its counts, in place
                out.append(f"{inner}counts = lst.counts")
                out.append(f"{inner}counts[0] += 1")
                for i, ref in enumerate(p.count_refs):
                    out.append(f"{inner}counts[{i + 1}] += {self.count(ref, bound)}")
            else:
                out.append(f"{inner}found_append({bound})")
        out.append(f"{pad}break")

    def count(self, ref: A.VarRef, regs: str) -> str:
        """Source for the number of nodes ``count(ref)`` counts in a match."""
        slot = self.p.analysis.index[ref.var]
        known = self.state[slot]
        whole = slot in self.p.kleene_slots and ref.func is None
        if known == "no":
            return "0"
        if known == "yes":
            return f"{regs}[{slot}][2]" if whole else "1"
        if whole:
            return f"(0 if {regs}[{slot}] is None else {regs}[{slot}][2])"
        return f"(0 if {regs}[{slot}] is None else 1)"

    def test(self, expr: str, pad: str) -> bool:
        """A guard of the block; False when it always fails (the rest of the block is dead).
        A guard on the element and its predecessor alone (``$X@price < prev($X)@price``)
        is computed once per step, before the partial matches, not once per each."""
        if expr == "True":
            return True
        if expr == "False":
            self.lines.append(f"{pad}break")
            return False
        if self.in_loop and not self.reads_match:
            key = re.sub(r"\b([abc])\d+\b", r"\1", expr)  # the same test, other names
            name = self.hoisted.get(key)
            if name is None:
                name = self.hoisted[key] = f"h{len(self.hoisted)}"
                self.hoisted_exprs[name] = expr
            expr = name
        self.lines.append(f"{pad}if not ({expr}):")
        self.lines.append(f"{pad}    break")
        return True

    def constant(self, value) -> str:
        """A name for ``value`` in the step function's namespace (one per constant number,
        string or pair: a test written twice reads the same names, and is computed once)."""
        key = (type(value), value)
        try:
            name = self.constants.get(key)
        except TypeError:  # not hashable: a name of its own
            key = name = None
        if name is None:
            name = f"_k{len(self.namespace)}"
            self.namespace[name] = value
            if key is not None:
                self.constants[key] = name
        return name

    def single(self, expr, iteration: bool, regs: str) -> str | None:
        """Source for an operand with at most one value (a pair, or None), else None."""
        found = self.operand(expr, iteration, regs)
        return None if found is None or found[1] else found[0]

    def operand(self, expr, iteration: bool, regs: str) -> tuple | None:
        """Source for an operand's values, and whether it has many: a pair or None (an
        attribute, a constant, arithmetic), or a sequence of pairs (a child's texts, how
        JSON's members arrive); None when the closures must read it."""
        p = self.p
        if isinstance(expr, A.Const):
            return self.constant(_pair(expr.value)), False
        if isinstance(expr, A.Arith):  # on the first value of each side: computed inline
            sides = [self.operand(side, iteration, regs) for side in (expr.left, expr.right)]
            if None in sides:
                return None
            if any(source in ("None", "()") for source, _ in sides):
                return "None", False
            left, right = (f"_first({src})" if many else src for src, many in sides)
            return f"{self.constant(_arithmetic(expr.op))}({left}, {right})", False
        if not isinstance(expr, A.VarRef | A.RelPath) or expr.path is None:
            return None
        at = p._field(expr.path)
        many = not p._is_attribute(at)  # a child's text(): any number of values
        if isinstance(expr, A.RelPath):
            return f"e[3][{at}]", many
        slot = p.analysis.index[expr.var]
        if expr.func == "prev":
            return f"p[3][{at}]", many
        if expr.func is None and iteration and slot in p.kleene_slots:
            return f"e[3][{at}]", many
        if slot in p.kleene_slots and expr.func not in ("first", "last"):
            return None  # all of a Kleene-* variable's nodes
        if (regs, slot) == self.binds_e and expr.func in (None, "last"):
            return f"e[3][{at}]", many  # the element just bound is read from e
        self.reads_match = True
        node = f"{regs}[{slot}]"
        if slot in p.kleene_slots:
            node += "[0]" if expr.func == "first" else "[1]"
        known, empty = self.state[slot], "()" if many else "None"
        if known == "no":
            return empty, many
        if known == "yes":
            return f"{node}[3][{at}]", many
        return f"({empty} if {regs}[{slot}] is None else {node}[3][{at}])", many

    def compare_numbers(self, cond: A.Compare, iteration: bool, regs: str) -> str | None:
        """Source for a comparison with arithmetic on a side, computed without a call or a
        pair: its numbers compared when every value is a finite number, the pairs (strings
        where a result is not finite) otherwise; None when neither side is arithmetic
        this way (the pair form is used)."""
        if not (isinstance(cond.left, A.Arith) or isinstance(cond.right, A.Arith)):
            return None
        guards: list[str] = []
        numbers, pairs, finite = [], [], []
        computed = sum(isinstance(side, A.Arith) for side in (cond.left, cond.right))
        for side in (cond.left, cond.right):
            if isinstance(side, A.Arith):
                found = self.arithmetic(side, iteration, regs, guards)
                if found is None:
                    return None
                number, expr = found
                numbers.append(number)
                pairs.append(f"_arithmetic_pair({number})")
                if computed == 1:  # computed where its finiteness is tested, first
                    finite.insert(0, f"({number} := {expr}) - {number} == 0")
                else:
                    guards.append(f"({number} := {expr}) is not None")
                    finite.append(f"{number} - {number} == 0")
            elif isinstance(side, A.Const):
                pair = _pair(side.value)
                pairs.append(self.constant(pair))
                numbers.append(self.constant(pair[1]))
                if pair[1] is None:
                    finite.append("False")
            else:
                found = self.single(side, iteration, regs)
                if found is None:
                    return None
                name = self.temporary("b")
                guards.append(f"({name} := {found}) is not None")
                pairs.append(name)
                numbers.append(f"{name}[1]")
                finite.append(f"{name}[1] is not None")
        if "None" in guards:
            return "False"  # an empty operand: the comparison is false
        op = _PYTHON_OPS[cond.op]
        slow = self.constant(_compare_pairs(cond.op))
        test = (
            f"(({numbers[0]} {op} {numbers[1]}) if {' and '.join(finite)} "
            f"else {slow}({pairs[0]}, {pairs[1]}))"
        )
        return f"({' and '.join([*guards, test])})"

    def arithmetic(self, expr: A.Arith, iteration: bool, regs: str, guards: list):
        """(a name for ``expr``'s number, the source computing it from its sides), with the
        guards its sides need (appended): each side's first value has a number (an inner
        result a finite one), a divisor is not zero — else the operand is empty
        (``values.arith``). None when a side must be read by the closures; a guard "None"
        when a side never has a value."""
        sides = []
        for side in (expr.left, expr.right):
            if isinstance(side, A.Arith):
                found = self.arithmetic(side, iteration, regs, guards)
                if found is None:
                    return None
                number, inner = found
                guards.append(f"({number} := {inner}) - {number} == 0")
            elif isinstance(side, A.Const):
                value = _pair(side.value)[1]
                number = self.constant(value)
                if value is None:  # no number: the result is empty
                    guards.append("None")
            else:
                found = self.operand(side, iteration, regs)
                if found is None:
                    return None
                source, many = found
                if source in ("None", "()"):
                    guards.append("None")
                number = self.temporary("a")
                source = f"_first({source})" if many else source
                guards.append(f"({number} := {source}) is not None")
                guards.append(f"({number} := {number}[1]) is not None")
            sides.append(number)
        if expr.op == "div":
            guards.append(f"{sides[1]} != 0")
        symbol = "/" if expr.op == "div" else expr.op
        return self.temporary("c"), f"{sides[0]} {symbol} {sides[1]}"

    def temporary(self, role: str) -> str:
        """A fresh name for a value the step source computes once (``a``: a side's number,
        ``b``: a value, ``c``: a result)."""
        self.fresh += 1
        return f"{role}{self.fresh}"

    def fresh_condition(self, cond, iteration: bool, regs: str) -> str:
        """``condition``, noting in ``reads_match`` whether it reads the partial match."""
        self.reads_match = False
        return self.condition(cond, iteration, regs)

    def condition(self, cond, iteration: bool, regs: str) -> str:
        """Source for a condition's effective boolean value ("True"/"False" when known)."""
        if isinstance(cond, A.Compare):
            sides = [self.operand(side, iteration, regs) for side in (cond.left, cond.right)]
            if any(side is not None and side[0] in ("None", "()") for side in sides):
                return "False"  # an empty operand: every comparison is false
            if None not in sides and (sides[0][1] or sides[1][1]):  # many values: any pair
                left, right = (src if many else f"_one({src})" for src, many in sides)
                test = self.constant(functools.partial(_compare, COMPARISONS[cond.op]))
                return f"{test}({left}, {right})"
            numbers = self.compare_numbers(cond, iteration, regs)
            if numbers is not None:
                return numbers
            left, right = (None if side is None else side[0] for side in sides)
            if left is not None and right is not None:
                a, b = f"a{self.fresh}", f"b{self.fresh}"
                self.fresh += 1
                op = _PYTHON_OPS[cond.op]
                return (
                    f"(({a} := {left}) is not None and ({b} := {right}) is not None and "
                    f"({a}[1] {op} {b}[1] if {a}[1] is not None and {b}[1] is not None "
                    f"else ({a}[0] or _string({a})) {op} ({b}[0] or _string({b}))))"
                )
        if isinstance(cond, A.And | A.Or):
            left = self.condition(cond.left, iteration, regs)
            right = self.condition(cond.right, iteration, regs)
            absorbing, neutral = ("False", "True") if isinstance(cond, A.And) else ("True", "False")
            if absorbing in (left, right):
                return absorbing
            if left == neutral or right == neutral:
                return right if left == neutral else left
            word = " and " if isinstance(cond, A.And) else " or "
            return f"({left}{word}{right})"
        if isinstance(cond, A.Not):
            arg = self.condition(cond.arg, iteration, regs)
            return {"True": "False", "False": "True"}.get(arg, f"(not {arg})")
        self.reads_match = True
        closure = self.constant(self.p._condition(cond, iteration))
        return f"{closure}({regs}, e, p)"


# the node kinds, field sources and operators of the list kernel's Stepper (_lists.c)
_CONST, _FIELD, _ARITH, _CMP, _AND, _OR, _NOT, _CALL = range(8)
_SOURCES = {"e": 0, "p": 1, None: 2, "first": 3, "last": 4}
_CMP_OPS = {"<": 0, "<=": 1, "=": 2, "!=": 3, ">": 4, ">=": 5}  # Python's rich comparisons
_ARITH_OPS = {"+": 0, "-": 1, "*": 2, "div": 3}


class _StepProgram:
    """A pattern's step function as data, for the list kernel's ``Stepper`` (the same
    moves as ``_StepSource``'s generated function, which stays as its reference).

    Per item ``j`` (-1: a new partial match) its blocks, in ``_StepSource``'s order: to
    item ``k``, the name to test, the conditions on the registers before binding (step
    predicates), those after (per-iteration conditions, then the per-match conditions
    settled on the way), and, where a match can end, the per-match conditions left. A
    condition is a tree of nodes (a constant pair, a field of ``e``, ``p`` or a variable's
    element, arithmetic, a comparison, and/or/not) or, for what those do not cover, the
    closure ``SequencePattern._condition`` makes; one that reads no partial match is
    decided once per element."""

    def __init__(self, pattern: SequencePattern) -> None:
        self.p = pattern
        self.nodes: list[tuple] = []
        self.conds: list[tuple] = []  # (root node, reads no partial match)
        self.ids: dict = {}  # (id(condition), iteration) -> its id
        self.reads_match = False
        items = pattern.items
        self.blocks = [self.block(j, k) for j in range(-1, len(items)) for k in _targets(items, j)]

    def stepper(self, emit, count_in_place: bool):
        """The kernel's step function; matches counted in place where only counts are
        returned and ``count_in_place``, else handed to ``emit(list, found)``."""
        p = self.p
        counts = None
        if count_in_place and p.counts_in_place:
            counts = tuple(
                (p.analysis.index[ref.var], p.analysis.index[ref.var] in p.kleene_slots
                 and ref.func is None)
                for ref in p.count_refs
            )  # fmt: skip
        dedupe = _deduplicate if p.varless else None
        empty = tuple(None for _ in p.analysis.variables)
        return _Stepper(
            self.nodes, self.conds, self.blocks, len(p.items), empty, p.keep_nodes, counts, emit,
            dedupe, _arithmetic_pair, as_string,
        )  # fmt: skip

    def block(self, j: int, k: int) -> tuple:
        p, item = self.p, self.p.items[k]
        pre = tuple(self.condition_id(c, True) for c in item.preds)
        held = sum(1 for at in p.settle if at <= j)
        settled = sum(1 for at in p.settle if at <= k)
        conds = [self.condition_id(c, True) for c in item.conds]
        conds += [self.condition_id(c, False) for c in p.per_match[held:settled]]
        final = k >= p.last_mandatory
        rest = tuple(self.condition_id(c, False) for c in p.per_match[settled:]) if final else ()
        slot = -1 if item.slot is None else item.slot
        return (j, k, item.name, pre, tuple(conds), slot, item.star, final, rest)

    def condition_id(self, cond, iteration: bool) -> int:
        key = (id(cond), iteration)
        found = self.ids.get(key)
        if found is None:
            self.reads_match = False
            root = self.condition(cond, iteration)
            found = self.ids[key] = len(self.conds)
            self.conds.append((root, not self.reads_match))
        return found

    def node(self, kind, op=0, src=0, slot=0, at=0, many=False, left=-1, right=-1, obj=None):
        self.nodes.append((kind, op, src, slot, at, many, left, right, obj))
        return len(self.nodes) - 1

    def condition(self, cond, iteration: bool) -> int:
        if isinstance(cond, A.Compare):
            left = self.operand(cond.left, iteration)
            right = self.operand(cond.right, iteration)
            if left is not None and right is not None:
                return self.node(_CMP, _CMP_OPS[cond.op], left=left, right=right)
        elif isinstance(cond, A.And | A.Or):
            left = self.condition(cond.left, iteration)
            right = self.condition(cond.right, iteration)
            return self.node(_AND if isinstance(cond, A.And) else _OR, left=left, right=right)
        elif isinstance(cond, A.Not):
            return self.node(_NOT, left=self.condition(cond.arg, iteration))
        self.reads_match = True
        return self.node(_CALL, obj=self.p._condition(cond, iteration))

    def operand(self, expr, iteration: bool) -> int | None:
        """A node for an operand's values (as ``_StepSource.operand`` reads them), or None
        when the closures must read it."""
        p = self.p
        if isinstance(expr, A.Const):
            return self.node(_CONST, obj=_pair(expr.value))
        if isinstance(expr, A.Arith):
            left = self.operand(expr.left, iteration)
            right = self.operand(expr.right, iteration)
            if left is None or right is None:
                return None
            return self.node(_ARITH, _ARITH_OPS[expr.op], left=left, right=right)
        if not isinstance(expr, A.VarRef | A.RelPath) or expr.path is None:
            return None
        at = p._field(expr.path)
        many = not p._is_attribute(at)
        if isinstance(expr, A.RelPath):
            return self.node(_FIELD, src=_SOURCES["e"], at=at, many=many)
        slot = p.analysis.index[expr.var]
        if expr.func == "prev":
            return self.node(_FIELD, src=_SOURCES["p"], at=at, many=many)
        kleene = slot in p.kleene_slots
        if expr.func is None and iteration and kleene:
            return self.node(_FIELD, src=_SOURCES["e"], at=at, many=many)
        if kleene and expr.func not in ("first", "last"):
            return None  # all of a Kleene-* variable's nodes
        self.reads_match = True
        src = _SOURCES[expr.func if kleene else None]
        return self.node(_FIELD, src=src, slot=slot, at=at, many=many)


def _targets(items: list, j: int) -> list[int]:
    """The items a partial match in item ``j`` can move to by one element, in order (-1: a
    new partial match, the head): ``j`` again when it is a Kleene-*, then the next ones up
    to the first that is not."""
    if j < 0:
        return [0]
    targets = [j] if items[j].star else []
    for k in range(j + 1, len(items)):
        targets.append(k)
        if not items[k].star:
            break
    return targets


def _deduplicate(new: list) -> list:
    """A varless pattern's partial matches, each (item, registers) once."""
    return list({(t[0], _identity(t[1])): t for t in new}.values())
