"""``xcep serve``: every standing query of every kind over one parse of each message.

The service reads the messages of ``--input`` (a JetStream stream over the subject,
made or reused), in order from the one after its checkpoint, each one a document (XML or JSON,
detected as the command line does), and feeds its events to one run per kind
(``xcep.plans``): filters, XSeq, XQuery (per document, or a window over the
stream), XSCL. What they find is published to JetStream:

- a filter ``ID`` that matches: the message itself, unchanged, on
  ``xcep.out.filter.ID`` (header ``Xcep-Input-Seq``: the input's stream sequence);
- a result row of an XSeq, XQuery or XSCL query ``ID``: the batch command's
  output line on ``xcep.out.<kind>.ID``;
- a malformed document: its one-line error on ``xcep.deadletter``.

Every result carries a ``Nats-Msg-Id`` made of the kind, the query, the input's
sequence and the row's place, so a result published twice (after a restart) is
stored once; a message counts as served (the checkpoint moves past it) only once
the output stream has stored its results. The standing
queries (``--filters`` and the other files, and the changes sent to
``xcep.control``) are kept in ``STATE/queries.json``; after each message the
runs that can be saved are saved with the sequence they cover
(``STATE/checkpoint``), so a restart goes on from there: a message it covered
is acknowledged again and not served twice. ``xcep.status`` answers with the
counts as JSON. See docs/serve.md.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pickle
import re
import time
from pathlib import Path

import numpy as np

from xcep.errors import StateError, XcepError
from xcep.events import EventStream, Input
from xcep.plans import KINDS, read_query_file, standing_plans
from xcep.serve.broker import NatsBroker, jetstream

SAVE_EVERY, SAVE_SECONDS = 200, 0.5  # a checkpoint at least this often
TOKEN = re.compile(r"[A-Za-z0-9_-]+\Z")  # a query id is one subject token
CONTROL, STATUS, DEADLETTER = "xcep.control", "xcep.status", "xcep.deadletter"
OUTPUT = "xcep.out"


class QuerySet:
    """The standing queries, by kind and id, kept in ``STATE/queries.json``."""

    def __init__(self, state: Path) -> None:
        self.path = state / "queries.json"
        self.queries: dict[str, dict] = {kind: {} for kind in KINDS}
        if self.path.exists():
            saved = json.loads(self.path.read_text())
            for kind in KINDS:
                self.queries[kind].update(saved.get(kind, {}))

    def save(self) -> None:
        _write_atomically(self.path, json.dumps(self.queries, indent=1).encode())


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _check_id(qid: str) -> None:
    if not TOKEN.match(qid):
        raise ValueError(
            f"a query id is letters, digits, '_' and '-' (a subject token), not {qid!r}"
        )


class Service:
    """The runs of the standing queries, fed one message at a time."""

    def __init__(self, state: Path) -> None:
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self.queries = QuerySet(state)
        self.checkpoint = state / "checkpoint"
        self.covered = 0  # the last input sequence the saved runs include
        self.served = 0  # the last input sequence served (its results stored)
        self.saved_at = time.monotonic()
        self.save_seconds = 0.0  # what the last save took
        self.runs: dict = {}
        self.documents = self.results = self.bad = 0
        self.last = 0  # the input's last sequence, when last asked
        self.seconds = dict.fromkeys(KINDS, 0.0)  # time in each kind's engines
        self.started = time.monotonic()
        # the checkpoint holds the queries its runs were saved with: a change that a crash
        # cut short (in queries.json, not yet in the checkpoint) was never answered, and
        # is forgotten
        checkpoint = self._read_checkpoint()
        saved = checkpoint.get("queries")
        if saved is not None and saved != self.queries.queries:
            self.queries.queries = saved
            self.queries.save()
        self._start_runs(checkpoint)

    def _plan(self, kind: str, queries: dict):
        return standing_plans(kind, queries, per_document=True)

    def _read_checkpoint(self) -> dict:
        """The last checkpoint (``save``), or nothing yet."""
        if not self.checkpoint.exists():
            return {}
        return pickle.loads(self.checkpoint.read_bytes())

    def _start_runs(self, checkpoint: dict | None = None) -> None:
        data = self._read_checkpoint() if checkpoint is None else checkpoint
        saved = data.get("runs", {})
        if data:
            self.covered = self.served = data["covered"]
        self.runs = {}
        for kind in KINDS:
            for plan in self._plan(kind, self.queries.queries[kind]):
                key = (kind, tuple(sorted(map(str, plan.queries))))
                snapshot = saved.get(key)
                try:
                    run = plan.restore(snapshot) if snapshot is not None else plan.start()
                except StateError:
                    run = plan.start()  # saved by other queries: starts afresh
                self.runs[key] = (kind, plan, run)

    def save_now(self) -> bool:
        """Whether to save: every SAVE_EVERY messages or SAVE_SECONDS (a message served
        again after a crash gives results the output stream already has, so a checkpoint
        per message is not needed, and a file's rename costs about a millisecond) — but
        never sooner than ten times the last save took: a large state (an XSCL join's
        wide window) costs at most a tenth of the time to save, and a restart serves
        more messages again instead."""
        since = time.monotonic() - self.saved_at
        if since < 10 * self.save_seconds:
            return False
        return self.served - self.covered >= SAVE_EVERY or since >= SAVE_SECONDS

    def save(self, covered: int | None = None) -> None:
        """The runs that can be saved, with the input sequence they cover (the last one
        served by default)."""
        covered = self.served if covered is None else covered
        began = time.monotonic()
        runs = {}
        for key, (kind, plan, run) in self.runs.items():
            # filters hold nothing between two messages (each a whole document), and their
            # set is in queries.json: saving them would cost their texts per message
            if kind != "filter" and "snapshot" in plan.can:
                runs[key] = run.snapshot()
        self.covered = covered
        saved = {"covered": covered, "runs": runs, "queries": self.queries.queries}
        _write_atomically(self.checkpoint, pickle.dumps(saved))
        self.saved_at = time.monotonic()
        self.save_seconds = self.saved_at - began

    def change(self, request: dict) -> None:
        """``{"op": "add"|"remove", "kind": KIND, "id": ID, "query": TEXT}``: checked (a bad
        query raises and changes nothing), then in force from the next message on (the
        answer to a control request says which: ``from``, an input sequence)."""
        op, kind, qid = request.get("op"), request.get("kind"), str(request.get("id", ""))
        if kind not in KINDS or op not in ("add", "remove"):
            raise ValueError(f"op is add or remove, kind one of {', '.join(KINDS)}")
        _check_id(qid)
        queries = dict(self.queries.queries[kind])
        if op == "add":
            if qid in queries:
                raise ValueError(f"{kind} {qid} is already a standing query")
            queries[qid] = str(request.get("query", ""))
            self._plan(kind, {qid: queries[qid]})  # a bad query fails here
        elif queries.pop(qid, None) is None:
            raise ValueError(f"no {kind} query {qid}")
        self.queries.queries[kind] = queries
        self.queries.save()
        if kind in ("filter", "xscl") and queries:  # one run holds them all: it changes
            for key, (k, plan, run) in list(self.runs.items()):
                if k == kind:  # (its saved state then names the queries it has now)
                    (run.add(qid, queries[qid]) if op == "add" else run.remove(qid))
                    del self.runs[key]
                    self.runs[(kind, tuple(sorted(map(str, queries))))] = (k, plan, run)
                    return
        kept = {key: value for key, value in self.runs.items() if value[0] != kind}
        for plan in self._plan(kind, queries):  # the others start again with their queries
            key = (kind, tuple(sorted(map(str, plan.queries))))
            kept[key] = self.runs.get(key) or (kind, plan, plan.start())
        for key, (_, _, run) in self.runs.items():
            if key not in kept:
                run.close()
        self.runs = kept

    def serve(self, seq: int, data: bytes) -> list[tuple[str, bytes, str, dict]]:
        """The messages to publish for the input message ``seq``: (subject, body, id —
        stored once by the broker however often it is sent —, headers)."""
        errors: list = []
        stream = EventStream(
            [Input(f"message {seq}", file=io.BytesIO(data), format="auto")],
            errors=errors.append,
            keep_whitespace=True,
        )
        runs = list(self.runs.items())  # (a key holds every id of its run: hashed once)
        found: list = [[] for _ in runs]
        failed: dict = {}  # a run that raised (by its place): its error (it starts afresh)
        for batch in stream.batches():
            np.frombuffer(batch.docs, np.int64)[:] = seq  # the document is the message
            for at, (_, (kind, _, run)) in enumerate(runs):
                if at in failed:
                    continue
                began = time.perf_counter()
                try:
                    found[at] += run.feed(batch)
                except Exception as exc:  # one query's failure costs its answer, no more
                    failed[at] = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
                self.seconds[kind] += time.perf_counter() - began
        for at, why in failed.items():
            key, (kind, plan, old) = runs[at]
            old.close()
            self.runs[key] = (kind, plan, plan.start())
            errors.append(f"{kind} {', '.join(key[1])}: {why}")
        out = []
        if errors:
            self.bad += 1
        for n, error in enumerate(errors):  # a malformed document, a query that failed on it
            line = f"input {seq}: {error}".encode()
            out.append((DEADLETTER, line, f"dead.{seq}.{n}", {"Xcep-Input-Seq": str(seq)}))
        seen: dict = {}
        headers = {"Xcep-Input-Seq": str(seq)}  # (the broker copies it per message)
        for ((kind, _), _), rows in zip(runs, found, strict=True):
            for row in rows:
                if kind == "filter":
                    out += [
                        (f"{OUTPUT}.filter.{fid}", data, f"filter.{fid}.{seq}", headers)
                        for fid in row.value
                    ]
                    continue
                n = seen[(kind, row.query)] = seen.get((kind, row.query), -1) + 1
                value = row.value if isinstance(row.value, str) else _json(row.value)
                ident = f"{kind}.{row.query}.{seq}.{n}"
                out.append((f"{OUTPUT}.{kind}.{row.query}", value.encode(), ident, headers))
        self.documents += 1
        self.results += len(out)
        return out

    def status(self) -> dict:
        seconds = time.monotonic() - self.started
        return {
            "documents": self.documents,
            "served": self.served,
            "results": self.results,
            "malformed": self.bad,
            "covered": self.covered,
            "documents_per_s": round(self.documents / seconds, 1) if seconds else 0.0,
            "lag": max(0, self.last - self.served),
            "engine_seconds": {kind: round(t, 3) for kind, t in self.seconds.items()},
            "queries": {kind: len(q) for kind, q in self.queries.queries.items()},
        }


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def load_files(service: Service, files: dict[str, str | None]) -> None:
    """The queries of ``--filters`` and the other files join the standing ones (a query
    already standing keeps its text)."""
    changed = False
    for kind, path in files.items():
        if path is None:
            continue
        for qid, text in read_query_file(path).items():
            _check_id(qid)
            if qid not in service.queries.queries[kind]:
                service.queries.queries[kind][qid] = text
                changed = True
    if changed:
        service.queries.save()
        service._start_runs()


async def run_service(
    url: str,
    subject: str,
    state: Path,
    files: dict[str, str | None] | None = None,
    stop: asyncio.Event | None = None,
    log=None,
    fetch: int = 32,
    broker=None,
) -> Service:
    """Serve ``subject`` until ``stop`` is set (or forever), on ``broker`` (a
    ``NatsBroker`` at ``url`` by default)."""
    service = Service(Path(state))
    load_files(service, files or {})
    broker = broker or NatsBroker(url)
    # the input read in order from the message after the checkpoint: the checkpoint is
    # what the service has acknowledged (a message served again after a crash gives the
    # same results, which the output stream stores once: their ids)
    await broker.open(subject, service.covered + 1, [f"{OUTPUT}.>", DEADLETTER])
    changes: asyncio.Queue = asyncio.Queue()

    async def on_control(body: bytes, respond) -> None:
        await changes.put((body, respond))  # applied between two messages: apply_changes

    async def apply_changes() -> None:
        """The changes sent since the last message, in force from the next one on: made
        and saved with the checkpoint, so that a restart has them from that message on."""
        while not changes.empty():
            body, respond = changes.get_nowait()
            try:
                service.change(json.loads(body))
                service.save()  # the change and what was served before it, together
                answer = {"ok": True, "from": service.covered + 1}
            except (ValueError, XcepError, json.JSONDecodeError) as exc:
                answer = {"error": str(exc)}
            await respond(_json(answer).encode())

    async def on_status(body: bytes, respond) -> None:
        service.last = await broker.last_sequence()
        await respond(_json(service.status()).encode())

    await broker.listen(CONTROL, on_control)
    await broker.listen(STATUS, on_status)
    last_log = time.monotonic()
    want = 1  # a fetch waits until it has this many: 1 when idle (latency), more in a backlog
    try:
        while stop is None or not stop.is_set():
            await apply_changes()
            try:
                messages = await broker.fetch(want, timeout=0.2)
                want = fetch if len(messages) == want else 1
            except TimeoutError:  # idle: save
                want = 1
                if service.served > service.covered:
                    service.save()
                continue
            # the fetched messages served, their results published together: served once
            # the output stream has stored them all (one wait for the acknowledgements)
            out, last = [], service.served
            for seq, data in messages:
                if seq > service.served:
                    out += service.serve(seq, data)
                    last = seq
            await broker.publish(out)
            service.served = last
            if service.save_now():
                service.save()
            if log is not None and time.monotonic() - last_log > 10:
                last_log = time.monotonic()
                service.last = await broker.last_sequence()
                log(_json(service.status()))
        if service.served > service.covered:
            service.save()
    finally:
        await broker.close()
    return service


async def send_control(url: str, request: dict, timeout: float = 5) -> dict:
    """Send one change to a running service and return its answer."""
    from nats.errors import NoRespondersError

    connection, _ = await jetstream(url)
    try:
        answer = await connection.request(CONTROL, _json(request).encode(), timeout=timeout)
        return json.loads(answer.data)
    except NoRespondersError:
        raise ConnectionError(f"no xcep serve answers on {url}") from None
    finally:
        await connection.close()
