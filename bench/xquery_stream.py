"""XQuery windows over a stream (issue 23): ``xcep xquery`` as a user runs it, on a stock
feed of 10 MB and 100 MB (``XCEP_BENCH_1GB=1`` adds 1 GB), beside Saxon-HE
(``saxonche``, which builds the whole document first) in the same run.

Each row: one query over one file, in a fresh process writing its results to
a file: wall time, MB/s, peak RSS, result lines; Saxon's time to count the
same results (``count(QUERY)``, timed inside its process), or its failure.
The queries read ``$input/stocks/transaction`` (bench.generators.stock_stream):
a tumbling window per run of one company, a sliding window of three with a
``where``, and a tumbling window with ``previous``/``next`` (price drops).
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.generators import stock_stream
from bench.harness import write_results
from bench.peers import PeerTimeout, saxon_count

QUERIES = {
    "tumbling": (
        "for tumbling window $w in $input/stocks/transaction "
        "start $s when true() end $e next $n when $n/@company != $e/@company "
        'return <run company="{$s/@company}" n="{count($w)}"/>'
    ),
    "sliding, only end, where": (
        "for sliding window $w in $input/stocks/transaction "
        "start $s at $i when true() only end $e at $j when $j - $i eq 2 "
        "where $w[1]/@company = $w[3]/@company return string($s/@id)"
    ),
    "previous / next": (
        "for tumbling window $w in $input/stocks/transaction "
        "start $s previous $p when $s/@company = $p/@company "
        "end $e next $n when not($n/@company = $e/@company) "
        'return <same from="{$s/@id}" n="{count($w)}"/>'
    ),
}
SIZES = [10, 100]
TIMEOUT = 300.0


def _xcep(job: dict) -> dict:
    """In a fresh process: ``xcep xquery QUERY FILE``, its output to a file (counted)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        done = subprocess.run(
            [sys.executable, "-m", "xcep", "xquery", job["query"], job["path"]],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - start
        out.seek(0)
        lines = sum(1 for _ in out)
    if done.returncode:
        raise RuntimeError(done.stderr.strip())
    return {
        "seconds": seconds,
        "lines": lines,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _isolated(function, job: dict) -> dict:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, job).result()


def run(repeat: int = 1, quick: bool = False) -> list[dict]:
    sizes = [5] if quick else SIZES + ([1_000] if os.environ.get("XCEP_BENCH_1GB") else [])
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            path = stock_stream(Path(tmp) / f"stocks-{mb}.xml", mb)
            size = path.stat().st_size / 1e6
            for name, query in QUERIES.items():
                row = {"query": name, "mb": size}
                row.update(_isolated(_xcep, {"query": query, "path": str(path)}))
                row["mb_per_s"] = size / row["seconds"]
                if mb <= 100:
                    try:
                        theirs = query.replace("$input", ".")  # Saxon's context item
                        count, seconds = saxon_count(f"count({theirs})", path, TIMEOUT)
                        row["saxon_s"], row["saxon_count"] = seconds, count
                    except (PeerTimeout, RuntimeError) as exc:
                        row["saxon_error"] = str(exc)[:80] or type(exc).__name__
                rows.append(row)
                write_results("xquery-stream", rows)
                saxon = (
                    f"Saxon {row['saxon_s']:.2f} s ({row['saxon_count']})"
                    if "saxon_s" in row
                    else f"Saxon: {row.get('saxon_error', 'not run')}"
                )
                print(
                    f"{name:26} {size:7.1f} MB {row['seconds']:7.2f} s {row['mb_per_s']:6.2f} MB/s"
                    f" RSS {row['peak_rss_mb']:6.0f} MB lines {row['lines']:,}; {saxon}",
                    flush=True,
                )
            path.unlink()
    print(markdown(rows))
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| query | input | xcep | MB/s | peak RSS | results | Saxon-HE (count) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        saxon = f"{r['saxon_s']:.2f} s" if "saxon_s" in r else r.get("saxon_error", "–")
        lines.append(
            f"| {r['query']} | {r['mb']:,.0f} MB | {r['seconds']:.2f} s | {r['mb_per_s']:.2f} "
            f"| {r['peak_rss_mb']:,.0f} MB | {r['lines']:,} | {saxon} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run()
