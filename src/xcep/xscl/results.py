"""What an XSCL engine gives and reads: ``Result``s (a query and its ``Match``: the
documents joined, their nodes, the output), ``GroupedResult`` for the queries that find the
same, ``parse_document`` for a published result read back as a document, and
``ready_batches`` (batches of the documents that are ready)."""

from __future__ import annotations

import io
import json
import queue
import threading
from collections.abc import Iterable, Iterator

from xcep.events import EventStream, Input
from xcep.xscl.documents import Document, documents_from_batches

_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class Match:
    """What the results of one joined row share: ``docs``, the document indexes in the
    order of the query's blocks; ``nodes``, the output nodes (one per SELECT term, or
    per block); ``output``, the result document, serialized when first read (pass a
    string, or the output ``Node`` objects as a tuple: one node alone is the output,
    several are wrapped in ``<result>``)."""

    __slots__ = ("_output", "_tail", "docs", "nodes")

    def __init__(self, docs: list[int], nodes: list[int], output) -> None:
        self.docs = docs
        self.nodes = nodes
        self._output = output
        self._tail: str | None = None

    @property
    def output(self) -> str:
        if type(self._output) is tuple:
            parts = [node.serialize() for node in self._output]
            self._output = parts[0] if len(parts) == 1 else f"<result>{''.join(parts)}</result>"
        return self._output

    def json_tail(self) -> str:
        """``,"docs":[...],"output":"..."}``: the end of each result's JSON line."""
        if self._tail is None:
            self._tail = f',"docs":{_json(self.docs)},"output":{_json(self.output)}}}'
        return self._tail


class Result:
    """One result of one query: its ``query`` id and its ``match``, which the results of
    one joined row share (``docs``, ``nodes`` and ``output`` read through to it: copy
    the lists to change them)."""

    __slots__ = ("match", "query")

    def __init__(self, query: str, match: Match) -> None:
        self.query = query
        self.match = match

    @property
    def docs(self) -> list[int]:
        return self.match.docs

    @property
    def nodes(self) -> list[int]:
        return self.match.nodes

    @property
    def output(self) -> str:
        return self.match.output

    @property
    def queries(self) -> list[str]:
        return [self.query]

    def to_dict(self) -> dict:
        return {"query": self.query, "docs": self.docs, "output": self.output}

    def to_json(self) -> str:
        """``to_dict()`` as one compact JSON line (without the newline)."""
        return '{"query":' + _json(self.query) + self.match.json_tail()

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Result(query={self.query!r}, docs={self.docs}, nodes={self.nodes})"


class GroupedResult(Result):
    """One result shared by several queries (``run(..., grouped=True)``): the same
    documents, in the same order, and the same output nodes; ``queries`` in the
    order they were added, ``query`` the first of them."""

    __slots__ = ("_queries",)

    def __init__(self, queries: list[str], match: Match) -> None:
        super().__init__(queries[0], match)
        self._queries = queries

    @property
    def queries(self) -> list[str]:
        return self._queries

    def to_dict(self) -> dict:
        return {"queries": self._queries, "docs": self.docs, "output": self.output}

    def to_json(self) -> str:
        return '{"queries":' + _json(self._queries) + self.match.json_tail()

    def __repr__(self) -> str:
        return f"GroupedResult(queries={self._queries!r}, docs={self.docs}, nodes={self.nodes})"


class _Failed:
    """An exception of the reading thread, handed to the one that joins."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def ready_batches(items: Iterable, most: int) -> Iterator[list]:
    """Batches of the items a source has produced so far: a thread reads the source
    into a queue; each batch is what is queued (at least one item, at most
    ``most``). A fast source gives full batches, a slow one batches of one: nothing
    waits for a batch to fill. The source's exceptions are raised here, after the
    items before them."""
    ready: queue.Queue = queue.Queue(maxsize=2 * most)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as error:  # handed over, raised by the consumer
            put(_Failed(error))
        put(done)

    reader = threading.Thread(target=read, name="xcep-ready-batches", daemon=True)
    reader.start()
    try:
        while True:
            batch = []
            item = ready.get()
            while True:
                if item is done or isinstance(item, _Failed):
                    if batch:
                        yield batch
                    if item is done:
                        return
                    raise item.error
                batch.append(item)
                if len(batch) >= most:
                    break
                try:
                    item = ready.get_nowait()
                except queue.Empty:
                    break
            yield batch
    finally:
        stop.set()


def parse_document(xml: str) -> Document:
    stream = EventStream([Input("<published>", file=io.BytesIO(xml.encode()), format="xml")])
    return next(documents_from_batches(stream.batches()))
