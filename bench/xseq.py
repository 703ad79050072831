"""XSeq benchmarks (seed §6.2 and §6.4), peers in the same run.

1. Throughput of the §6.4 queries Q1–Q4 on XMark f0.1 and f1, next to the
   event source alone: MB/s, events/s, engine/parse ratio, and linearity
   (MB/s at f1 over MB/s at f0.1).
2. Sequence queries on generated stock streams (10 KB … 50 MB): S2
   "decreasing runs", S1 "V shape", S3 "W shape" per company. xcep runs the
   XSeq query (on its flat sequence fast path, and again on the automaton,
   ``--automaton``); Saxon (saxonche) and BaseX run the same count written in
   XQuery 3.1, in the Figure 1 style (quantified expressions over
   following siblings, what the seed compared with) and, for S2, with the
   window clause and with recursive functions (what a careful XQuery user
   writes). Every contender must return the same count; a contender that
   passes ``TIMEOUT`` seconds on a size is not run on larger ones.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import RESULTS, Case, measure, summarise, write_results
from bench.peers import PeerTimeout, available
from xcep.events import EventStream
from xcep.xseq import XSeqEngine

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TIMEOUT = 60.0

XMARK_QUERIES = {
    "Q1 flat": "/site/people/person[@id = 'person0']/name/text()",
    "Q2 deep": "/site/closed_auctions/closed_auction/annotation/description/parlist/listitem/"
    "parlist/listitem/text/emph/keyword/text()",
    "Q3 recursive": "//parlist/listitem(/parlist/listitem)*",
    "Q4 monotonic": "return last($X)/price/text() from //closed_auctions/$Z (\\ $X)* "
    "where tag($X) = 'closed_auction' and $X/price/text() < prev($X)/price/text()",
}

_PARTITION = " partition by /stocks/transaction@company"
SEQUENCE_QUERIES = {
    "S2 decreasing": "return count($Z) from /stocks /$Z (\\ $X)* "
    "where $X@price < prev($X)@price and first($X)@price < $Z@price" + _PARTITION,
    "S1 V shape": "return count($Z) from /stocks /$Z (\\ $X)* (\\ $Y)* "
    "where $X@price < prev($X)@price and $Y@price > prev($Y)@price "
    "and first($X)@price < $Z@price and last($Y)@price > $Z@price" + _PARTITION,
    "S3 W shape": "return count($Z) from /stocks /$Z (\\ $A)* (\\ $B)* (\\ $C)* (\\ $D)* "
    "where $A@price < prev($A)@price and $B@price > prev($B)@price "
    "and $C@price < prev($C)@price and $D@price > prev($D)@price "
    "and first($A)@price < $Z@price and last($B)@price > last($A)@price "
    "and last($C)@price < last($B)@price and last($D)@price > last($C)@price" + _PARTITION,
}

# the seed's CEP queries 18 (active users) and 20 (item theft), in the shapes of the stock
# stream: runs of a company's transactions close in time that span long enough, and a
# buyer's trade followed by another's with no third buyer's in between (per company). S5
# has no window-clause form: each peer got one of two equivalent forms wrong on random
# streams (Saxon-HE 12 returned no window when the start condition reads an attribute,
# `start $t when $t/@buyer = 'b1'`; BaseX 9.7 none that ran to the sequence's end when every
# window started, `start $t when true()`, and was kept by its first item's buyer)
CEP_QUERIES = {
    "S4 active runs (Query 18)": "return count($Z) from /stocks /$Z (\\ $T)* "
    "where $T@date - prev($T)@date < 12 and last($T)@date - first($T)@date > 30" + _PARTITION,
    "S5 theft (Query 20)": "return count($T) from /stocks /$T (\\ $W)* \\ $X "
    "where $T@buyer = 'b1' and $X@buyer = 'b2' and $W@buyer != 'b3'" + _PARTITION,
}

_RUNS = """
declare function local:fall($p, $i) {
  if ($i < count($p) and $p[$i + 1] < $p[$i]) then 1 + local:fall($p, $i + 1) else 0 };
declare function local:rise($p, $i) {
  if ($i < count($p) and $p[$i + 1] > $p[$i]) then 1 + local:rise($p, $i + 1) else 0 };
"""
_PRICES = """
let $t := /stocks/transaction
return sum(for $c in distinct-values($t/@company)
  let $p := for $x in $t[@company = $c] return number($x/@price)
  return count({body}))
"""
_COLUMN = """
let $t := /stocks/transaction
return sum(for $c in distinct-values($t/@company)
  let $p := for $x in $t[@company = $c] return {value}
  return count({body}))
"""
_STEADY = """
declare function local:steady($p, $i) {
  if ($i < count($p) and $p[$i + 1] - $p[$i] < 12) then 1 + local:steady($p, $i + 1) else 0 };
"""
_ENDS = """
declare function local:ends($b, $j) {
  if ($j > count($b) or $b[$j] = 'b3') then 0
  else (if ($b[$j] = 'b2') then 1 else 0) + local:ends($b, $j + 1) };
"""
XQUERY = {
    ("S4 active runs (Query 18)", "window clause"): """sum(
  for $c in distinct-values(/stocks/transaction/@company)
  let $s := /stocks/transaction[@company = $c]
  for sliding window $w in $s start when true()
      end $e next $n when not(number($n/@date) - number($e/@date) < 12)
  return count($w[position() > 1][number(@date) - number($w[2]/@date) > 30]))""",
    ("S4 active runs (Query 18)", "recursive functions"): _STEADY
    + _COLUMN.format(
        value="number($x/@date)",
        body="for $i in 1 to count($p), $k in 1 to local:steady($p, $i) "
        "where $p[$i + $k] - $p[$i + 1] > 30 return 1",
    ),
    ("S5 theft (Query 20)", "recursive functions"): _ENDS
    + _COLUMN.format(
        value="string($x/@buyer)",
        body="for $i in index-of($p, 'b1'), $j in 1 to local:ends($p, $i + 1) return 1",
    ),
    ("S2 decreasing", "Figure 1 style"): """count(
  for $t1 in /stocks/transaction
  let $after := $t1/following-sibling::transaction[@company = $t1/@company]
  for $t4 at $k in $after
  where every $j in 1 to $k satisfies
    number($after[$j]/@price) <
      (if ($j = 1) then number($t1/@price) else number($after[$j - 1]/@price))
  return 1)""",
    ("S2 decreasing", "window clause"): """sum(
  for $c in distinct-values(/stocks/transaction/@company)
  let $s := /stocks/transaction[@company = $c]
  for sliding window $w in $s start when true()
      end $e next $n when not(number($n/@price) < number($e/@price))
  return count($w) - 1)""",
    ("S2 decreasing", "recursive functions"): _RUNS
    + _PRICES.format(body="for $i in 1 to count($p), $a in 1 to local:fall($p, $i) return 1"),
    ("S1 V shape", "recursive functions"): _RUNS
    + _PRICES.format(
        body="for $i in 1 to count($p), $a in 1 to local:fall($p, $i), "
        "$b in 1 to local:rise($p, $i + $a) where $p[$i + $a + $b] > $p[$i] return 1"
    ),
    ("S3 W shape", "recursive functions"): _RUNS
    + _PRICES.format(
        body="for $i in 1 to count($p), $a in 1 to local:fall($p, $i), "
        "$b in 1 to local:rise($p, $i + $a), $c in 1 to local:fall($p, $i + $a + $b), "
        "$d in 1 to local:rise($p, $i + $a + $b + $c) return 1"
    ),
}


def transactions(path: Path, size: int, seed: int = 7) -> Path:
    """A Figure 3 stream: <stocks><transaction company price buyer date/>…</stocks>."""
    rng = random.Random(seed)
    prices = {c: 100.0 for c in ("ACME", "BETA", "CORP", "DYNA", "EPSI")}
    parts, written, i = ["<stocks>\n"], 9, 0
    while written < size:
        company = rng.choice(list(prices))
        prices[company] = round(max(1.0, prices[company] * (1 + rng.gauss(0, 0.02))), 2)
        line = (
            f'<transaction company="{company}" price="{prices[company]}" buyer="b{i % 97}" '
            f'date="{i}"/>\n'
        )
        parts.append(line)
        written += len(line)
        i += 1
    parts.append("</stocks>\n")
    path.write_text("".join(parts))
    return path


def xcep_rows(query: str, path: Path, fast: bool = True) -> list:
    return list(XSeqEngine(query, fast=fast).run(EventStream([path]).batches()))


def xcep_count(query: str, path: Path, fast: bool = True) -> int:
    return int(sum(row[0] for row in xcep_rows(query, path, fast)))


def throughput(workdir: Path, repeat: int, quick: bool) -> list[dict]:
    inputs = {}
    for scale in ("0.1",) if quick else ("0.1", "1"):
        target = workdir / f"xmark-f{scale}.xml"
        with gzip.open(DATA / "xmark" / f"xmark-f{scale}.xml.gz") as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        inputs[f"XMark f{scale}"] = target
    cases = []
    for label, path in inputs.items():
        size = path.stat().st_size
        cases.append(
            Case("event source", label, lambda p=path: _events(p), size)  # the parse floor
        )
        cases.append(  # the foundation's source: expat with Python callbacks
            Case(EXPAT_SOURCE, label, lambda p=path: _events(p, compiled=False), size)
        )
        for name, query in XMARK_QUERIES.items():
            cases.append(Case(name, label, lambda q=query, p=path: _run_count(q, p), size))
    measure(cases, repeat)
    rows = [summarise(c) for c in cases]
    events = {c.input: c.count for c in cases if c.contender == "event source"}
    for row in rows:
        base, expat = (
            next(r for r in rows if r["input"] == row["input"] and r["contender"] == source)
            for source in ("event source", EXPAT_SOURCE)
        )
        row["events_per_s"] = events[row["input"]] / row["median_s"]
        row["of_source"] = base["median_s"] / row["median_s"]
        row["of_expat_source"] = expat["median_s"] / row["median_s"]
        source = row["contender"] in ("event source", EXPAT_SOURCE)
        row["results"] = None if source else row.pop("count")
    return rows


EXPAT_SOURCE = "event source, expat callbacks only"


def _events(path: Path, compiled: bool = True) -> int:
    return sum(len(batch) for batch in EventStream([path], compiled=compiled).batches())


def _run_count(query: str, path: Path) -> int:
    return sum(1 for _ in XSeqEngine(query).run(EventStream([path]).batches()))


def sequences(
    workdir: Path, quick: bool, queries: dict = SEQUENCE_QUERIES, results: str = "xseq-sequences"
) -> list[dict]:
    sizes = [10_000, 100_000, 1_000_000] if quick else [10_000, 100_000, 1_000_000, 10_000_000]
    sizes += [] if quick else [50_000_000]
    peers = available()
    rows, gave_up, last = [], set(), {}
    for size in sizes:
        path = transactions(workdir / f"stocks-{size}.xml", size)
        for name, query in queries.items():
            times, expected = [], None
            for _ in range(3):  # xcep's fast path: the median of three runs
                start = time.perf_counter()
                expected = xcep_count(query, path)
                times.append(time.perf_counter() - start)
            rows.append(_row(name, "xcep XSeq", size, statistics.median(times), expected, expected))
            if results != "xseq-sequences":  # end to end: fresh `xcep xseq` processes
                found, seconds = _xcep_process(query, path, workdir / "rows.jsonl")
                rows.append(_row(name, "xcep xseq (end to end)", size, seconds, found, expected))
            contender = "xcep automaton"  # the same query on the pushdown automaton
            before = last.get(contender + name)
            if before is not None and before[1] * size / before[0] > TIMEOUT:
                gave_up.add(contender + name)  # linear in size: it would pass the limit
                rows.append(_row(name, contender, size, None, None, expected))
            elif contender + name not in gave_up:
                start = time.perf_counter()
                found = xcep_count(query, path, fast=False)
                seconds = time.perf_counter() - start
                last[contender + name] = (size, seconds)
                rows.append(_row(name, contender, size, seconds, found, expected))
            for (qname, style), xquery in XQUERY.items():
                if qname != name:
                    continue
                for peer, count in peers.items():
                    contender = f"{peer} ({style})"
                    if contender + name in gave_up:
                        continue
                    try:
                        found, seconds = count(xquery, path, TIMEOUT)
                    except PeerTimeout:
                        found, seconds = None, None
                        print(f"{contender} {name} {size:,}: over {TIMEOUT:.0f} s")
                    except Exception as error:
                        found, seconds = None, None
                        print(f"{contender} {name} {size:,}: {error}")
                    rows.append(_row(name, contender, size, seconds, found, expected))
                    if seconds is None:
                        gave_up.add(contender + name)
            print(f"{size:>11,} bytes: {name} done", flush=True)
            write_results(results, rows, {"timeout_s": TIMEOUT})
    return rows


def _xcep_process(query: str, path: Path, out: Path) -> tuple:
    """The count of ``xcep xseq QUERY PATH`` in fresh processes, rows to a file (the median
    of three runs): (count, seconds)."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        with out.open("w") as sink:
            subprocess.run(
                [sys.executable, "-m", "xcep", "xseq", query, str(path)], stdout=sink, check=True
            )
        times.append(time.perf_counter() - start)
    count = sum(json.loads(line)[0] for line in out.read_text().splitlines())
    return count, statistics.median(times)


def run_cep(repeat: int = 3, quick: bool = False) -> None:
    """The seed's Query 18 and 20 shapes on the stock stream (``python -m bench xseq-cep``)."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = sequences(Path(tmp), quick, CEP_QUERIES, "xseq-cep")
        print(sequence_table(rows))


def _row(query, contender, size, seconds, found, expected) -> dict:
    return {
        "query": query,
        "contender": contender,
        "bytes": size,
        "seconds": seconds,  # None: over the time limit, or failed
        "mb_per_s": size / 1e6 / seconds if seconds else None,
        "count": found,
        "agrees": found == expected,
    }


def run(repeat: int = 3, quick: bool = False, parts: str = "throughput,sequences") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "throughput" in parts:
            rows = throughput(work, repeat, quick)
            write_results("xseq-throughput", rows, {"repeat": repeat})
            print(throughput_table(rows))
        if "sequences" not in parts:
            return
        sequence_rows = sequences(work, quick)
        print(sequence_table(sequence_rows))
        plot_sequences(sequence_rows)


def throughput_table(rows: list[dict]) -> str:
    lines = [
        "| input | contender | median s | MB/s | events/s | × event source | × expat-only source |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['input']} | {r['contender']} | {r['median_s']:.2f} | {r['mb_per_s']:.1f} | "
            f"{r['events_per_s']:,.0f} | {r['of_source']:.2f} | "
            f"{r.get('of_expat_source', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def sequence_table(rows: list[dict]) -> str:
    lines = [
        "| query | bytes | contender | s | xcep speed-up | count agrees |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = next(
            x
            for x in rows
            if x["query"] == r["query"]
            and x["bytes"] == r["bytes"]
            and x["contender"] == "xcep XSeq"
        )
        if r["seconds"] is None:
            lines.append(
                f"| {r['query']} | {r['bytes']:,} | {r['contender']} | > {TIMEOUT:.0f} | "
                f"> {TIMEOUT / ours['seconds']:.0f} | – |"
            )
            continue
        lines.append(
            f"| {r['query']} | {r['bytes']:,} | {r['contender']} | {r['seconds']:.3f} | "
            f"{r['seconds'] / ours['seconds']:.2f} | {'yes' if r['agrees'] else 'NO'} |"
        )
    return "\n".join(lines)


def plot_sequences(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = list(dict.fromkeys(r["query"] for r in rows))
    fig, axes = plt.subplots(1, len(queries), figsize=(5 * len(queries), 4), squeeze=False)
    for ax, query in zip(axes[0], queries, strict=True):
        for contender in dict.fromkeys(r["contender"] for r in rows if r["query"] == query):
            mine = [
                r
                for r in rows
                if r["query"] == query and r["contender"] == contender and r["seconds"]
            ]
            ax.loglog(
                [r["bytes"] for r in mine], [r["seconds"] for r in mine], "o-", label=contender
            )
        ax.set_title(query)
        ax.set_xlabel("input bytes")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "xseq-sequences.png", dpi=110)
    plt.close(fig)


def readme_tables() -> str:
    """The markdown tables of bench/README.md, from the saved results."""
    import json

    throughput_rows = json.loads((RESULTS / "xseq-throughput.json").read_text())["results"]
    rows = json.loads((RESULTS / "xseq-sequences.json").read_text())["results"]
    out = [throughput_table(throughput_rows), ""]
    sizes = sorted({r["bytes"] for r in rows})
    for query in dict.fromkeys(r["query"] for r in rows):
        peers = [
            c
            for c in dict.fromkeys(r["contender"] for r in rows if r["query"] == query)
            if c != "xcep XSeq"
        ]
        out += [
            f"**{query}** — peer seconds ÷ xcep seconds (> 1: xcep is faster; "
            f"> N: the peer passed {TIMEOUT:.0f} s and was not run on larger inputs)",
            "",
            "| bytes | xcep s | xcep MB/s | " + " | ".join(peers) + " |",
            "|---|---|---|" + "---|" * len(peers),
        ]
        for size in sizes:
            mine = [r for r in rows if r["query"] == query and r["bytes"] == size]
            ours = next((r for r in mine if r["contender"] == "xcep XSeq"), None)
            if ours is None:
                continue
            cells = []
            for peer in peers:
                found = next((r for r in mine if r["contender"] == peer), None)
                if found is None:
                    cells.append("–")
                elif found["seconds"] is None:
                    cells.append(f"> {TIMEOUT / ours['seconds']:.0f}")
                else:
                    agree = "" if found["agrees"] else " (count differs!)"
                    cells.append(f"{found['seconds'] / ours['seconds']:.2f}{agree}")
            out.append(
                f"| {size:,} | {ours['seconds']:.3f} | {ours['mb_per_s']:.2f} | "
                + " | ".join(cells)
                + " |"
            )
        out.append("")
    return "\n".join(out)
