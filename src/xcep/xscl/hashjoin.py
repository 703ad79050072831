"""Stage 2 in memory: every template's queries joined as each document arrives.

The SQL of ``templates.py`` joins a batch with the state in one statement per
template; a statement costs milliseconds however small the batch, so one
document at a time it loses to 10,000 separate hash joins. This module runs
the same conjunctive queries (same rows, same semantics) on in-memory
structures, with work proportional to the string values the new document
shares with the state, not to the number of templates or queries.

Structures (constant between changes of the query set):

- ``groups``: one ``Group`` per (template, left variables, right variables):
  the template's shape and value joins; its ``rows`` are the directed queries
  (``r_t`` rows: rid, followed, window, since) that differ only in operator,
  window or start.
- ``by_pair``: ``left variable -> {right variable: [(group, bit)]}``: which
  value join of which group a pair of equal strings helps (the counting
  algorithm of content-based pub/sub, over value joins).

Join state (Algorithm 2, bounded by the widest window):

- ``docs``: per earlier document a ``Record``: timestamp, the nodes of each
  variable, the ancestor/descendant pairs (``r_bin``), the string values
  (``r_doc``), and the side matches computed for it so far;
- ``by_value``: string value -> {docid: nodes bound to a left join end}, the
  slices R_L,s of the seed's view cache (§5) kept whole.

Caches (cleared when the groups change, or past ``CACHE_LIMIT`` entries):
``_full``: a profile -> the groups it satisfies; ``_classes``: a pair of
variable sets (an earlier node's, a new node's) -> the groups it completes and
the bits it sets in the others (arrays over the numbered groups); ``_layouts``:
per document structure; ``_interned`` variable sets, so that pairs compare fast.

The loop for a new document d (``process``):

1. each string value of d bound to a right join end probes ``by_value``:
   every earlier node with an equal value, in the widest window, is a pair;
2. counting: a pair sets its group bits per earlier document e; a group
   whose bits are all set is a candidate for (e, d);
3. a candidate is checked exactly: the group's left side matched in e and
   its right side in d (the template's structural edges, as the SQL's
   ``r_bin`` lookups), joined on the join ends' string values; each pair of
   matches is a row ``(rids, e, d, nodes)`` for the queries of the group
   whose window, order and start admit e;
4. ``insert`` files d's nodes bound to a left join end under their values;
   ``evict`` drops documents no window reaches.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from xcep.xscl.witness import Shape

CACHE_LIMIT = 200_000  # entries of each cache before it is cleared
SET_CACHE_LIMIT = 4_096  # the same for the per-set arrays (each up to all join ends long)


@dataclass(frozen=True, eq=False)  # one object per distinct side (HashJoin.side): fast keys
class Side:
    """One side of a group: its variables in template order (the root first), each
    node's parent position (-1 for the root), and its join ends' positions in
    the order of the template's value joins."""

    variables: tuple[str, ...]
    parents: tuple[int, ...]
    ends: tuple[int, ...]


@dataclass(eq=False)  # hashed by identity: a key of the counting masks
class Group:
    left: Side
    right: Side
    full: int  # every value join's bit set
    number: int = -1  # its place in HashJoin's arrays of masks
    # (rid, followed, window, since), widest window first, and what is derived from them
    rows: list[tuple[int, bool, float, int]] = field(default_factory=list)
    negated: list[float] = field(default_factory=list)  # -window of each row, ascending
    latest: int = 0  # the largest since
    widest: float = 0.0  # the widest window
    prefixes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # n -> first n rids

    def add(self, row: tuple[int, bool, float, int]) -> None:
        at = bisect.bisect_right(self.negated, -row[2])  # after rows of the same window
        self.rows.insert(at, row)
        self.negated.insert(at, -row[2])
        self.latest = max(self.latest, row[3])
        self.widest = -self.negated[0]
        self.prefixes = {}

    def remove(self, rid: int) -> None:
        at = next(i for i, row in enumerate(self.rows) if row[0] == rid)
        del self.rows[at], self.negated[at]
        self.latest = max((row[3] for row in self.rows), default=0)
        self.widest = -self.negated[0] if self.negated else 0.0
        self.prefixes = {}

    def admitted(self, e: int, dt: float) -> tuple[int, ...]:
        """The rows whose window, order and start admit an earlier document ``e``,
        ``dt`` before: for a later one (``dt > 0``) after every start, a prefix
        of the rows (the same tuple each time)."""
        n = bisect.bisect_right(self.negated, -abs(dt))  # windows of at least |dt|
        if dt > 0 and e >= self.latest:
            found = self.prefixes.get(n)
            if found is None:
                found = self.prefixes[n] = tuple(row[0] for row in self.rows[:n])
            return found
        return tuple(
            rid
            for rid, followed, window, since in self.rows[:n]
            if e >= since and ((0 < dt <= window) if followed else abs(dt) <= window)
        )


class Layout:
    """What the join needs of a document structure (a witness ``Shape``): the nodes of
    each variable, the ancestor/descendant pairs, per bound node the left and right
    join ends it is bound to (interned sets), and each side's matches (node tuples
    in template order). Shared by the documents of one structure."""

    __slots__ = ("ends", "nodes_of", "pairs", "sides")

    def __init__(self, binw: Iterable[tuple], join: HashJoin) -> None:
        self.nodes_of: dict[str, list[int]] = {}  # variable -> its nodes
        self.pairs: dict[tuple, list[int]] = {}  # (upper var, lower var, upper node) -> nodes
        for v1, v2, n1, n2 in binw:
            if v1 == v2:
                self.nodes_of.setdefault(v1, []).append(n1)
            else:
                self.pairs.setdefault((v1, v2, n1), []).append(n2)
        names_of: dict[int, list[str]] = {}
        for var, nodes in self.nodes_of.items():
            nodes.sort()
            for node in nodes:
                names_of.setdefault(node, []).append(var)
        # node -> (the left join ends it is bound to, the right ones), each None if none
        self.ends: dict[int, tuple] = {}
        for node, names in names_of.items():
            theirs = join.left_ends.intersection(names)
            mine = join.right_ends.intersection(names)
            if theirs or mine:
                self.ends[node] = (
                    join.intern(frozenset(theirs)) if theirs else None,
                    join.intern(frozenset(mine)) if mine else None,
                )
        self.sides: dict[Side, list[tuple]] = {}

    def matches(self, side: Side) -> list[tuple]:
        """The side's matches: node tuples in template order (the SQL's r_bin lookups)."""
        found = self.sides.get(side)
        if found is not None:
            return found
        variables, parents = side.variables, side.parents
        found = [(n,) for n in self.nodes_of.get(variables[0], ())]
        pairs = self.pairs
        for i in range(1, len(variables)):
            if not found:
                break
            upper, var, p = variables[parents[i]], variables[i], parents[i]
            found = [(*m, n) for m in found for n in pairs.get((upper, var, m[p]), ())]
        self.sides[side] = found
        return found


class Record:
    """What the join keeps of one document: its structure's layout, its strings."""

    __slots__ = ("docid", "keyed", "layout", "left_values", "strings", "ts")

    def __init__(self, docid: int, ts: float, layout: Layout, strings: dict) -> None:
        self.docid = docid
        self.ts = ts
        self.layout = layout
        self.strings = strings  # bound node -> string value
        self.keyed: dict[Side, dict] = {}  # side -> its matches by join key
        self.left_values: list[str] = []  # the values filed in by_value (for eviction)

    def matches(self, side: Side) -> dict[tuple, list[tuple]]:
        """The side's matches by the string values of their join ends."""
        found = self.keyed.get(side)
        if found is None:
            found = self.keyed[side] = {}
            strings, ends = self.strings, side.ends
            for match in self.layout.matches(side):
                key = tuple(strings[match[i]] for i in ends)
                found.setdefault(key, []).append(match)
        return found


class HashJoin:
    """The queries of every template, joined in memory one document at a time."""

    def __init__(self) -> None:
        self.groups: dict[tuple, Group] = {}
        self.by_pair: dict[str, dict[str, list[tuple[Group, int]]]] = {}
        self.left_ends: set[str] = set()
        self.right_ends: set[str] = set()
        self._group_of: dict[int, Group] = {}  # rid -> its group
        self._sides: dict[tuple, Side] = {}  # (variables, parents, ends) -> the one Side
        self._side_uses: Counter[Side] = Counter()  # groups per side
        self.docs: dict[int, Record] = {}
        self.by_value: dict[str, dict[int, list[int]]] = {}
        self._left_vars: dict[tuple[int, int], frozenset] = {}  # (docid, node) -> its V
        # profile -> the groups it satisfies, widest window first, and -their windows
        self._full: dict[frozenset, tuple[list[Group], list[float]]] = {}
        self._classes: dict[tuple, tuple] = {}  # pair of variable sets -> _class_masks
        self._entries: dict[frozenset, tuple] = {}  # left join ends -> _entries_of
        self._masks: dict[frozenset, np.ndarray] = {}  # right join ends -> _mask_of
        self._right_numbers: dict[str, int] = {}  # right join end -> its number
        self._numbered: list[Group] | None = None  # the groups by number (_numbering)
        self._fulls = np.zeros(0, dtype=np.int64)
        self._interned: dict[frozenset, frozenset] = {}
        self._layouts: dict[Shape, Layout] = {}
        self.candidates = self.checked = 0  # statistics: candidate pairs, matched

    # -- the query set -------------------------------------------------------------

    def add_row(
        self,
        template,
        variables: list[str],
        rid: int,
        followed: bool,
        window: float,
        since: int,
    ) -> None:
        """A directed query (an ``r_t`` row) of ``template`` over ``variables``."""
        size = template.left_size
        parent = {b: a for a, b in template.edges}
        joins = template.joins  # (left node, right node), the template's order

        def side(lo: int, hi: int, ends: list[int]) -> Side:
            key = (
                tuple(variables[lo:hi]),
                tuple(parent[i] - lo if i in parent else -1 for i in range(lo, hi)),
                tuple(e - lo for e in ends),
            )
            return self._sides.setdefault(key, Side(*key))

        left = side(0, size, [a for a, _ in joins])
        right = side(size, template.size, [b for _, b in joins])
        key = (template.index, left.variables, right.variables)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(left, right, (1 << len(joins)) - 1)
            self._side_uses.update((left, right))
            for bit, (a, b) in enumerate(joins):
                pair = (variables[a], variables[b])
                self.by_pair.setdefault(pair[0], {}).setdefault(pair[1], []).append(
                    (group, 1 << bit)
                )
                self.left_ends.add(pair[0])
                self.right_ends.add(pair[1])
            self._changed()
        if group.rows and window > group.widest:
            self._full.clear()  # its lists are ordered by the groups' widest windows
        group.add((rid, followed, window, since))
        self._group_of[rid] = group

    def remove_row(self, rid: int) -> None:
        group = self._group_of.pop(rid)
        group.remove(rid)
        if group.rows:
            return
        key = next(k for k, g in self.groups.items() if g is group)
        del self.groups[key]
        self._side_uses.subtract((group.left, group.right))
        for side in (group.left, group.right):
            if self._side_uses[side] <= 0:
                del self._side_uses[side]
                self._sides.pop((side.variables, side.parents, side.ends), None)
        for left in list(self.by_pair):
            partners = self.by_pair[left]
            for right in list(partners):
                kept = [(g, bit) for g, bit in partners[right] if g is not group]
                if kept:
                    partners[right] = kept
                else:
                    del partners[right]
            if not partners:
                del self.by_pair[left]
        self.left_ends = set(self.by_pair)
        self.right_ends = {right for partners in self.by_pair.values() for right in partners}
        self._changed()

    def _changed(self) -> None:
        """The join ends or groups changed: what was derived from them goes."""
        self._full.clear()
        self._classes.clear()
        self._entries.clear()
        self._masks.clear()
        self._right_numbers.clear()
        self._layouts.clear()
        self._numbered = None

    # -- documents -----------------------------------------------------------------

    def process(
        self, docid: int, ts: float, shape: Shape, strings: dict, widest: float
    ) -> list[tuple]:
        """The joined rows ``(rids, earlier docid, docid, nodes)`` of a new document (its
        witness ``shape``, its bound nodes' ``strings``), which then joins the state:
        the ``r_t`` rows that share a match, and the match's nodes in template order."""
        layout = self._layouts.get(shape)
        if layout is None:
            if len(self._layouts) >= CACHE_LIMIT:
                self._layouts.clear()
            layout = self._layouts[shape] = Layout(shape.binw, self)
        record = Record(docid, ts, layout, strings)
        out: list[tuple] = []
        if self.by_pair and self.docs:
            for e, profile in self._profiles(record, widest).items():
                found = self._full.get(profile)
                if found is None:
                    found = self._full_groups(profile)
                full, negated = found
                earlier = self.docs[e]
                # the groups with a window of at least |dt| (widest first): a prefix
                reach = bisect.bisect_right(negated, -abs(ts - earlier.ts))
                for group in full[:reach]:
                    self._check(group, earlier, record, out)
        self._insert(record)
        return out

    def _profiles(self, record: Record, widest: float) -> dict:
        """Per earlier document in the widest window that shares a string value with the
        new one, its *profile*: the pairs (join ends of the earlier node, join ends
        of the new node) of nodes with equal strings, as a frozenset."""
        found: dict[int, set] = {}
        docs, left_vars, by_value = self.docs, self._left_vars, self.by_value
        oldest = record.ts - widest
        strings = record.strings
        for node, (_, mine) in record.layout.ends.items():
            if mine is None:
                continue
            entries = by_value.get(strings[node])
            if not entries:
                continue
            for e, nodes in entries.items():
                if docs[e].ts < oldest:
                    continue
                pairs = found.get(e)
                if pairs is None:
                    pairs = found[e] = set()
                for earlier_node in nodes:
                    pairs.add((left_vars[(e, earlier_node)], mine))
        return {e: frozenset(pairs) for e, pairs in found.items()}

    def _full_groups(self, profile: frozenset) -> list[Group]:
        """The groups each of whose value joins a profile's pairs satisfy (counting; the
        bits that several pairs set together are ORed in arrays over all groups)."""
        full: list[Group] = []
        partial: list[tuple[np.ndarray, np.ndarray]] = []
        for pair in profile:
            complete, numbers, bits = self._class_masks(pair)
            full += complete
            if len(numbers):
                partial.append((numbers, bits))
        if len(partial) > 1:  # joins that only several pairs together satisfy
            numbered, fulls = self._numbering()
            masks = np.zeros(len(numbered), dtype=np.int64)
            for numbers, bits in partial:
                masks[numbers] |= bits  # a group once per pair: no repeated index
            full += [numbered[i] for i in np.flatnonzero(masks == fulls)]
        if len(profile) > 1:
            full = list(dict.fromkeys(full))
        full.sort(key=attrgetter("widest"), reverse=True)
        if len(self._full) >= CACHE_LIMIT:
            self._full.clear()
        found = self._full[profile] = (full, [-g.widest for g in full])
        return found

    def _class_masks(self, pair: tuple[frozenset, frozenset]) -> tuple:
        """What one pair of equal strings (its nodes' join-end variable sets ``pair``)
        does for the groups: the groups it satisfies alone, and the value-join bits
        it sets in the others (their numbers and bits, as arrays). Kept: pairs repeat
        more than profiles do; and made from per-set arrays, as sets repeat more still."""
        found = self._classes.get(pair)
        if found is None:
            theirs, mine = pair
            partners, numbers, bits = self._entries_of(theirs)
            chosen = self._mask_of(mine)[partners]
            numbers, bits = numbers[chosen], bits[chosen]
            if len(numbers) > 1:  # one group's joins helped by several (v, w): OR them
                numbers, where = np.unique(numbers, return_inverse=True)
                ored = np.zeros(len(numbers), dtype=np.int64)
                np.bitwise_or.at(ored, where, bits)
                bits = ored
            numbered, fulls = self._numbering()
            done = bits == fulls[numbers]
            complete = [numbered[i] for i in numbers[done]]
            if len(self._classes) >= CACHE_LIMIT:
                self._classes.clear()
            found = self._classes[pair] = (complete, numbers[~done], bits[~done])
        return found

    def _entries_of(self, theirs: frozenset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``by_pair`` entries of a set of left join ends, as arrays: each one's right
        variable (its number in ``_right_numbers``), group number and bit."""
        found = self._entries.get(theirs)
        if found is None:
            self._numbering()
            numbered = self._right_numbers
            rights, groups, bits = [], [], []
            for v in theirs:
                for w, entries in self.by_pair.get(v, {}).items():
                    for group, bit in entries:
                        rights.append(numbered.setdefault(w, len(numbered)))
                        groups.append(group.number)
                        bits.append(bit)
            found = (
                np.array(rights, dtype=np.int64),
                np.array(groups, dtype=np.int64),
                np.array(bits, dtype=np.int64),
            )
            if len(self._entries) >= SET_CACHE_LIMIT:
                self._entries.clear()
            self._entries[theirs] = found
        return found

    def _mask_of(self, mine: frozenset) -> np.ndarray:
        """A set of right join ends as a boolean array over ``_right_numbers``."""
        numbered = self._right_numbers
        found = self._masks.get(mine)
        if found is None or len(found) < len(numbered):
            for w in mine:
                numbered.setdefault(w, len(numbered))
            found = np.zeros(len(numbered), dtype=bool)
            found[[numbered[w] for w in mine]] = True
            if len(self._masks) >= SET_CACHE_LIMIT:
                self._masks.clear()
            self._masks[mine] = found
        return found

    def _numbering(self) -> tuple[list[Group], np.ndarray]:
        """The groups numbered (``group.number``), and each one's full mask by number;
        made again after the groups change."""
        if self._numbered is None:
            self._numbered = list(self.groups.values())
            for number, group in enumerate(self._numbered):
                group.number = number
            self._fulls = np.array([g.full for g in self._numbered], dtype=np.int64)
        return self._numbered, self._fulls

    def _check(self, group: Group, earlier: Record, record: Record, out: list) -> None:
        self.candidates += 1
        theirs = earlier.matches(group.left)
        if not theirs:
            return
        mine = record.matches(group.right)
        e, d = earlier.docid, record.docid
        dt = record.ts - earlier.ts
        rows = group.admitted(e, dt)
        if not rows:
            return
        for key, rights in mine.items():
            lefts = theirs.get(key)
            if lefts is None:
                continue
            self.checked += 1
            for left in lefts:
                for right in rights:
                    out.append((rows, e, d, left + right))

    def _insert(self, record: Record) -> None:
        """File the document's nodes bound to a left join end under their values."""
        self.docs[record.docid] = record
        docid, strings = record.docid, record.strings
        for node, (theirs, _) in record.layout.ends.items():
            if theirs is None:
                continue
            self._left_vars[(docid, node)] = theirs
            value = strings[node]
            self.by_value.setdefault(value, {}).setdefault(docid, []).append(node)
            record.left_values.append(value)

    def intern(self, names: frozenset) -> frozenset:
        """One object per set of variable names, so that profiles compare fast."""
        found = self._interned.get(names)
        if found is None:
            if len(self._interned) >= CACHE_LIMIT:
                self._interned.clear()
            found = self._interned[names] = names
        return found

    def evict(self, docids: Iterable[int]) -> None:
        """Documents no window reaches leave the state."""
        for docid in docids:
            record = self.docs.pop(docid, None)
            if record is None:
                continue
            for value in record.left_values:
                entries = self.by_value.get(value)
                if entries is None:
                    continue
                nodes = entries.pop(docid, None)
                if nodes is not None:
                    for node in nodes:
                        self._left_vars.pop((docid, node), None)
                if not entries:
                    del self.by_value[value]

    def state_size(self) -> dict:
        return {
            "documents": len(self.docs),
            "values": len(self.by_value),
            "bindings": len(self._left_vars),
            "groups": len(self.groups),
        }
