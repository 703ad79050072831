"""Partitions in Structured Streaming: per-key engine state in Spark's state store.

``groupBy(key).transformWithStateInPandas`` with an ``XSeqPartition`` or
``XQueryPartition`` processor. A partition's records arrive over many
micro-batches and read as one document that goes on (the record path's
ancestors open once, close when the partition ends).

- **Saved runs** (XSeq queries, on any runtime): the state is the plan's run state
  (``Run.snapshot()``: open elements, partial matches, pending rows,
  aggregates) and the number of nodes read so far. Each micro-batch resumes the
  run, feeds it only the new records and saves it again: its cost depends on
  the micro-batch, not on the partition's history, and the state's size on
  the live matches, not on the records read.
- **Kept records** (XQuery): a FLWOR's answer over a partition depends on all
  of it, so the state is the partition's records so far (in arrival order): a
  micro-batch appends its records (nothing is evaluated), and the partition's
  end runs the plan over them once. (A run's own snapshot would hold the same
  events, and restoring it would rebuild the partial tree every micro-batch.)

When a partition has been idle for ``idle_timeout``, its last rows (XSeq:
aggregates, matches waiting to be maximal; XQuery: all of its result, a
FLWOR's answer depending on all of its input) are emitted and its state is
dropped. Idle is measured in event time (the input files' modification time;
an event-time timer at the partition's last record plus the timeout), so a job
whose input has stopped keeps its partitions until newer input comes. The
state lives in the checkpoint (RocksDB state store), so a restarted query
resumes where the last committed micro-batch left off, and the file sink's log
makes output exactly-once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from xcep.spark.engines import worker_plan, xquery_rows
from xcep.spark.partitions import Wrapper, partition_stream

if TYPE_CHECKING:
    from collections.abc import Iterator

STATE = StructType(
    [
        StructField("log", BinaryType()),  # replay: the records so far
        StructField("emitted", LongType()),  # replay: the rows emitted so far
        StructField("run", BinaryType()),  # saved runs: the engine's run state
        StructField("nodes", LongType()),  # saved runs: the nodes read so far
    ]
)


class PartitionProcessor(StatefulProcessor):
    """A partition kept across micro-batches: its records so far and the rows emitted.

    Subclasses say what a partition's records give: ``rows(key, document, final)``,
    every row from the start (``final``: the partition has ended)."""

    columns: tuple[str, ...] = ()

    def __init__(
        self, record_path: str, idle_timeout_ms: int, state_ttl_ms: int | None = None
    ) -> None:
        self.wrap = Wrapper(record_path)
        self.idle_timeout_ms = idle_timeout_ms
        self.state_ttl_ms = state_ttl_ms

    def init(self, handle) -> None:
        self.handle = handle
        # the TTL (processing time) is a safety net: a partition whose timer never fires
        # (no newer input moves the watermark) is dropped, without its last rows
        self.state = handle.getValueState("partition", STATE, self.state_ttl_ms)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        new = pd.concat(frames).sort_values(["path", "record"]) if frames else None
        records = list(new["content"]) if new is not None else []
        state = tuple(self.state.get()) if self.state.exists() else None
        out, state = self.advance(key[0], records, state, final=False)
        self.state.update(state)
        if new is not None:
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            last = int(new["time"].max().timestamp() * 1000)
            self.handle.registerTimer(last + self.idle_timeout_ms)
        yield pd.DataFrame(out, columns=list(self.columns))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        if self.state.exists():
            out, _ = self.advance(key[0], [], tuple(self.state.get()), final=True)
            self.state.clear()
            yield pd.DataFrame(out, columns=list(self.columns))

    def advance(self, key: str, records: list, state: tuple | None, final: bool) -> tuple:
        """(the new rows, the new state) once ``records`` are added (replay: the whole
        partition again, the rows past those emitted)."""
        log, emitted = (state[0], state[1]) if state is not None else (b"", 0)
        log += b"".join(records)
        out = self.rows(key, self.wrap([log]), final=final)[emitted:]
        return out, (log, emitted + len(out), None, None)

    def rows(self, key: str, document: bytes, final: bool) -> list[tuple]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class XSeqPartition(PartitionProcessor):
    """A partition of an XSeq query: rows as soon as the engine knows them."""

    columns = ("doc_id", "key", "row", "error")

    def __init__(
        self,
        query: str,
        selection: str,
        record_path: str,
        idle_timeout_ms: int,
        state_ttl_ms: int | None = None,
    ):
        super().__init__(record_path, idle_timeout_ms, state_ttl_ms)
        self.spec = (query, selection)

    def advance(self, key: str, records: list, state: tuple | None, final: bool) -> tuple:
        """The saved run resumed, fed the new records only, saved again."""
        query, selection = self.spec
        plan = worker_plan("xseq", {None: query}, selection=selection)
        saved, nodes = (state[2], state[3]) if state is not None else (None, 0)
        run = plan.restore(saved) if saved is not None else plan.start()
        batch, read = continued(
            partition_stream(key, self.wrap(records)).batches(),
            self.wrap.depth,
            first=saved is None,
            last=final,
            nodes=nodes,
        )
        rows = run.feed(batch) if batch is not None else []
        if final:
            rows += run.finish()
        state = (b"", 0, None if final else run.snapshot(), nodes + read)
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        return [(None, key, dumps(r.value), None) for r in rows], state


def continued(batches, depth: int, first: bool, last: bool, nodes: int) -> tuple:
    """(one batch, nodes read) of a wrapped piece of a partition's document as the
    continuation of what came before: the ancestors' opens only in the ``first`` piece,
    their closes only in the ``last``, node numbers going on from ``nodes``."""
    import numpy as np

    from xcep.events import CLOSE, OPEN, EventBatch

    batches = list(batches)
    if not batches:
        return None, 0
    batch = EventBatch.join(batches)
    kinds = np.frombuffer(batch.kinds, dtype=np.uint8)
    depths = np.frombuffer(batch.depths, dtype=np.int32)
    start, end = 0, len(kinds)
    if not first:  # the ancestors opened in an earlier piece
        while start < end and kinds[start] == OPEN and depths[start] <= depth:
            start += 1
    if not last:  # and close in a later one
        while end > start and kinds[end - 1] == CLOSE and depths[end - 1] <= depth:
            end -= 1
    read = int(np.frombuffer(batch.nodes, dtype=np.int64).max(initial=-1)) + 1
    batch = batch.slice(start, end)
    numbers = np.frombuffer(batch.nodes, dtype=np.int64) + nodes
    batch.nodes = type(batch.nodes)("q", numbers.tobytes())
    return (batch if len(batch.kinds) else None), read


class XQueryPartition(PartitionProcessor):
    """A partition of an XQuery: its result sequence once the partition has ended (a
    FLWOR's answer depends on all of its input)."""

    columns = ("doc_id", "key", "item", "error")

    def __init__(
        self, query: str, record_path: str, idle_timeout_ms: int, state_ttl_ms: int | None = None
    ):
        super().__init__(record_path, idle_timeout_ms, state_ttl_ms)
        self.query = query

    def rows(self, key: str, document: bytes, final: bool) -> list[tuple]:
        if not final:
            return []
        plan = worker_plan("xquery", {None: self.query})
        stream = partition_stream(key, document, **plan.source_options)
        items, failure = xquery_rows(plan, stream.batches())
        rows = [(None, key, item, None) for item in items]
        return rows + ([(None, key, None, failure)] if failure is not None else [])
