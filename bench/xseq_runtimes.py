"""XSeq's runtimes on the same queries, end to end (issue 21): is a fast path still faster
than the compiled automaton, and how far is the Python automaton behind?

Each case is one query run in fresh ``xcep xseq --runtime R QUERY FILE`` processes for
``auto`` (the flat-sequence runtime where it serves the query, else the compiled
automaton), ``compiled`` (the compiled automaton), ``path`` (the path runtime: node
selections only) and ``automaton`` (the Python automaton: only on the smaller input,
where it is slow), writing rows to a file; the rows
of every runtime are checked equal. Inputs: the Figure 3 stock stream (``transactions``:
``<transaction company price buyer date/>``, 5 companies, 97 buyers) for the seed's
sequence patterns S1-S5 under ``partition by`` and the same patterns' shapes without it,
and XMark for node selections and a ``partition by //``; and the xseq-paths family
(``bench/xseq_paths.py``: node selections with attribute, child-value, ``or``/``not``
predicates, attributes, elements, rows and aggregates as output, on its flat stock stream
of 20 MB and on XMark). Knobs: the pattern's length
(S2 one Kleene-* … S3 four), a condition at every iteration or per match (S5), the
output (a count per partition, or a row per match).
"""

from __future__ import annotations

import gzip
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import write_results
from bench.xseq import CEP_QUERIES, SEQUENCE_QUERIES, transactions
from bench.xseq_paths import CASES as PATH_CASES
from bench.xseq_paths import DATA, isolated, stock_stream

_STOCKS = {**SEQUENCE_QUERIES, **CEP_QUERIES}
# name -> (input, query)
CASES = {
    **{name: ("stocks", query) for name, query in _STOCKS.items()},
    "S2 rows, no partition": (
        "stocks",
        "return $Z@date, last($X)@price from /stocks /$Z (\\ $X)* "
        "where $X@price < prev($X)@price and first($X)@price < $Z@price and $Z@company = 'ACME'",
    ),
    "node selection, predicate": ("xmark", "//item[@featured = 'yes']/name"),
    "node selection, elements": ("xmark", "//open_auction/bidder/increase"),
    "Q14 partition by //": (
        "xmark",
        "return $X@id, count($X) from // $X partition by //item@featured where tag($X) = 'item'",
    ),
    # the xseq-paths family: node selections with predicates (its flat stream, 20 MB)
    **{
        f"paths: {name}": ("flat" if source == "stocks" else "xmark", query)
        for name, (source, query, _) in PATH_CASES.items()
    },
}
SMALL = ("stocks", "flat")  # (where the Python automaton reads a tenth)
SIZES = {"automaton": ("small",), "compiled": ("full", "small")}
RUNTIMES = ("auto", "compiled", "path", "automaton")


def _runs_on(query: str, runtime: str) -> bool:
    """Whether a case runs on ``runtime``: the path runtime takes node selections only."""
    return runtime != "path" or not query.lstrip().startswith("return")


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        inputs = {"stocks": transactions(work / "stocks.xml", 2_000_000 if quick else 20_000_000)}
        xmark = work / "xmark.xml"
        name = "xmark-f0.1.xml.gz" if quick else "xmark-f1.xml.gz"
        with gzip.open(DATA / "xmark" / name) as src, xmark.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        inputs["xmark"] = xmark
        elements = 16_000 if quick else 160_000
        inputs["flat"] = stock_stream(work / "flat.xml", elements)
        # the Python automaton on a tenth of the stock streams (it is 10-100x slower there)
        tenth = inputs["stocks"].stat().st_size // 10
        smalls = {
            "stocks": transactions(work / "stocks-small.xml", tenth),
            "flat": stock_stream(work / "flat-small.xml", elements // 10),
        }
        out = str(work / "out.jsonl")
        xcep = [sys.executable, "-m", "xcep", "xseq"]
        times: dict = {}
        counts: dict = {}
        for round_ in range(repeat):
            for case, (source, query) in CASES.items():
                for runtime in filter(lambda r: _runs_on(query, r), RUNTIMES):
                    sizes = ("full",)
                    if source in SMALL:  # (the compiled automaton: on both, for the ratio)
                        sizes = SIZES.get(runtime, sizes)
                    for size in sizes:
                        file = smalls[source] if size == "small" else inputs[source]
                        found = isolated([*xcep, "--runtime", runtime, query, str(file)], out)
                        key = (case, runtime, size)
                        times.setdefault(key, []).append(found["seconds"])
                        counts[key] = found["rows"]
            print(f"round {round_ + 1}/{repeat} done", flush=True)
        for case, (source, query) in CASES.items():
            row = {"case": case, "query": query, "bytes": inputs[source].stat().st_size}
            for runtime in RUNTIMES:
                for size in ("full", "small"):
                    if (case, runtime, size) in times:
                        row[f"{runtime}_{size}_s"] = statistics.median(times[(case, runtime, size)])
            small_counts = {counts[k] for k in counts if k[0] == case and k[2] == "small"}
            full_counts = {counts[k] for k in counts if k[0] == case and k[2] == "full"}
            assert len(small_counts) <= 1 and len(full_counts) == 1, (case, counts)
            row["rows"] = full_counts.pop()
            row["compiled_vs_auto"] = row["auto_full_s"] / row["compiled_full_s"]
            if "path_full_s" in row:
                row["compiled_vs_path"] = row["path_full_s"] / row["compiled_full_s"]
            slow = "small" if source in SMALL else "full"
            row["compiled_vs_automaton"] = row[f"automaton_{slow}_s"] / row[f"compiled_{slow}_s"]
            rows.append(row)
            print(
                f"{case:30} auto {row['auto_full_s']:6.2f} s"
                f"  compiled {row['compiled_full_s']:6.2f} s"
                f"  (auto/compiled {row['compiled_vs_auto']:5.2f})  Python automaton x"
                f"{row['compiled_vs_automaton']:5.1f} slower  rows {row['rows']:>7}",
                flush=True,
            )
    write_results("xseq-runtimes", rows)
    print(readme_table(rows))
    return rows


def readme_table(rows: list[dict]) -> str:
    lines = [
        "| case | MB | auto s | compiled s | path runtime s | auto ÷ compiled "
        "| path ÷ compiled | Python automaton ÷ compiled | rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        path = f"{r['path_full_s']:.2f}" if "path_full_s" in r else "–"
        vs_path = f"{r['compiled_vs_path']:.2f}" if "compiled_vs_path" in r else "–"
        lines.append(
            f"| {r['case']} | {r['bytes'] / 1e6:.0f} | {r['auto_full_s']:.2f} | "
            f"{r['compiled_full_s']:.2f} | {path} | {r['compiled_vs_auto']:.2f} | {vs_path} | "
            f"{r['compiled_vs_automaton']:.1f} | {r['rows']:,} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run(repeat=1, quick=True)
