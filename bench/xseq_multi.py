"""Many XSeq queries at once (issue 4, the seed's §8 union of VPAs): 1 … 10,000
queries from a template family over XMark, in one automaton (``XSeqMultiEngine``)
against one automaton per query (``XSeqEngine`` each, one pass each), same run.

``python -m bench xseq-multi``. The family has six templates whose constants are
drawn from the document (so every query can match): a person by id, the items of a
region with a minimum quantity, open auctions above a current price, bidders above
an increase, falling closing prices under a bound (Kleene-*), and the count of the
elements of one name anywhere (``//$E`` with ``tag($E)``: descendant waiters, which
the transition cache serves; its hit ratio is reported). Both sides read
the same parsed event batches (parsing is not timed). One automaton per query is
timed on a sample of the queries (at most ``SAMPLE``, all templates alike) and
scaled linearly to the count: its cost is a sum over queries. The union's rows for
the sampled queries are checked equal to theirs.
"""

from __future__ import annotations

import random
import statistics
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.harness import log_log_plot, write_results
from xcep.events import EventStream
from xcep.xseq import XSeqEngine, XSeqMultiEngine

XMARK = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "xmark"
COUNTS = [1, 10, 100, 1_000, 10_000]
SAMPLE = 40


def family(document: Path, count: int, seed: int = 11) -> dict[str, str]:
    """``count`` queries of the six templates, round-robin, constants from the data."""
    root = ET.parse(document).getroot()
    persons = [p.get("id") for p in root.iter("person")]
    regions = [r.tag for r in root.find("regions")]
    currents = [float(c.text) for c in root.iter("current")]
    increases = [float(i.text) for i in root.iter("increase")]
    prices = [float(p.text) for p in root.iter("price")]
    keywords = {"from", "to", "where", "return", "and", "or", "by", "union", "intersect"}
    names = sorted({e.tag for e in root.iter()} - keywords)
    rnd = random.Random(seed)
    templates = [
        lambda: f"/site/people/person[@id = '{rnd.choice(persons)}']/name/text()",
        lambda: (
            f"/site/regions/{rnd.choice(regions)}/item[quantity >= {rnd.randint(1, 3)}]/name/text()"
        ),
        lambda: (
            "return $A@id, $A/current/text() from /site/open_auctions/$A "
            f"where $A/current/text() > {rnd.choice(currents)}"
        ),
        lambda: (
            "return $B/increase/text() from /site/open_auctions/open_auction/$B "
            f"where tag($B) = 'bidder' and $B/increase/text() > {rnd.choice(increases)}"
        ),
        lambda: (
            "return last($X)/price/text() from /site/closed_auctions/$Z (\\ $X)* "
            "where $X/price/text() < prev($X)/price/text() "
            f"and first($X)/price/text() < {rnd.choice(prices)}"
        ),
        lambda: f"return count($E) from //$E where tag($E) = '{rnd.choice(names)}'",
    ]
    return {f"q{i}": templates[i % len(templates)]() for i in range(count)}


def _timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def run(repeat: int = 3, quick: bool = False) -> None:
    document = XMARK / "xmark-f0.01.xml"
    batches = list(EventStream([document]).batches())
    counts = COUNTS[:4] if quick else COUNTS
    rows = []
    for count in counts:
        queries = family(document, count)
        compile_s, engine = _timed(lambda queries=queries: XSeqMultiEngine(queries))
        python = XSeqMultiEngine(queries, runtime="automaton")
        union, union_python = [], []
        for _ in range(repeat):  # (each run compiles the templates' runs: timed with it)
            seconds, found = _timed(lambda engine=engine: list(engine.run(batches)))
            union.append(seconds)
            seconds, on_python = _timed(lambda python=python: list(python.run(batches)))
            union_python.append(seconds)
        assert engine.not_compiled is None, engine.not_compiled
        key = lambda row: row[0]  # noqa: E731 (each query's rows in its order)
        assert sorted(found, key=key) == sorted(on_python, key=key), "rows differ"
        sample = list(queries)[: min(count, SAMPLE)]
        separate = []
        for _ in range(max(1, repeat if count <= 100 else 1)):
            seconds, alone = _timed(
                lambda sample=sample, queries=queries: {
                    qid: list(XSeqEngine(queries[qid]).run(batches)) for qid in sample
                }
            )
            separate.append(seconds)
        mine: dict = {}
        for qid, *row in found:
            mine.setdefault(qid, []).append(row)
        assert all(mine.get(qid, []) == alone[qid] for qid in sample), "rows differ"
        stats = engine.stats()["none"]
        cache = python.stats()["none"]["transition cache"]  # (the Python automaton's)
        union_s = statistics.median(union)
        separate_s = statistics.median(separate) * count / len(sample)
        rows.append(
            {
                "queries": count,
                "templates": stats["templates"],
                "states": stats["states"],
                "compile_s": compile_s,
                "union_s": union_s,
                "union_python_s": statistics.median(union_python),
                "separate_s": separate_s,
                "separate_sampled": len(sample) < count,
                "ratio": separate_s / union_s,
                "rows": len(found),
                "bytes": document.stat().st_size,
                "cache_hit_ratio": cache["hit ratio"],
                "cache_entries": cache["entries"],
            }
        )
        print(
            f"{count:>6} queries: union {union_s:.3f} s (Python automaton "
            f"{statistics.median(union_python):.3f} s), separate {separate_s:.2f} s"
            f"{' (est.)' if len(sample) < count else ''}, {separate_s / union_s:.1f}×, "
            f"{stats['templates']} templates, {stats['states']} states, {len(found)} rows, "
            f"transition cache {cache}",
            flush=True,
        )
    write_results("xseq-multi", rows)
    log_log_plot(
        "xseq-multi",
        {
            "one automaton (union, compiled)": ([(r["queries"], r["union_s"]) for r in rows], "-"),
            "one automaton (union, Python)": (
                [(r["queries"], r["union_python_s"]) for r in rows],
                ":",
            ),
            "one automaton per query": ([(r["queries"], r["separate_s"]) for r in rows], "--"),
        },
        "queries (XMark f0.01, 1.1 MB)",
        "XSeq: many queries in one automaton",
    )
    print(readme_table(rows))


def readme_table(rows: list[dict]) -> str:
    lines = [
        "| queries | templates | states | compile s | union s | union on the Python automaton s "
        "| separate s | separate ÷ union | rows | cache hit ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        est = " (est.)" if r["separate_sampled"] else ""
        lines.append(
            f"| {r['queries']:,} | {r['templates']:,} | {r['states']:,} | {r['compile_s']:.2f} "
            f"| {r['union_s']:.3f} | {r['union_python_s']:.3f} "
            f"| {r['separate_s']:.2f}{est} | {r['ratio']:.1f} "
            f"| {r['rows']:,} | {r['cache_hit_ratio'] or '–'} |"
        )
    return "\n".join(lines)
