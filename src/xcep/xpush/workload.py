"""A workload of filters: parsed, rewritten, compiled into one AFA; loaded from files.

A filters file has one ``ID XPATH`` per line (the id, whitespace, the
filter); ``#`` starts a comment line; blank lines are ignored. An id that is
a decimal integer is an integer (ids sort numerically), otherwise a string.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path as FilePath

from xcep.collector import collector_paused
from xcep.dicts import hashed_dict
from xcep.idlines import FilterError, filter_blocks
from xcep.lexing import expression
from xcep.xpush.afa import AFA, Program, Recorder, conjunction_program
from xcep.xpush.ast import And, Compare, Const, Exists, Not, Or, Path, Step
from xcep.xpush.counted_plans import Plan, Template, conjunction, plan_of
from xcep.xpush.parser import FilterSyntaxError, parse_filter
from xcep.xpush.rewrite import UnsupportedFilter, normalize

COMPILE_EVERY = 50_000  # filters added before they are compiled into the AFA (and dropped)
BLOCK = 2_048  # filters added together (what a block holds stays in the processor's caches)
SHAPE_LIMIT = 65_536  # filter shapes kept (compile_filter) before the cache is cleared


@dataclass(slots=True)
class _Shape:
    """A filter shape parsed and rewritten once: the tree of the first filter of the shape
    (with its constants and names), and the shape's program (made when first asked for;
    or put together from its conjuncts' programs, and then no tree); its plan where its
    values are counted (``counting.py``; the first filter's constants and names in it),
    put together from its conjuncts' where it can be, and then neither tree nor program
    until one is asked for."""

    path: Path | None
    constants: tuple
    names: tuple
    program: Program | None = None
    plan: Template | None = None
    counted: bool = False  # its filters' values are counted (its plan tests values)
    # its plan where counted, else None: made of the two above, which never change (read
    # for every filter of a block by one map)
    counted_plan: Template | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.counted_plan = self.plan if self.counted else None


_COUNTED_PLAN = attrgetter("counted_plan")
_by_shape: dict[tuple, _Shape] = {}
_names_used: dict[tuple, tuple] = {}  # the names filters use, each tuple once (cleared alike)
# a filter's text → what _program made of it (equal filters: the same; cleared alike)
_made_by_text: dict[str, tuple] = {}
# (plan, places, names) → its Template, one object for shapes written apart (``/a[b=1]``,
# ``/a[b = 1]``): their filters are one filter to the counter where equal (cleared alike)
_templates: dict[tuple, Template] = {}


def _known_shape(text: str, fid) -> tuple[_Shape, tuple, tuple]:
    """(the shape of a filter, the filter's constants, its names): parsed and rewritten
    when new, or raise ``FilterError``.

    Subscriptions are mostly a few shapes with different constants and names: a
    filter's *shape* (its tokens, each constant by its first place among the filter's
    distinct constants, each element or attribute name by its first place among its
    names) is parsed and rewritten once. Neither the parser nor the rewrite rules look
    at a constant's value or at a name, only at whether two are equal, which the shape
    keeps (the names the parser reads as words stay in the shape: ``and``, ``or``, a
    name before ``(`` or ``::``)."""
    key, constants, names = shape_of(text)
    found = _by_shape.get(key)
    if found is None:
        found = _new_shape(key, text, fid, constants, names)
    return found, constants, names


def _new_shape(key, text: str, fid, constants: tuple, names: tuple) -> _Shape:
    """The shape ``key`` of a filter first seen in ``text``: its plan read from the text
    (``_read_plan``) or its program put together from its conjuncts' where it can be,
    else its text parsed and rewritten; kept for the filters of the shape to come. Or
    raise ``FilterError``."""
    plan = _read_plan(text)
    program = None if plan is not None else _conjunction_program(text, constants, names)
    try:  # (a program or plan put together has no tree: ``compile_filter`` parses it)
        tree = None if program is not None or plan is not None else _tree(text)
        plan = plan or plan_of(tree)
        template = plan and Template.of(plan, constants, names)
        if template is not None:
            template = _templates.setdefault(
                (template.plan, template.places, template.names), template
            )
        counted = template is not None and template.counted
        found = _Shape(tree, constants, names, program, template, counted)
    except FilterSyntaxError as exc:
        raise FilterError(exc.message, fid, column=exc.position) from None
    except UnsupportedFilter as exc:
        raise FilterError(str(exc), fid) from None
    if len(_by_shape) >= SHAPE_LIMIT:
        _by_shape.clear(), _names_used.clear(), _made_by_text.clear(), _templates.clear()
    _by_shape[key] = found
    return found


def _tree(text: str) -> Path:
    """A filter's text parsed and rewritten (``normalize``: plain where the text has no
    ``.`` and no axis, so no ``..``, ``.[C]`` or ``self::node()[C]`` step), or raise
    ``FilterSyntaxError`` or ``UnsupportedFilter``."""
    return normalize(parse_filter(text), plain="." not in text and "::" not in text)


def compile_filter(text: str, fid=None) -> Path:
    """Parse and rewrite one filter (a filter of a known shape is that shape's tree with
    its own constants and names put in), or raise ``FilterError``."""
    shape, constants, names = _known_shape(text, fid)
    if shape.path is None:  # its program was put together from its conjuncts'
        return _tree(text)
    if shape.constants == constants and shape.names == names:
        return shape.path
    values = dict(zip(shape.constants, constants, strict=True))
    return _put(shape.path, values, dict(zip(shape.names, names, strict=True)))


def filter_program(text: str, fid=None) -> tuple[Program, tuple, tuple, tuple]:
    """(the program of a filter's shape, the constants and the names it uses, the filter's
    own key for early notification): what ``AFA.add_program`` compiles, without a tree
    per filter; or raise ``FilterError``."""
    return _program(text, *_known_shape(text, fid))


def _program(text: str, shape: _Shape, constants: tuple, names: tuple) -> tuple:
    """``filter_program`` of a filter whose shape is known."""
    if shape.program is None and shape.path is None:  # a plan put together: this filter's tree
        shape.program = Recorder.program(_tree(text), constants, names)
    elif shape.program is None:
        shape.program = Recorder.program(shape.path, shape.constants, shape.names)
    program = shape.program
    used = program.uses(constants)
    used_names = program.uses_names(names)  # one tuple for the many filters that name alike
    used_names = _names_used.setdefault(used_names, used_names)
    # equal filters (one program, the same constants and names) share their own state
    return program, used, used_names, ("early", program, used, used_names)


def filter_plan(text: str, fid=None) -> Plan | None:
    """The plan of a filter of the counted form (``counting.py``), or None when it is not
    of that form (counted or not: see ``filter_template``); or raise ``FilterError``."""
    shape, constants, names = _known_shape(text, fid)
    return None if shape.plan is None else shape.plan.plan_for(constants, names)


def filter_template(text: str, fid=None) -> tuple[Template, tuple, tuple] | None:
    """(the plan of a counted filter's shape, the filter's constants, its names): what
    ``CountedFilters`` compiles without a plan per filter; None when it is not counted:
    not of the form, or with no value to test (``Template.counted``)."""
    shape, constants, names = _known_shape(text, fid)
    if not shape.counted:
        return None
    return shape.plan, constants, _names_used.setdefault(names, names)


_NAME_CHAR = r"\w.\-\u00b7\u00c0-\uffff"
_NAME = r"[A-Za-z_\u00c0-\uffff][" + _NAME_CHAR + r"]*"
# what a shape cuts out: a string constant; a number where a token starts (not inside a
# name: the tokenizer reads ``a-1`` and ``x1.5`` as names); a name (or prefix:name) where
# a token starts, not before ``(`` or ``:`` (a function, an axis: words the parser reads)
PIECE_PATTERN = (
    r"""('[^']*'|"[^"]*")"""
    rf"|(?<![{_NAME_CHAR}])(-?(?:\d+(?:\.\d*)?|\.\d+))"
    rf"|(?<![{_NAME_CHAR}:])({_NAME}(?::{_NAME})?)(?![{_NAME_CHAR}:(]|\s*[(:])"
)


_WORDS = frozenset(("and", "or"))  # names the parser reads as operators: kept in the shape


# what cuts a filter's last predicate into conjuncts: a quoted string (passed over), a
# bracket or parenthesis (the depth), ``and`` between white space (a cut at depth 0), and
# ``or`` as a word (at depth 0: no cut, ``and`` binds tighter)
_CONJUNCT_MARK = (
    r"""'[^']*'|"[^"]*"|[\[\]()]|(?<=\s)and(?=\s)"""
    rf"|(?<![{_NAME_CHAR}:@$])or(?![{_NAME_CHAR}:])"
)
_PLAIN_HEAD = rf"/[{_NAME_CHAR}:*@/]*"  # an absolute path of names, no predicate
# (the three compiled when first asked for, ``lexing.expression``: 6 ms of every start)


def conjuncts(text: str) -> tuple[str, list[str]] | None:
    """``HEAD[C1 and C2 and …]`` as HEAD and its two or more conjuncts; None when the
    filter is not so (the first ``[`` must close at the end, with no ``or`` at its top)."""
    start = text.find("[")
    if start <= 0 or text[-1] != "]":
        return None
    depth, parts, cut = 0, [], start + 1
    for mark in expression(_CONJUNCT_MARK).finditer(text, start + 1, len(text) - 1):
        token = mark.group()
        if token in ("[", "("):
            depth += 1
        elif token in ("]", ")"):
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and token == "or":
            return None
        elif depth == 0 and token == "and":
            parts.append(text[cut : mark.start()].strip())
            cut = mark.end()
    parts.append(text[cut:-1].strip())
    if depth or len(parts) < 2:
        return None
    for part in parts:  # ``and`` as an element's name: leave it to the parser
        words = part.split()
        if not words or {words[0], words[-1]} & _WORDS:
            return None
    return text[:start], parts


def _conjunction_program(text: str, constants: tuple, names: tuple) -> Program | None:
    """The program of ``HEAD[C1 and C2 …]`` put together from those of ``HEAD[C1]``,
    ``HEAD[C2]``, … (``afa.conjunction_program``): shapes known mostly, since
    subscriptions combine a few hundred kinds of predicate in thousands of ways; None
    where a conjunct could look above its step (``..``, an axis), where a part does not
    compile alone (the whole filter's parse says why) or where the rewrite would change
    the whole (a constant conjunct)."""
    cut = None if ".." in text or "::" in text else conjuncts(text)
    if cut is None:
        return None
    head, parts = cut
    if not expression(_PLAIN_HEAD).fullmatch(head):  # an expression, a relative path: a tree
        return None
    try:
        programs = [filter_program(f"{head}[{part}]")[:3] for part in parts]
        return conjunction_program(programs, constants, names)
    except (FilterError, KeyError):  # (KeyError: a part reads a piece not as the whole does)
        return None


def _conjunction_plan(text: str) -> Plan | None:
    """The plan of ``HEAD[C1 and C2 …]`` as the conjunction of those of ``HEAD[C1]``,
    ``HEAD[C2]``, … (known shapes mostly; ``_conjunction_program`` for programs), or
    None where one is not counted or the parts are not the whole's."""
    cut = None if ".." in text or "::" in text else conjuncts(text)
    if cut is None or not expression(_PLAIN_HEAD).fullmatch(cut[0]):
        return None
    head, parts = cut
    try:
        plans = [filter_plan(f"{head}[{part}]") for part in parts]
    except FilterError:
        return None
    if None in plans:
        return None
    return conjunction(plans)


def _shape(text: str) -> tuple[str | tuple, tuple, tuple]:
    """A filter's text with its constants and names cut out (each constant replaced by its
    place among the filter's distinct constants, and whether it is a number; each name by
    its place among its distinct names), its distinct constants in order (as the parser
    reads them: numbers as floats, strings without their quotes) and its distinct names.
    Two filters of one shape differ only in their constants and names: they tokenize
    alike and parse to one tree but for those. (What is not cut out stays in the text:
    a shape of its own, never a wrong one.)

    The shape is one string (one hash for the shapes' dictionary): the text between the
    pieces as it is, each piece as NUL, its kind (``s`` string, ``n`` number, ``m`` name,
    ``w`` ``and``, ``o`` ``or``) and ``chr(1 + place)``. A text with a NUL between its
    pieces is its own shape (``("text", text)``)."""
    parts = expression(PIECE_PATTERN).split(text)
    constants: dict = {}
    names: dict = {}
    key = [parts[0]]
    for i in range(1, len(parts), 4):
        string, number, name = parts[i], parts[i + 1], parts[i + 2]
        if string is not None:
            place = "s" + chr(1 + constants.setdefault(string[1:-1], len(constants)))
        elif number is not None:
            place = "n" + chr(1 + constants.setdefault(float(number), len(constants)))
        elif name in _WORDS:
            place = "w\x01" if name == "and" else "o\x01"
        else:
            place = "m" + chr(1 + names.setdefault(name, len(names)))
        key += ("\x00", place, parts[i + 3])
    shape = ("text", text) if any("\x00" in part for part in parts[::4]) else "".join(key)
    return shape, tuple(constants), tuple(names)


def _shapes(texts: list) -> tuple[list, list, list]:
    """``_shape`` of each of a list of texts, as three lists (shapes, constants, names),
    the filters that name alike sharing one names tuple (as ``filter_shapes`` mostly
    gives them)."""
    if not texts:
        return [], [], []
    shapes, constants, names = map(list, zip(*map(_shape, texts), strict=True))
    return shapes, constants, list(map(_names_used.setdefault, names, names))


try:  # the same cuts in C: ``_shape`` is what they must equal (tested)
    from xcep.xpush._states import filter_shape as shape_of
    from xcep.xpush._states import filter_shapes as shapes_of
    from xcep.xpush._states import read_plan
except ImportError:  # built without a C compiler
    shape_of, shapes_of, read_plan = _shape, _shapes, None


def _read_plan(text: str) -> Plan | None:
    """The plan of a filter of the counted form: read straight from its text by the
    compiled core (``plan_reader.c``: a plan as ``plan_of`` makes it of the parsed and
    rewritten filter, tested so; about 3 µs where putting it together from its conjuncts'
    takes 20), else put together from its conjuncts' (``_conjunction_plan``); None when
    it is not of the form (or not plainly: the parser reads it)."""
    if read_plan is None:
        return _conjunction_plan(text)
    read = read_plan(text)
    return None if read is None else Plan(*read)


def _put(node, values: dict, names: dict | None = None):
    """``node`` with each comparison's constant replaced as ``values`` says, and each
    step's name as ``names`` says."""
    return _PUT[type(node)](node, values, names or {})


_PUT = {
    Path: lambda n, v, m: Path(tuple(_put(s, v, m) for s in n.steps), n.absolute),
    Step: lambda n, v, m: Step(
        n.axis, n.test, m.get(n.name, n.name), tuple(_put(p, v, m) for p in n.predicates)
    ),
    And: lambda n, v, m: And(tuple(_put(i, v, m) for i in n.items)),
    Or: lambda n, v, m: Or(tuple(_put(i, v, m) for i in n.items)),
    Not: lambda n, v, m: Not(_put(n.item, v, m)),
    Exists: lambda n, v, m: Exists(_put(n.path, v, m)),
    Compare: lambda n, v, m: Compare(_put(n.path, v, m), n.op, v[n.value]),
    Const: lambda n, v, m: n,
}


class Workload:
    """Filters by id, with their compiled AFA states; the plans of those whose values are
    counted (``templates``, ``constants`` and ``names``, columns by filter number: compiled
    into the AFA only when the machine does not count).

    The AFA is kept between compilations: filters added since are compiled into
    it, removed ones are taken out of its initial and early states (their other
    states stay, reached by no filter), until more than a quarter of the filters
    have been removed since it was built, when it is built afresh.
    """

    def __init__(self, filters: dict | Iterable[tuple] = ()) -> None:
        self.numbers: dict = hashed_dict()  # id → filter number in the AFA
        self.names_of: list = []  # filter number → id
        self.text_of: list = []  # filter number → its text (None: removed)
        self._afa: AFA | None = None  # the last compilation, and how it was made
        self._afa_flags = (False, True)  # (unique_early, counting) it was made with
        # by filter number: a counted filter's shape's Template (None: the machine's filter,
        # or removed), its constants (None: not counted) and its names; and how many
        self.templates: list = []
        self.constants: list = []
        self.names: list = []
        self.counted = 0
        # id → (program, constants, names, own key) of the filters added since (filter_program)
        # that the AFA compiles: not the counted ones, but where it was last made without
        # counting (then None: compiled from the text); only they are kept so (``paths``
        # parses every filter again)
        self._uncompiled: dict = {}
        self._removed = 0  # filters removed since
        items = filters.items() if isinstance(filters, dict) else filters
        for fid, text in items:
            self.add(fid, text)

    def __len__(self) -> int:
        return len(self.numbers)

    def __contains__(self, fid) -> bool:
        return fid in self.numbers

    @property
    def texts(self) -> dict:
        """id → text of every filter (a new dict: one dict by id, ``numbers``, is what a
        million filters keep)."""
        text_of = self.text_of
        return {fid: text_of[n] for fid, n in self.numbers.items()}

    @property
    def plans(self) -> dict:
        """id → (template, constants, names) of each counted filter."""
        numbers, templates = self.numbers, self.templates
        return {
            fid: (templates[n], self.constants[n], self.names[n])
            for fid, n in numbers.items()
            if templates[n] is not None
        }

    @property
    def paths(self) -> dict:
        """id → rewritten Path of every filter, parsed again from its text (for training:
        rare)."""
        return {fid: compile_filter(self.text_of[n], fid) for fid, n in self.numbers.items()}

    def add(self, fid, text: str, line: int | None = None) -> None:
        """Add one filter, or raise ``FilterError`` (a bad or duplicate one)."""
        self.add_columns([line], [fid], [text])

    def add_columns(self, lines: list, fids: list, texts: list, errors: list | None = None):
        """Add filters given as columns (their lines, ids and texts: ``filter_blocks``) in
        order; a bad or duplicate one goes to ``errors`` with its line and costs only
        itself (where ``errors`` is None the first in line order raises, once the good
        ones of its block are added). Column by column, ``BLOCK`` filters at a time, not
        filter by filter: a million filters are a million turns of whatever a filter
        costs in Python."""
        for start in range(0, len(fids), BLOCK):
            block = slice(start, start + BLOCK)
            bad = self._add_block(lines[block], fids[block], texts[block])
            if bad and errors is None:
                raise min(bad, key=lambda e: e.line or 0)
            if errors is not None:
                errors += bad
            if len(self._uncompiled) >= COMPILE_EVERY:  # into the AFA: the programs can go
                self.compile(*self._afa_flags)

    def _add_block(self, lines: list, fids: list, texts: list) -> list[FilterError]:
        """``add_columns`` of a block of filters: the errors of those not added."""
        keys, constants, names = shapes_of(texts)
        shapes = list(map(_by_shape.get, keys))
        bad: dict[int, FilterError] = {}  # position → why it is not added
        for k in [k for k, shape in enumerate(shapes) if shape is None]:
            try:  # (a shape new in this block is new at its first filter only)
                shapes[k] = _by_shape.get(keys[k]) or _new_shape(
                    keys[k], texts[k], fids[k], constants[k], names[k]
                )
            except FilterError as exc:
                exc.line = lines[k]
                bad[k] = exc
        # numbered as they come, an id numbered before keeping its number: where one was
        # (given twice, or before), the block's numbers are taken back and it is numbered
        # again without the duplicates (one dict operation per filter where all is well)
        numbers, first = self.numbers, len(self.names_of)
        good = [fid for k, fid in enumerate(fids) if k not in bad] if bad else fids
        proposed = range(first, first + len(good))
        numbered = list(map(numbers.setdefault, good, proposed)) == list(proposed)
        if not numbered:
            for fid, number in zip(good, proposed, strict=True):
                if numbers.get(fid) == number:
                    del numbers[fid]
            seen = set()  # (a bad one is not a filter added, and keeps its error)
            for k, fid in enumerate(fids):
                if k in bad:
                    continue
                if fid in numbers or fid in seen:
                    bad[k] = FilterError("duplicate filter id", fid, lines[k])
                seen.add(fid)
        if bad:
            kept = [k for k in range(len(fids)) if k not in bad]
            fids, texts, shapes, constants, names = (
                [column[k] for k in kept] for column in (fids, texts, shapes, constants, names)
            )
        if not numbered:
            numbers.update(zip(fids, range(first, first + len(fids)), strict=True))
        templates = list(map(_COUNTED_PLAN, shapes))
        made = {}  # the programs of the machine's filters
        if len(_made_by_text) >= SHAPE_LIMIT:  # (a running machine adds filters for ever)
            _made_by_text.clear()
        for k, template in enumerate(templates):
            if template is None:  # (an equal filter's, where one came before)
                program = _made_by_text.get(texts[k])
                if program is None:
                    program = _made_by_text[texts[k]] = _program(
                        texts[k], shapes[k], constants[k], names[k]
                    )
                made[fids[k]] = program
                constants[k] = None  # (only a counted filter's are kept)
        self.templates += templates
        self.constants += constants
        self.names += names
        self.counted += len(templates) - len(made)
        self.names_of += fids
        self.text_of += texts
        if self._afa_flags[1]:  # counted filters stay out of the AFA
            self._uncompiled.update(made)
        else:  # (None: counted, compiled from its text)
            self._uncompiled.update(zip(fids, map(made.get, fids), strict=True))
        return list(bad.values())

    def remove(self, fid) -> None:
        number = self.numbers.pop(fid, None)
        if number is None:
            raise FilterError("no such filter", fid)
        self.text_of[number] = None
        self._uncompiled.pop(fid, None)
        if self.templates[number] is not None:
            self.counted -= 1
        self.templates[number] = self.constants[number] = None
        if self._afa is not None:  # its states are left to no filter
            self._afa.initial.pop(number, None)
            self._afa.early.pop(number, None)
            self._removed += 1

    def compile(self, unique_early: bool = False, counting: bool = True) -> AFA:
        """One AFA for all current filters (common sub-filters shared) but, with
        ``counting``, those with plans: the last one with the filters added since, or a
        new one (see the class)."""
        afa = self._afa
        flags = (unique_early, counting)
        if afa is not None and self._afa_flags == flags and 4 * self._removed <= len(self):
            adding = self._uncompiled  # the filters added since (counted ones: not counting)
        elif afa is None and counting and self._afa_flags[1]:  # (never compiled: all pending)
            afa = self._afa = AFA()
            adding, self._afa_flags = self._uncompiled, flags
        else:
            afa = self._afa = AFA()
            self._afa_flags, self._removed = flags, 0
            pending, templates = self._uncompiled, self.templates
            adding = {
                fid: pending.get(fid)
                for fid, number in self.numbers.items()
                if not counting or templates[number] is None
            }
        numbers, add, text_of = self.numbers, afa.add_program, self.text_of
        for fid, made in adding.items():
            program, constants, names, owner = made or filter_program(text_of[numbers[fid]], fid)
            add(numbers[fid], program, constants, names, owner if unique_early else None)
        self._uncompiled = {}
        return afa

    @classmethod
    def from_file(cls, path: str | FilePath, strict: bool = False) -> tuple[Workload, list]:
        """Load a filters file: (workload, errors). With ``strict`` the first error raises."""
        errors: list[FilterError] = []
        workload = cls()
        try:
            with collector_paused():  # parsing many filters: every object new
                for lines, fids, texts in filter_blocks(path, errors):
                    workload.add_columns(lines, fids, texts, None if strict else errors)
                    if strict and errors:  # a line read wrong
                        break
        except FilterError as exc:  # with ``strict``: the first bad filter of its block
            errors.append(exc)
        finally:
            # the shapes served this load; a running machine adds filters one at a time,
            # and a set of varied shapes (65,536 of them) would hold 100s of MB for nothing
            _by_shape.clear(), _names_used.clear(), _made_by_text.clear(), _templates.clear()
        errors.sort(key=lambda e: e.line or 0)
        if strict and errors:
            raise errors[0]
        return workload, errors
