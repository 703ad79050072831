"""Many XSeq queries at once, end to end: ``xcep xseq --queries FILE INPUT`` (issue 21).

The user's job: a file of standing queries, one per line, over a stock stream
(``xseq_paths.stock_stream``: ``<transaction company price buyer date><note>``),
run as a fresh process that writes every query's rows. Families of queries,
with knobs, constants drawn from the data:

- *attribute*: ``/stocks/transaction[@company = 'C' and @price > P]/@buyer`` —
  two attribute predicates per query, decided at the open tag;
- *child value*: ``//transaction[@company = 'C']/note[text() = 'N']/text()`` —
  a predicate on the subtree, decided when the note closes (``N`` a note of the
  stream, ``C`` its transaction's company half the time: one row or none);
- *mixed*: the two, alternating;
- *sequence*: ``return $X@buyer from /stocks/$Z \\ $X where $Z@company = 'C' and
  $X@price > P`` — the trade right after one of a company's (a flat sequence
  pattern; lxml's side is one pass over the parsed transactions in Python per
  query: libxml2's ``following-sibling::*[1]`` is quadratic here);
- *xmark*: subscriptions on XMark f0.1 (11.7 MB), four shapes in turn — a person
  by id, items by location and quantity, open auctions above an initial price, a
  category by id — with `//` steps, child values and attributes.

Knobs: the number of queries (10, 100, 1,000) and the thresholds' selectivity
(*broad*: ``P`` one of the stream's prices, so a transaction matches about a
twentieth of the attribute queries; *selective*: one of its top 3 %). Beside xcep,
in the same round: lxml in a fresh process — the document parsed once, then each
query as a compiled XPath (the same text is XPath 1.0), rows written as JSON
Lines — the way a user without xcep answers a query file. Row counts are checked
equal. Reported: median seconds, MB/s, rows, × lxml (above 1: xcep is faster),
xcep's peak RSS.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import write_results
from bench.xseq_paths import COMPANIES, DATA, isolated, stock_stream

COUNTS = [10, 100, 1_000]
FAMILIES = ["attribute", "child value", "mixed", "sequence"]
ELEMENTS = 30_000  # transactions in the stream (3.6 MB)

LXML = """
import json, sys
from lxml import etree
source, queries, out = sys.argv[1:4]
tree = etree.parse(source)
children = list(tree.getroot())
with open(out, "w") as sink:
    for line in open(queries):
        qid, query = line.rstrip("\\n").split("\\t", 1)
        if query.startswith("next after "):  # company, price: one pass over the list
            company, price = query.split()[2:]
            found = [
                b.get("buyer") for a, b in zip(children, children[1:])
                if a.get("company") == company and float(b.get("price")) > float(price)
            ]
        else:
            found = etree.XPath(query)(tree)
        for value in found:
            sink.write(json.dumps([qid, str(value)]) + "\\n")
"""


def queries(family: str, count: int, selectivity: str, source: Path, seed: int = 3) -> list[str]:
    """``count`` queries of a family; constants drawn from the stream ``source``."""
    rnd = random.Random(seed)
    text = source.read_text()
    prices = sorted(float(p) for p in re.findall(r'price="([0-9.]+)"', text))
    notes = re.findall(r'company="([^"]*)"[^>]*><note>([^<]*)</note>', text)
    if selectivity == "selective":  # the top 3 % of the prices
        prices = prices[int(len(prices) * 0.97) :]

    def attribute() -> str:
        price = rnd.choice(prices)
        return (
            f"/stocks/transaction[@company = '{rnd.choice(COMPANIES)}' and @price > {price}]/@buyer"
        )

    def child_value() -> str:  # a transaction's note, its company half the time
        company, note = rnd.choice(notes)
        company = company if rnd.random() < 0.5 else rnd.choice(COMPANIES)
        return f"//transaction[@company = '{company}']/note[text() = '{note}']/text()"

    def sequence() -> str:  # (its XPath for lxml: ``as_xpath``)
        price, company = rnd.choice(prices), rnd.choice(COMPANIES)
        return (
            f"return $X@buyer from /stocks/$Z \\ $X where $Z@company = '{company}' "
            f"and $X@price > {price}"
        )

    make = {
        "attribute": [attribute],
        "child value": [child_value],
        "mixed": [attribute, child_value],
        "sequence": [sequence],
    }
    shapes = make[family]
    return [shapes[i % len(shapes)]() for i in range(count)]


_SEQUENCE = re.compile(
    r"return \$X@buyer from /stocks/\$Z \\ \$X where \$Z@company = '(\w+)' and \$X@price > (\S+)"
)


def as_xpath(query: str) -> str:
    """What lxml runs for a query of the file: the same text (XPath 1.0), or for the
    *sequence* family ``next after C P``, one pass over the transactions in Python (as
    XPath, ``transaction[@company = 'C']/following-sibling::*[1][@price > P]``, libxml2
    walks every following sibling of each: quadratic, minutes for 100 queries)."""
    found = _SEQUENCE.fullmatch(query)
    if found is None:
        return query
    company, price = found.groups()
    return f"next after {company} {price}"


def xmark_queries(count: int, source: Path, seed: int = 1) -> list[str]:
    """``count`` subscriptions on XMark, four shapes in turn, constants from the document:
    a person by id (its name), items by location and quantity, open auctions above an
    initial price, a category by id (``/site/…``: a plain child path)."""
    rnd = random.Random(seed)
    text = source.read_text()
    people = re.findall(r'<person id="(person\d+)"', text)
    places = sorted({p for p in re.findall(r"<location>([^<]*)</location>", text) if "'" not in p})
    categories = re.findall(r'<category id="(category\d+)"', text)
    shapes = [
        lambda: f"//person[@id = '{rnd.choice(people)}']/name/text()",
        lambda: f"//item[location = '{rnd.choice(places)}' and quantity > {rnd.randint(1, 3)}]/@id",
        lambda: f"//open_auction[initial > {rnd.uniform(1, 200):.2f}]/@id",
        lambda: f"/site/categories/category[@id = '{rnd.choice(categories)}']/name/text()",
    ]
    return [shapes[i % len(shapes)]() for i in range(count)]


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    counts = COUNTS[:2] if quick else COUNTS
    cases = [
        (f, s)
        for f in FAMILIES
        for s in ("broad", "selective")
        if f != "child value" or s == "broad"
    ]
    cases.append(("xmark", "constants of the document"))
    if os.environ.get("XCEP_BENCH_FAMILIES"):  # some families only: "sequence,xmark"
        wanted = {f.strip() for f in os.environ["XCEP_BENCH_FAMILIES"].split(",")}
        cases = [(f, s) for f, s in cases if f in wanted]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        elements = 3_000 if quick else ELEMENTS
        stocks = stock_stream(work / "stocks.xml", elements)
        xmark = work / "xmark.xml"
        with gzip.open(DATA / "xmark" / "xmark-f0.1.xml.gz") as src, xmark.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        script = work / "lxml_queries.py"
        script.write_text(LXML)
        out = str(work / "out.jsonl")
        for family, selectivity in cases:
            source = xmark if family == "xmark" else stocks
            size = source.stat().st_size
            for count in counts:
                made = (
                    xmark_queries(count, source)
                    if family == "xmark"
                    else queries(family, count, selectivity, source)
                )
                file = work / "queries.txt"
                file.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(made)))
                xpaths = work / "lxml.txt"
                xpaths.write_text("".join(f"q{i}\t{as_xpath(q)}\n" for i, q in enumerate(made)))
                times: dict = {"xcep": [], "compiled": [], "lxml": []}
                found: dict = {}
                xcep = [sys.executable, "-m", "xcep", "xseq", "--queries", str(file), str(source)]
                for _ in range(repeat if count < 1_000 else 1):
                    for contender, command in (
                        ("xcep", xcep),
                        # every query on the compiled automaton (a run per template)
                        ("compiled", [*xcep[:4], "--runtime", "compiled", *xcep[4:]]),
                        ("lxml", [sys.executable, str(script), str(source), str(xpaths), out]),
                    ):
                        result = isolated(command, out)
                        times[contender].append(result["seconds"])
                        found[contender] = result
                assert found["xcep"]["rows"] == found["lxml"]["rows"], (family, count, found)
                assert found["compiled"]["rows"] == found["xcep"]["rows"], (family, count, found)
                xcep_s = statistics.median(times["xcep"])
                compiled_s = statistics.median(times["compiled"])
                lxml_s = statistics.median(times["lxml"])
                row = {
                    "family": family,
                    "selectivity": selectivity,
                    "queries": count,
                    "xcep_s": xcep_s,
                    "compiled_s": compiled_s,
                    "lxml_s": lxml_s,
                    "mb_per_s": size / 1e6 / xcep_s,
                    "x_lxml": lxml_s / xcep_s,
                    "rows": found["xcep"]["rows"],
                    "peak_rss_mb": found["xcep"]["peak_rss_mb"],
                    "megabytes": size / 1e6,
                }
                rows.append(row)
                print(
                    f"{family:>11} {selectivity:>9} {count:>5} queries: xcep {xcep_s:.2f} s "
                    f"({row['mb_per_s']:.2f} MB/s), compiled {compiled_s:.2f} s, "
                    f"lxml {lxml_s:.2f} s, "
                    f"×lxml {row['x_lxml']:.2f}, {row['rows']:,} rows, {row['peak_rss_mb']:.0f} MB",
                    flush=True,
                )
    write_results("xseq-queries", rows)
    print(readme_table(rows))
    return rows


def readme_table(rows: list[dict]) -> str:
    lines = [
        "| family | thresholds | queries | xcep s | MB/s | all compiled s | lxml s | × lxml "
        "| rows | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['family']} | {r['selectivity']} | {r['queries']:,} | {r['xcep_s']:.2f} "
            f"| {r['mb_per_s']:.2f} | {r.get('compiled_s', float('nan')):.2f} | {r['lxml_s']:.2f} "
            f"| {r['x_lxml']:.2f} | {r['rows']:,} "
            f"| {r['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)
