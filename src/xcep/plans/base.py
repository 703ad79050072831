"""Plans and runs: the base classes every engine's plan and run derive from (the
interface is described in ``xcep.plans``)."""

from __future__ import annotations

import gc
import json
import pickle
from collections.abc import Iterable
from itertools import repeat
from typing import ClassVar, NamedTuple

from xcep.collector import collector_paused
from xcep.errors import StateError
from xcep.events.model import CLOSE, EventBatch

MAGIC = b"xcep-run\n"
VERSION = 2  # 2: a run of several XSeq queries holds its sequence groups


class Row(NamedTuple):
    query: object  # the query's id (None for a document's filters)
    doc: int | None  # the document it came from, where the engine knows it
    value: object


def make_rows(queries: Iterable, values: Iterable, docs: Iterable = ()) -> list[Row]:
    """``[Row(q, d, v) for q, d, v in zip(queries, docs, values)]`` (``docs`` empty: None
    each), made by ``tuple.__new__`` in C: three times as quick as ``Row(...)``, which
    counts where a batch has hundreds of thousands of rows."""
    fields = zip(queries, docs or repeat(None), values, strict=False)  # (queries: repeat)
    return list(map(tuple.__new__, repeat(Row), fields))


class Plan:
    """Compiled queries of one language (subclasses: one per engine)."""

    kind: ClassVar[str]
    can: ClassVar[frozenset] = frozenset()  # of "snapshot", "add", "remove"

    def __init__(self, queries: dict, **options) -> None:
        self.queries = dict(queries)
        self.options = options
        # what the event source must give this plan's runs (``SourceOptions`` fields)
        self.source_options: dict = {}

    def fingerprint(self, queries: dict | None = None) -> str:
        """What a snapshot is checked against: the kind, the queries (``queries``, those
        of a run that changed them; the plan's by default) and the options."""
        queries = self.queries if queries is None else queries
        text = json.dumps(
            [self.kind, sorted((str(k), v) for k, v in queries.items()), self.options],
            sort_keys=True,
            default=str,
        )
        import hashlib  # (here: 4 ms of every command's start-up, for snapshots only)

        return hashlib.sha256(text.encode()).hexdigest()

    def start(self) -> Run:
        raise NotImplementedError

    def rows(self, batches) -> list[Row]:
        """The rows of one run over ``batches`` to their end (a document, a partition)."""
        run = self.start()
        try:
            rows = []
            for batch in batches:
                rows += run.feed(batch)
            return rows + run.finish()
        finally:
            run.close()

    def restore(self, data: bytes) -> Run:
        """The run that ``data`` (``Run.snapshot``) saved."""
        if not isinstance(data, bytes | bytearray) or not data.startswith(MAGIC):
            raise StateError("not a run snapshot")
        try:
            saved = pickle.loads(data[len(MAGIC) :])
        except Exception as exc:  # truncated or damaged
            raise StateError(f"a damaged run snapshot ({type(exc).__name__})") from None
        if saved.get("version") != VERSION:
            raise StateError(f"a run snapshot of version {saved.get('version')}, not {VERSION}")
        if saved.get("kind") != self.kind or saved.get("plan") != self.fingerprint():
            raise StateError(
                "the snapshot was saved by another plan (queries or options): a run whose "
                "queries changed is restored by a plan of the queries it had then"
            )
        return self._restore(saved["state"])

    def _restore(self, state) -> Run:
        raise StateError(f"{self.kind} runs cannot be saved yet")

    def explain(self) -> str:
        raise NotImplementedError


class Run:
    """One pass of a plan over a stream, fed a batch at a time."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.documents = 0
        self.rows = 0
        self.finished = False

    def feed(self, batch: EventBatch) -> list[Row]:
        """The rows known once ``batch`` is read. The cyclic collector waits meanwhile:
        a batch's results (millions of rows in a join) would make it scan the heap again
        and again (3x the run's time); what it would free is freed after the batch."""
        if self.finished:
            raise StateError("this run is finished: start or restore another")
        enabled = gc.isenabled()  # (collector_paused, inline: a run may be fed per document)
        gc.disable()
        try:
            rows = self._feed(batch)
        finally:
            if enabled:
                gc.enable()
        self.rows += len(rows)
        return rows

    def finish(self) -> list[Row]:
        if self.finished:
            return []
        self.finished = True
        with collector_paused():
            rows = self._finish()
        self.rows += len(rows)
        return rows

    def snapshot(self) -> bytes:
        if self.finished:
            raise StateError("this run is finished: nothing is left to save")
        saved = {
            "version": VERSION,
            "kind": self.plan.kind,
            "plan": self.plan.fingerprint(self.queries()),
            "state": self._state(),
        }
        return MAGIC + pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL)

    def queries(self) -> dict:
        """id → text of the queries it runs now (the plan's, then those added, less
        those removed)."""
        return dict(self.plan.queries)

    def add(self, query_id, text: str) -> None:
        raise StateError(f"{self.plan.kind} queries cannot be added to a running plan yet")

    def remove(self, query_id) -> None:
        raise StateError(f"{self.plan.kind} queries cannot be removed from a running plan yet")

    def stats(self) -> dict:
        return {"queries": len(self.plan.queries), "documents": self.documents, "rows": self.rows}

    def close(self) -> None:
        """Let the run go without finishing it (a run with a thread ends it)."""

    def _feed(self, batch: EventBatch) -> list[Row]:
        raise NotImplementedError

    def _finish(self) -> list[Row]:
        return []

    def _state(self):
        raise StateError(f"{self.plan.kind} runs cannot be saved yet")


def documents_ended(batch: EventBatch) -> int:
    """How many documents end in ``batch`` (their root closes)."""
    return batch.depth_facts()[1]


class OpenDocument:
    """The events read so far of the document still open after the last batch: what a
    run whose state between documents is empty saves (and reads again when restored)."""

    def __init__(self) -> None:
        self.batches: list[EventBatch] = []
        self.number = None

    def note(self, batch: EventBatch) -> None:
        """Take in the batch just fed."""
        n = len(batch)
        if n == 0 or (batch.kinds[n - 1] == CLOSE and batch.depths[n - 1] == 1):
            self.batches, self.number = [], None  # it ends at a document's end
            return
        *_, (number, start, end) = batch.document_runs()
        tail = batch.slice(start, end)
        if number == self.number:
            self.batches.append(tail)
        else:
            self.batches, self.number = [tail], number
