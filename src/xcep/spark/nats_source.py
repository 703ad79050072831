"""NATS JetStream as a Spark streaming source (a Spark 4 Python data source).

``spark.readStream.format("xcep-nats").option("url", "nats://HOST:PORT")
.option("subject", SUBJECT).load()`` gives one row per message: ``path`` (its
document id, ``nats://HOST:PORT/SUBJECT#SEQ``), ``content`` (the message body)
and ``time`` (when JetStream stored it). The offsets are JetStream stream sequence
numbers: a micro-batch reads the messages after the last one it committed up to
the stream's last one, in partitions of ``messagesPerPartition`` (1,000), so a
query restarted from its checkpoint reads exactly the range it had not committed.
``maxMessagesPerTrigger`` bounds a micro-batch. The stream over the subject is
made when it is not there (as ``xcep serve`` makes it).

``xcep spark … --stream nats://HOST:PORT/SUBJECT`` reads it (``sources.read_units``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)


def parse_url(text: str) -> tuple[str, str]:
    """``nats://HOST:PORT/SUBJECT`` → (server URL, subject)."""
    rest = text[len("nats://") :]
    server, _, subject = rest.partition("/")
    if not server or not subject:
        raise ValueError(f"a NATS source is nats://HOST:PORT/SUBJECT, not {text!r}")
    return f"nats://{server}", subject


class _Range(InputPartition):
    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last


async def _last_sequence(url: str, subject: str) -> int:
    from xcep.serve.broker import ensure_stream, jetstream, stream_name

    connection, js = await jetstream(url)
    try:
        await ensure_stream(js, stream_name(subject), [subject])
        return (await js.stream_info(stream_name(subject))).state.last_seq
    finally:
        await connection.close()


async def _read(url: str, subject: str, first: int, last: int) -> list[tuple]:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    from xcep.serve.broker import jetstream, stream_name

    connection, js = await jetstream(url)
    rows: list[tuple] = []
    try:
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=first,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30,
        )
        consumer = await js.pull_subscribe(subject, stream=stream_name(subject), config=config)
        while not rows or rows[-1][0] < last:
            want = min(256, last - (rows[-1][0] if rows else first - 1))
            for message in await consumer.fetch(want, timeout=10):
                meta = message.metadata
                if meta.sequence.stream > last:
                    break
                stored = meta.timestamp or dt.datetime.now(dt.UTC)
                rows.append((meta.sequence.stream, message.data, stored))
    finally:
        await connection.close()
    return rows


class NatsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict) -> None:
        self.url, self.subject = options["url"], options["subject"]
        self.per_partition = int(options.get("messagesPerPartition", 1000))
        self.per_trigger = int(options.get("maxMessagesPerTrigger", 0))
        self.target: int | None = None  # available-now: no message after this one

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.per_trigger) if self.per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = asyncio.run(_last_sequence(self.url, self.subject))

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        last = self.target
        if last is None:
            last = asyncio.run(_last_sequence(self.url, self.subject))
        if isinstance(limit, ReadMaxRows) and start is not None:
            last = min(last, start["seq"] + limit.max_rows)
        return {"seq": max(last, start["seq"] if start is not None else 0)}

    def partitions(self, start: dict, end: dict) -> list[_Range]:
        first, last = start["seq"] + 1, end["seq"]
        return [
            _Range(a, min(a + self.per_partition - 1, last))
            for a in range(first, last + 1, self.per_partition)
        ]

    def read(self, partition: _Range) -> Iterator[tuple]:
        base = f"{self.url}/{self.subject}#"
        for seq, data, stored in asyncio.run(
            _read(self.url, self.subject, partition.first, partition.last)
        ):
            yield (base + str(seq), data, stored)

    def commit(self, end: dict) -> None:
        pass  # the messages stay in the stream: its retention decides


class NatsSource(DataSource):
    """``format("xcep-nats")``: see the module."""

    @classmethod
    def name(cls) -> str:
        return "xcep-nats"

    def schema(self) -> str:
        return "path string, content binary, time timestamp"

    def streamReader(self, schema) -> NatsStreamReader:
        return NatsStreamReader(self.options)


def register(spark) -> None:
    """Make ``format("xcep-nats")`` known to ``spark``."""
    spark.dataSource.register(NatsSource)
