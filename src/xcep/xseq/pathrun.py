"""The path runtime's runs: a compiled ``PlainPath`` (``paths.py``) over an event stream.

``PlainPathRun`` runs the lazy DFA a whole batch at a time: numpy finds each
open's parent (the last open one level up, level by level) and looks its state
up from the parent's state and its symbol; the states of the elements still
open when a batch ends carry over; an element whose move waits on a predicate
decided at its close and that is still open when the batch ends holds the
events from its open until it closes (``undecided``). A selected element is
serialized from its events (``_Writer``) or built as a node for the return
clause (``_Capture``) — only the events inside selected elements are visited
one by one — text and attribute steps take the event's value; rows come out in
document order, each as soon as its element closed and the rows before it are
out, as the automaton emits them. With several queries every row says whose
it is, and each query's rows come in its own order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import itemgetter

import numpy as np

from xcep.events import ATTR, CLOSE, OPEN, TEXT, EventBatch
from xcep.xmltext import escape, quoteattr
from xcep.xseq.atoms import DEEP_TEXT, TEXT_END, element_codes, masks, reach
from xcep.xseq.dom import TEXT_NODE, Node
from xcep.xseq.matches import Aggregator, Binding, output_row
from xcep.xseq.paths import PlainPath
from xcep.xseq.semantics import Analysis

_OPEN, _ATTR, _TEXT, _CLOSE = int(OPEN), int(ATTR), int(TEXT), int(CLOSE)


class _Capture:
    """One selected element built as a node (``dom.Node``, attributes kept raw until read)
    from its events; its row is the return clause's terms over it, as the automaton
    gives them."""

    __slots__ = ("doc", "node", "tags")

    def __init__(self, doc: int) -> None:
        self.doc = doc
        self.tags: list[Node] = []  # the open elements, innermost last
        self.node = None

    def feed(self, batch, start: int, end: int) -> bool:
        """Events ``start:end`` of ``batch``; True once the element closed."""
        kinds, names, values, ids = batch.kinds, batch.names, batch.values, batch.nodes
        table, tags, doc = batch.symbols.names, self.tags, self.doc
        for i in range(start, end):
            kind = kinds[i]
            if kind == _ATTR:
                tags[-1].raw.append((table[names[i]], values[i], ids[i]))
            elif kind == _TEXT:
                top = tags[-1]
                text = Node(TEXT_NODE, None, doc, ids[i], top)
                text.value = values[i]
                top.children.append(text)
            elif kind == _OPEN:
                parent = tags[-1] if tags else None
                node = Node.element(table[names[i]], doc, ids[i], parent, [])
                if parent is None:
                    self.node = node
                else:
                    parent.children.append(node)
                tags.append(node)
            else:
                tags.pop().closed = True
                if not tags:
                    return True
        return False

    def binding(self, analysis: Analysis) -> Binding:
        return Binding.empty(analysis).bind(0, self.node, False)


class _Writer:
    """The serialization (or string value) of one selected element, fed its events."""

    __slots__ = ("doc", "parts", "tags", "unclosed", "values_only")

    def __init__(self, doc: int, values_only: bool) -> None:
        self.doc = doc
        self.values_only = values_only
        self.parts: list[str] = []
        self.tags: list[str] = []
        self.unclosed = False  # an open tag whose '>' is not written yet

    def feed(self, batch, start: int, end: int) -> bool:
        """Events ``start:end`` of ``batch``; True once the element closed."""
        kinds, names, values, table = batch.kinds, batch.names, batch.values, batch.symbols.names
        parts, tags = self.parts, self.tags
        if self.values_only:
            for i in range(start, end):
                kind = kinds[i]
                if kind == _TEXT:
                    parts.append(values[i])
                elif kind == _OPEN:
                    tags.append(None)
                elif kind == _CLOSE:
                    tags.pop()
                    if not tags:
                        return True
            return False
        for i in range(start, end):
            kind = kinds[i]
            if kind == _ATTR:
                parts.append(f" {table[names[i]]}={quoteattr(values[i] or '')}")
                continue
            if kind == _CLOSE:
                tag = tags.pop()
                parts.append("/>" if self.unclosed else f"</{tag}>")
                self.unclosed = False
                if not tags:
                    return True
                continue
            if self.unclosed:
                parts.append(">")
                self.unclosed = False
            if kind == _OPEN:
                tag = table[names[i]]
                parts.append(f"<{tag}")
                tags.append(tag)
                self.unclosed = True
            else:
                parts.append(escape(values[i] or ""))
        return False

    def row(self) -> list:
        return ["".join(self.parts)]


def _pick(values: np.ndarray, positions: np.ndarray, missing) -> np.ndarray:
    """``values[positions]``, and ``missing`` (a value, or one per position) where a position
    is -1 (``values`` may then be empty)."""
    taken = values[np.maximum(positions, 0)] if len(values) else np.zeros(len(positions), int)
    return np.where(positions >= 0, taken, missing)


def _last_before(events: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each index in ``at``, the position in ``events`` of the last one before it (-1)."""
    return np.searchsorted(events, at) - 1


class PlainPathRun:
    """One pass of a ``PlainPath`` over an event stream. With several queries
    (``tagged``) a row comes as (the query's index in ``path.selections``, the row);
    each query's rows in its own order (document order)."""

    def __init__(self, path: PlainPath, values_only: bool, tagged: bool = False) -> None:
        self.p = path
        self.values_only = values_only
        self.tagged = tagged
        self.carry: list[int] = [path.start]  # carry[d]: state of the open element at depth d
        # in document order: (selection, doc, row), the row a list or a _Writer/_Capture
        self.queue: deque = deque()
        # the batch's rows out at once (one query's values, nothing queued before them)
        self.ready: list = []
        self.writing: list = []  # the selected elements still open (their writers)
        self.before = np.zeros(1, dtype=np.int32)  # carry as it was when the batch began
        self.counts = [0] * len(path.selections)  # select count: selected elements closed
        self.held: list = []  # batches from the open of an element a predicate waits on
        self.held_at = (0, 0)  # (document, depth) of that element
        self.labels = np.zeros(0, dtype=np.int64)  # name id -> label (and OTHER last)
        self.mapped = None  # the symbol table ``labels`` was made for, and its size
        # select rows, an aggregate return clause: its aggregator
        self.aggregators = [
            Aggregator(s.analysis, values_only)
            if s.select == "rows" and s.analysis.mode != "rows"
            else None
            for s in path.selections
        ]
        self.inner = np.zeros(0, dtype=np.int64)  # the batch's opens' nested predicate masks
        self.objects = 0  # the queue's entries that are writers or captures (not rows)
        self.aggregating = any(a is not None for a in self.aggregators)

    def run(self, batches: Iterable, final: bool) -> Iterator[list]:
        for batch in batches:
            yield from self.feed(batch)
        yield from self.end(final)

    def feed(self, batch) -> list:
        """The rows known once ``batch`` is read, in document order."""
        if self.held:
            self.held.append(batch)
            if not self.closes_held(batch):
                return []
            batch = EventBatch.join(self.held)
            self.held = []
        self.batch(batch)
        ready = self.ready
        if ready:
            self.ready = []
        queue, selections, aggregators = self.queue, self.p.selections, self.aggregators
        if not self.objects and not self.aggregating:  # rows only: all of them out at once
            rows = [(e[0], e[2]) for e in queue] if self.tagged else list(map(_ITEM, queue))
            queue.clear()
            return ready + rows if ready else rows
        rows: list = []
        while queue:
            q, _, item = queue[0]
            aggregator = aggregators[q]
            if item.__class__ is list:
                if aggregator is None:
                    rows.append((q, item))
                else:  # a match's values, term by term
                    aggregator.add_values(None, item)
            elif item.tags:  # a selected element still open: the rows after it wait
                break
            elif item.__class__ is _Writer:
                self.objects -= 1
                rows.append((q, item.row()))
            else:
                self.objects -= 1
                analysis = selections[q].analysis
                binding = item.binding(analysis)
                if aggregator is not None:
                    aggregator.add(None, binding)
                else:
                    rows.append((q, output_row(analysis, binding, item.node, self.values_only)))
            queue.popleft()
        rows = rows if self.tagged else [row for _, row in rows]
        return ready + rows if ready else rows

    def end(self, final: bool) -> list:
        """The stream ends (``final``) or stops here: what never closed is dropped (its
        document was cut short); the counts and aggregates, when ``final``."""
        self.queue.clear()
        self.ready = []
        self.objects = 0
        self.held = []
        rows: list = []
        if final:
            for q, selection in enumerate(self.p.selections):
                if selection.select == "count":
                    rows.append((q, [self.counts[q]] * selection.terms))
                elif self.aggregators[q] is not None:
                    rows += [(q, row) for row in self.aggregators[q].rows()]
        return rows if self.tagged else [row for _, row in rows]

    def state(self) -> dict:
        """What the run has read, as plain data (DFA states as their NFA state sets: the
        lazily numbered states of another process differ)."""
        sets = self.p.sets
        return {
            "carry": [sets[state] for state in self.carry],
            "queue": list(self.queue),
            "writing": self.writing,
            "counts": self.counts,
            "held": self.held,
            "held_at": self.held_at,
            "groups": [None if a is None else a.groups for a in self.aggregators],
        }

    def restore(self, state: dict) -> PlainPathRun:
        intern = self.p._intern
        self.carry = [intern(states) for states in state["carry"]]
        self.queue = deque(state["queue"])
        self.objects = sum(1 for entry in self.queue if entry[2].__class__ is not list)
        self.writing = state["writing"]
        self.counts = state["counts"]
        self.held, self.held_at = state["held"], state["held_at"]
        for aggregator, groups in zip(self.aggregators, state["groups"], strict=True):
            if aggregator is not None:
                aggregator.groups = groups
        return self

    def closes_held(self, batch) -> bool:
        """Whether ``batch`` closes the held element (or leaves its document, cut short)."""
        doc, depth = self.held_at
        kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
        depths = np.frombuffer(batch.depths, dtype=np.int32)
        docs = np.frombuffer(batch.docs, dtype=np.int64)
        return bool(((kinds == _CLOSE) & (depths == depth)).any() or (docs != doc).any())

    def label_table(self, symbols) -> np.ndarray:
        if self.mapped is not symbols or len(self.labels) != len(symbols.names) + 1:
            self.labels = self.p.label_table(symbols.names)
            self.mapped = symbols
        return self.labels

    def batch(self, batch) -> None:
        p = self.p
        kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
        depths = np.frombuffer(batch.depths, dtype=np.int32)
        names = np.frombuffer(batch.names, dtype=np.int32)
        opens = np.flatnonzero(kinds == _OPEN)
        states = np.empty(len(opens), dtype=np.int32)
        open_depths = depths[opens]
        top = int(open_depths.max(initial=0))
        carry = self.carry  # the states of the elements open when the batch began
        while len(carry) <= top:
            carry.append(p.dead)
        self.before = np.array(carry, dtype=np.int32)
        parents = _owner_at_depth(opens, depths, opens, open_depths - 1)
        labels = self.label_table(batch.symbols)[names[opens]]
        arrays = (kinds, depths, names)
        if p.guards.inner:
            self.inner = masks(p.guards.inner, batch, arrays, opens, parents)
        if p.operands:
            codes = element_codes(p.operands, batch, arrays, opens, parents, self.inner)
            symbols = p.symbols_of(labels, codes)
        else:
            symbols = labels
        levels = []
        for d in range(1, top + 1):  # a level's parents are known before it
            here = np.flatnonzero(open_depths == d)
            levels.append(here)
            if not len(here):
                continue
            above = _pick(states, parents[here], self.before[d - 1])
            states[here] = p.moves(above.astype(np.int32), symbols[here])
        cut = self.undecided(batch, kinds, depths, opens, parents, states, labels)
        if cut is not None:  # hold the events from there until the element closes
            self.held = [batch.slice(cut, len(kinds))]
            self.held_at = (batch.docs[cut], int(depths[cut]))
            batch = batch.slice(0, cut)
            kinds, depths, names = kinds[:cut], depths[:cut], names[:cut]
            arrays = (kinds, depths, names)
            kept = int(np.searchsorted(opens, cut))
            opens, states = opens[:kept], states[:kept]
            levels = [here[here < kept] for here in levels]
        for d, here in enumerate(levels, start=1):
            if len(here):
                carry[d] = int(states[here[-1]])
        kinds_here = p.of_select  # the select kinds of its queries
        if "count" in kinds_here:  # the selected elements that closed (as the automaton counts)
            closes = np.flatnonzero(kinds == _CLOSE)
            closed = self.enclosing(opens, depths, states, closes, depths[closes])
            closed = closed[p.accepting_array("count")[closed]]
            if len(closed):
                found, times = np.unique(closed, return_counts=True)
                for state, n in zip(found.tolist(), times.tolist(), strict=True):
                    for q in p.of_kind(state, "count"):
                        self.counts[q] += n
        if "element" in kinds_here or "rows" in kinds_here:
            self.elements(batch, arrays, opens, parents[: len(opens)], states)
        if "text" in kinds_here:
            found = np.flatnonzero(kinds == _TEXT)
            owners = self.enclosing(opens, depths, states, found, depths[found] - 1)
            chosen = p.accepting_array("text")[owners]
            self.values(batch, found[chosen], owners[chosen], "text")
        for kind in kinds_here:
            if kind.__class__ is not tuple:
                continue
            number = batch.symbols.get(kind[1])
            if number is None:
                continue
            found = np.flatnonzero((kinds == _ATTR) & (names == number))
            if len(found):  # an attribute follows its element's open, in the same batch
                owners = _pick(states, _last_before(opens, found), p.dead)
                keep = p.accepting_array(kind)[owners]
                self.values(batch, found[keep], owners[keep], kind)

    def undecided(self, batch, kinds, depths, opens, parents, states, labels) -> int | None:
        """The event position of the outermost element still open when the batch ends
        whose move depends on a predicate it has not closed to decide, or None."""
        if not self.p.atoms or not len(opens):
            return None
        docs = batch.docs
        last = len(kinds) - 1
        inside = int(depths[last]) - (0 if kinds[last] == _OPEN else 1)
        if inside <= 0:
            return None
        at = _owner_at_depth(opens, depths, np.array([last]), np.array([inside]))[0]
        chain = []  # the elements open at the end that opened in this batch, innermost first
        while at >= 0 and docs[opens[at]] == docs[last]:
            chain.append(at)
            at = parents[at]
        cut = None
        for at in chain:  # outermost last: it wins
            parent = parents[at]
            above = int(states[parent]) if parent >= 0 else int(self.before[depths[opens[at]] - 1])
            if self.p.reads_subtree(above, int(labels[at])):
                cut = int(opens[at])
        return cut

    def enclosing(self, opens, depths, states, events, want) -> np.ndarray:
        """The DFA state of the element at depth ``want`` around each of ``events``: the last
        open at that depth in this batch, or the one carried from an earlier batch."""
        return _pick(states, _owner_at_depth(opens, depths, events, want), self.before[want])

    def field_rows(self, batch, arrays, opens, parents, chosen, fields, raw: bool) -> dict:
        """The rows of the selected elements that close in the batch, by open position,
        their terms (``fields``) read by ``atoms.reach`` (the others are built as nodes);
        ``raw``: each term's values, for an aggregator."""
        kinds, depths, _ = arrays
        docs = np.frombuffer(batch.docs, dtype=np.int64)
        at = opens[chosen]
        closed = np.zeros(len(at), dtype=bool)
        level = depths[at]
        for d in np.unique(level).tolist():  # its close: the first close at its depth after it
            closes = np.flatnonzero((kinds == _CLOSE) & (depths == d))
            mine = np.flatnonzero(level == d)
            spot = np.searchsorted(closes, at[mine])
            found = spot < len(closes)
            close = closes[np.minimum(spot, len(closes) - 1)] if len(closes) else spot
            closed[mine] = found & (docs[close] == docs[at[mine]]) if len(closes) else False
        done = chosen[closed]
        if not len(done):
            return {}
        columns = []
        wanted = np.zeros(len(opens), dtype=bool)
        wanted[done] = True
        selected = done.tolist()
        for field in fields:
            if field.end is None:  # count($X): the element itself
                columns.append(dict.fromkeys(selected, (True,) if raw else True))
                continue
            # an attribute's or a text's value is the event's: read for the selected only
            events = field.end.startswith("@") or field.end in (TEXT_END, DEEP_TEXT)
            found = reach(field, batch, arrays, opens, parents, not events, self.inner)
            owners, keep, values, order = found
            keep &= wanted[np.maximum(owners, 0)]  # only the selected elements' values
            owners, order = owners[keep], order[keep]
            # (``order``: the event positions of the values, where they are events')
            values = [batch.values[i] for i in order.tolist()] if events else _kept(values, keep)
            columns.append(_by_owner(owners, order, values, raw))
        absent = repeat(() if raw else None)  # a term without a value
        terms = [map(column.get, selected, absent) for column in columns]
        rows = map(list, zip(*terms, strict=True))
        return dict(zip(opens[done].tolist(), rows, strict=True))

    def elements(self, batch, arrays, opens, parents, states) -> None:
        """Feed the open selected elements their events, start the new ones: each selected
        open's row for every query that selects it (an element's serialization or node
        made once for all of them; rows of fields read from the events by return clause)."""
        p = self.p
        element = p.accepting_array("element")[states]
        rows = p.accepting_array("rows")[states]
        ready: dict = {}  # a fields key -> {open position: row}
        keys = p.field_keys
        selected = np.flatnonzero(element | rows)
        if len(p.of_select.get("element", ())) + len(p.of_select.get("rows", ())) == 1:
            distinct = [int(states[selected[0]])] if len(selected) else []  # one query: one
            inverse = np.zeros(len(selected), dtype=np.int64)  # plan for all of them
        else:
            distinct, inverse = np.unique(states[selected], return_inverse=True)
            distinct = distinct.tolist()
        if rows.any():
            for q in sorted({q for s in distinct for q in p.of_kind(s, "rows")}):
                key = keys[q]
                if key is None or key in ready:
                    continue
                mine = np.array(
                    [any(keys[r] == key for r in p.of_kind(s, "rows")) for s in distinct]
                )
                ready[key] = self.field_rows(
                    batch,
                    arrays,
                    opens,
                    parents,
                    selected[mine[inverse]],
                    p.selections[q].fields,
                    key[1],
                )
        # per DFA state: (query, kind, its rows known from the events or None) to make
        plans = [
            [
                (q, kind, None if keys[q] is None else ready[keys[q]])
                for kind in ("element", "rows")
                for q in p.of_kind(s, kind)
            ]
            for s in distinct
        ]
        runs = list(batch.document_runs())
        ends = {doc: (start, end) for doc, start, end in runs}
        size = len(batch.kinds)
        broken = set()
        for writer in self.writing:  # opened in an earlier batch
            start, end = ends.get(writer.doc, (0, 0))
            if start != 0 or (not writer.feed(batch, 0, end) and end < size):
                broken.add(writer.doc)  # its document ended before the element closed
        docs, queue, values_only = batch.docs, self.queue, self.values_only
        for i, plan in zip(opens[selected].tolist(), inverse.reshape(-1).tolist(), strict=True):
            doc = docs[i]
            writer = capture = None  # what is made for this element, once
            for q, kind, known in plans[plan]:
                if known is not None:
                    row = known.get(i)
                    if row is not None:  # its row is known: read from the events
                        queue.append((q, doc, row))
                        continue
                made = capture if kind == "rows" else writer
                if made is None:
                    made = _Capture(doc) if kind == "rows" else _Writer(doc, values_only)
                    if kind == "rows":
                        capture = made
                    else:
                        writer = made
                    self.writing.append(made)
                    end = ends[doc][1]
                    if not made.feed(batch, i, end) and end < size:
                        broken.add(doc)
                queue.append((q, doc, made))
                self.objects += 1
        self.writing = [w for w in self.writing if w.tags and w.doc not in broken]
        if broken:  # the automaton drops what a malformed document had not emitted
            self.queue = deque(item for item in queue if item[1] not in broken)
            self.objects = sum(1 for entry in self.queue if entry[2].__class__ is not list)

    def values(self, batch, chosen: np.ndarray, owners: np.ndarray, kind) -> None:
        """Rows for the selected text or attribute events (``owners``: their elements'
        DFA states), for each query of ``kind`` that selects them."""
        if not len(chosen):
            return
        values, docs, queue = batch.values, batch.docs, self.queue
        only = self.p.of_select[kind]
        if len(only) == 1:  # one query selects these: every one is its row
            if not (queue or self.objects or self.aggregating or self.tagged):
                self.ready += _value_rows(values, chosen.tolist())  # nothing waits: out now
            else:
                queue.extend(_rows_of(only[0], docs, values, chosen.tolist()))
            return
        distinct, inverse = np.unique(owners, return_inverse=True)
        plans = [self.p.of_kind(state, kind) for state in distinct.tolist()]
        if len(plans[0]) == 1 and all(plan == plans[0] for plan in plans):  # one query
            queue.extend(_rows_of(plans[0][0], docs, values, chosen.tolist()))
            return
        for i, plan in zip(chosen.tolist(), inverse.reshape(-1).tolist(), strict=True):
            for q in plans[plan]:
                queue.append((q, docs[i], [values[i]]))


_ITEM = itemgetter(2)  # a queue entry's row


def _value_rows(values: list, chosen: list) -> Iterator[list]:
    """The rows ``[value]`` of the events at ``chosen``, made in C (``zip``, ``map``): a
    batch can select hundreds of thousands."""
    return map(list, zip(map(values.__getitem__, chosen)))


def _rows_of(query: int, docs, values: list, chosen: list) -> Iterator[tuple]:
    """The queue entries ``(query, document, [value])`` of the events at ``chosen``."""
    return zip(repeat(query), map(docs.__getitem__, chosen), _value_rows(values, chosen))


def _by_owner(owners: np.ndarray, order: np.ndarray, values: list, raw: bool) -> dict:
    """{element: its value in a row} from the (element, value) pairs of one term, values
    in document order (``order``): the one value, a list of several, None for none
    (absent); ``raw``: the tuple of all of them, for an aggregator."""
    values = [value if value is not None else "" for value in values]
    if len(owners) < 2 or (owners[1:] > owners[:-1]).all():  # one value each, in order
        return dict(zip(owners.tolist(), map(_one, values) if raw else values, strict=True))
    by_owner: dict = {}
    for at in np.argsort(order, kind="stable").tolist():  # in document order
        by_owner.setdefault(int(owners[at]), []).append(values[at])
    if raw:
        return {owner: tuple(found) for owner, found in by_owner.items()}
    return {owner: found[0] if len(found) == 1 else found for owner, found in by_owner.items()}


def _one(value) -> tuple:
    return (value,)


def _kept(values: list, keep: np.ndarray) -> list:
    return [value for value, kept in zip(values, keep.tolist(), strict=True) if kept]


SORTED_OPENS = 4096  # fewer opens than this: one search over them sorted by depth


def _owner_at_depth(opens, depths, found, want) -> np.ndarray:
    """For each event in ``found``, the position in ``opens`` of the last open before it at
    depth ``want`` (-1: it opened in an earlier batch).

    Two ways to the same answer (``tests/test_xseq_paths.py`` compares them): in a small
    batch (a message, a record) the opens sorted by (depth, position) — a radix sort — and
    one search for all of ``found``, a dozen numpy calls whatever the depth; in a large one
    a search per depth level, which sorts nothing."""
    if not len(opens):
        return np.full(len(found), -1, dtype=np.int64)
    open_depths = depths[opens]
    if len(opens) < SORTED_OPENS:
        deep = int(open_depths.max()) >= 2**15  # (else a 16-bit radix sort)
        order = np.argsort(open_depths if deep else open_depths.astype(np.int16), kind="stable")
        span = len(depths) + 1
        keys = (open_depths.astype(np.int64) * span + opens)[order]
        at = np.searchsorted(keys, np.asarray(want, dtype=np.int64) * span + found) - 1
        hit = at >= 0
        at = np.maximum(at, 0)
        hit &= keys[at] // span == want
        return np.where(hit, order[at], -1)
    owner = np.full(len(found), -1, dtype=np.int64)
    for d in np.unique(want).tolist():
        level = np.flatnonzero(open_depths == d)
        mine = np.flatnonzero(want == d)
        owner[mine] = _pick(level, _last_before(opens[level], found[mine]), -1)
    return owner
