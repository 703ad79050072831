"""Plain paths: the XSeq engine's path runtime for node-set queries, predicates included.

A from clause of child and descendant steps with names or ``*`` and step
predicates, Kleene-* groups of such steps, and optionally a last ``text()``
or ``@name`` step, with no variables or return clause (``//parlist/listitem
(/parlist/listitem)*``, ``/stocks/transaction[@company = 'DAGM']/@price``),
selects exactly the elements whose root-to-node sequence of (name, predicate
outcomes) is in a regular language: ``/n`` reads ``n``, ``//n`` reads any
names then ``n``, ``*`` any name, ``n[p]`` an ``n`` whose predicate atoms
satisfy ``p`` (``atoms.py`` codes a batch's elements: per compared path, where
its value falls among the constants). ``PlainPath`` builds that language's
automaton (an NFA over names with guarded moves, determinized lazily over
(name, codes) symbols: states are sets of NFA states, the transition table is
filled on first use, as in RE2), and ``pathrun.PlainPathRun`` runs it a whole
batch at a time.

Many queries are one ``PlainPath``: one NFA whose queries' paths start from one
state and end in states of their own, so a DFA state says which queries select
an element, and a batch is read once for all of them (``xcep xseq --queries``).

``tests/test_xseq_paths.py`` compares it with the reference evaluator and
with the automaton, one query and many at once.
"""

from __future__ import annotations

import numpy as np

from xcep.xseq import ast as A
from xcep.xseq.atoms import ELEMENT, Guards
from xcep.xseq.semantics import Analysis, NotFast

ANY = None  # the label of a wildcard or descendant move
TABLE_BUDGET = 1 << 22  # transition table entries (48 MB) before it is started afresh


class _Nfa:
    """Thompson's construction over element names; ``moves[s]`` = [(name or ANY, guard, t)]
    where ``guard`` is None or a function of the element's predicate mask (``atoms.py``).

    Paths of several queries share their common prefixes, as YFilter's NFA does: a step
    from a state goes to the state the same step (axis, name, predicates) from that state
    went to before, and a descendant step's loop over any names is made once per state.
    A thousand ``//transaction[…]`` queries have one ``//`` loop, so a DFA state (a set of
    NFA states) does not hold a thousand. Sharing a state reached by the same steps from
    the same state keeps every query's language: what reaches it is the same, and each
    query ends in a state of its own (``end``)."""

    def __init__(self, guards: Guards) -> None:
        self.guards = guards
        self.moves: list[list] = []
        self.empty: list[list] = []  # ε-moves
        self.shared: dict = {}  # (state, step) -> the state it goes to
        self.made_guards: dict = {}  # (name tested, predicates' text) -> their guard

    def end(self, state: int) -> int:
        """A state of its own after ``state`` (a query's end: never shared)."""
        own = self.state()
        self.empty[state].append(own)
        return own

    def state(self) -> int:
        self.moves.append([])
        self.empty.append([])
        return len(self.moves) - 1

    def build(self, path, start: int) -> int:
        """States for ``path`` from ``start``; returns its end state."""
        if isinstance(path, A.Seq):
            for item in path.items:
                start = self.build(item, start)
            return start
        if isinstance(path, A.Star):
            loop = self.state()
            self.empty[start].append(loop)
            end = self.build(path.body, loop)
            self.empty[end].append(loop)
            return loop
        if isinstance(path, A.Union):
            end = self.state()
            for item in path.items:
                self.empty[self.build(item, start)].append(end)
            return end
        if not (
            isinstance(path, A.Step)
            and path.kind == A.ELEMENT
            and path.axis in (A.CHILD, A.DESCENDANT)
        ):
            raise NotFast(f"the step {A.to_text(path)!r}")
        preds = tuple(A.to_text(pred) for pred in path.preds)
        guard = self.made_guards.get((path.name, preds))
        if guard is None and preds:
            guard = self.made_guards[(path.name, preds)] = self.guards.guard(path)
        if path.axis == A.DESCENDANT:
            below = self.shared.get((start, "//"))
            if below is None:
                below = self.shared[(start, "//")] = self.state()
                self.empty[start].append(below)
                self.moves[below].append((ANY, None, below))
            start = below
        key = (start, path.name, preds)
        end = self.shared.get(key)
        if end is None:
            end = self.shared[key] = self.state()
            self.moves[start].append((None if path.name == A.WILDCARD else path.name, guard, end))
        return end

    def closure(self, states) -> frozenset:
        seen, stack = set(states), list(states)
        while stack:
            for t in self.empty[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)


READS_BELOW = (A.CHILD, A.DESCENDANT, A.DESCENDANT_OR_SELF, A.SELF, A.ATTRIBUTE)


def _check_rows(analysis: Analysis, last, variables: list) -> None:
    """NotFast unless the return clause reads only the last step's variable, one node of
    it per match, and only inside that node's subtree (its fields, children, text)."""
    if not (isinstance(last, A.Step) and last.var and variables == [last.var]):
        raise NotFast("a return clause over other than the last step's variable")
    if last.var in analysis.kleene or analysis.per_match or analysis.iteration:
        raise NotFast("a return clause with conditions per match")
    for term in analysis.query.returns:
        for node in A.walk(term.expr):
            if isinstance(node, A.VarRef) and (node.func or node.var != last.var):
                raise NotFast(f"the term {A.to_text(node)!r}")
            if isinstance(node, A.Step) and node.axis not in READS_BELOW:
                raise NotFast(f"the term {term.text or A.to_text(term.expr)!r}")


class Field:
    """A return term read straight from the events: ``$X`` then child steps and a last
    ``@name`` or ``text()`` (``atoms.reach`` finds its nodes)."""

    __slots__ = ("end", "on", "steps")

    def __init__(self, steps: tuple, end: str) -> None:
        self.on, self.steps, self.end = None, steps, end


def _fields(analysis: Analysis, guards: Guards) -> list[Field] | None:
    """The return clause as fields, when every term is one: ``$X@a``, ``$X/b/text()``,
    an aggregate of one, or ``count($X)`` (a field of the element itself, ``end`` None)."""
    fields = []
    for term in analysis.query.returns:
        expr = term.expr
        if expr.__class__ is not A.VarRef:
            return None
        if expr.path is None:
            if term.aggregate != "count":
                return None
            fields.append(Field((), None))
            continue
        try:
            steps, end = guards.relative(expr.path, expr)
        except NotFast:
            return None
        if end == ELEMENT:
            return None
        fields.append(Field(steps, end))
    return fields


class Selection:
    """What one query of a path runtime selects (``select``: "element", "text", ("@",
    name), "count" or "rows") and returns, and the NFA state its path ends in."""

    __slots__ = ("analysis", "fields", "final", "select", "steps", "terms")

    def __init__(self, analysis: Analysis, guards: Guards) -> None:
        """NotFast unless the path runtime serves the query; ``steps`` its element steps."""
        query = analysis.query
        if analysis.partition is not None or query.where is not None:
            raise NotFast("a where or partition by clause")
        steps = list(query.path.items) if isinstance(query.path, A.Seq) else [query.path]
        last = steps[-1]
        variables = [n.var for n in A.walk(query.path) if isinstance(n, A.Step) and n.var]
        self.analysis = analysis
        self.select = "element"
        self.terms = 0
        self.fields = None  # select rows: the terms as fields read from the events, or None
        self.final = None
        if analysis.mode == "aggregate":  # return count($X) from …/$X: count the nodes
            counts = [  # count($X): the number of nodes of $X in a match
                t.expr
                for t in query.returns
                if t.aggregate == "count"
                and isinstance(t.expr, A.VarRef)
                and t.expr.func is None
                and t.expr.path is None
            ]
            counted = {ref.var for ref in counts}
            ends = last.items if isinstance(last, A.Union) else (last,)  # Opt-3's tag() union
            if len(counts) == len(query.returns) and not (
                len(counted) == 1
                and all(isinstance(end, A.Step) for end in ends)
                and len(variables) == len(ends)
                and {end.var for end in ends} == counted
            ):
                raise NotFast("a return clause other than count() of the last step's variable")
            if len(counts) == len(query.returns):
                self.select, self.terms = "count", len(query.returns)
        if analysis.mode != "nodes" and self.select != "count":
            _check_rows(analysis, last, variables)
            self.select = "rows"
            self.fields = _fields(analysis, guards)
        elif variables and self.select != "count":
            raise NotFast(f"the variable ${variables[0]}")
        if isinstance(last, A.Step) and last.kind == A.TEXT:
            if last.axis != A.CHILD or last.preds:
                raise NotFast(f"the step {A.to_text(last)!r}")
            self.select, steps = "text", steps[:-1]
        elif isinstance(last, A.Step) and last.axis == A.ATTRIBUTE:
            if last.name == A.WILDCARD or last.preds:
                raise NotFast(f"the step {A.to_text(last)!r}")
            self.select, steps = ("@", last.name), steps[:-1]
        if not steps:
            raise NotFast("a path without an element step")
        self.steps = steps

    def fields_key(self) -> tuple:
        """What the rows of its fields depend on (queries with the same key share them)."""
        fields = tuple(
            (tuple((step.axis, step.name, step.text) for step in field.steps), field.end)
            for field in self.fields
        )
        return (fields, self.analysis.mode != "rows")


class PlainPath:
    """Compiled plain paths — one query's, or several queries' read in one pass: the lazy
    DFA over names and predicate codes, and what each query's last step selects.

    Several queries (``PlainPath([a, b, …])``) are one NFA whose paths start from one
    state, each ending in a state of its own, so one DFA state says which queries
    select an element; their predicates are one set of atoms, grouped by the path they
    compare (``atoms.Operand``): a value is read and coded once for every query that
    compares it, whatever the number of constants."""

    def __init__(self, analyses) -> None:
        if isinstance(analyses, Analysis):
            analyses = [analyses]
        guards = Guards()  # the predicates' atoms (the fields' own predicates' too)
        nfa = _Nfa(guards)
        start = nfa.state()
        self.selections: list[Selection] = []
        for analysis in analyses:
            selection = Selection(analysis, guards)
            selection.final = nfa.end(nfa.build(A.Seq(tuple(selection.steps)), start))
            del selection.steps
            self.selections.append(selection)
        self.nfa = nfa
        self.guards = guards
        self.atoms = guards.atoms  # the predicates' atoms: bit i of a mask is atoms[i]
        self.operands = guards.operands  # the atoms by the path they compare
        # labels: the names the paths test, then OTHER for every other name
        named = {want for moves in nfa.moves for want, _, _ in moves if want is not ANY}
        self.labels: list = [*sorted(named), ANY]
        self.other = len(self.labels) - 1
        # symbols: (label, mask) pairs as table columns; with no atoms, symbol = label
        self.symbols = [(label, 0) for label in range(len(self.labels))]
        self.symbol_ids = {(label, ()): label for label in range(len(self.labels))}
        self.finals = {selection.final: i for i, selection in enumerate(self.selections)}
        self.of_select: dict = {}  # a select kind -> the selections of that kind
        for i, selection in enumerate(self.selections):
            self.of_select.setdefault(selection.select, []).append(i)
        # per selection, what its rows of fields depend on (None: not rows of fields)
        self.field_keys = [
            s.fields_key() if s.fields is not None else None for s in self.selections
        ]
        self.sets: list[frozenset] = []  # DFA state -> NFA states
        self.ids: dict[frozenset, int] = {}
        self.accepts: list[tuple] = []  # DFA state -> the selections whose path ends there
        self._by_kind: dict = {}  # (state, kind) -> its selections of that kind
        self._arrays: dict = {}  # kind -> accepting_array(kind), for the states so far
        self.start = self._intern(nfa.closure([start]))
        self.table = np.zeros(0, dtype=np.int64)  # state << 32 | symbol, sorted
        self.targets = np.zeros(0, dtype=np.int32)  # the state each of them goes to
        self.flushes = 0
        self.dead = self._intern(frozenset())
        self._subtree: dict = {}  # (state, label) -> whether the move reads a subtree atom
        self._candidates: dict = {}  # (state, label) -> its moves (``candidates``)

    def _intern(self, states: frozenset) -> int:
        found = self.ids.get(states)
        if found is None:
            found = self.ids[states] = len(self.sets)
            self.sets.append(states)
            finals = self.finals
            accepts = tuple(sorted(finals[s] for s in states if s in finals))
            self.accepts.append(accepts)
        return found

    def of_kind(self, state: int, kind) -> tuple:
        """The selections of ``kind`` (a ``select``) whose path ends in DFA state ``state``."""
        key = (state, kind)
        found = self._by_kind.get(key)
        if found is None:
            selections = self.selections
            found = self._by_kind[key] = tuple(
                i for i in self.accepts[state] if selections[i].select == kind
            )
        return found

    def accepting_array(self, kind) -> np.ndarray:
        """For each DFA state, whether a selection of ``kind`` ends there."""
        found = self._arrays.get(kind)
        if found is None or len(found) < len(self.sets):
            known = 0 if found is None else len(found)
            more = [bool(self.of_kind(s, kind)) for s in range(known, len(self.sets))]
            found = np.concatenate([found, more]) if known else np.array(more, dtype=bool)
            self._arrays[kind] = found
        return found

    def label_table(self, names: list) -> np.ndarray:
        """Name id -> label, for a stream's symbol table (``names``); then OTHER for text."""
        index = {label: i for i, label in enumerate(self.labels[:-1])}
        return np.array([index.get(name, self.other) for name in names] + [self.other], np.int64)

    def symbols_of(self, labels: np.ndarray, codes: list) -> np.ndarray:
        """The table column of each element: its label and its code for each operand
        (``codes[k]``, one per element; 0 where the element has no value or the operand
        is another name's). The (label, codes) of a batch are packed into one integer per
        element where they fit, else compared as rows."""
        if not codes:
            return labels
        operands = self.operands
        radices = [operand.size() for operand in operands]
        width = len(self.labels)
        for radix in radices:
            width *= radix
        if width < 1 << 62:
            keys = labels.astype(np.int64)
            for column, radix in zip(codes, radices, strict=True):
                keys = keys * radix + column
            unique, inverse = np.unique(keys, return_inverse=True)
            rows = []
            for key in unique.tolist():
                row = []
                for radix in reversed(radices):
                    key, code = divmod(key, radix)
                    row.append(code)
                rows.append((key, tuple(reversed(row))))
        else:
            stacked = np.column_stack([labels.astype(np.int64), *codes])
            unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
            rows = [(row[0], tuple(row[1:])) for row in unique.tolist()]
        ids, symbols = self.symbol_ids, self.symbols
        columns = []
        for label, row in rows:
            key = (label, row) if any(row) else (label, ())
            found = ids.get(key)
            if found is None:
                found = ids[key] = len(symbols)
                mask = 0
                for operand, code in zip(operands, row, strict=True):
                    if code:
                        mask |= operand.truths(code)
                symbols.append((label, mask))
            columns.append(found)
        return np.array(columns, dtype=np.int64)[inverse.reshape(-1)]

    def reads_subtree(self, state: int, label: int) -> bool:
        """Whether the move from ``state`` on an element of ``label`` depends on an atom that
        is only known at the element's close."""
        key = (state, label)
        found = self._subtree.get(key)
        if found is None:
            name = self.labels[label]
            found = self._subtree[key] = any(
                guard is not None and guard.subtree and (want is ANY or want == name)
                for s in self.sets[state]
                for want, guard, _ in self.nfa.moves[s]
            )
        return found

    def moves(self, states: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        """The DFA states after ``symbols`` from ``states`` (element-wise), the table filled
        lazily. The table is sparse — its (state, symbol) keys sorted, looked up by binary
        search — so that many queries' states and symbols (thousands of each, few of the
        pairs ever met) cost the pairs met; past ``TABLE_BUDGET`` it is started afresh."""
        keys = states.astype(np.int64) << 32 | symbols
        table, targets = self.table, self.targets
        at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
        found = (
            np.where(table[at] == keys, targets[at], -1) if len(table) else np.full(len(keys), -1)
        )
        missing = found < 0
        if missing.any():
            new = np.unique(keys[missing])
            made = np.empty(len(new), dtype=np.int32)
            for j, key in enumerate(new.tolist()):
                label, mask = self.symbols[key & 0xFFFFFFFF]
                free, required, guarded = self.candidates(key >> 32, label)
                after = {t for bits, t in required if mask & bits == bits}
                after.update(t for guard, t in guarded if guard(mask))
                made[j] = self._intern(self.nfa.closure(after | free if after else free))
            if len(table) + len(new) > TABLE_BUDGET:  # start over: entries are filled again
                table, targets = table[:0], targets[:0]
                self._candidates.clear()
                self.flushes += 1
            table = np.concatenate([table, new])
            targets = np.concatenate([targets, made])
            order = np.argsort(table, kind="stable")
            self.table, self.targets = table[order], targets[order]
            found[missing] = made[np.searchsorted(new, keys[missing])]
        return found.astype(np.int32)

    def candidates(self, state: int, label: int) -> tuple:
        """The moves of ``state``'s NFA states on an element of ``label``: the states they
        go to whatever the element's codes; the (bits, state) of those guarded by a
        conjunction of atoms (taken where the mask has all the bits: a thousand queries'
        guards are decided at a miss without a call each); the (guard, state) of others."""
        key = (state, label)
        found = self._candidates.get(key)
        if found is None:
            name = self.labels[label]
            free, required, guarded = set(), [], []
            for s in self.sets[state]:
                for want, guard, t in self.nfa.moves[s]:
                    if want is ANY or want == name:
                        if guard is None:
                            free.add(t)
                        elif guard.required is not None:
                            required.append((guard.required, t))
                        else:
                            guarded.append((guard, t))
            found = (frozenset(free), tuple(required), tuple(guarded))
            self._candidates[key] = found
        return found

    def stats(self) -> dict:
        return {
            "dfa states": len(self.sets),
            "table entries": len(self.table),
            "table flushes": self.flushes,
        }
