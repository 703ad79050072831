"""The seed's Table 3 again: pattern A+B+C, sliding maximal, over flat sequences.

``python -m bench xquery``: xcep's pattern clause against the same query
written with the XQuery window clause — the seed's §3.3 translation (one
window per pattern variable, joined on positions) and the best single-window
translation found — on xcep, Saxon (saxonche) and BaseX, in one run, on the
same files.  Every contender must find the same number of instances.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import log_log_plot, write_results
from bench.peers import PeerTimeout, available, count_in_child

SIZES = [50, 100, 500, 1_000, 5_000, 10_000, 100_000, 1_000_000]
QUICK_SIZES = [50, 500, 5_000]
TIMEOUT = 120.0

PATTERN = """count(
pattern $p sliding maximal in /s/* $a $b $c using
  $a as element(e)+ pcur $x when $x/@t eq 'A'
  $b as element(e)+ pcur $y when $y/@t eq 'B'
  $c as element(e) pcur $z when $z/@t eq 'C'
return 1)"""

# §3.3: a window per variable, joined on positions.  The A window starts only at
# the first A of a run, so that it finds what sliding maximal finds.
WINDOW_JOIN = """count(
for sliding window $wa in /s/*
  start $ax previous $apv when $ax/@t eq 'A' and not($apv/@t eq 'A')
  end at $aq next $ay when not($ay/@t eq 'A')
return
  for sliding window $wb in /s/*
    start $bx at $bp when $bx/@t eq 'B' and $bp eq $aq + 1
    end at $bq next $by when not($by/@t eq 'B')
  return
    for sliding window $wc in /s/*
      start $cx at $cp when $cx/@t eq 'C' and $cp eq $bq + 1
      end at $cq when true()
    return 1)"""

# the best single window: from the first A of a run to the next C, checked as a whole
SINGLE_WINDOW = """count(
for sliding window $w in /s/*
  start $s previous $p when $s/@t eq 'A' and not($p/@t eq 'A')
  only end $e when $e/@t eq 'C'
where matches(string-join($w/@t, ''), '^A+B+C$')
return 1)"""

QUERIES = {"pattern": PATTERN, "window join": WINDOW_JOIN, "single window": SINGLE_WINDOW}


def sequence(n: int, seed: int = 3) -> list[str]:
    """Runs of 1-3 A, 1-3 B, then (80 %) one C."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        out += ["A"] * rng.randint(1, 3) + ["B"] * rng.randint(1, 3)
        if rng.random() < 0.8:
            out.append("C")
    return out[:n]


def write_sequence(workdir: Path, n: int) -> Path:
    path = workdir / f"seq-{n}.xml"
    if not path.exists():
        with open(path, "w") as out:
            out.write("<s>")
            out.writelines(f'<e t="{t}"/>' for t in sequence(n))
            out.write("</s>")
    return path


def xcep_count(query: str, path: Path, timeout: float) -> tuple[int, float]:
    """xcep in a child process (so that a timeout can stop it): count, seconds in-process."""
    return count_in_child(["bench.xquery"], query, path, timeout)


def _count_here(query_file: str, xml: str) -> None:
    from xcep import xquery

    query = Path(query_file).read_text()
    start = time.perf_counter()
    count = int(xquery.compile(query).evaluate([xml])[0])
    print(count, f"{time.perf_counter() - start:.6f}")


def run(repeat: int = 3, quick: bool = False) -> None:
    peers = available()
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    given_up: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = write_sequence(Path(tmp), n)
            expected = None
            for style, query in QUERIES.items():
                contenders = {"xcep": None, **peers}
                for engine, peer in contenders.items():
                    if (engine, style) in given_up or (peer and style == "pattern"):
                        continue  # the pattern clause is xcep's own
                    runs = repeat if n <= 100_000 else 1
                    row = _measure(engine, peer, style, query, path, n, runs)
                    if row["seconds"] is None:
                        given_up.add((engine, style))
                    if expected is None and row["count"] is not None:
                        expected = row["count"]
                    row["agrees"] = row["count"] is None or row["count"] == expected
                    rows.append(row)
                    print(
                        f"n={n:>9,} {engine:>6} {style:<13} "
                        + (f"{row['seconds']:.4f}s" if row["seconds"] is not None else "timeout")
                        + f" count={row['count']}"
                    )
    meta = {"timeout_s": TIMEOUT, "queries": QUERIES}
    write_results("xquery-table3", rows, meta)
    plot(rows)
    print(readme_table(rows))


def _measure(engine, peer, style, query, path, n, runs) -> dict:
    seconds, count = [], None
    for _ in range(runs):
        try:
            count, took = (peer or xcep_count)(query, path, TIMEOUT)
        except PeerTimeout:
            seconds.append(None)
            break
        seconds.append(took)
        if took > 10:  # long runs are measured once
            break
    ok = [s for s in seconds if s is not None]
    median = statistics.median(ok) if ok and len(ok) == len(seconds) else None
    return {"items": n, "engine": engine, "style": style, "seconds": median, "count": count}


def _cell(rows, n, engine, style) -> dict | None:
    return next(
        (r for r in rows if r["items"] == n and r["engine"] == engine and r["style"] == style), None
    )


def readme_table(rows: list[dict]) -> str:
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    columns = [(e, s) for s in QUERIES for e in engines if any(_cell(rows, n, e, s) for n in SIZES)]
    head = " | ".join(f"{e} {s}" for e, s in columns)
    out = [
        "Seconds (median; parse + query, JVM start-up excluded); '>' = passed the "
        f"{TIMEOUT:.0f} s limit, '–' = not run after a timeout.",
        "",
        f"| items | {head} |",
        "|---|" + "---|" * len(columns),
    ]
    for n in sorted({r["items"] for r in rows}):
        cells = []
        for engine, style in columns:
            row = _cell(rows, n, engine, style)
            if row is None:
                cells.append("–")
            elif row["seconds"] is None:
                cells.append(f"> {TIMEOUT:.0f}")
            else:
                flag = "" if row["agrees"] else " (count differs!)"
                cells.append(f"{row['seconds']:.3f}{flag}")
        out.append(f"| {n:,} | " + " | ".join(cells) + " |")
    ours = {
        r["items"]: r["seconds"] for r in rows if r["engine"] == "xcep" and r["style"] == "pattern"
    }
    out.append("")
    if 10_000 in ours:
        out.append("At 10,000 items, other ÷ xcep pattern clause:")
        out.append("")
        for engine, style in columns:
            row = _cell(rows, 10_000, engine, style)
            if row is None or (engine, style) == ("xcep", "pattern"):
                continue
            ratio = (
                f"> {TIMEOUT / ours[10_000]:.0f}"
                if row["seconds"] is None
                else f"{row['seconds'] / ours[10_000]:.1f}"
            )
            out.append(f"- {engine} {style}: {ratio}×")
    if 10_000 in ours and 1_000_000 in ours:
        per_item = [ours[n] / n for n in (10_000, 100_000, 1_000_000) if n in ours]
        deviation = max(per_item) / min(per_item) - 1
        out.append(
            "- xcep pattern, seconds per item from 10,000 to 1,000,000 items: "
            + ", ".join(f"{p * 1e6:.1f} µs" for p in per_item)
            + f" (largest deviation from linear: {deviation:.0%})"
        )
    return "\n".join(out)


def plot(rows: list[dict]) -> None:
    lines = {
        f"{engine} {style}": (
            [
                (r["items"], r["seconds"])
                for r in rows
                if r["engine"] == engine and r["style"] == style and r["seconds"]
            ],
            "-",
        )
        for engine, style in dict.fromkeys((r["engine"], r["style"]) for r in rows)
    }
    log_log_plot(
        "xquery-table3", lines, "items in the sequence", "A+B+C, sliding maximal (seed Table 3)"
    )


if __name__ == "__main__":
    _count_here(*sys.argv[1:3])
