"""Partitions in Structured Streaming: per-key engine state in Spark's state store.

``groupBy(key).transformWithStateInPandas`` with an ``XSeqPartition`` or
``XQueryPartition`` processor. The state of a partition is what it takes to
bring its engine back: the partition's records so far (in arrival order) and
how many output rows were already emitted. Each micro-batch appends the new
records, replays the partition through the engine (XSeq: ``run(final=False)``)
and emits only the rows past that count. When a partition has been idle for
``idle_timeout``, its last rows (XSeq: aggregates, matches waiting to be
maximal; XQuery: all of its result, a FLWOR's answer depending on all of its
input) are emitted and its state is dropped. Idle is measured in event time
(the input files' modification time; an event-time timer at the partition's
last record plus the timeout), so a job whose input has stopped keeps its
partitions until newer input comes. The state lives in the checkpoint (RocksDB
state store), so a restarted query resumes where the last committed
micro-batch left off, and the file sink's log makes output exactly-once.
Replaying costs time proportional to a partition's length: the idle timeout
bounds it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from xcep.spark.partitions import Wrapper, partition_stream

if TYPE_CHECKING:
    from collections.abc import Iterator

STATE = StructType([StructField("log", BinaryType()), StructField("emitted", LongType())])


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
        log, emitted = self.state.get() if self.state.exists() else (b"", 0)
        if new is not None:
            log += b"".join(new["content"])
        out = self.rows(key[0], self.wrap([log]), final=False)[emitted:]
        self.state.update((log, emitted + len(out)))
        if new is not None:
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            last = int(new["time"].max().timestamp() * 1000)
            self.handle.registerTimer(last + self.idle_timeout_ms)
        yield pd.DataFrame(out, columns=list(self.columns))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        if self.state.exists():
            log, emitted = self.state.get()
            out = self.rows(key[0], self.wrap([log]), final=True)[emitted:]
            self.state.clear()
            yield pd.DataFrame(out, columns=list(self.columns))

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

    def rows(self, key: str, document: bytes, final: bool) -> list[tuple]:
        from xcep.spark.xseq import _engine

        rows = _engine(self.spec).run(partition_stream(key, document).batches(), final=final)
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        return [(None, key, dumps(r), None) for r in rows]


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
        from xcep.spark.xquery import _evaluate, _query
        from xcep.xquery.documents import documents_from_batches

        trees = list(documents_from_batches(partition_stream(key, document).batches()))
        items, failure = _evaluate(_query(self.query), trees)
        rows = [(None, key, item, None) for item in items]
        return rows + ([(None, key, None, failure)] if failure is not None else [])
