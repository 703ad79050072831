"""Units: what the Spark sources hand to the engines, and how a worker reads one.

A *unit* is a row ``(path, record, content, error, time)``: a whole file
(``record`` null; it may hold several documents: concatenated XML, JSON
Lines), or one record cut out of a large document (``record`` = its position);
``time`` is the file's modification time (the event time of streaming jobs).
Every document gets an id: the file's path for a file of one document,
``path#N`` for the N-th (0-based) document of a file of several, and
``path#N`` for the record at position N. Plain Python, no Spark needed.
"""

from __future__ import annotations

import io
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xcep.errors import InputError
from xcep.events import EventStream, Input
from xcep.events.stream import EXTENSIONS, format_by_name

if TYPE_CHECKING:
    from collections.abc import Iterator

    from xcep.events import EventBatch

UNIT_SCHEMA = "path string, record long, content binary, error string, time timestamp"


WORKER_CACHE = 8  # compiled engines a Python worker keeps between tasks (per kind)


class WorkerCache:
    """What a Python worker compiled (machines, engines, queries), kept between tasks by
    key, the most recently used last, at most ``size``: a long-lived worker that serves
    many jobs keeps the last few, not every one it ever built."""

    def __init__(self, size: int = WORKER_CACHE) -> None:
        self.size = size
        self.items: OrderedDict = OrderedDict()

    def get(self, key, make: Callable[[], object]):
        found = self.items.get(key)
        if found is None:
            found = self.items[key] = make()
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        else:
            self.items.move_to_end(key)
        return found


def data_glob() -> str:
    """A Hadoop glob of the data files' names (any case, ``.gz`` too), so that Spark
    lists and reads only them (``pathGlobFilter``)."""

    def any_case(text: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in text)

    names = [f"*{any_case(ext)}{gz}" for ext in EXTENSIONS for gz in ("", any_case(".gz"))]
    return "{" + ",".join(names) + "}"


def is_data_file(path: str) -> bool:
    """Whether a directory listing's file is read (XML/JSON by name, gz included, not hidden)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return not name.startswith((".", "_")) and format_by_name(name) is not None


def document_id(path: str, record: int | None, doc: int, documents: int) -> str:
    if record is not None:
        return f"{path}#{record}"
    return path if documents == 1 and doc == 0 else f"{path}#{doc}"


@dataclass
class UnitDocuments:
    """The documents of one unit: the event batches of each good one, the bad ones' errors."""

    path: str
    record: int | None
    batches: dict[int, list[EventBatch]] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.batches) + len(self.errors)

    def doc_id(self, doc: int) -> str:
        return document_id(self.path, self.record, doc, self.count)

    def good(self) -> Iterator[tuple[str, list[EventBatch]]]:
        """(document id, its batches) for each well-formed document, in order."""
        for doc, batches in self.batches.items():
            yield self.doc_id(doc), batches

    def bad(self) -> Iterator[tuple[str, str]]:
        """(document id, one-line error) for each malformed document."""
        for error in self.errors:
            yield (self.path if error.doc is None else self.doc_id(error.doc)), str(error)


def unit_input(path: str, record: int | None, content: bytes) -> Input:
    """A unit as an event-source input (a record is always XML)."""
    name = path if record is None else f"{path}#{record}"
    return Input(name, file=io.BytesIO(content), format="xml" if record is not None else "auto")


def read_unit(path: str, record: int | None, content: bytes, **options) -> UnitDocuments:
    """Parse a unit's content into documents, per document: events or an error."""
    unit = UnitDocuments(path, record)
    stream = EventStream([unit_input(path, record, content)], errors=unit.errors.append, **options)
    for batch in stream.batches():
        for doc, start, end in batch.document_runs():
            part = batch if end - start == len(batch) else batch.slice(start, end)
            unit.batches.setdefault(doc, []).append(part)
    bad = {error.doc for error in unit.errors}
    for doc in bad:
        unit.batches.pop(doc, None)
    return unit


def unit_rows(batch) -> Iterator[tuple]:
    """(path, record, content, error) of each unit in an Arrow record batch."""
    columns = [batch.column(name).to_pylist() for name in ("path", "record", "content", "error")]
    return zip(*columns, strict=True)


def string_batch(rows: list[tuple], names: list[str]):
    """Rows of strings (or None) as an Arrow record batch with these column names."""
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), pa.string()) for c in columns], names=names
    )
