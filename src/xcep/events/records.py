"""Records: the elements at a path of a large document, each read as a document.

``records(batches, "/site/people/person")`` turns an event stream into the
stream of its records: every element whose names from the root are the path's
becomes a document of its own (depths counted from it, nodes numbered from 0,
documents numbered in order), and the events outside records are dropped. So
pub/sub over one large document (`xcep filter --record-path …`) answers once
per record, as `xcep spark … --record-path` does. A record that a malformed
document cuts short ends without its close, which every consumer drops.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

from xcep.events.model import CLOSE, OPEN, EventBatch


def parse_record_path(path: str) -> tuple[str, ...]:
    """``/a/b/c`` → ``("a", "b", "c")``; only child steps with names are allowed."""
    steps = tuple(path.split("/")[1:])
    if not path.startswith("/") or not steps or any(not s or s in "*." for s in steps):
        raise ValueError(
            f"a record path is an absolute path of element names like /stocks/transaction, "
            f"not {path!r}"
        )
    return steps


def records(batches: Iterable[EventBatch], record_path: str) -> Iterator[EventBatch]:
    """The records at ``record_path`` of the documents of ``batches`` (see the module)."""
    import numpy as np  # (here: a stream without records need not load it)

    steps = parse_record_path(record_path)
    depth = len(steps)
    on_path = [True] * (depth + 1)  # on_path[d]: the open element at depth d is on the path
    doc = -1  # the record being read (its document number)
    node0 = 0  # the node number of the record's root in its source
    inside = False  # the last events read are a record's
    for batch in batches:
        kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
        depths = np.frombuffer(batch.depths, dtype=np.int32)
        starts = []  # (event index, the record's document number, root node)
        names, nodes, table = batch.names, batch.nodes, batch.symbols.names
        for i in np.flatnonzero((kinds == OPEN) & (depths <= depth)).tolist():
            d = int(depths[i])
            on_path[d] = on_path[d - 1] and table[names[i]] == steps[d - 1]
            if d == depth and on_path[d]:
                doc += 1
                starts.append((i, doc, nodes[i]))
        # each record's events: from its open to its close, or to where it was cut short
        # (an event above its depth, or another element opening at its depth)
        closes = np.flatnonzero((kinds == CLOSE) & (depths == depth))
        cuts = np.flatnonzero((depths < depth) | ((kinds == OPEN) & (depths == depth)))
        ranges = []
        if inside:
            ranges.append(_end(0, closes, cuts, len(kinds), carried=True))
        for i, _, _ in starts:
            ranges.append((i, _end(i, closes, cuts, len(kinds))[1]))
        marks = np.zeros(len(kinds) + 1, dtype=np.int8)
        for first, stop in ranges:
            marks[first] += 1
            marks[stop if stop is not None else len(kinds)] -= 1
        keep = np.cumsum(marks[:-1]) > 0
        if ranges:
            inside = ranges[-1][1] is None  # the last record goes on in the next batch
        if not keep.any():
            continue
        picked = np.flatnonzero(keep)
        # each kept event's record: the last record start at or before it (or the one
        # carried from the batch before)
        record_docs = np.full(len(picked), doc if not starts else starts[0][1] - 1, np.int64)
        roots = np.full(len(picked), node0, np.int64)
        if starts:
            at = np.array([s[0] for s in starts])
            which = np.searchsorted(at, picked, side="right") - 1
            has = which >= 0
            record_docs[has] = np.array([s[1] for s in starts])[which[has]]
            roots[has] = np.array([s[2] for s in starts])[which[has]]
            node0 = starts[-1][2]
        values = batch.values
        yield EventBatch(
            batch.symbols,
            array("q", record_docs.tobytes()),
            array("B", kinds[picked].tobytes()),
            array("i", np.frombuffer(names, dtype=np.int32)[picked].tobytes()),
            [values[i] for i in picked.tolist()],
            array("i", (depths[picked] - (depth - 1)).tobytes()),
            array("q", (np.frombuffer(nodes, dtype=np.int64)[picked] - roots).tobytes()),
        )


def _end(start: int, closes, cuts, size: int, carried: bool = False) -> tuple:
    """(start, end) of the record that opened at ``start`` (or before the batch,
    ``carried``): just past its close, at the first cut after it, or None (it goes on)."""
    spot = closes.searchsorted(start)
    close = int(closes[spot]) + 1 if spot < len(closes) else None
    spot = cuts.searchsorted(start if carried else start + 1)
    cut = int(cuts[spot]) if spot < len(cuts) else None
    ends = [e for e in (close, cut) if e is not None]
    return start, (min(ends) if ends else None)
