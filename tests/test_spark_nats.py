"""NATS JetStream as a Spark streaming source: offsets are stream sequences, so a query
restarted from its checkpoint (after it stopped, or after kill -9 in a micro-batch)
reads exactly what it had not committed: every document's row once."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from xcep.events import EventStream
from xcep.serve import local_server
from xcep.serve.broker import ensure_stream, jetstream, stream_name
from xcep.xpush import XPushMachine

FILTERS = {1: "/t[@p > 5]", 2: "/t[v = 1]"}


def document(i: int) -> bytes:
    return f'<t p="{i * 7 % 11}"><v>{i % 3}</v></t>'.encode()


async def _publish(url: str, bodies: list[bytes]) -> None:
    connection, js = await jetstream(url)
    await ensure_stream(js, stream_name("docs"), ["docs"])
    for body in bodies:
        await js.publish("docs", body)
    await connection.close()


def _rows(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for part in sorted(out.glob("*.json"))
        for line in part.read_text().splitlines()
    ]


def test_a_stream_from_nats_restarts_where_it_stopped(tmp_path):
    (tmp_path / "filters.txt").write_text("".join(f"{k} {v}\n" for k, v in FILTERS.items()))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with local_server(tmp_path / "jetstream") as url:
        command = [
            sys.executable, "-m", "xcep", "spark", "filter", "--filters",
            str(tmp_path / "filters.txt"), "--stream", "--checkpoint", str(checkpoint),
            "--output", str(out), "--max-files-per-trigger", "10", "--master", "local[2]",
            f"{url}/docs",
        ]  # fmt: skip
        asyncio.run(_publish(url, [document(i) for i in range(20)]))
        subprocess.run(command, check=True, capture_output=True, timeout=300)
        assert len(_rows(out)) == 20
        # more messages; the driver killed with -9 inside the run that reads them
        asyncio.run(_publish(url, [document(i) for i in range(20, 200)]))
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(_rows(out)) < 40 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.2)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        subprocess.run(command, check=True, capture_output=True, timeout=300)  # restarted
        rows = _rows(out)
    ids = [row["doc_id"] for row in rows]
    assert len(ids) == len(set(ids)) == 200  # every message once
    for row in rows:
        seq = int(row["doc_id"].rsplit("#", 1)[1])
        body = document(seq - 1)
        machine = XPushMachine(FILTERS)
        ((_, want),) = list(machine.run(EventStream([io.BytesIO(body)]).batches()))
        assert row["matches"] == want, row
