"""Event streams over files, directories, pipes and strings.

``EventStream(inputs)`` reads its inputs in order as one stream of documents
(document indexes count across inputs) and delivers ``EventBatch``es
(``.batches()``) or single ``Event``s (iteration).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from xcep.errors import InputError
from xcep.events.context import ErrorPolicy, StreamContext, StreamStats
from xcep.events.json_source import JsonReader
from xcep.events.model import Event, EventBatch, Symbols
from xcep.events.options import SourceOptions
from xcep.events.records import parse_record_path, records
from xcep.events.xml_source import XmlReader

FORMATS = ("auto", "xml", "json", "jsonl")
EXTENSIONS = {".xml": "xml", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"


@dataclass(frozen=True, slots=True)
class Input:
    """One input: a path, standard input (``-``) or an open binary file."""

    name: str
    path: Path | None = None
    file: BinaryIO | None = None
    format: str = "auto"

    @property
    def size(self) -> int | None:
        """Bytes to read, uncompressed, for progress bars (None for pipes): a gzip file's
        own record of its size (its last member's, modulo 4 GiB: an estimate)."""
        if self.path is None:
            return None
        try:
            with open(self.path, "rb") as file:
                if file.read(2) != _GZIP_MAGIC:
                    return self.path.stat().st_size
                file.seek(-4, os.SEEK_END)
                return int.from_bytes(file.read(4), "little")
        except OSError:
            return None


def expand_inputs(inputs: Iterable, format: str = "auto") -> list[Input]:
    """Paths, ``-``, directories (their data files, recursively, by name) and files."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    result = []
    for item in inputs:
        if isinstance(item, Input):
            result.append(item)
        elif hasattr(item, "read"):
            result.append(Input(getattr(item, "name", "<file>"), file=item, format=format))
        elif str(item) == STDIN:
            result.append(Input("<stdin>", format=format))
        else:
            path = Path(item)
            if path.is_dir():
                result += [Input(str(p), p, format=format) for p in _data_files(path)]
            else:
                result.append(Input(str(path), path, format=format))
    return result


def _data_files(top: Path) -> list[Path]:
    """The data files under ``top`` (not hidden), in name order; a subdirectory that
    cannot be listed is in the list too, so that reading it reports why."""
    found: list[Path] = []

    def unlisted(error: OSError) -> None:
        found.append(Path(error.filename))

    for folder, folders, files in os.walk(top, onerror=unlisted):
        folders[:] = [name for name in folders if not name.startswith(".")]
        found += [
            Path(folder, name)
            for name in files
            if not name.startswith(".") and format_by_name(name)
        ]
    return sorted(found)


def format_by_name(name: str) -> str | None:
    name = name.lower().removesuffix(".gz")
    return EXTENSIONS.get(os.path.splitext(name)[1])


class _Prefixed(io.RawIOBase):
    """A binary stream with some bytes already read put back in front."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head = head
        self.rest = rest

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        if self.head:
            if size < 0:
                size = len(self.head)
            out, self.head = self.head[:size], self.head[size:]
            return out
        return getattr(self.rest, "read1", self.rest.read)(size)

    read = read1

    def readinto(self, buffer) -> int:
        data = self.read1(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _sniff(stream: BinaryIO) -> tuple[str, BinaryIO]:
    """Guess the format from the first bytes: XML, JSON Lines or JSON."""
    read = getattr(stream, "read1", stream.read)
    head = b""
    while len(head) < 1 << 20:
        chunk = read(64 * 1024)
        if not chunk:
            break
        head += chunk
        if head.strip() and b"\n" in head.lstrip():
            break
    stream = _Prefixed(head, stream)
    text = head.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text.startswith((b"{", b"[")):
        return "xml", stream
    first_line = text.split(b"\n", 1)[0]
    try:
        json.loads(first_line)
    except ValueError:
        return "json", stream
    return "jsonl", stream


class EventStream:
    """A stream of documents read from one or more inputs, as nested-word events.

    >>> import io
    >>> stream = EventStream([io.BytesIO(b'<a x="1">t</a>')], errors="skip")
    >>> [(str(e.kind), e.name, e.value) for e in stream]  # one Event at a time
    [('open', 'a', None), ('attr', 'x', '1'), ('text', None, 't'), ('close', 'a', None)]
    >>> [len(batch) for batch in EventStream([io.BytesIO(b"<a/>")]).batches()]  # columnar
    [2]

    ``format`` is ``auto`` (by file name, then by the first bytes), ``xml``,
    ``json`` or ``jsonl``. ``errors`` says what happens to a malformed
    document: ``"fail"`` raises ``InputError`` (the default), ``"skip"`` drops
    it, a callable receives each ``InputError`` and the stream goes on.
    From a pipe, a terminal or a socket, each document is delivered as soon as
    it ends when the input has nothing more yet (a feed that pauses), and
    ``on_wait`` (if given) is called before the read that waits: a program
    that writes results flushes them there. ``record_path`` (``/a/b/c``) makes
    every element at that path a document of its own (``events/records.py``).
    Keyword options are those of ``SourceOptions``.
    """

    def __init__(
        self,
        inputs: Iterable = (STDIN,),
        *,
        format: str = "auto",
        errors: ErrorPolicy = "fail",
        progress: Callable[[int], None] | None = None,
        on_wait: Callable[[], None] | None = None,
        record_path: str | None = None,
        **options,
    ) -> None:
        self.inputs = expand_inputs(inputs, format)
        if record_path is not None:
            parse_record_path(record_path)  # a bad one fails here, before any reading
        self.record_path = record_path
        self.options = SourceOptions(**options)
        self.stats = StreamStats()
        self._ctx = StreamContext(self.options, errors, self.stats, progress, on_wait)

    @property
    def symbols(self) -> Symbols:
        return self._ctx.builder.symbols

    def batches(self) -> Iterator[EventBatch]:
        """The event batches of the inputs (of their records, with ``record_path``)."""
        if self.record_path is None:
            return self._batches()
        return records(self._batches(), self.record_path)

    def _batches(self) -> Iterator[EventBatch]:
        ctx = self._ctx
        started = time.perf_counter()
        try:
            for item in self.inputs:
                for batch in self._read_input(item):
                    self.stats.add_batch(batch)
                    yield batch
            batch = ctx.builder.take(force=True)
            if batch is not None:
                self.stats.add_batch(batch)
                yield batch
        finally:
            self.stats.seconds += time.perf_counter() - started

    def __iter__(self) -> Iterator[Event]:
        for batch in self.batches():
            yield from batch

    def _read_input(self, item: Input) -> Iterator[EventBatch]:
        ctx = self._ctx
        try:
            raw = self._open(item)
        except IsADirectoryError:  # a subdirectory that could not be listed (_data_files)
            ctx.document_failed(InputError(_unlisted(item.path), item.name))
            return
        except OSError as exc:
            ctx.document_failed(InputError(exc.strerror or str(exc), item.name))
            return
        try:
            stream = raw
            ctx.start_input(raw.tell if item.path is not None else None, _live(raw))
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
            if head == _GZIP_MAGIC:
                stream = gzip.GzipFile(fileobj=raw, mode="rb")
            format = item.format
            if format == "auto":
                format = format_by_name(item.name) or "auto"
            if format == "auto":
                format, stream = _sniff(stream)
            try:
                if format == "xml":
                    yield from XmlReader(ctx, stream, item.name).batches()
                else:
                    yield from JsonReader(ctx, stream, item.name, format == "jsonl").batches()
            except (OSError, EOFError) as exc:  # a broken gzip file, a failing disk
                ctx.document_failed(InputError(f"cannot read: {exc}", item.name))
        finally:
            ctx.start_input(None)
            if item.file is None and item.path is not None:
                raw.close()

    @staticmethod
    def _open(item: Input) -> BinaryIO:
        if item.file is not None:
            file = item.file
            return file if hasattr(file, "peek") else io.BufferedReader(_Prefixed(b"", file))
        if item.path is None:
            return sys.stdin.buffer
        return open(item.path, "rb")


def _unlisted(path: Path) -> str:
    """Why the directory ``path`` cannot be read as an input."""
    try:
        with os.scandir(path):
            pass
    except OSError as exc:
        return f"cannot list the directory: {exc.strerror or exc}"
    return "a directory, not a file"


def _live(raw) -> bool:
    """Is this input a pipe, a terminal or a socket (a read may wait for the writer)?"""
    try:
        mode = os.fstat(raw.fileno()).st_mode
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # an in-memory file: never waits
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def iter_events(*inputs, **options) -> Iterator[Event]:
    """The events of the given inputs (paths, ``-`` or binary files), one by one."""
    return iter(EventStream(inputs or (STDIN,), **options))


def parse(data: str | bytes, format: str = "xml", **options) -> list[Event]:
    """All events of a string or bytes (handy in tests and at the prompt)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return list(EventStream([Input("<string>", file=io.BytesIO(data), format=format)], **options))
