"""XQuery windows and the pattern clause over a stream (issue 23): ``xcep xquery`` as a
user runs it, on a stock feed of 10 MB and 100 MB (``XCEP_BENCH_1GB=1`` adds 1 GB),
beside Saxon-HE (``saxonche``) and BaseX (when installed), which load the whole
document first, in the same run.

Each row: one query over one file, in a fresh process writing its results to
a file: wall time, MB/s, peak RSS, result lines; each peer's time to count the
same results (``count(QUERY)``, Saxon timed inside its process, BaseX's wall time
less its JVM start-up), or its failure (out of memory, past the time limit).
The queries read ``$input/stocks/transaction`` (bench.generators.stock_stream):
a tumbling window per run of one company, a sliding window of three with a
``where``, a tumbling window with ``previous``/``next`` (price drops), and the
seed's pattern clause (a rise then a fall: no peer has it, so xcep on whole
documents — the same query over an absolute path — stands beside it, up to
100 MB).
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.generators import stock_stream
from bench.harness import write_results
from bench.peers import PeerTimeout, basex_count, saxon_count

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
    "pattern: rise then fall": (
        "pattern $p tumbling maximal in $input/stocks/transaction $up $down using "
        "$up as element(transaction)+ pprev $a pcur $b when empty($a) or $b/price > $a/price "
        "$down as element(transaction)+ pprev $c pcur $d when $d/price < $c/price "
        'return <swing from="{$p[1]/@id}" n="{count($p)}"/>'
    ),
}
PATTERN = "pattern"  # queries no peer has (the seed's pattern clause)
SIZES = [10, 100]
TIMEOUT = 300.0
LARGE_TIMEOUT = 180.0  # a peer's limit on the 1 GB feed (it loads the whole document)


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
                if name.startswith(PATTERN) and mb <= 100:  # xcep itself on whole documents
                    whole = query.replace("$input/stocks", "(/stocks)")
                    done = _isolated(_xcep, {"query": whole, "path": str(path)})
                    row["whole_s"], row["whole_rss_mb"] = done["seconds"], done["peak_rss_mb"]
                elif not name.startswith(PATTERN):  # (at 1 GB to see where they give up)
                    theirs = query.replace("$input", ".")  # the peers' context item
                    limit = TIMEOUT if mb <= 100 else LARGE_TIMEOUT
                    for peer, count_of in peers().items():
                        try:
                            count, seconds = count_of(f"count({theirs})", path, limit)
                            row[f"{peer}_s"], row[f"{peer}_count"] = seconds, count
                            if count != row["lines"]:  # (shown in the table: never seen)
                                row[f"{peer}_error"] = f"{count:,} results, not {row['lines']:,}"
                                del row[f"{peer}_s"]
                        except (PeerTimeout, RuntimeError) as exc:
                            row[f"{peer}_error"] = _failure(exc, limit)
                rows.append(row)
                write_results("xquery-stream", rows)
                print(
                    f"{name:26} {size:7.1f} MB {row['seconds']:7.2f} s {row['mb_per_s']:6.2f} MB/s"
                    f" RSS {row['peak_rss_mb']:6.0f} MB lines {row['lines']:,}; "
                    + "; ".join(f"{peer} {_peer_cell(row, peer)}" for peer in ("saxon", "basex")),
                    flush=True,
                )
            path.unlink()
    print(markdown(rows))
    return rows


def peers() -> dict:
    """The peers there are here: Saxon-HE always (a dependency of the bench), BaseX
    when installed."""
    found = {"saxon": saxon_count}
    if shutil.which("basex"):
        found["basex"] = basex_count
    return found


def _failure(exc: Exception, limit: float) -> str:
    if isinstance(exc, PeerTimeout):
        return f"past {limit:.0f} s"
    text = str(exc)
    if "OutOfMemory" in text or "memory" in text.lower():
        return "out of memory"
    return text[:80] or type(exc).__name__


def _peer_cell(row: dict, peer: str) -> str:
    if f"{peer}_s" in row:
        return f"{row[f'{peer}_s']:.2f} s"
    return row.get(f"{peer}_error", "–")


def markdown(rows: list[dict]) -> str:
    lines = [
        "| query | input | xcep | MB/s | peak RSS | results | Saxon-HE (count) | BaseX (count) "
        "| xcep, whole document |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        whole = f"{r['whole_s']:.2f} s, {r['whole_rss_mb']:,.0f} MB" if "whole_s" in r else "–"
        lines.append(
            f"| {r['query']} | {r['mb']:,.0f} MB | {r['seconds']:.2f} s | {r['mb_per_s']:.2f} "
            f"| {r['peak_rss_mb']:,.0f} MB | {r['lines']:,} | {_peer_cell(r, 'saxon')} "
            f"| {_peer_cell(r, 'basex')} | {whole} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run()
