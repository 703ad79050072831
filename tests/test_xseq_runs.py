"""XSeq runs fed batch by batch, saved and resumed (xcep.xseq.runs): cut a stream at
random points, save the run, resume it in a fresh engine, and the rows are the rows of
the uninterrupted run; damaged or foreign snapshots are refused with a clear error."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.test_xseq_paths import plain_paths
from tests.test_xseq_sequence import sequence_queries, streams
from tests.xseq_queries import documents, families, queries

from xcep.errors import StateError
from xcep.events import EventStream
from xcep.xseq import QuerySyntaxError, XSeqEngine, XSeqMultiEngine
from xcep.xseq.routing import Driver


def _batches(text: str, size: int) -> list:
    return list(EventStream([io.BytesIO(text.encode())], batch_size=size).batches())


def _cut_and_resumed(query: str, batches: list, cuts: set, **options) -> list:
    """The rows of a run saved after each batch in ``cuts`` and resumed by a new engine."""
    run = XSeqEngine(query, **options).start()
    rows: list = []
    for i, batch in enumerate(batches):
        rows += run.feed([batch])
        if i in cuts:
            run = XSeqEngine(query, **options).resume(run.snapshot())
    return rows + run.finish()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=plain_paths(),
    text=documents(),
    size=st.integers(1, 12),
    cuts=st.sets(st.integers(0, 40), max_size=6),
)
def test_path_runs_resume_where_they_stopped(query, text, size, cuts) -> None:
    engine = XSeqEngine(query)
    assert engine.resumable
    batches = _batches(text, size)
    expected = list(engine.run(iter(batches)))
    assert _cut_and_resumed(query, batches, cuts) == expected, query


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=sequence_queries(),
    docs=streams(),
    cuts=st.sets(st.integers(0, 40), max_size=6),
    selection=st.sampled_from(("all", "maximal", "skip-past-last")),
)
def test_sequence_runs_resume_where_they_stopped(query, docs, cuts, selection) -> None:
    """Under every policy: matches held for their selection are saved with the run."""
    try:
        engine = XSeqEngine(query, selection=selection)
    except QuerySyntaxError:
        return
    batches = _batches("".join(docs), 7)
    expected = list(engine.run(iter(batches)))
    assert _cut_and_resumed(query, batches, cuts, selection=selection) == expected, query


def test_a_snapshot_is_small_and_does_not_grow_with_the_stream() -> None:
    """A run keeps states and live matches, not input: its snapshot stays the same size
    while one document (a root that never closes) goes on and on."""
    query = "return $T@price from /s/$T where $T@k = 'a'"
    run = XSeqEngine(query).start()
    sizes, rows = [], 0
    for n in range(200):
        records = "".join(f'<t k="{"ab"[i % 2]}" price="{n}.{i}"/>' for i in range(50))
        (batch,) = _batches(f"<s>{records}</s>", 10_000)
        inner = batch.slice(0 if n == 0 else 1, len(batch) - 1)  # the root opens once
        rows += len(run.feed([inner]))
        sizes.append(len(run.snapshot()))
    assert rows == 200 * 25
    assert max(sizes[100:]) <= max(sizes[:100]) < 2_000


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=queries(),
    text=documents(),
    selection=st.sampled_from(("all", "maximal", "skip-past-last")),
    size=st.integers(1, 12),
    cuts=st.sets(st.integers(0, 40), max_size=6),
)
def test_automaton_runs_resume_where_they_stopped(query, text, selection, size, cuts) -> None:
    """Every query shape on the pushdown automaton (partitions, Kleene-*, pending subtree
    checks, selections that wait for later matches), saved anywhere, even inside a tag."""
    try:
        engine = XSeqEngine(query, selection=selection, fast=False)
    except QuerySyntaxError:
        return
    batches = _batches(text, size)
    expected = list(engine.run(iter(batches)))
    resumed = _cut_and_resumed(query, batches, cuts, selection=selection, fast=False)
    assert resumed == expected, query


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    queries=families(3),
    text=documents(),
    size=st.integers(1, 12),
    cuts=st.sets(st.integers(0, 40), max_size=6),
    runtime=st.sampled_from(("auto", "automaton")),
    selection=st.sampled_from(("all", "all", "maximal", "skip-past-last")),
)
def test_runs_of_many_queries_resume_where_they_stopped(
    queries, text, size, cuts, runtime, selection
):
    """An ``XSeqMultiEngine`` run (shared states, templates; on the Python automaton, or
    its templates each on a compiled run) pickled with its driver, against the Python
    automaton's uninterrupted run."""
    import pickle

    try:
        engine = XSeqMultiEngine(dict(enumerate(queries)), runtime="automaton", selection=selection)
    except QuerySyntaxError:
        return
    batches = _batches(text, size)
    expected = list(engine.run(iter(batches)))
    engine = XSeqMultiEngine(dict(enumerate(queries)), runtime=runtime, selection=selection)
    driver, rows = engine.start(), []
    kind = type(driver)
    assert (kind is Driver) == (runtime == "automaton" or engine.not_compiled is not None)
    for i, batch in enumerate(batches):
        rows += driver.feed(batch)
        if i in cuts:
            engine, driver = pickle.loads(pickle.dumps((engine, driver)))
            assert type(driver) is kind
    rows += driver.finish()
    # (each query's rows in its order; across queries a compiled run's come per template)
    assert sorted(rows, key=lambda row: row[0]) == sorted(expected, key=lambda row: row[0])


def test_foreign_and_damaged_snapshots_are_refused() -> None:
    assert XSeqEngine("//a[b = c]").resumable  # (the automaton: saved too)
    run = XSeqEngine("//a/@x").start()
    (batch,) = _batches('<r><a x="1"/></r>', 10)
    assert run.feed([batch.slice(0, len(batch) - 1)]) == [["1"]]  # the root still open
    data = run.snapshot()
    with pytest.raises(StateError, match="another query"):
        XSeqEngine("//a/@y").resume(data)
    with pytest.raises(StateError, match="damaged"):
        XSeqEngine("//a/@x").resume(data[:-5])
    with pytest.raises(StateError, match="not an XSeq run snapshot"):
        XSeqEngine("//a/@x").resume(b"hello")
    assert run.finish() == []
    with pytest.raises(StateError, match="finished"):
        run.feed([])
