"""Streaming XSeq partitions keep the engine's saved run, not the partition's records
(xcep.spark.streaming), checked without Spark: a partition fed in micro-batches gives
the rows of one uninterrupted run, and its state does not grow with its history."""

from __future__ import annotations

import io
import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep.events import EventStream
from xcep.spark.partitions import Wrapper
from xcep.spark.streaming import XSeqPartition
from xcep.xseq import XSeqEngine

RECORD_PATH = "/stocks/transaction"
QUERIES = [
    "return $Z@price, $Y@price from /stocks /$Z (\\ $Y)* where $Y@price < prev($Y)@price "
    "partition by /stocks/transaction@company",
    "return count($Z), max($Y@price) from /stocks /$Z (\\ $Y)* where $Y@price > "
    "prev($Y)@price partition by /stocks/transaction@company",
    "return $T@price from /stocks/$T where $T@price > 50 partition by /stocks/transaction@company",
]


def _records(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    price = 50.0
    out = []
    for i in range(count):
        price = max(1.0, price + rng.uniform(-3, 3))
        out.append(f'<transaction company="ACME" price="{price:.2f}" n="{i}"/>'.encode())
    return out


def _in_one_run(query: str, records: list[bytes]) -> list:
    document = Wrapper(RECORD_PATH)(records)
    return list(XSeqEngine(query).run(EventStream([io.BytesIO(document)]).batches()))


def _micro_batches(query: str, selection: str, pieces: list[list[bytes]]) -> tuple:
    processor = XSeqPartition(query, selection, RECORD_PATH, idle_timeout_ms=1000)
    rows, states, state = [], [], None
    for records in pieces:
        out, state = processor.advance("ACME", records, state, final=False)
        rows += [json.loads(row) for _, _, row, _ in out]
        states.append(state)
    out, _ = processor.advance("ACME", [], state, final=True)
    return rows + [json.loads(row) for _, _, row, _ in out], states


@settings(max_examples=40, deadline=None)
@given(
    query=st.sampled_from(QUERIES),
    count=st.integers(0, 60),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    seed=st.integers(0, 1000),
)
def test_micro_batches_give_the_rows_of_one_run(query, count, cuts, seed) -> None:
    records = _records(count, seed)
    bounds = sorted({0, count, *(c for c in cuts if c <= count)})
    pieces = [records[a:b] for a, b in itertools.pairwise(bounds)] or [[]]
    rows, states = _micro_batches(query, "all", pieces)
    assert rows == _in_one_run(query, records)
    assert all(state[0] == b"" and state[2] is not None for state in states)  # no log kept


@pytest.mark.parametrize("query", QUERIES[:1])
def test_the_state_does_not_grow_with_the_partition(query) -> None:
    """A key that never idles: 300 micro-batches, the saved run stays the same size."""
    records = _records(3000, 5)
    pieces = [records[i : i + 10] for i in range(0, 3000, 10)]
    rows, states = _micro_batches(query, "all", pieces)
    assert rows == _in_one_run(query, records)
    sizes = [len(state[2]) for state in states]
    assert max(sizes[-50:]) < 4 * max(sizes[:50]) + 2000
    assert states[-1][3] > 3000  # the node numbers go on across micro-batches


def test_a_query_on_the_automaton_saves_its_run_too() -> None:
    """Selection maximal runs on the pushdown automaton: its saved run is the state (no
    log), the same size on the 300th micro-batch as on the first."""
    query = QUERIES[0]
    records = _records(3000, 1)
    pieces = [records[i : i + 10] for i in range(0, 3000, 10)]
    rows, states = _micro_batches(query, "maximal", pieces)
    assert all(state[0] == b"" and state[2] is not None for state in states)  # no log kept
    expected = list(
        XSeqEngine(query, selection="maximal").run(
            EventStream([io.BytesIO(Wrapper(RECORD_PATH)(records))]).batches()
        )
    )
    assert rows == expected and rows
    sizes = [len(state[2]) for state in states]
    assert max(sizes[-50:]) < 2 * max(sizes[:50]) + 2000, (sizes[:5], sizes[-5:])
