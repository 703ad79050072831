"""Streaming XSeq partitions: per-micro-batch cost of a key that never idles (issue 21).

One partition key (a stock symbol that trades all day) gets ``BATCHES``
micro-batches of ``PER_BATCH`` transaction records each. The processor that
Spark's ``transformWithStateInPandas`` calls for each micro-batch
(``XSeqPartition.advance``, the work done per key per micro-batch; Spark's own
scheduling cost per micro-batch is the same for both and left out) runs it two
ways, on the same query (falling runs, ``partition by`` the symbol):

- *saved run*: the state is the engine's run snapshot (``XSeqRun``); each
  micro-batch resumes it, feeds the new records, saves it;
- *replay* (before issue 21, and still for queries on the automaton): the state
  is every record so far; each micro-batch replays them all.

Reported: median milliseconds per micro-batch over the first and the last 100
micro-batches, the total, and the state's size at the end.
"""

from __future__ import annotations

import random
import statistics
import time

from bench.harness import write_results
from xcep.spark.streaming import PartitionProcessor, XSeqPartition

BATCHES, QUICK_BATCHES = 1000, 200
PER_BATCH = 20
QUERY = (
    "return $Z@price, last($Y)@price from /stocks /$Z (\\ $Y)* "
    "where $Y@price < prev($Y)@price partition by /stocks/transaction@company"
)


def records(count: int, seed: int = 3) -> list[bytes]:
    rng = random.Random(seed)
    price, out = 100.0, []
    for i in range(count):
        price = max(1.0, price + rng.uniform(-2, 2))
        out.append(
            f'<transaction company="ACME" price="{price:.2f}" buyer="b{i % 97}" '
            f'date="{i}"/>'.encode()
        )
    return out


def _run(mode: str, pieces: list[list[bytes]]) -> dict:
    processor = XSeqPartition(QUERY, "all", "/stocks/transaction", idle_timeout_ms=60_000)
    advance = (
        processor.advance
        if mode == "saved run"
        else lambda *a, **k: PartitionProcessor.advance(processor, *a, **k)
    )
    state, times, rows = None, [], 0
    for piece in pieces:
        start = time.perf_counter()
        out, state = advance("ACME", piece, state, final=False)
        times.append(time.perf_counter() - start)
        rows += len(out)
    size = len(state[2]) if mode == "saved run" else len(state[0])
    return {"times": times, "rows": rows, "state_bytes": size}


def run(repeat: int = 1, quick: bool = False) -> list[dict]:
    batches = QUICK_BATCHES if quick else BATCHES
    data = records(batches * PER_BATCH)
    pieces = [data[i : i + PER_BATCH] for i in range(0, len(data), PER_BATCH)]
    rows = []
    for mode in ("saved run", "replay"):
        found = _run(mode, pieces)
        times = found["times"]
        row = {
            "mode": mode,
            "micro_batches": batches,
            "records_per_batch": PER_BATCH,
            "first_100_ms": statistics.median(times[:100]) * 1000,
            "last_100_ms": statistics.median(times[-100:]) * 1000,
            "total_s": sum(times),
            "rows": found["rows"],
            "state_bytes": found["state_bytes"],
        }
        rows.append(row)
        print(
            f"{mode:10} first 100: {row['first_100_ms']:8.2f} ms  last 100: "
            f"{row['last_100_ms']:8.2f} ms  total {row['total_s']:7.2f} s  rows {row['rows']}"
            f"  state {row['state_bytes']:,} B",
            flush=True,
        )
    assert rows[0]["rows"] == rows[1]["rows"], "the two ways must give the same rows"
    write_results("streaming-state", rows)
    return rows


if __name__ == "__main__":
    run(quick=True)
