"""What the readers of one event stream share (``StreamContext``) and what the stream
counts (``StreamStats``): kept apart from ``stream.py`` so that the readers
(``xml_source``, ``json_source``) depend on it and not on the stream that uses them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from xcep.errors import InputError
from xcep.events.model import EventBatch, EventBuilder, Kind
from xcep.events.options import SourceOptions

ErrorPolicy = str | Callable[[InputError], None]  # "fail", "skip" or a callback


@dataclass(slots=True)
class StreamStats:
    """What a stream has read so far."""

    documents: int = 0  # well-formed documents delivered
    bad_documents: int = 0  # malformed documents skipped
    events: dict[str, int] = field(default_factory=lambda: {str(k): 0 for k in Kind})
    max_depth: int = 0
    bytes: int = 0  # bytes parsed (after decompression)
    seconds: float = 0.0

    def add_batch(self, batch: EventBatch) -> None:
        kinds = batch.kinds.tobytes()
        for kind in Kind:
            self.events[str(kind)] += kinds.count(kind)
        if len(batch):
            self.max_depth = max(self.max_depth, batch.depth_facts()[0])

    def to_dict(self) -> dict:
        total = sum(self.events.values())
        seconds = max(self.seconds, 1e-9)
        return {
            "documents": self.documents,
            "bad_documents": self.bad_documents,
            "events": total,
            **{f"{kind}_events": count for kind, count in self.events.items()},
            "max_depth": self.max_depth,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 4),
            "mb_per_s": round(self.bytes / 1e6 / seconds, 2),
            "events_per_s": round(total / seconds),
        }


class StreamContext:
    """What the readers share: the builder, document numbering, errors, counters."""

    def __init__(
        self,
        options: SourceOptions,
        errors: ErrorPolicy,
        stats: StreamStats,
        progress: Callable[[int], None] | None,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        if not (callable(errors) or errors in ("fail", "skip")):
            raise ValueError(f"errors must be 'fail', 'skip' or a callable, not {errors!r}")
        self.options = options
        self.builder = EventBuilder(batch_size=options.batch_size)
        self.errors = errors
        self.stats = stats
        self.progress = progress
        self.next_doc = 0
        self.position: Callable[[], int] | None = None  # where the current raw file is
        self.on_wait = on_wait
        self.live = False  # the current input is a pipe, a terminal or a socket

    def start_input(self, position: Callable[[], int] | None, live: bool = False) -> None:
        self.position = position
        self.live = live

    def before_wait(self) -> Iterator[EventBatch]:
        """Before a read that may wait for a live input (a pipe from a feed): the events
        read so far go out now (not when a batch fills) — the complete documents, and the
        part of a document that is still open, so that a feed whose root never closes is
        answered as it comes —, and ``on_wait`` is called when the consumer has taken
        them (the CLI flushes its output there)."""
        if self.live:
            batch = self.builder.take(force=True)
            if batch is not None:
                yield batch
            if self.on_wait is not None:
                self.on_wait()

    def new_document(self) -> int:
        doc = self.next_doc
        self.next_doc += 1
        self.builder.begin_document()
        return doc

    def document_done(self) -> None:
        self.builder.end_document()
        self.stats.documents += 1

    def document_failed(self, error: InputError, raw: bytes | None = None) -> None:
        self.builder.abandon_document()
        self.stats.bad_documents += 1
        if raw is not None and len(raw) <= self.options.raw_limit:
            error.raw = raw
        if self.errors == "fail":
            raise error
        if callable(self.errors):
            self.errors(error)

    def read(self, stream: BinaryIO) -> bytes:
        """One chunk of an input, counted in the statistics and the progress."""
        read = getattr(stream, "read1", stream.read)
        chunk = read(self.options.chunk_size)
        self.stats.bytes += len(chunk)
        if self.progress is not None and self.position is not None:
            self.progress(len(chunk))  # bytes read, uncompressed
        return chunk
