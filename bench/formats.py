"""The same records as XML and as JSON Lines, end to end (issue 29).

100,000 records (`{"id", "user", "price", "tags": [...], "addr": {"city",
"zip"}}`), written as JSON Lines and as the XML documents that JSON maps to
(docs/events.md), each read by a fresh ``xcep`` process: ``events --stats``
(reading), ``events`` (reading and writing JSON Lines to a file) and
``filter`` with 2,000 subscriptions (answers to a file). Each command runs
``repeat`` times; the median is kept. Rates are per byte of each input and
per record; the ratios compare JSON with XML, and writing with reading.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import write_results

RECORDS = 100_000
QUICK_RECORDS = 10_000
FILTERS = 2_000


def records(n: int) -> list[dict]:
    rng = random.Random(1)
    return [
        {
            "id": i,
            "user": f"u{rng.randrange(5000)}",
            "price": round(rng.random() * 100, 2),
            "tags": ["a", "b"][: rng.randrange(3)],
            "addr": {"city": f"c{rng.randrange(300)}", "zip": rng.randrange(99999)},
        }
        for i in range(n)
    ]


def as_xml(record: dict) -> str:
    tags = "".join(f"<tags>{t}</tags>" for t in record["tags"])
    addr = record["addr"]
    return (
        f"<json><id>{record['id']}</id><user>{record['user']}</user>"
        f"<price>{record['price']}</price>{tags}"
        f"<addr><city>{addr['city']}</city><zip>{addr['zip']}</zip></addr></json>"
    )


def subscriptions(n: int) -> list[str]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.4:
            text = f"/json[user = 'u{rng.randrange(5000)}']"
        elif roll < 0.7:
            text = f"/json[addr/city = 'c{rng.randrange(300)}' and price > {rng.randrange(100)}]"
        else:
            text = f"/json[tags = 'a' and addr/zip < {rng.randrange(99999)}]"
        out.append(f"s{i}\t{text}\n")
    return out


def _seconds(command: list[str], out: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with out.open("w") as sink:
            subprocess.run(command, stdout=sink, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    n = QUICK_RECORDS if quick else RECORDS
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = records(n)
        inputs = {
            "JSON Lines": work / "records.jsonl",
            "XML": work / "records.xml",
        }
        inputs["JSON Lines"].write_text("".join(json.dumps(r) + "\n" for r in data))
        inputs["XML"].write_text("".join(as_xml(r) + "\n" for r in data))
        filters = work / "subscriptions.txt"
        filters.write_text("".join(subscriptions(FILTERS)))
        xcep = [sys.executable, "-m", "xcep"]
        commands = {
            "events --stats": ["events", "--stats"],
            "events (JSON Lines out)": ["events"],
            f"filter ({FILTERS:,} subscriptions)": ["filter", "--filters", str(filters)],
        }
        for name, args in commands.items():
            for fmt, path in inputs.items():
                seconds = _seconds([*xcep, *args, str(path)], work / "out", repeat)
                size = path.stat().st_size
                rows.append(
                    {
                        "command": name,
                        "format": fmt,
                        "records": n,
                        "bytes": size,
                        "seconds": seconds,
                        "mb_per_s": size / 1e6 / seconds,
                        "records_per_s": n / seconds,
                    }
                )
                print(f"{name:32} {fmt:11} {seconds:6.2f} s {size / 1e6 / seconds:6.2f} MB/s")
    write_results("formats", rows, {"records": n, "repeat": repeat})
    print(markdown(rows))
    return rows


def markdown(rows: list[dict]) -> str:
    by = {(r["command"], r["format"]): r for r in rows}
    lines = [
        "| command | JSON Lines | XML | JSON ÷ XML per byte | JSON ÷ XML per record |",
        "|---|---:|---:|---:|---:|",
    ]
    for command in dict.fromkeys(r["command"] for r in rows):
        j, x = by[(command, "JSON Lines")], by[(command, "XML")]
        lines.append(
            f"| `{command}` | {j['seconds']:.2f} s ({j['mb_per_s']:.1f} MB/s) "
            f"| {x['seconds']:.2f} s ({x['mb_per_s']:.1f} MB/s) "
            f"| {j['mb_per_s'] / x['mb_per_s']:.2f}× | {x['seconds'] / j['seconds']:.2f}× |"
        )
    for fmt in ("JSON Lines", "XML"):
        read, write = by[("events --stats", fmt)], by[("events (JSON Lines out)", fmt)]
        lines.append(
            f"\nWriting every event as JSON Lines ({fmt} input) takes "
            f"{write['seconds'] / read['seconds']:.1f}× the time of reading alone."
        )
    return "\n".join(lines)
