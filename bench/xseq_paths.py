"""XSeq node selection with predicates, end to end, against lxml iterparse (issue 21).

A family of queries over two inputs, each run as a user runs it: a fresh
``xcep xseq QUERY FILE`` process writing its rows to a file. Beside each, in
the same round: the event source alone (``xcep events --stats``, a fresh
process) and lxml's ``iterparse`` doing the same selection in a fresh Python
process (the predicated element's tag as iterparse's filter, its ancestors
checked, the predicate and the output as compiled lxml XPath on the element,
rows written as JSON Lines, each candidate cleared once seen: the idiom of
lxml's documentation; elements outside the candidates stay in its tree). The knobs: the
predicate's kind (attribute, child value, text, ``or``/``not``), its
selectivity (1%, 10%, 50%, 99%), and the output (an attribute, a text, a
serialized element, a row of fields, an aggregate).

- *stocks*: a flat stream of ``<transaction company price buyer date><note>``
  elements under one root (``stock_stream``; 600,000 elements, 74 MB);
- *XMark f1* (117 MB) with the XMark queries that have predicates.

Reported: median seconds, MB/s, × lxml (lxml's time / xcep's: above 1 is
faster), × event source (the event source's time / xcep's: the share of the
parse speed the query keeps), rows, and xcep's peak RSS.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.harness import write_results

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
COMPANIES = ["DAGM", "IBM", "MSFT", "ORCL", "AAPL", "GOOG", "AMZN", "INTC", "CSCO", "HPQ"]

# name -> (input, XSeq query, lxml: (tag, ancestors, predicate, output, kind))
CASES = {
    "attribute = (10%)": (
        "stocks",
        "/stocks/transaction[@company = 'DAGM']/@price",
        ("transaction", ["stocks"], "@company = 'DAGM'", "@price", "values"),
    ),
    "attribute > (1%)": (
        "stocks",
        "/stocks/transaction[@price > 196]/@buyer",
        ("transaction", ["stocks"], "@price > 196", "@buyer", "values"),
    ),
    "attribute > (50%)": (
        "stocks",
        "/stocks/transaction[@price > 100]/@buyer",
        ("transaction", ["stocks"], "@price > 100", "@buyer", "values"),
    ),
    "attribute != (99%)": (
        "stocks",
        "/stocks/transaction[@buyer != 'b17']/@price",
        ("transaction", ["stocks"], "@buyer != 'b17'", "@price", "values"),
    ),
    "child text = (0.0002%)": (
        "stocks",
        "/stocks/transaction[note/text() = 'trade number 7 ok']/@price",
        ("transaction", ["stocks"], "note/text() = 'trade number 7 ok'", "@price", "values"),
    ),
    "or / not (10%)": (
        "stocks",
        "/stocks/transaction[@company = 'IBM' or not(@price < 190)]/@date",
        ("transaction", ["stocks"], "@company = 'IBM' or not(@price < 190)", "@date", "values"),
    ),
    "element out (10%)": (
        "stocks",
        "/stocks/transaction[@company = 'DAGM']",
        ("transaction", ["stocks"], "@company = 'DAGM'", ".", "elements"),
    ),
    "row of fields (10%)": (
        "stocks",
        "return $T@price, $T@buyer, $T/note/text() from /stocks/$T where $T@company = 'DAGM'",
        ("transaction", ["stocks"], "@company = 'DAGM'", "@price|@buyer|note/text()", "row"),
    ),
    "aggregate (10%)": (
        "stocks",
        "return max($T@price), count($T) from //$T where $T@company = 'DAGM'",
        ("transaction", ["stocks"], "@company = 'DAGM'", "@price", "max-count"),
    ),
    "XMark person income": (
        "xmark",
        "/site/people/person[profile/@income > 50000]/name/text()",
        ("person", ["site", "people"], "profile/@income > 50000", "name/text()", "values"),
    ),
    "XMark auction bids": (
        "xmark",
        "/site/open_auctions/open_auction[bidder/increase > 10 and not(reserve)]/@id",
        (
            "open_auction",
            ["site", "open_auctions"],
            "bidder/increase > 10 and not(reserve)",
            "@id",
            "values",
        ),
    ),
    "XMark item location": (
        "xmark",
        "/site/regions/*/item[location = 'United States']/name/text()",
        ("item", ["site", "regions", "*"], "location = 'United States'", "name/text()", "values"),
    ),
    "XMark Q17 no homepage": (
        "xmark",
        "/site/people/person[not(homepage/text())]/name/text()",
        ("person", ["site", "people"], "not(homepage/text())", "name/text()", "values"),
    ),
}

LXML = r"""
import json, sys
from lxml import etree
path, dest, tag, ancestors, predicate, output, kind = sys.argv[1:8]
ancestors = json.loads(ancestors)
test = etree.XPath(f"boolean({predicate})")
get = etree.XPath(output)
rows = 0
top = None
with open(dest, "w") as out:
    for _, el in etree.iterparse(path, tag=tag, huge_tree=True):
        names = [a.tag for a in el.iterancestors()][::-1]
        if len(names) == len(ancestors) and all(
            w == "*" or w == n for w, n in zip(ancestors, names)
        ) and test(el):
            rows += 1
            if kind == "elements":
                out.write(json.dumps([etree.tostring(el, with_tail=False).decode()]) + "\n")
            elif kind == "max-count":
                value = float(get(el)[0])
                top = value if top is None or value > top else top
            else:
                found = [str(v) for v in get(el)]
                out.write(json.dumps(found if kind == "row" else found[:1]) + "\n")
        el.clear(keep_tail=True)
        while el.getprevious() is not None:
            del el.getparent()[0]
    if kind == "max-count":
        out.write(json.dumps([top, rows]) + "\n")
"""


def stock_stream(path: Path, elements: int, seed: int = 1) -> Path:
    """``<stocks>`` of ``elements`` transactions (company, price 1-200, buyer, date, note)."""
    rng = random.Random(seed)
    prices = dict.fromkeys(COMPANIES, 100.0)
    with path.open("w") as out:
        out.write("<stocks>\n")
        for i in range(elements):
            company = rng.choice(COMPANIES)
            prices[company] = min(200.0, max(1.0, prices[company] + rng.uniform(-2, 2)))
            out.write(
                f'<transaction company="{company}" price="{prices[company]:.2f}" '
                f'buyer="b{rng.randrange(5000)}" date="2026-01-{1 + i % 28:02d}">'
                f"<note>trade number {i} ok</note></transaction>\n"
            )
        out.write("</stocks>\n")
    return path


def _timed(command: list[str], out: str) -> dict:
    """In a fresh process: ``command`` with stdout to ``out``: seconds, rows, peak RSS."""
    start = time.perf_counter()
    with open(out, "w") as sink:
        subprocess.run(command, stdout=sink, stderr=subprocess.DEVNULL, check=True)
    seconds = time.perf_counter() - start
    with open(out) as rows:
        count = sum(1 for _ in rows)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"seconds": seconds, "rows": count, "peak_rss_mb": peak}


def isolated(command: list[str], out: str) -> dict:
    """``command`` in a process of its own, stdout to ``out``: seconds, rows, peak RSS."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_timed, command, out).result()


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        inputs = {"stocks": stock_stream(work / "stocks.xml", 60_000 if quick else 600_000)}
        xmark = work / "xmark.xml"
        name = "xmark-f0.1.xml.gz" if quick else "xmark-f1.xml.gz"
        with gzip.open(DATA / "xmark" / name) as src, xmark.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        inputs["xmark"] = xmark
        script = work / "lxml_query.py"
        script.write_text(LXML)
        out = str(work / "out.jsonl")
        xcep = [sys.executable, "-m", "xcep"]
        times: dict = {}
        counts: dict = {}
        peaks: dict = {}
        for round_ in range(repeat):
            for source, path in inputs.items():
                found = isolated([*xcep, "events", "--stats", str(path)], out)
                times.setdefault(("event source", source), []).append(found["seconds"])
            for case, (source, query, (tag, chain, pred, output, kind)) in CASES.items():
                path = str(inputs[source])
                lxml = [sys.executable, str(script), path, out, tag, json.dumps(chain)]
                lxml += [pred, output, kind]
                for contender, command in (("xcep", [*xcep, "xseq", query, path]), ("lxml", lxml)):
                    found = isolated(command, out)
                    times.setdefault((contender, case), []).append(found["seconds"])
                    counts[(contender, case)] = found["rows"]
                    peaks[(contender, case)] = found["peak_rss_mb"]
            print(f"round {round_ + 1}/{repeat} done", flush=True)
        for case, (source, query, _) in CASES.items():
            size = inputs[source].stat().st_size
            xcep_s = statistics.median(times[("xcep", case)])
            lxml_s = statistics.median(times[("lxml", case)])
            source_s = statistics.median(times[("event source", source)])
            row = {
                "case": case,
                "input": source,
                "query": query,
                "bytes": size,
                "xcep_s": xcep_s,
                "xcep_mb_per_s": size / 1e6 / xcep_s,
                "lxml_s": lxml_s,
                "event_source_s": source_s,
                "vs_lxml": lxml_s / xcep_s,
                "vs_event_source": source_s / xcep_s,
                "rows": counts[("xcep", case)],
                "lxml_rows": counts[("lxml", case)],
                "peak_rss_mb": peaks[("xcep", case)],
            }
            rows.append(row)
            print(
                f"{case:28} {source:6} xcep {xcep_s:6.2f} s {row['xcep_mb_per_s']:6.1f} MB/s"
                f"  x lxml {row['vs_lxml']:5.2f}  x source {row['vs_event_source']:5.2f}"
                f"  rows {row['rows']:>7} (lxml {row['lxml_rows']})",
                flush=True,
            )
    write_results("xseq-paths", rows)
    return rows


if __name__ == "__main__":
    run(repeat=1, quick=True)
