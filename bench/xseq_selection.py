"""XSeq sequence patterns under the selection policies, end to end (issue 21).

The stock patterns of ``bench/xseq.py`` (S2 decreasing, S1 V shape, S3 W
shape, counted) and the seed's Q16 (V shapes per company, a row per match:
the start's price and the ends of its falling and rising runs) under
``--selection maximal`` and ``--selection skip-past-last``, on the Figure 3
stock stream (``bench.xseq.transactions``) at 1 MB and 10 MB. Each row is
``xcep xseq --selection P QUERY FILE`` in a fresh process writing its rows to
a file, beside the same command with ``--automaton`` (the pushdown
automaton: where every policy but ``all`` ran before the flat-sequence
runtime took them); the rows of the two are compared. xcep: median of
``repeat`` runs; the automaton once, and not where its time at 1 MB scaled to
the size would pass ``LIMIT_S``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import write_results
from bench.xseq import SEQUENCE_QUERIES, transactions
from bench.xseq_paths import isolated

LIMIT_S = 60.0
Q16 = (
    "return $Z@price, last($X)@price, last($Y)@price from /stocks /$Z (\\ $X)* (\\ $Y)* "
    "where $X@price < prev($X)@price and $Y@price > prev($Y)@price "
    "and first($X)@price < $Z@price and last($Y)@price > $Z@price "
    "partition by /stocks/transaction@company"
)
QUERIES = {**SEQUENCE_QUERIES, "Q16 V shape rows": Q16}
POLICIES = ("maximal", "skip-past-last")


def _command(query: str, path: Path, policy: str, automaton: bool) -> list[str]:
    command = [sys.executable, "-m", "xcep", "xseq", "--selection", policy, query, str(path)]
    return command + (["--automaton"] if automaton else [])


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    sizes = [100_000, 1_000_000] if quick else [1_000_000, 10_000_000]
    rows: list[dict] = []
    first: dict = {}  # (query, policy) -> the automaton's seconds per byte at the first size
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for size in sizes:
            path = transactions(work / f"stocks-{size}.xml", size)
            for name, query in QUERIES.items():
                for policy in POLICIES:
                    outs = [str(work / "fast.jsonl"), str(work / "automaton.jsonl")]
                    runs = [
                        isolated(_command(query, path, policy, False), outs[0])
                        for _ in range(max(1, repeat))
                    ]
                    fast = statistics.median(r["seconds"] for r in runs)
                    per_byte = first.get((name, policy))
                    automaton = agrees = None
                    if per_byte is None or per_byte * size <= LIMIT_S:
                        slow = isolated(_command(query, path, policy, True), outs[1])
                        automaton = slow["seconds"]
                        first.setdefault((name, policy), automaton / size)
                        agrees = Path(outs[0]).read_text() == Path(outs[1]).read_text()
                    row = {
                        "query": name,
                        "policy": policy,
                        "bytes": size,
                        "xcep_s": fast,
                        "mb_per_s": size / 1e6 / fast,
                        "automaton_s": automaton,
                        "speedup": None if automaton is None else automaton / fast,
                        "rows": runs[0]["rows"],
                        "agrees": agrees,
                    }
                    rows.append(row)
                    print(row, flush=True)
                    write_results("xseq-selection", rows, {"repeat": repeat})
    print(table(rows))
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| query | policy | bytes | xcep s | MB/s | automaton s | × automaton | rows | same rows |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        slow = "–" if r["automaton_s"] is None else f"{r['automaton_s']:.2f}"
        ratio = "–" if r["speedup"] is None else f"{r['speedup']:.1f}×"
        same = "–" if r["agrees"] is None else ("yes" if r["agrees"] else "NO")
        lines.append(
            f"| {r['query']} | {r['policy']} | {r['bytes']:,} | {r['xcep_s']:.2f} | "
            f"{r['mb_per_s']:.1f} | {slow} | {ratio} | {r['rows']:,} | {same} |"
        )
    return "\n".join(lines)
