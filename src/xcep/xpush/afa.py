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
from operator import itemgetter

from xcep.xpush.ast import (
    ATTRIBUTE,
    DESCENDANT,
    ELEMENT,
    SELF,
    TEXT,
    WILDCARD,
    And,
    Compare,
    Const,
    Exists,
    Expr,
    Not,
    Or,
    Path,
    Step,
    walk,
)
from xcep.xpush.predicates import Predicate

try:
    from xcep.xpush._states import replay
except ImportError:  # built without a C compiler: Python replays the programs
    replay = None

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
    # (program, constants, names) → the initial state its replay made (without an owner:
    # equal filters replay to the same states, so a repeated one is not replayed)
    replayed: dict[tuple, int] = field(default_factory=dict)

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
        """Compile one (rewritten, ``..``-free) filter; returns its initial state. Its own
        state (early notification) is keyed as ``add_program`` keys it: by its program
        and constants, so that filters that compile alike share it however written."""
        owner = None
        if unique_early:
            nodes = list(walk(path))
            constants = tuple(dict.fromkeys(n.value for n in nodes if isinstance(n, Compare)))
            names = tuple(
                dict.fromkeys(
                    n.name for n in nodes if isinstance(n, Step) and n.name not in (None, WILDCARD)
                )
            )
            program = Recorder.program(path, constants, names)
            owner = ("early", program, program.uses(constants), program.uses_names(names))
        builder = Builder(self, owner)
        compiler = _Compiler(builder, unique_early)
        state = compiler.path(path.steps, builder.true, main=True)
        self.initial[number] = state
        if compiler.early is not None:
            self.early[number] = compiler.early
        return state

    def add_program(
        self,
        number: int,
        program: Program,
        constants: tuple,
        names: tuple = (),
        owner: tuple | None = None,
    ) -> int:
        """Compile one filter by replaying its shape's program with its constants and
        names (those it uses: ``Program.uses``, ``uses_names``); ``owner`` (the filter's
        own key) when its first branching state must be its own (early notification).
        Returns its initial state."""
        key = (program, constants, names) if owner is None else None
        root = self.replayed.get(key) if key is not None else None
        if root is not None:  # an equal filter's: the same states
            self.initial[number] = root
            return root
        if replay is not None:  # the kernel: the same states, made in C
            root, early = replay(
                self._lists(),
                program.codes,
                program.root,
                -1 if owner is None or program.early is None else program.early,
                constants,
                names,
                owner,
            )
        else:
            builder = Builder(self, owner)
            states: list[int] = []
            for name, args in program.steps:
                states.append(_REPLAY[name](builder, args, states, constants, names))
            root, early = states[program.root], None
            if owner is not None and program.early is not None:
                early = states[program.early]
        self.initial[number] = root
        if early is not None:
            self.early[number] = early
        if key is not None:
            self.replayed[key] = root
        return root

    def _lists(self) -> tuple:
        """What the replay kernel writes to (grown in place) and the leaves' class."""
        return (
            self.kind,
            self.eps,
            self.label,
            self.target,
            self.predicate,
            self.shared,
            Predicate,
        )


class Builder:
    """Makes the states of an AFA, equal ones shared: the primitives a filter is
    compiled into (``_Compiler`` calls them; a ``Recorder`` records them as a program).
    ``owner``: the key of the filter's own first branching state, when it needs one."""

    def __init__(self, afa: AFA, owner: tuple | None = None) -> None:
        self.afa, self.owner = afa, owner

    def true(self) -> int:
        return self.afa.state(("true",), OR, predicate=TRUE)

    def false(self) -> int:
        return self.afa.state(("false",), OR)  # an OR with nothing never matches

    def leaf(self, op: str, value) -> int:
        key = ("leaf", op, value)  # a number constant is a float, a string one a str
        found = self.afa.shared.get(key)
        return self.afa.state(key, OR, predicate=Predicate(op, value)) if found is None else found

    def step(self, label: str, target: int) -> int:
        return self.afa.state(("step", label, target), OR, label=label, target=target)

    def loop(self, inner: int) -> int:
        """``//``: a ``*`` transition to itself and an ε-move to ``inner``."""
        loop = self.afa.state(("loop", inner), OR, eps=(inner,), label="*")
        self.afa.target[loop] = loop
        return loop

    def loop_or_text(self, inner: int) -> int:
        """``//.`` (descendant-or-self::node()): text nodes too."""
        text = self.step("#text", inner)
        loop = self.afa.state(("loop-or-text", inner), OR, eps=(inner, text), label="*")
        self.afa.target[loop] = loop
        return loop

    def all_of(self, items) -> int:
        """AND: leaves that match every node add nothing (``x and true()`` is x)."""
        predicate = self.afa.predicate
        items = tuple(sorted({t for t in items if predicate[t] is not TRUE}))
        if not items:
            return self.true()
        if len(items) == 1:
            return items[0]
        return self.afa.state(("and", items), AND, eps=items)

    def any_of(self, items) -> int:
        predicate = self.afa.predicate
        items = tuple(sorted(set(items)))
        if not items or any(predicate[t] is TRUE for t in items):
            return self.true()
        if len(items) == 1:
            return items[0]
        return self.afa.state(("or", items), OR, eps=items)

    def negate(self, item: int) -> int:
        return self.afa.state(("not", item), NOT, eps=(item,))

    def own(self, items) -> int:
        """The filter's own first branching state: the AND of ``items`` (its own true leaf
        when nothing is left to check), keyed by ``owner`` so that reaching it proves the
        filter (and those equal to it) and no other. Without an owner, ``all_of``."""
        if self.owner is None:
            return self.all_of(items)
        predicate = self.afa.predicate
        items = tuple(sorted({t for t in items if predicate[t] is not TRUE}))
        if items:
            return self.afa.state(self.owner, AND, eps=items)
        return self.afa.state(self.owner, OR, predicate=TRUE)


class _Compiler:
    """A filter's tree as ``Builder`` calls (or a ``Recorder``'s)."""

    def __init__(self, build: Builder | Recorder, unique_early: bool) -> None:
        self.build = build
        self.unique_early = unique_early
        # the filter's own first branching state: None until claimed, -1 while built
        self.early: int | None = None

    def _unique(self, main: bool) -> bool:
        return main and self.unique_early and self.early is None

    def path(self, steps: tuple[Step, ...], final, main: bool = False) -> int:
        """A state matching node x iff ``steps`` from x reach a node matched by ``final()``."""
        if not steps:
            if self._unique(main):
                self.early = self.build.own(())
                return self.early
            return final()
        step, rest = steps[0], steps[1:]
        inner = self.step(step, rest, final, main)
        if step.axis != DESCENDANT:
            return inner
        if step.test == SELF:  # //. is descendant-or-self::node(): text nodes too
            return self.build.loop_or_text(inner)
        return self.build.loop(inner)

    def step(self, step: Step, rest: tuple[Step, ...], final, main: bool) -> int:
        if step.test == SELF:
            return self.conjunction(step.predicates, lambda: self.path(rest, final, main), main)
        if step.test not in (ELEMENT, ATTRIBUTE, TEXT):
            raise ValueError(f"cannot compile a {step.test} step (rewrite it first)")
        target = self.conjunction(step.predicates, lambda: self.path(rest, final, main), main)
        return self.build.step(step.label, target)

    def conjunction(self, predicates: tuple[Expr, ...], then, main: bool = False) -> int:
        if not predicates:
            return then()
        unique = self._unique(main)
        if unique:
            self.early = -1  # claimed: the states inside are ordinary
        successors = [self.expr(q) for q in predicates]
        successors.append(then())
        if unique:
            self.early = self.build.own(successors)
            return self.early
        return self.build.all_of(successors)

    def expr(self, expr: Expr) -> int:
        return _EXPRESSIONS[type(expr)](self, expr)


_EXPRESSIONS = {  # filter expression type → its states (by the compiler's builder)
    And: lambda c, e: c.build.all_of([c.expr(item) for item in e.items]),
    Or: lambda c, e: c.build.any_of([c.expr(item) for item in e.items]),
    Not: lambda c, e: c.build.negate(c.expr(e.item)),
    Const: lambda c, e: c.build.true() if e.value else c.build.false(),
    Exists: lambda c, e: c.path(e.path.steps, c.build.true),
    Compare: lambda c, e: c.path(e.path.steps, lambda: c.build.leaf(e.op, e.value)),
}


@dataclass(frozen=True)
class Program:
    """A filter shape compiled once: ``steps`` are ``Builder`` calls ``(name, args)``
    whose state arguments are indexes of earlier steps and whose constants and step
    names are indexes in the constants and names it uses; ``root`` is the step of its
    initial state, ``early`` that of its own first branching state (None when it has
    none); ``places`` and ``name_places``: where the constants and names it uses are
    among the filter's (a rewrite may drop some). Equal trees record equal programs
    (where their constants and names came from in the text aside). ``AFA.add_program``
    replays it with a filter's constants and names (``uses``, ``uses_names``): no tree
    is built or walked."""

    steps: tuple[tuple[str, tuple], ...]
    root: int
    early: int | None
    places: tuple[int, ...] = field(compare=False)
    name_places: tuple[int, ...] = field(default=(), compare=False)
    _hash: int = field(default=0, compare=False, repr=False)
    # the places as one call (``itemgetter``) where there are two or more
    _pick: itemgetter | None = field(default=None, compare=False, repr=False)
    _pick_names: itemgetter | None = field(default=None, compare=False, repr=False)
    codes: tuple = field(
        default=(), compare=False, repr=False
    )  # the steps as the kernel reads them

    def __post_init__(self) -> None:  # a program is a key of its filters' own states
        object.__setattr__(self, "_hash", hash((self.steps, self.root, self.early)))
        for name, places in (("_pick", self.places), ("_pick_names", self.name_places)):
            object.__setattr__(self, name, itemgetter(*places) if len(places) > 1 else None)
        codes = tuple((_OPCODES[name], *args) for name, args in self.steps)
        object.__setattr__(self, "codes", codes)

    def __hash__(self) -> int:
        return self._hash

    def uses(self, constants: tuple) -> tuple:
        """The constants it uses, of a filter's constants."""
        if self._pick is not None:
            return self._pick(constants)
        return (constants[self.places[0]],) if self.places else ()

    def uses_names(self, names: tuple) -> tuple:
        """The step names it uses, of a filter's names (in the order it uses them)."""
        if self._pick_names is not None:
            return self._pick_names(names)
        return (names[self.name_places[0]],) if self.name_places else ()


class Recorder:
    """Stands in for a ``Builder`` and records its calls (``Recorder.program``)."""

    def __init__(self, places: dict, name_places: dict) -> None:
        self.places = places  # constant → its place among the filter's constants
        self.used: dict[int, int] = {}  # place → index among the constants used
        self.name_places = name_places  # name → its place among the filter's names
        self.used_names: dict[int, int] = {}  # place → index among the names used
        self.steps: list[tuple[str, tuple]] = []

    def _emit(self, name: str, *args) -> int:
        self.steps.append((name, args))
        return len(self.steps) - 1

    def true(self) -> int:
        return self._emit("true")

    def false(self) -> int:
        return self._emit("false")

    def leaf(self, op: str, value) -> int:
        place = self.places[value]
        return self._emit("leaf", op, self.used.setdefault(place, len(self.used)))

    def step(self, label: str, target: int) -> int:
        prefix = "@" if label[0] == "@" else ""
        place = self.name_places.get(label[len(prefix) :])
        if place is None:  # *, @*, #text
            return self._emit("step", label, target)
        used = self.used_names.setdefault(place, len(self.used_names))
        return self._emit("named_step", prefix, used, target)

    def loop(self, inner: int) -> int:
        return self._emit("loop", inner)

    def loop_or_text(self, inner: int) -> int:
        return self._emit("loop_or_text", inner)

    def all_of(self, items) -> int:
        return self._emit("all_of", tuple(items))

    def any_of(self, items) -> int:
        return self._emit("any_of", tuple(items))

    def negate(self, item: int) -> int:
        return self._emit("negate", item)

    def own(self, items) -> int:
        return self._emit("own", tuple(items))

    @classmethod
    def program(cls, path: Path, constants: tuple, names: tuple = ()) -> Program:
        """The program of a (rewritten) filter whose distinct constants are ``constants``
        and whose distinct step names are ``names``."""
        recorder = cls(
            {value: place for place, value in enumerate(constants)},
            {name: place for place, name in enumerate(names)},
        )
        compiler = _Compiler(recorder, unique_early=True)
        root = compiler.path(path.steps, recorder.true, main=True)
        steps = tuple(recorder.steps)
        used, used_names = tuple(recorder.used), tuple(recorder.used_names)
        return Program(steps, root, compiler.early, used, used_names)


_REPLAY = {  # step name → the Builder call, from (builder, args, states, constants, names)
    "true": lambda b, a, s, c, n: b.true(),
    "false": lambda b, a, s, c, n: b.false(),
    "leaf": lambda b, a, s, c, n: b.leaf(a[0], c[a[1]]),
    "step": lambda b, a, s, c, n: b.step(a[0], s[a[1]]),
    "named_step": lambda b, a, s, c, n: b.step(a[0] + n[a[1]], s[a[2]]),
    "loop": lambda b, a, s, c, n: b.loop(s[a[0]]),
    "loop_or_text": lambda b, a, s, c, n: b.loop_or_text(s[a[0]]),
    "all_of": lambda b, a, s, c, n: b.all_of([s[i] for i in a[0]]),
    "any_of": lambda b, a, s, c, n: b.any_of([s[i] for i in a[0]]),
    "negate": lambda b, a, s, c, n: b.negate(s[a[0]]),
    "own": lambda b, a, s, c, n: b.own([s[i] for i in a[0]]),
}


_MOVE = {  # step name → its args with state indexes, constants and names renumbered
    "true": lambda a, state, constant, name: a,
    "false": lambda a, state, constant, name: a,
    "leaf": lambda a, state, constant, name: (a[0], constant(a[1])),
    "step": lambda a, state, constant, name: (a[0], state(a[1])),
    "named_step": lambda a, state, constant, name: (a[0], name(a[1]), state(a[2])),
    "loop": lambda a, state, constant, name: (state(a[0]),),
    "loop_or_text": lambda a, state, constant, name: (state(a[0]),),
    "all_of": lambda a, state, constant, name: (tuple(map(state, a[0])),),
    "any_of": lambda a, state, constant, name: (tuple(map(state, a[0])),),
    "negate": lambda a, state, constant, name: (state(a[0]),),
    "own": lambda a, state, constant, name: (tuple(map(state, a[0])),),
}


def conjunction_program(parts: list[tuple], constants: tuple, names: tuple) -> Program | None:
    """The program of a filter ``HEAD[C1 and … and Cn]`` (its distinct ``constants`` and
    ``names``) put together from those of ``HEAD[C1]``, …, ``HEAD[Cn]`` (``parts``: each
    ``(program, the constants it uses, the names it uses)``), step for step the program
    ``Recorder.program`` records from the filter's tree: each conjunct's steps, an
    ``all_of`` of them, then the head's steps (``true``, ``own`` and the path) as the first
    part has them. None where the tree would not be that, or might not: a conjunct that is
    a constant or an ``and`` of its own (the rewrite folds and flattens them), two that
    compile alike (the rewrite folds equal trees only)."""
    place = {value: k for k, value in enumerate(constants)}
    name_place = {value: k for k, value in enumerate(names)}
    used: dict[int, int] = {}  # the filter's place of a constant → its index in the program
    used_names: dict[int, int] = {}
    steps: list = []
    roots: list[int] = []
    seen: set = set()

    def numbering(values: tuple, step_names: tuple) -> tuple:
        """A part's constant and name indexes → the filter program's (new ones in turn)."""
        return (
            lambda k: used.setdefault(place[values[k]], len(used)),
            lambda k: used_names.setdefault(name_place[step_names[k]], len(used_names)),
        )

    for program, values, step_names in parts:
        early = program.early  # the steps: the conjunct's, true, own of both, the head's
        if (
            early is None
            or early < 2
            or program.steps[early - 1 : early + 1]
            != (
                ("true", ()),
                ("own", ((early - 2, early - 1),)),
            )
        ):
            return None
        body = program.steps[: early - 1]
        if body[-1][0] in ("true", "false", "all_of"):
            return None
        key = (body, values, step_names)
        if key in seen:  # folded where the trees are equal (a and a), not where only the
            return None  # programs are (a and a/.): the tree's to say
        seen.add(key)
        moves = (len(steps).__add__, *numbering(values, step_names))
        steps += [(op, _MOVE[op](args, *moves)) for op, args in body]
        roots.append(len(steps) - 1)
    if len(roots) > 1:
        steps.append(("all_of", (tuple(roots),)))
    condition = len(steps) - 1
    program, values, step_names = parts[0]
    start = program.early - 1
    shift = len(steps) - start
    moves = (lambda k: condition if k < start else k + shift, *numbering(values, step_names))
    steps += [(op, _MOVE[op](args, *moves)) for op, args in program.steps[start:]]
    return Program(
        tuple(steps), program.root + shift, program.early + shift, tuple(used), tuple(used_names)
    )


_OPCODES = {name: code for code, name in enumerate(_REPLAY)}  # as _states.c numbers them


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
