"""XSeq peak memory over stream size (issue 21): flat from 10 MB to 1 GB.

The flat stock stream of ``xseq_paths.stock_stream`` at 10 MB, 100 MB and
1 GB (quick: 1, 10, 30 MB), and one query per runtime, each run as a user runs
it (a fresh ``xcep xseq`` process, rows to a file): node selection with a
predicate and a row of fields (the path runtime), falling runs per company
(the flat-sequence runtime), and a path the automaton runs. Reported: wall
time, MB/s and the process's peak RSS; "growth" is the peak at the largest
size over the peak at the smallest.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.harness import write_results
from bench.xseq_paths import isolated, stock_stream

SIZES_MB = (10, 100, 1000)
QUICK_SIZES_MB = (1, 10, 30)
BYTES_PER_ELEMENT = 124  # of stock_stream's transactions, about
QUERIES = {
    "path, predicate": "/stocks/transaction[@company = 'DAGM' and @price > 150]/@buyer",
    "path, row of fields": (
        "return $T@price, $T/note/text() from /stocks/$T where $T@company = 'IBM'"
    ),
    "sequence, falling runs": (
        "return $Z@price, last($Y)@price from /stocks /$Z (\\ $Y)* "
        "where $Y@price < prev($Y)@price and first($Y)@price < $Z@price * 0.9 "
        "partition by /stocks/transaction@company"
    ),
    "automaton, two fields compared": ("return $T@price from /stocks/$T where $T/note = $T/@buyer"),
}


def run(repeat: int = 1, quick: bool = False) -> list[dict]:
    sizes = QUICK_SIZES_MB if quick else SIZES_MB
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = str(work / "out.jsonl")
        for megabytes in sizes:
            data = stock_stream(work / "stocks.xml", megabytes * 1_000_000 // BYTES_PER_ELEMENT)
            size = data.stat().st_size
            for name, query in QUERIES.items():
                found = isolated([sys.executable, "-m", "xcep", "xseq", query, str(data)], out)
                row = {"query": name, "mb": size / 1e6, **found}
                row["mb_per_s"] = size / 1e6 / found["seconds"]
                rows.append(row)
                print(
                    f"{name:28} {size / 1e6:7.0f} MB {found['seconds']:7.2f} s "
                    f"{row['mb_per_s']:6.1f} MB/s  peak {found['peak_rss_mb']:6.0f} MB  "
                    f"rows {found['rows']}",
                    flush=True,
                )
            data.unlink()
    for name in QUERIES:
        mine = [r for r in rows if r["query"] == name]
        print(f"{name:28} growth {mine[-1]['peak_rss_mb'] / mine[0]['peak_rss_mb']:.2f}x")
    write_results("xseq-memory", rows)
    return rows


if __name__ == "__main__":
    run(quick=True)
