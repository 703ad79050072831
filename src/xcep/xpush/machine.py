"""The lazy XPush machine (the seed's Definition 3.1, Fig. 2, §4 and §5).

A machine state is a pair (top-down state, bottom-up state); both are sets of
AFA states, interned as sorted tuples (hash-consed) to small integers. The
transition functions are tables filled on first use:

- t_push → ``push``: (q^t, label) → the child's q^t;
- t_value then t_pop → ``leaf``: (q^t, label, value) → what an attribute or
  text child adds to its parent;
- eval then t_pop → ``close``: (parent's q^t, q^b, value states, label) → what
  a closing element adds to its parent (and, with early notification, the
  early states it matched: they prove their filters);
- t_add^b → ``add``: (q^b, q^b) → q^b (adding the empty state is the identity: no entry);
- t_accept → ``accept``: the document node's q^b → the initial and early
  states matched there (they prove their filters).

A document's answer is made once per (accepted states, proven states) from
the filters those states prove (``answers``).

``t_add^t`` is the identity (the seed's Fig. 3 too), so it needs no table.
Element values (string values, for comparisons on elements) are looked up
in ``values``: (q^t, string value) → the predicate states they make true.

Options (each switchable, the seed's §5): ``top_down`` pruning (on by
default), ``order`` (drop states that a DTD says can no longer complete an
AND, needs ``order_facts``), ``early`` notification (needs ``top_down``);
training is done by feeding training documents (``xcep.xpush.training``).

The tables and states are a cache with a memory budget: when more than
``max_entries`` entries are held at a document boundary, everything is
flushed and rebuilt lazily (``stats.flushes``).

One module of about 900 lines, on purpose: one machine (its Python tables and
the C core's, the delta machines beside it for live changes, the answer cache) whose
parts share its state; the AFA is in ``afa.py``, the C core in ``_states.c``.
"""

from __future__ import annotations

import io
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from heapq import heapify, heappop, heappush

from xcep.collector import collector_paused
from xcep.events.model import ATTR, CLOSE, OPEN, TEXT, EventBatch
from xcep.events.stepping import Feed
from xcep.idlines import FilterError, id_key
from xcep.xpush.afa import AND, OR
from xcep.xpush.compiled import (
    MachineOptions,
    SetStore,
    compile_workload,
    id_json,
)
from xcep.xpush.counting import Counting, Labels
from xcep.xpush.predicates import PredicateIndex
from xcep.xpush.workload import Workload

try:
    from xcep.xpush._states import json_list, merge_ranks
except ImportError:  # built without a C compiler: the Python machine does it all
    json_list = merge_ranks = None


DELTA_SMALL = 64  # a machine this small rebuilds itself for a change (under a millisecond)
DELTA_SHARE = 32  # a larger one's delta (and removals) merge at a 32nd of its filters


class _Follower:
    """A delta machine run beside its machine over the same batches, from the document
    after ``last`` (the one answered when the change came), in step with it: it reads a
    document only when asked for its answer, so that the changes made after each answer
    reach it in time."""

    def __init__(self, machine: XPushMachine, batch: EventBatch, last: int) -> None:
        self.machine = machine
        self.items: deque = deque()
        self.answers = machine.run(Feed(self.items))
        self.ahead: tuple | None = None  # an answer read for a later document
        self.done = True  # the batch given is read to its end
        start = bisect_right(batch.docs, last)  # this batch's documents after the change
        if start < len(batch):
            self.feed(batch.slice(start, len(batch)) if start else batch)

    def feed(self, batch: EventBatch) -> None:
        while not self.done:  # the end of the last batch: no document left in it
            self._read()
        self.items.extend((batch, None))
        self.done = False

    def _read(self) -> tuple | None:
        item = next(self.answers)
        if item is None:
            self.done = True
        return item

    def answer(self, doc: int) -> list:
        """Its answer for ``doc``."""
        while True:
            item = self.ahead
            self.ahead = None
            if item is None:
                if self.done:
                    return []
                item = self._read()
                if item is None:
                    return []
            if item[0] == doc:
                return item[1]
            if item[0] > doc:  # (a document it began before the change: none)
                self.ahead = item
                return []


@dataclass
class MachineStats:
    documents: int = 0
    lookups: int = 0
    misses: int = 0
    flushes: int = 0
    rebuilds: int = 0
    training_documents: int = 0

    @property
    def hit_ratio(self) -> float:
        """Table lookups served without computing an entry. ``lookups`` is counted from
        the events (a bound, not a tally), so on a few small documents, where a lookup can
        fill several entries, the ratio is held at 0 rather than going negative."""
        return max(0.0, 1.0 - self.misses / self.lookups) if self.lookups else 0.0


def _wildcard(label: str) -> str | None:
    """The wildcard that also matches ``label`` (none for text)."""
    return "@*" if label[0] == "@" else ("*" if label[0] != "#" else None)


def _label_matches(pattern: str, label: str) -> bool:
    if pattern == label:
        return True
    if pattern == "*":
        return label[0] not in "@#"
    return pattern == "@*" and label[0] == "@"


class XPushMachine:
    """Many boolean XPath filters over a stream of documents, one lazy pushdown machine.

    >>> import io
    >>> from xcep.events import EventStream
    >>> m = XPushMachine({"p1": "//a[b/text()=1]", "p2": "//a[@c>2]"})
    >>> docs = [io.BytesIO(b'<r><a c="3"><b>1</b></a></r>'), io.BytesIO(b'<r><a c="1"/></r>')]
    >>> [(doc, sorted(ids)) for doc, ids in m.run(EventStream(docs).batches())]
    [(0, ['p1', 'p2']), (1, [])]
    """

    def __init__(
        self,
        filters: dict | Iterable[tuple] = (),
        options: MachineOptions | None = None,
        order_facts=None,
    ) -> None:
        self.options = options or MachineOptions()
        self.order_facts = order_facts
        with collector_paused():  # parsing and compiling many filters: every object new
            self.workload = filters if isinstance(filters, Workload) else Workload(filters)
        self.stats = MachineStats()
        self._pending_change = False
        self._delta: XPushMachine | None = None  # runs the filters added since the build
        self._dropped: frozenset = frozenset()  # filters removed since: left out of answers
        self._dropped_ranks: tuple = ()  # their ranks, ascending
        self._build()

    # ----- building and flushing -----

    def _build(self) -> None:
        with collector_paused():
            self.compiled = compile_workload(self.workload, self.options, self.order_facts)
            self.kernel = self.compiled.new_kernel() if self.options.compiled else None
            if self.kernel is not None:  # it holds its own copies: the Python ones can go
                self.compiled.watchers = self.compiled.lists = None
            counted = self.compiled.counted
            self.counting = None if counted is None else Counting(counted, self.options.compiled)
        self._ranks: dict = {}  # filter id → its rank here (_rank_of)
        self._indexes: dict[frozenset, tuple] = {}  # enabled predicates -> index, in C
        self.index_held = 0  # their predicates (part of the memory measure)
        self.flush(count=False)

    def flush(self, count: bool = True) -> None:
        """Forget every machine state and table (they are rebuilt on demand)."""
        if count:
            self.stats.flushes += 1
        self.held = 0  # nested table entries (the sets count their own)
        if self.index_held > self.options.max_entries // 4:  # else kept: they repeat
            self._indexes.clear()
            self.index_held = 0
        if self.kernel is not None:  # the core's sets and tables (mappings like the dicts)
            self.kernel.clear()
            self.sets = self.kernel.states
            self.push, self.leaf, self.close, self.add, self.values = map(
                self.kernel.table, ("push", "leaf", "close", "add", "values")
            )
        else:
            self.sets = SetStore()
            self.push, self.leaf, self.close, self.add, self.values = ({} for _ in range(5))
        self.EMPTY = self._intern(frozenset())
        self.ALL = self._intern(frozenset((-1,)))  # the top-down state without top-down pruning
        self.accept: dict = {}
        self.clear_answers()
        self._qt_sets: dict[int, frozenset[int]] = {}
        self._qt_extras: dict[int, tuple[frozenset, frozenset]] = {}
        self._qt_indexes: dict[int, PredicateIndex] = {}
        self._qt_tested: dict = {}  # top-down state → its index tested in C
        if self.options.top_down:
            initial = self._eps_close(self.compiled.initial)
            self.q0t = self._intern(initial)
        else:
            self.q0t = self.ALL

    def clear_answers(self) -> None:
        """Forget the cached answers (their ranks), not the states: at a document boundary
        when they hold more than half the budget, for answers that are large and rarely
        repeat must not flush the machine."""
        self.answers: dict = {}
        self.answers_held = 0

    def entries(self) -> int:
        """Table entries plus the elements of all interned sets (the memory measure)."""
        tables = (self.push, self.leaf, self.close, self.add, self.accept, self.values)
        sets = self.sets.held + (self.kernel.held if self.kernel else 0)
        return (
            sum(map(len, tables))
            + len(self.answers)
            + self.answers_held
            + self.held
            + self.index_held
            + sets
        )

    def __len__(self) -> int:
        """The filters it answers for."""
        delta = len(self._delta) if self._delta is not None else 0
        return len(self.workload) - len(self._dropped) + delta

    def __contains__(self, fid) -> bool:
        """Whether it answers for the filter ``fid``."""
        if self._delta is not None and fid in self._delta:
            return True
        return fid in self.workload and fid not in self._dropped

    def filters(self) -> dict:
        """id → text of every filter it answers for."""
        text_of, dropped = self.workload.text_of, self._dropped
        texts = {f: text_of[n] for f, n in self.workload.numbers.items() if f not in dropped}
        return texts | (self._delta.filters() if self._delta is not None else {})

    def add_filter(self, fid, text: str) -> None:
        """Subscribe a filter; it takes effect at the next document boundary.

        A small machine (``DELTA_SMALL`` filters) rebuilds itself for a change, in well
        under a millisecond. A larger one hands added filters to its *delta machine*,
        which runs beside it over the same events, and leaves removed ones out of its
        answers; when the delta holds more than a ``DELTA_SHARE``-th of its filters (or
        that many were removed) both are merged into one machine, rebuilt at the next
        document boundary. So a change costs well under a millisecond, and a rebuild of
        the large machine comes once per many changes."""
        if fid in self:
            raise FilterError("duplicate filter id", fid)
        small = self._delta is None and len(self.workload) < DELTA_SMALL
        if (small or self._pending_change) and fid not in self.workload:
            self.workload.add(fid, text)  # rebuilt at the next document anyway
            self._pending_change = True
            return
        if self._delta is None:
            self._delta = XPushMachine((), self.options, self.order_facts)
        self._delta.add_filter(fid, text)
        if len(self._delta) > max(DELTA_SMALL, len(self) // DELTA_SHARE):
            self._merge()

    def remove_filter(self, fid) -> None:
        """Unsubscribe a filter; it takes effect at the next document boundary (see
        ``add_filter``)."""
        if self._delta is not None and fid in self._delta:
            self._delta.remove_filter(fid)
            return
        if fid not in self:
            raise FilterError("no such filter", fid)
        if self._pending_change or (self._delta is None and len(self.workload) <= DELTA_SMALL):
            self.workload.remove(fid)  # rebuilt at the next document anyway
            self._pending_change = True
            return
        self._dropped = self._dropped | {fid}  # a new set: a run reads it per document
        self._dropped_ranks = tuple(sorted({*self._dropped_ranks, self._rank_of(fid)}))
        if len(self._dropped) > max(DELTA_SMALL, len(self) // DELTA_SHARE):
            self._merge()

    def _merge(self) -> None:
        """One workload again: the removed filters out, the delta's in; rebuilt at the next
        document boundary."""
        for fid in self._dropped:
            self.workload.remove(fid)
        if self._delta is not None:
            for fid, text in self._delta.filters().items():
                self.workload.add(fid, text)
        self._delta, self._dropped, self._dropped_ranks = None, frozenset(), ()
        self._pending_change = True

    # ----- set operations behind the tables -----

    def _intern(self, states) -> int:
        """Hash-cons a set of AFA states to a small integer."""
        return self.sets.intern(states)

    def _eps_close(self, states) -> set[int]:
        eps = self.compiled.afa.eps
        out = set(states)
        todo = list(out)
        while todo:
            for t in eps[todo.pop()]:
                if t not in out:
                    out.add(t)
                    todo.append(t)
        return out

    def _enabled(self, qt: int) -> frozenset[int] | None:
        if qt == self.ALL:
            return None
        enabled = self._qt_sets.get(qt)
        if enabled is None:  # the compiled core's sets are made on request: kept here
            enabled = self._qt_sets[qt] = self.sets[qt]
        return enabled

    def _extras(self, qt: int) -> tuple[frozenset[int], frozenset[int]]:
        """The TRUE leaves and NOT states enabled at a node with top-down state ``qt``."""
        extras = self._qt_extras.get(qt)
        if extras is None:
            c = self.compiled
            enabled = self._enabled(qt)
            if enabled is None:
                extras = (c.true_leaves, c.not_states)
            else:
                extras = (c.true_leaves & enabled, c.not_states & enabled)
            self._qt_extras[qt] = extras
        return extras

    def _eval(self, bases: tuple, qt: int) -> set[int]:
        """eval(q): the states matched at a node, given those matched through its children.

        States in ``bases`` (a tuple of sets) and the enabled TRUE leaves match. Combinators above
        them are decided in increasing state order (ε-successors first), each
        when one of its successors matches: any successor for OR, the *watched*
        one — the successor shared by the fewest states — for AND (an AND needs
        them all), and every enabled NOT. So a state shared by thousands of ANDs
        does not make each of them a candidate.
        """
        c = self.compiled
        kind, eps, watchers = c.afa.kind, c.afa.eps, c.watchers
        enabled = self._enabled(qt)
        trues, nots = self._extras(qt)
        matched = set(trues).union(*bases)
        heap = [w for s in matched for w in watchers[s]]
        heap.extend(nots)
        heapify(heap)
        decided = set()
        while heap:
            s = heappop(heap)
            if s in decided or s in matched:
                continue
            decided.add(s)
            if enabled is not None and s not in enabled:
                continue
            k = kind[s]
            if k == AND:
                ok = all(t in matched for t in eps[s])
            elif k == OR:
                ok = any(t in matched for t in eps[s])
            else:  # NOT
                ok = eps[s][0] not in matched
            if ok:
                matched.add(s)
                for w in watchers[s]:
                    heappush(heap, w)
        return matched

    def _eval_pop(self, bases: tuple, qt: int, label: str, parent_qt: int) -> tuple[int, int]:
        """eval at a node with top-down state ``qt``, then t_pop to its parent (``_pop``):
        in C when the core is built (``xcep.xpush._states``), else in Python. ``bases`` are
        interned sets (their ids) or sets of states."""
        if self.kernel is not None:
            return self.kernel.eval_pop(bases, qt, label, parent_qt)
        bases = tuple(self.sets[b] if type(b) is int else b for b in bases)
        return self._pop(self._eval(bases, qt), label, parent_qt)

    def _pop(self, matched: set[int], label: str, parent_qt: int) -> tuple[int, int]:
        """t_pop: the parent's states that the matched child states complete, and (with
        early notification) the early states matched, which prove their filters; both
        interned."""
        c = self.compiled
        notes = self.EMPTY
        if c.early:
            proven = matched & c.early_states
            if proven:
                notes = self._intern(proven)
                matched = matched - proven
        wildcard = _wildcard(label)
        up: set[int] = set()
        back = c.back
        for s in matched:
            by_label = back[s]
            if by_label:
                exact = by_label.get(label)
                if exact:
                    up.update(exact)
                if wildcard:
                    loose = by_label.get(wildcard)
                    if loose:
                        up.update(loose)
        enabled = self._enabled(parent_qt)
        if enabled is not None:
            up &= enabled
        return self._intern(up), notes

    # ----- the tables, filled on first use -----

    def _push(self, qt: int, label: str) -> int:
        self.stats.misses += 1
        return self._compute_push(qt, label)

    def _compute_push(self, qt: int, label: str) -> int:
        if qt == self.ALL:
            result = self.ALL
        elif self.kernel is not None:
            result = self.kernel.push(qt, label)
        else:
            afa = self.compiled.afa
            targets = {
                afa.target[s]
                for s in self.sets[qt]
                if afa.label[s] is not None and _label_matches(afa.label[s], label)
            }
            result = self._intern(self._eps_close(targets))
        self.push[(qt, label)] = result
        return result

    def _value_states(self, qt: int, value: str) -> set[int]:
        """The enabled predicate states ``value`` makes true at a node with top-down state
        ``qt``."""
        index = self._value_index(qt)
        tested = self._qt_tested.get(qt)  # the compiled twin, when there is one
        return index.true_states(value) if tested is None else set(tested.true_states(value))

    def _value_index(self, qt: int) -> PredicateIndex:
        """The index of the predicates enabled at a node with top-down state ``qt`` (built
        once per top-down state)."""
        index = self._qt_indexes.get(qt)
        if index is None:
            enabled = self._enabled(qt)
            if enabled is None:
                index, tested = self.compiled.index, None
            else:  # kept across flushes: the same predicates are enabled again after one
                key = self.compiled.index.states.intersection(enabled)
                index, tested = self._indexes.get(key) or (None, None)
                if index is None:
                    index = self.compiled.index.restricted(key)
                    self._indexes[key] = (index, None)
                    self.index_held += index.count + 1
            self._qt_indexes[qt] = index
            if self.kernel is not None and index.count:  # the walk then tests values itself
                if tested is None:
                    tested = index.compiled(self.compiled.size)
                    if enabled is not None:
                        self._indexes[key] = (index, tested)
                self.kernel.set_values(qt, tested)
                self._qt_tested[qt] = tested
        return index

    def _tests_values(self, qt: int) -> bool:
        """Do predicate states matter at a node with top-down state ``qt``?"""
        return self._value_index(qt).count > 0

    def _leaf(self, qt: int, label: str, value: str) -> tuple:
        """An attribute or a text child with ``value``: what it adds to its parent.

        ``leaf[(qt, label)]`` is the answer itself when no predicate can look at
        the value there, else a dict from values to answers.
        """
        self.stats.misses += 1
        child_qt = self.push.get((qt, label))
        if child_qt is None:
            child_qt = self._compute_push(qt, label)
        if not self._tests_values(child_qt):
            result = self._eval_pop((), child_qt, label, qt)
            self.leaf[(qt, label)] = result
            return result
        result = self._eval_pop((self._value_states(child_qt, value),), child_qt, label, qt)
        self.leaf.setdefault((qt, label), {})[value] = result
        self.held += 1
        return result

    def _element_values(self, qt: int, value: str) -> int:
        """The predicate states an element's string value makes true (``values`` table)."""
        self.stats.misses += 1
        table = self.values.get(qt)
        if table is None:
            table = self.values[qt] = {} if self._tests_values(qt) else False
        if table is False:
            return self.EMPTY
        result = self._intern(self._value_states(qt, value))
        table[value] = result
        self.held += 1
        return result

    def _close(self, parent_qt: int, qt: int, qb: int, vq: int, label: str) -> tuple:
        self.stats.misses += 1
        result = self._eval_pop((qb, vq), qt, label, parent_qt)
        self.close[(parent_qt, qb, vq, label)] = result
        return result

    def _add(self, qs: int, q: int) -> int:
        self.stats.misses += 1
        if self.kernel is not None:
            result = self.add[(qs, q)] = self.kernel.add(qs, q)
            return result
        prec = self.compiled.prec
        left = self.sets[qs]
        right = self.sets[q]
        if prec:  # the order optimization: drop what can no longer complete an AND
            guarded = right & prec.keys()
            if guarded:
                right = right - {s for s in guarded if not any(p <= left for p in prec[s])}
        result = self._intern(left | right)
        self.add[(qs, q)] = result
        return result

    def _accept(self, qb: int, vq: int) -> int:
        self.stats.misses += 1
        c = self.compiled
        if self.kernel is None:
            matched = self._eval((self.sets[qb], self.sets[vq]), self.q0t)
            result = self._intern(matched & c.proving_states)
        else:
            result = self.kernel.accept((qb, vq), self.q0t)
        self.accept[(qb, vq)] = result
        return result

    def _answer(self, found: int, proven: tuple[int, ...]) -> bytes | tuple[int, ...]:
        """A document's answer: the ranks of its filters, ascending (int32 bytes from the
        compiled core, else a tuple).

        ``found`` is the accepted set of states (initial and early states matched at the
        document node), ``proven`` the sets of early states matched on the way (all
        interned); the answer's ranks are cached by both (``answers``).
        """
        c = self.compiled
        ranks = self.answers.get((found, proven))
        if ranks is None:  # (or only seen: _answer_json)
            if self.kernel is not None:  # sorted int32 ranks, as bytes
                ranks = self.kernel.answer(found, proven)
                count = len(ranks) // 4
            else:
                union = set()
                for s in self.sets[found]:
                    union.update(c.initial.get(s, ()), c.early.get(s, ()))
                for s in set().union(*map(self.sets.__getitem__, proven)):
                    union.update(c.early[s])
                ranks = tuple(sorted(union))
                count = len(ranks)
            self.answers[(found, proven)] = ranks
            self.answers_held += count + len(proven) + 1
        return ranks

    def _all_ranks(self, found: int, proven: tuple, counted) -> bytes | tuple:
        """A document's ranks: the machine's (``_answer``) and, where filters are counted,
        the counted ones that match (``counted``, ascending; None for none)."""
        ranks = self._answer(found, proven)
        if not counted:
            return ranks
        if not ranks:
            return counted
        if self.kernel is not None and type(counted) is bytes:
            return merge_ranks(ranks, counted)
        return tuple(sorted((*self._rank_list(ranks), *self._rank_list(counted))))

    @staticmethod
    def _rank_list(ranks) -> list | tuple:
        return array("i", ranks).tolist() if type(ranks) is bytes else ranks

    def _combined(
        self, found: int, proven: tuple, more: list, as_json: bool, counted=None
    ) -> list | str:
        """A document's answer while filters change: its own, less the removed filters,
        with ``more`` (the delta's answer, ids ascending) merged in. Done on ranks, in
        time in the changes, not in the size of the answer (which can hold thousands)."""
        import numpy as np  # (here: only a machine whose filters change loads it)

        answer = self._all_ranks(found, proven, counted)  # int32 bytes, or a tuple
        ranks = (
            np.frombuffer(answer, np.int32) if type(answer) is bytes else np.array(answer, np.int32)
        )
        if self._dropped and len(ranks):
            dropped = np.array(self._dropped_ranks, np.int32)
            ranks = ranks[~np.isin(ranks, dropped, assume_unique=True)]
        ids = self.compiled.ids
        # where each of ``more`` goes among the ranks: before the first filter above it
        cuts = ranks.searchsorted([self._rank_of(fid) for fid in more]).tolist()
        pieces: list = []
        start = 0
        for cut, fid in zip(cuts, more, strict=True):
            pieces += (ranks[start:cut], fid)
            start = cut
        pieces.append(ranks[start:])
        if as_json:
            texts = [
                id_json(piece) if k % 2 else self._ranks_json(piece)[1:-1]
                for k, piece in enumerate(pieces)
            ]
            return "[" + ",".join(text for text in texts if text) + "]"
        out: list = []
        for k, piece in enumerate(pieces):
            if k % 2:
                out.append(piece)
            elif self.kernel is not None:
                out += self.kernel.ids_of(piece.tobytes(), ids)
            else:
                out += map(ids.__getitem__, piece.tolist())
        return out

    def _rank_of(self, fid) -> int:
        """The rank a filter would have here (the first one above it): for a filter of the
        delta, cached until the machine is rebuilt."""
        rank = self._ranks.get(fid)
        if rank is None:
            rank = self._ranks[fid] = bisect_left(self.compiled.ids, id_key(fid), key=id_key)
        return rank

    def _ranks_json(self, ranks) -> str:
        """Ranks (int32 bytes or an array from the compiled core; a tuple from Python) as the
        text of a JSON list of their ids."""
        if self.kernel is not None and type(ranks) is not tuple:
            return json_list(ranks, *self.compiled.json_ids)
        return "[" + ",".join(id_json(self.compiled.ids[rank]) for rank in ranks) + "]"

    def _answer_ids(self, found: int, proven: tuple[int, ...], counted=None) -> list:
        """A document's answer as a new list of ids (ascending)."""
        ranks = self._all_ranks(found, proven, counted)
        if self.kernel is not None and type(ranks) is bytes:
            return self.kernel.ids_of(ranks, self.compiled.ids)
        return list(map(self.compiled.ids.__getitem__, ranks))

    def _answer_json(self, found: int, proven: tuple[int, ...], counted=None) -> str:
        """A document's answer as the text of a JSON list of ids (ascending): the counted
        filters' ranks merged in as the list is written, in C. An answer seen the first
        time is written straight from the states (``kernel.answer_json``) and only marked
        as seen: the answers of varied documents mostly never come again (structural
        messages: 5,408 of 5,925), and one that does keeps its ranks the second time."""
        if self.kernel is not None and (counted is None or type(counted) is bytes):
            key = (found, proven)
            if key not in self.answers:
                self.answers[key] = None
                self.answers_held += len(proven) + 1
                return self.kernel.answer_json(found, proven, *self.compiled.json_ids, counted)
            return json_list(self._answer(found, proven), *self.compiled.json_ids, counted)
        return self._ranks_json(self._all_ranks(found, proven, counted))

    def _document_values(self, qt: int, text: str) -> int:
        table = self.values.get(qt)
        found = self.EMPTY if table is False else (table or {}).get(text)
        return self._element_values(qt, text) if found is None else found

    # ----- running -----

    def _document_boundary(self) -> None:
        if self._pending_change:
            self._pending_change = False
            self.stats.rebuilds += 1
            self._build()
        else:
            if self.answers_held > self.options.max_entries // 2:
                self.clear_answers()
            if self.entries() > self.options.max_entries:
                self.flush()

    def run(
        self, batches: Iterable[EventBatch | None], as_json: bool = False
    ) -> Iterator[tuple[int, list | str]]:
        """For each complete document: (doc index, ids of the matching filters, ascending);
        with ``as_json`` the ids as the text of a JSON list (``'[1,"b"]'``), made in C
        without a Python object per id (for writing large answers).

        Filters added since the machine was built run in its delta machine, over the same
        batches (from the document after the change); removed ones are left out of the
        answers until the machine is rebuilt (see ``add_filter``). A ``None`` among the
        batches is answered by a ``None``: a pause, for running machines side by side."""
        feed: deque = deque()
        own = self._run(Feed(feed))
        follower: _Follower | None = None
        last = -1  # the last document answered
        for batch in batches:
            if batch is None:
                feed.append(None)
                next(own)
                yield None
                continue
            feed.extend((batch, None))
            if self._delta is None:
                follower = None
            elif follower is None or follower.machine is not self._delta:
                follower = _Follower(self._delta, batch, last)  # changed before the run
            else:
                follower.feed(batch)
            for item in own:
                if item is None:  # the batch is done
                    break
                doc, found, proven, counted = item
                delta = self._delta
                if delta is None and not self._dropped:  # the common case: nothing changed
                    answer = self._answer_json if as_json else self._answer_ids
                    yield doc, answer(found, proven, counted)
                else:
                    more = follower.answer(doc) if follower and follower.machine is delta else []
                    yield doc, self._combined(found, proven, more, as_json, counted)
                last = doc
                if self._delta is None:
                    follower = None
                elif follower is None or follower.machine is not self._delta:
                    follower = _Follower(self._delta, batch, last)  # changed just now
        for _ in own:  # the end of the input
            pass

    def _run(self, batches: Iterable[EventBatch | None]) -> Iterator[tuple | None]:
        """The machine over the batches: (doc, accepted states, proven states, the ranks of
        the counted filters that match or None) per complete document, None after each
        ``None`` batch. The counted filters read each document's events as the machine
        begins it (a change to the filters takes effect at a document's start)."""
        labels = Labels()  # the names by symbol id, and their ids in the kernel's tables
        values_needed = self.compiled.needs_element_values
        doc = -1
        stack: list[tuple[int, int]] = []
        texts: list[list[str]] = []
        qt = qb = 0
        proven: list[int] = []  # what early notification reported in this document
        # the tables, bound at every document start (a flush or rebuild replaces them)
        push = leaf = close = add = accept = values = None
        EMPTY = self.EMPTY
        kernel = walk = None  # the compiled core's walk
        fresh = False  # the walk has not yet run in this document
        misses = (self._leaf, self._element_values)  # what the walk calls on a miss
        counting = None
        counted: dict = {}  # doc → the ranks of its counted filters that match
        for batch in batches:
            if batch is None:
                yield None
                continue
            if counting is not None and len(batch) and batch.docs[0] == doc:  # it goes on
                counted.update(counting.feed(batch, 0, bisect_right(batch.docs, doc)))
            labels.read(batch.symbols)
            elem_labels, attr_labels = labels.elements, labels.attributes
            kinds = batch.kinds
            kind_bytes = kinds.tobytes()  # bytes.count is a memchr-speed scan
            opens = kind_bytes.count(OPEN)
            self.stats.lookups += (
                opens + 2 * (len(kinds) - opens) + kind_bytes.count(CLOSE) * values_needed
            )
            docs, names, values_column = batch.docs, batch.names, batch.values
            i, n = 0, len(kinds)
            while i < n:
                if walk is not None and docs[i] == doc:
                    # the document's events up to its root's close, followed in C
                    i, qt, qb, computed = walk(
                        docs, kinds, names, values_column, doc, i, n, elem_labels, attr_labels,
                        labels.element_ids, labels.attribute_ids, texts if values_needed else None,
                        EMPTY, proven,
                        qt, qb, fresh, misses,
                    )  # fmt: skip
                    fresh = False
                    self.stats.misses += computed
                    if i == n:
                        break
                d, kind, name, value = docs[i], kinds[i], names[i], values_column[i]
                i += 1
                if d != doc:  # a new document (a malformed one before it is dropped)
                    self._document_boundary()
                    push, leaf, close, add, accept, values = (
                        self.push,
                        self.leaf,
                        self.close,
                        self.add,
                        self.accept,
                        self.values,
                    )
                    EMPTY = self.EMPTY
                    values_needed = self.compiled.needs_element_values
                    if self.kernel is not kernel:  # built anew: its labels have other ids
                        kernel = self.kernel
                        walk = None if kernel is None else kernel.walk
                        labels.relabel(kernel.label_ids if kernel else None)
                    fresh = True
                    doc = d
                    counting = self.counting
                    if counting is not None:
                        counted = dict(counting.feed(batch, i - 1, bisect_right(docs, d, i - 1)))
                    stack.clear()
                    texts = [[]]
                    qt, qb = self.q0t, EMPTY
                    proven = []
                if kind == OPEN:
                    label = elem_labels[name]
                    stack.append((qt, qb))
                    nqt = push.get((qt, label))
                    qt = self._push(qt, label) if nqt is None else nqt
                    qb = EMPTY
                    if values_needed:
                        texts.append([])
                elif kind == CLOSE:
                    label = elem_labels[name]
                    parent_qt, parent_qb = stack.pop()
                    vq = EMPTY
                    if values_needed:
                        text = "".join(texts.pop())
                        texts[-1].append(text)
                        table = values.get(qt)
                        vq = EMPTY if table is False else (table or {}).get(text)
                        if vq is None:
                            vq = self._element_values(qt, text)
                    entry = close.get((parent_qt, qb, vq, label))
                    if entry is None:
                        entry = self._close(parent_qt, qt, qb, vq, label)
                    popped, notes = entry
                    if notes:
                        proven.append(notes)
                    qt = parent_qt
                    if popped == EMPTY:  # t_add^b(q, ∅) = q: no entry needed
                        qb = parent_qb
                    else:
                        q = add.get((parent_qb, popped))
                        qb = self._add(parent_qb, popped) if q is None else q
                    if not stack:  # the root closed: the document is complete
                        dvq = EMPTY
                        if values_needed:
                            dvq = self._document_values(qt, "".join(texts[-1]))
                        found = accept.get((qb, dvq))
                        if found is None:
                            found = self._accept(qb, dvq)
                        self.stats.documents += 1
                        yield d, found, tuple(proven), counted.pop(d, None)
                        doc = -1  # the next event starts a new document
                else:
                    label = attr_labels[name] if kind == ATTR else "#text"
                    if kind == TEXT and values_needed:
                        texts[-1].append(value)
                    entry = leaf.get((qt, label))
                    if entry is None:
                        entry = self._leaf(qt, label, value)
                    elif type(entry) is dict:
                        found_entry = entry.get(value)
                        entry = self._leaf(qt, label, value) if found_entry is None else found_entry
                    popped, notes = entry
                    if notes:
                        proven.append(notes)
                    if popped != EMPTY:  # t_add^b(q, ∅) = q
                        q = add.get((qb, popped))
                        qb = self._add(qb, popped) if q is None else q

    def trace(self, document: str | bytes) -> tuple[list[tuple[str, list[str]]], list]:
        """Run one document event by event, for explaining and testing a machine.

        Returns the steps — after each event, the event and the sub-filters the
        current node's bottom-up state says have matched below it (as filter
        text) — and the matching filter ids. It uses the transition functions of
        ``run`` (and fills the same tables), without the fast paths.
        """
        from xcep.events import EventStream, parse
        from xcep.xpush.afa import describe

        afa, memo = self.compiled.afa, {}
        qt, qb, stack, texts, steps, proven = self.q0t, self.EMPTY, [], [[]], [], []
        for event in parse(document, keep_whitespace=True):
            if event.kind == OPEN:
                stack.append((qt, qb))
                qt, qb = self._push(qt, event.name), self.EMPTY
                texts.append([])
                shown = f"<{event.name}>"
            elif event.kind == CLOSE:
                text = "".join(texts.pop())
                texts[-1].append(text)
                vq = self._element_values(qt, text)
                parent_qt, parent_qb = stack.pop()
                popped, notes = self._close(parent_qt, qt, qb, vq, event.name)
                proven.append(notes)
                qt, qb = parent_qt, self._add(parent_qb, popped)
                shown = f"</{event.name}>"
            else:
                label = "#text" if event.kind == TEXT else "@" + event.name
                if event.kind == TEXT:
                    texts[-1].append(event.value)
                popped, notes = self._leaf(qt, label, event.value)
                proven.append(notes)
                qb = self._add(qb, popped)
                shown = f"{label}={event.value!r}"
            steps.append((shown, sorted(describe(afa, s, memo) for s in self.sets[qb])))
        vq = self._element_values(qt, "".join(texts[-1]))
        counted = None
        if self.counting is not None:  # (the counted filters: no steps of the machine)
            self.counting.reset()
            stream = EventStream([io.BytesIO(_bytes(document))], keep_whitespace=True)
            answers = [r for b in stream.batches() for _, r in self.counting.feed(b, 0, len(b))]
            counted = answers[0] if answers else None
        return steps, self._answer_ids(self._accept(qb, vq), tuple(proven), counted)

    def train(self, dtd=None) -> int:
        """Warm the tables on training documents made from the filters (and a DTD)."""
        from xcep.events import EventStream
        from xcep.xpush.training import training_documents

        documents = training_documents(self.workload.paths.values(), dtd)
        data = "".join(f'<?xml version="1.0"?>{d}\n' for d in documents).encode("utf-8")
        counted = self.stats.documents
        for _ in self.run(EventStream([io.BytesIO(data)], keep_whitespace=True).batches()):
            pass
        self.stats.documents = counted
        self.stats.training_documents += len(documents)
        return len(documents)

    def stats_dict(self) -> dict:
        tables = {
            "push": len(self.push),
            "leaf": len(self.leaf),
            "close": len(self.close),
            "add": len(self.add),
            "accept": len(self.accept),
            "values": len(self.values),
        }
        states = len(self.sets)
        return {
            "filters": len(self),
            "delta_filters": len(self._delta) if self._delta is not None else 0,
            "removed_pending": len(self._dropped),
            "afa_states": self.compiled.size,
            "atomic_predicates": self.compiled.index.count,
            "counted_filters": len(self.compiled.counted or ()),
            "states": states,
            "average_state_size": round((self.sets.held - states) / states, 2) if states else 0,
            "table_entries": tables,
            "entries": self.entries(),
            "max_entries": self.options.max_entries,
            "documents": self.stats.documents,
            "training_documents": self.stats.training_documents,
            "lookups": self.stats.lookups,
            "misses": self.stats.misses,
            "hit_ratio": round(self.stats.hit_ratio, 4),
            "flushes": self.stats.flushes,
            "rebuilds": self.stats.rebuilds,
        }


def _bytes(document: str | bytes) -> bytes:
    return document.encode("utf-8") if isinstance(document, str) else document


__all__ = ["MachineOptions", "MachineStats", "XPushMachine", "compile_workload"]
