"""The pattern clause: a regular expression over pattern variables, compiled to an NFA.

``compile_pattern`` builds a position automaton: one NFA state per variable
*occurrence* in the regular expression, with ordered ``first``/``follow``
lists and the accepting states; a variable's quantifier (its SequenceType's
occurrence indicator) becomes a self-loop (``+``, ``*``) and an optional
step (``?``, ``*``).

``instances_at`` runs the NFA from one start position as a Pike VM: threads
are kept in preference order (a variable prefers to take one more item, an
alternative prefers its left branch, like MATCH_RECOGNIZE and regex
engines), and for ``maximal`` and ``incremental`` two threads in the same
state with the same future keep only the preferred one, so the work per item
is bounded by the number of states.  ``allmatch`` keeps every thread.

``select_instances`` applies the restart policy (``tumbling`` / ``sliding``)
over start positions, the same for the NFA and for the brute-force
``reference_instances`` the tests compare it with.

An *instance* is ``(start, end, runs)``: positions in the input (0-based,
inclusive) and ``runs``, per variable in declaration order, ``(first, last)``
of its items or ``None`` for the empty sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xcep.xquery import ast as A

# test(variable index, run start, position) -> does the item at ``position`` join the run?
# for a ``nested`` variable: the length of the unit that starts at ``position`` (0: none)
Test = Callable[[int, int, int], int]


@dataclass
class NFA:
    variables: list[A.PatternVar]  # declaration order
    occurrences: list[int]  # state -> variable index
    first: list[int]
    follow: list[list[int]]
    last: frozenset

    def __post_init__(self) -> None:
        self.nested = [v.nested is not None for v in self.variables]  # by variable
        self.extends = [self.variables[v].max is None for v in self.occurrences]  # by state
        self._dfa: LazyDFA | None = None

    def dfa(self) -> LazyDFA:
        """This NFA's lazy DFA, made on first use and kept with it."""
        if self._dfa is None:
            self._dfa = LazyDFA(self)
        return self._dfa

    def describe(self) -> str:
        names = [self.variables[v].name for v in self.occurrences]
        lines = [f"first: {', '.join(f'{s}:${names[s]}' for s in self.first)}"]
        for state, succ in enumerate(self.follow):
            var = self.variables[self.occurrences[state]]
            loop = " (self-loop)" if var.max is None else ""
            nxt = ", ".join(f"{s}:${names[s]}" for s in succ) or "-"
            accept = " accepting" if state in self.last else ""
            lines.append(f"{state}:${names[state]}{var.occurrence}{loop} -> {nxt}{accept}")
        return "\n".join(lines)


ACCEPT = -1  # in a follow list: the pattern may end here


def compile_pattern(pattern: A.Pattern) -> NFA:
    """One state per variable occurrence; ``first`` and ``follow`` are *ordered* the way
    a backtracking matcher would try them, so the Pike VM keeps its preference order."""
    index = {v.name: i for i, v in enumerate(pattern.variables)}
    refs = A.regex_vars(pattern.regex)  # states are numbered left to right
    state_of = {id(ref): state for state, ref in enumerate(refs)}
    occurrences = [index[ref.name] for ref in refs]
    follow: list[list[int]] = [[] for _ in refs]

    def build(node, cont: list[int]) -> list[int]:
        """The states entered first when ``node`` starts, in preference order, when
        ``cont`` is what may follow ``node``; fills ``follow`` for the states inside."""
        if isinstance(node, A.RVar):
            state = state_of[id(node)]
            follow[state] = cont
            var = pattern.variables[occurrences[state]]
            return _unique([state, *cont]) if var.min == 0 else [state]
        if isinstance(node, A.RAlt):
            return _unique([s for option in node.options for s in build(option, cont)])
        for part in reversed(node.items):
            cont = build(part, cont)
        return cont

    first = build(pattern.regex, [ACCEPT])
    last = frozenset(s for s, nxt in enumerate(follow) if ACCEPT in nxt)
    follow = [[s for s in nxt if s != ACCEPT] for nxt in follow]
    states = [s for s in first if s != ACCEPT]
    return NFA(pattern.variables, occurrences, states, follow, last)


def _unique(states: list[int]) -> list[int]:
    return list(dict.fromkeys(states))


def check_single_binding(regex) -> str | None:
    """The name of a variable that one path through ``regex`` would bind twice, if any."""

    if isinstance(regex, A.RVar):
        return None
    parts = regex.items if isinstance(regex, A.RSeq) else regex.options
    for part in parts:
        twice = check_single_binding(part)
        if twice:
            return twice
    if isinstance(regex, A.RSeq):
        seen: set[str] = set()
        for part in parts:
            names = {v.name for v in A.regex_vars(part)}
            if names & seen:
                return sorted(names & seen)[0]
            seen |= names
    return None


def instances_at(
    nfa: NFA,
    start: int,
    more: Callable[[int], bool],
    test: Test,
    selection: str,
    keyed_by_start: set[int],
    covered: dict | None = None,
) -> list[tuple]:
    """The instances that start at ``start``, in output order (shorter first).

    A thread is ``(state, run start, completed runs, items left in a nested unit)``.
    ``keyed_by_start``: variables whose test depends on where their run
    started (they use ``before``, ``all`` or ``nested``): two threads in such
    a variable differ if their runs started at different positions.

    ``covered`` (sliding maximal/incremental without such variables): the
    states that runs from earlier starts had at each position.  If every
    state this start enters is among them, each instance of this start is
    contained in one of an earlier start (same states, same futures), so it
    would be suppressed: the start is skipped.
    """
    occ = nfa.occurrences
    nested = nfa.nested
    threads: list[tuple] = []
    for state in nfa.first:
        _enter(threads, state, start, (), test, occ, nested)
    if not threads:
        return []
    if covered is not None and {t[0] for t in threads} <= covered.get(start, set()):
        return []
    extends = nfa.extends
    follow = nfa.follow
    last = nfa.last
    dedupe = selection != "allmatch"
    keyed = [occ[s] in keyed_by_start for s in range(len(occ))]
    found: list[tuple] = []
    position = start
    count = len(nfa.variables)
    while threads:
        if dedupe and len(threads) > 1:
            threads = _dedupe(threads, keyed)
        if covered is not None:
            covered.setdefault(position, set()).update(t[0] for t in threads)
        done = [t for t in threads if not t[3] and t[0] in last]
        if done:
            ends = [(start, position, _runs(t, position, count, occ)) for t in done]
            if selection == "allmatch":
                seen = set()
                for inst in ends:
                    if inst[2] not in seen:
                        seen.add(inst[2])
                        found.append(inst)
            elif selection == "incremental":
                found.append(ends[0])
            else:
                found[:] = [ends[0]]
        position += 1
        if not more(position):
            break
        successors: list[tuple] = []
        for state, run_start, runs, remaining in threads:
            if remaining:
                successors.append((state, run_start, runs, remaining - 1))
                continue
            var = occ[state]
            if extends[state]:  # the run takes one more item (or unit)
                unit = test(var, run_start, position)
                if unit:
                    successors.append((state, run_start, runs, unit - 1 if nested[var] else 0))
            if follow[state]:
                closed = (*runs, (var, run_start, position - 1))
                for nxt in follow[state]:
                    _enter(successors, nxt, position, closed, test, occ, nested)
        threads = successors
    return found


def _enter(threads, state, position, runs, test, occ, nested) -> None:
    var = occ[state]
    unit = test(var, position, position)
    if unit:
        threads.append((state, position, runs, unit - 1 if nested[var] else 0))


def _dedupe(threads: list[tuple], keyed: list[bool]) -> list[tuple]:
    seen = set()
    out = []
    for t in threads:
        state = t[0]
        key = (state, t[3], t[1] if keyed[state] else None)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _runs(thread: tuple, position: int, count: int, occ: list[int]) -> tuple:
    runs: list = [None] * count
    state, run_start, completed, _ = thread
    for var, first, last in (*completed, (occ[state], run_start, position)):
        runs[var] = (first, last)
    return tuple(runs)


def select_instances(
    more: Callable[[int], bool],
    at: Callable[[int], list[tuple]],
    sliding: bool,
    selection: str,
    starts: Iterator[int] | None = None,
    progress: dict | None = None,
) -> Iterator[tuple]:
    """Apply the restart policy: ``at(start)`` gives the instances from one start, each
    given as soon as its start is done.

    Tumbling: the next search starts after the last item of the instances
    found (the longest one).  Sliding: every position is a start; an instance
    contained in one emitted from an earlier start is suppressed, except under
    ``allmatch``, which reports every variant.  ``more(i)``: is there an item at
    position ``i``; ``starts``: the positions where an instance can start,
    ascending (default: all).  ``progress`` (``after``, ``reach``, ``next``) is
    where the selection stands: a caller that keeps it may stop between two
    starts and go on from there with a new call.
    """
    progress = new_progress() if progress is None else progress
    if starts is None:
        starts = _positions(more, progress["next"])
    for start in starts:
        if start < progress["after"]:
            continue
        progress["next"] = start
        found = at(start)
        progress["next"] = start + 1
        if not found:
            continue
        if not sliding:
            progress["after"] = max(inst[1] for inst in found) + 1
            yield from found
            continue
        reach = progress["reach"]
        emitted = found if selection == "allmatch" else [i for i in found if i[1] > reach]
        progress["reach"] = max([reach, *(inst[1] for inst in emitted)])
        yield from emitted


def new_progress() -> dict:
    """Where ``select_instances`` stands: no start tried yet."""
    return {"after": 0, "reach": -1, "next": 0}


def _positions(
    more: Callable[[int], bool], first: int, reached: Callable[[int], None] | None = None
) -> Iterator[int]:
    """The positions from ``first`` on; ``reached(i)`` is told of each before it is tried
    as a start (no instance can reach before ``i - 1`` any more)."""
    i = first
    while more(i):
        if reached is not None:
            reached(i)
        yield i
        i += 1


def _more(length) -> Callable[[int], bool]:
    """``more(i)`` for ``length``: a number of items, or already that function (a
    stream, read as far as it is asked)."""
    return length if callable(length) else (lambda i: i < length)


def find_instances(
    nfa: NFA,
    length,
    test: Test,
    sliding: bool,
    selection: str,
    keyed_by_start: set[int],
    masks=None,
    progress: dict | None = None,
    reached: Callable[[int], None] | None = None,
) -> Iterator[tuple]:
    """Every pattern instance over a sequence of ``length`` items (a number, or
    ``more(i)``: is there an item ``i``), in output order, each as soon as it is known.

    ``masks`` (optional): per position (indexable), the bitmask of the variables whose
    test holds there, when every test looks at the item alone.  With it, maximal and
    incremental selection run on the lazy DFA instead of the Pike VM.  ``progress``:
    see ``select_instances``; ``reached(i)``: told of each position before it is tried
    as a start (a stream forgets what lies before it).
    """
    more = _more(length)
    progress = new_progress() if progress is None else progress

    def at_position(i: int) -> None:  # every start before i is done
        progress["next"] = i
        if reached is not None:
            reached(i)

    skip = sliding and selection != "allmatch" and not keyed_by_start and not any(nfa.nested)
    covered: dict | None = {} if skip else None

    if masks is not None and selection != "allmatch" and not any(nfa.nested):
        dfa = nfa.dfa()
        first_bits = sum(1 << v for v in {nfa.occurrences[s] for s in nfa.first})

        forgotten = [0]  # covered positions below this are gone

        def at(start: int) -> list[tuple]:
            if covered:  # forget the positions before this start
                for position in range(forgotten[0], start):
                    covered.pop(position, None)
                forgotten[0] = start
            return dfa.instances_at(start, masks, more, selection, covered)

        positions = _positions(more, progress["next"], at_position)
        starts = (i for i in positions if masks[i] & first_bits)
        return select_instances(more, at, sliding, selection, starts, progress)

    first = [(state, nfa.occurrences[state]) for state in nfa.first]

    def at(start: int) -> list[tuple]:
        if covered is not None:
            covered.pop(start - 1, None)
        if not any(test(var, start, start) for _, var in first):
            return []  # nothing can start here (the usual case; tests are memoized)
        return instances_at(nfa, start, more, test, selection, keyed_by_start, covered)

    starts = _positions(more, progress["next"], at_position)
    return select_instances(more, at, sliding, selection, starts, progress)


class LazyDFA:
    """The Pike VM's control, determinized on demand (RE2's lazy DFA), for tests that
    look at the item alone under maximal or incremental selection.

    A DFA state is the ordered tuple of the NFA states of the live threads
    after the dedupe; a symbol is the bitmask of the variables whose test holds
    at the next item.  A transition also records, for each new thread, its
    parent thread and whether it entered a new variable occurrence, so an
    instance's runs are read back along the path once its end is known: the
    work per item is one dictionary lookup.  The transition cache is flushed
    when it passes ``budget`` entries (between two starts).
    """

    def __init__(self, nfa: NFA, budget: int = 100_000) -> None:
        self.nfa = nfa
        self.budget = budget
        self.flushes = 0
        self._flush()

    def _flush(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.states: list[tuple] = []  # id -> NFA states, preferred first
        self.bits: list[int] = []  # id -> its NFA states as a bitmask
        self.accept: list[int] = []  # id -> index of the preferred accepting thread, or -1
        self.moves: dict[tuple, tuple] = {}  # (id, mask) -> (id, (states, parents, entered))
        self.starts: dict[int, int] = {}  # mask -> id
        self._intern(())  # id 0: no thread left

    def _intern(self, states: tuple) -> int:
        sid = self.ids.get(states)
        if sid is None:
            sid = self.ids[states] = len(self.states)
            self.states.append(states)
            self.bits.append(sum(1 << s for s in states))
            last = self.nfa.last
            self.accept.append(next((i for i, s in enumerate(states) if s in last), -1))
        return sid

    def start(self, mask: int) -> int:
        sid = self.starts.get(mask)
        if sid is None:
            occ = self.nfa.occurrences
            states = tuple(s for s in self.nfa.first if mask >> occ[s] & 1)
            sid = self.starts[mask] = self._intern(states)
        return sid

    def move(self, sid: int, mask: int) -> tuple:
        nfa = self.nfa
        occ = nfa.occurrences
        new: list[int] = []
        parents: list[int] = []
        entered: list[bool] = []
        for i, state in enumerate(self.states[sid]):
            options = [(state, False)] if nfa.extends[state] else []
            options += [(nxt, True) for nxt in nfa.follow[state]]
            for nxt, fresh in options:
                if mask >> occ[nxt] & 1 and nxt not in new:
                    new.append(nxt)
                    parents.append(i)
                    entered.append(fresh)
        step = (tuple(new), tuple(parents), tuple(entered))
        move = self.moves[sid, mask] = (self._intern(step[0]), step)
        return move

    def instances_at(
        self, start: int, masks, more: Callable[[int], bool], selection: str, covered: dict | None
    ) -> list[tuple]:
        """As ``instances_at`` of the Pike VM, for one start; ``covered`` holds the NFA
        states of earlier starts at each position as bitmasks."""
        if len(self.moves) > self.budget:
            self._flush()
            self.flushes += 1
        sid = first = self.start(masks[start])
        if not sid:
            return []
        bits, accept, moves = self.bits, self.accept, self.moves
        if covered is not None and not bits[sid] & ~covered.get(start, 0):
            return []
        path: list[tuple] = []  # the steps taken after ``start``
        ends: list[tuple] = []  # (end, steps, accepting thread)
        position = start
        while True:
            if covered is not None:
                covered[position] = covered.get(position, 0) | bits[sid]
            if accept[sid] >= 0:
                end = (position, len(path), accept[sid])
                if selection == "incremental":
                    ends.append(end)
                else:
                    ends = [end]
            position += 1
            if not more(position):
                break
            move = moves.get((sid, masks[position])) or self.move(sid, masks[position])
            sid = move[0]
            if not sid:
                break
            path.append(move[1])
        return [(start, end, self._runs(start, first, path, k, j)) for end, k, j in ends]

    def _runs(self, start: int, first: int, path: list, steps: int, thread: int) -> tuple:
        """The runs of the accepting ``thread`` after ``steps`` steps of ``path``, read
        back to ``start`` (whose DFA state is ``first``)."""
        occ = self.nfa.occurrences
        runs: list = [None] * len(self.nfa.variables)
        run_end = start + steps
        for position in range(start + steps, start, -1):
            states, parents, entered = path[position - start - 1]
            if entered[thread]:
                runs[occ[states[thread]]] = (position, run_end)
                run_end = position - 1
            thread = parents[thread]
        runs[occ[self.states[first][thread]]] = (start, run_end)
        return tuple(runs)


# -- the brute-force reference ------------------------------------------------


def reference_instances(
    pattern: A.Pattern, length: int, test: Test, sliding: bool, selection: str
) -> list[tuple]:
    """The same answer by backtracking: every way to cut the input from a start into the
    pattern's variables, in preference order (slow; for tests)."""
    variables = pattern.variables
    index = {v.name: i for i, v in enumerate(variables)}

    def runs_of(var: int, start: int):
        """Ends (exclusive) of the runs of ``var`` from ``start``, longest first."""
        v = variables[var]
        ends = []
        pos = start
        while pos < length and (v.max is None or len(ends) < v.max):
            step = test(var, start, pos)
            if not step:
                break
            pos += step if v.nested is not None else 1
            ends.append(pos)
        yield from reversed(ends)
        if v.min == 0:
            yield start

    def gen(node, start: int):
        """(end, assignment) for every way ``node`` matches from ``start``, preferred first."""
        if isinstance(node, A.RVar):
            var = index[node.name]
            for end in runs_of(var, start):
                yield end, {var: (start, end - 1) if end > start else None}
        elif isinstance(node, A.RAlt):
            for option in node.options:
                yield from gen(option, start)
        else:
            yield from gen_seq(node.items, start)

    def gen_seq(items: list, start: int):
        if not items:
            yield start, {}
            return
        for cut, left in gen(items[0], start):
            for end, right in gen_seq(items[1:], cut):
                yield end, {**left, **right}

    def at(start: int) -> list[tuple]:
        per_end: dict[int, list] = {}
        for end, assignment in gen(pattern.regex, start):
            if end == start:
                continue  # the empty match is not an instance
            run = tuple(assignment.get(i) for i in range(len(variables)))
            group = per_end.setdefault(end, [])
            if run not in group:
                group.append(run)
        ends = sorted(per_end)
        if selection == "allmatch":
            return [(start, e - 1, r) for e in ends for r in per_end[e]]
        if selection == "incremental":
            return [(start, e - 1, per_end[e][0]) for e in ends]
        return [(start, ends[-1] - 1, per_end[ends[-1]][0])] if ends else []

    return list(select_instances(_more(length), at, sliding, selection))
