"""`make demo`, part two: xcep serve on a real NATS JetStream broker.

Starts the NATS server installed with xcep (loopback, a temporary store), starts
`xcep serve` with the person subscriptions and an XSeq query, publishes the people
of XMark f0.01 one message each, adds a subscription and removes another half-way
(`xcep subscribe` / `xcep unsubscribe`), and prints what each subscriber received.

    python examples/serve_demo.py ../shared/data build/serve-demo
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from xcep.serve import local_server
from xcep.serve.broker import jetstream

HERE = Path(__file__).parent
XCEP = [sys.executable, "-m", "xcep"]


def people(data: Path) -> list[bytes]:
    root = ET.parse(data / "xmark" / "xmark-f0.01.xml").getroot()
    return [ET.tostring(person) for person in root.iter("person")]


async def status(url: str) -> dict:
    connection, _ = await jetstream(url)
    try:
        for _ in range(100):
            try:
                return json.loads((await connection.request("xcep.status", b"", timeout=1)).data)
            except Exception:
                await asyncio.sleep(0.2)
        raise RuntimeError("xcep serve does not answer")
    finally:
        await connection.close()


async def publish(url: str, bodies: list[bytes]) -> None:
    connection, js = await jetstream(url)
    for body in bodies:
        await js.publish("xmark.people", body)
    await connection.close()


async def received(url: str) -> Counter:
    connection, js = await jetstream(url)
    consumer = await js.pull_subscribe("xcep.out.>", durable="demo", stream="XCEP_OUT")
    counts: Counter = Counter()
    while True:
        try:
            batch = await consumer.fetch(500, timeout=1)
        except TimeoutError:
            break
        for message in batch:
            counts[message.subject] += 1
            await message.ack()
    await connection.close()
    return counts


def main(data: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    messages = people(data)
    xseq = work / "xseq.txt"
    xseq.write_text("incomes\t/person/profile/@income\n")
    with tempfile.TemporaryDirectory() as store, local_server(store) as url:
        print(f"broker: {url}")
        state = work / "state"
        for old in state.glob("*") if state.exists() else ():
            old.unlink()
        service = subprocess.Popen(
            [*XCEP, "serve", "--nats", url, "--input", "xmark.people", "--state", str(state),
             "--filters", str(HERE / "person-subscriptions.txt"), "--xseq", str(xseq)]
        )  # fmt: skip
        try:
            asyncio.run(status(url))
            half = len(messages) // 2
            asyncio.run(publish(url, messages[:half]))
            subscribe = [*XCEP, "subscribe", "--nats", url, "--kind", "filter"]
            subscribe += ["young", "/person[profile/age < 25]"]
            print(
                "subscribe young:",
                subprocess.run(subscribe, capture_output=True, text=True).stdout.strip(),
            )
            unsubscribe = [*XCEP, "unsubscribe", "--nats", url, "--kind", "filter", "mail-A"]
            print(
                "unsubscribe mail-A:",
                subprocess.run(unsubscribe, capture_output=True, text=True).stdout.strip(),
            )
            asyncio.run(publish(url, messages[half:]))
            deadline = time.monotonic() + 60
            while (
                asyncio.run(status(url))["covered"] < len(messages) and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            print("status:", json.dumps(asyncio.run(status(url))))
            print(f"{len(messages)} people published; each subscriber received:")
            for subject, count in sorted(asyncio.run(received(url)).items()):
                print(f"  {subject:32} {count:5}")
        finally:
            service.terminate()
            service.wait(20)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
