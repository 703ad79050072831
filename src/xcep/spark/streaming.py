"""Partitioned XSeq in Structured Streaming: per-key engine state in Spark's state store.

``groupBy(key).transformWithStateInPandas`` with one ``XSeqPartition``
processor. The state of a partition is what it takes to bring its engine back:
the partition's records so far (in arrival order) and how many output rows
were already emitted. Each micro-batch appends the new records, replays the
partition through the engine (``run(final=False)``) and emits only the rows
past that count. When a partition has been idle for ``idle_timeout``, its
last rows (aggregates, matches waiting to be maximal) are emitted and its
state is dropped. Idle is measured in event time (the input files'
modification time; an event-time timer at the partition's last record plus
the timeout), so a job whose input has stopped keeps its partitions until
newer input comes. The state lives in the
checkpoint (RocksDB state store), so a restarted query resumes where the last
committed micro-batch left off, and the file sink's log makes output
exactly-once. Replaying costs time proportional to a partition's length: the
idle timeout bounds it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from xcep.spark.partitions import Wrapper

if TYPE_CHECKING:
    from collections.abc import Iterator

STATE = StructType([StructField("log", BinaryType()), StructField("emitted", LongType())])
COLUMNS = ["doc_id", "key", "row", "error"]


class XSeqPartition(StatefulProcessor):
    """One partition of a partitioned XSeq query, kept across micro-batches."""

    def __init__(self, query: str, selection: str, record_path: str, idle_timeout_ms: int):
        self.spec = (query, selection)
        self.wrap = Wrapper(record_path)
        self.idle_timeout_ms = idle_timeout_ms

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState("partition", STATE)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        frames = list(rows)
        new = pd.concat(frames).sort_values(["path", "record"]) if frames else None
        log, emitted = self.state.get() if self.state.exists() else (b"", 0)
        if new is not None:
            log += b"".join(new["content"])
        out = self._rows(key[0], log, emitted, final=False)
        self.state.update((log, emitted + len(out)))
        if new is not None:
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            last = int(new["time"].max().timestamp() * 1000)
            self.handle.registerTimer(last + self.idle_timeout_ms)
        yield pd.DataFrame(out, columns=COLUMNS)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        if self.state.exists():
            log, emitted = self.state.get()
            out = self._rows(key[0], log, emitted, final=True)
            self.state.clear()
            yield pd.DataFrame(out, columns=COLUMNS)

    def _rows(self, key: str, log: bytes, emitted: int, final: bool) -> list[tuple]:
        import io
        from itertools import islice

        from xcep.events import EventStream, Input
        from xcep.spark.xseq import _engine

        data = self.wrap([log])
        stream = EventStream([Input(f"partition {key}", file=io.BytesIO(data))], errors="skip")
        rows = islice(_engine(self.spec).run(stream.batches(), final=final), emitted, None)
        return [
            (None, key, json.dumps(r, ensure_ascii=False, separators=(",", ":")), None)
            for r in rows
        ]

    def close(self) -> None:
        pass
