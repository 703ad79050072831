"""The seed's Figure 6: queries over XMark inputs of 50 KB … 5 MB, run as written
("naive"), with each optimization alone (Opt-1 prefix, Opt-2 loops, Opt-3 where) and
with all of them (Opt-All), the DTD given.

``python -m bench xseq-opt``. The inputs are XMark f0.1 thinned: every list
of a section (items of a region, people, auctions, categories, edges) keeps
its first elements in proportion, so each input is valid against XMark's DTD
and has XMark's shape. Every run's rows are checked against the naive run.
"""

from __future__ import annotations

import gzip
import statistics
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.harness import RESULTS, log_log_plot, write_results
from xcep.events import EventStream
from xcep.schema import read_dtd
from xcep.xseq import XSeqEngine

XMARK = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "xmark"
SIZES = [50_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000]
QUERIES = {
    "X2 (increases)": "//open_auction/bidder/increase/text()",
    "X1 (a person's name)": "//person[@id = 'person0']/name/text()",
    "item names": "//item/name/text()",
    "bid dates (//, where)": "return $D/text() from /site/open_auctions/$A//$D "
    "where tag($A) = 'open_auction' and tag($D) = 'date'",
    "keywords (where)": "return count($K) from //$K where tag($K) = 'keyword'",
    "cities of the over-30s (//)": "/site/people/person[.//age >= 30]//city/text()",
}
LEVELS = ["none", "prefix", "loops", "where", "all"]
NAMES = {"none": "naive", "prefix": "Opt-1", "loops": "Opt-2", "where": "Opt-3", "all": "Opt-All"}


def thinned_xmark(workdir: Path, size: int) -> Path:
    """XMark f0.1 with every section list cut to about ``size`` bytes in all."""
    path = workdir / f"xmark-{size}.xml"
    if path.exists():
        return path
    with gzip.open(XMARK / "xmark-f0.1.xml.gz") as f:
        root = ET.parse(f).getroot()
    whole = len(ET.tostring(root))
    keep = size / whole
    lists = [*root.find("regions"), *(root.find(s) for s in ("categories", "catgraph"))]
    lists += [root.find(s) for s in ("people", "open_auctions", "closed_auctions")]
    for parent in lists:
        children = list(parent)
        for child in children[max(1, round(len(children) * keep)) :]:
            parent.remove(child)
    # references to removed people, items and categories stay: IDREFs are not checked
    ET.ElementTree(root).write(path, encoding="utf-8")
    return path


def run(repeat: int = 3, quick: bool = False, workdir: Path | None = None) -> None:
    import tempfile

    dtd = read_dtd(XMARK / "auction.dtd")
    rows = []
    sizes = SIZES[:3] if quick else SIZES
    with tempfile.TemporaryDirectory() as tmp:
        work = workdir or Path(tmp)
        for size in sizes:
            path = thinned_xmark(work, size)
            batches = list(EventStream([path]).batches())
            actual = path.stat().st_size
            for name, query in QUERIES.items():
                expected = None
                for level in LEVELS:
                    engine = XSeqEngine(query, schema=dtd, opt=level)
                    times = []
                    for _ in range(repeat):
                        start = time.perf_counter()
                        found = list(engine.run(batches))
                        times.append(time.perf_counter() - start)
                    expected = found if expected is None else expected
                    rows.append(
                        {
                            "query": name,
                            "level": level,
                            "bytes": actual,
                            "seconds": statistics.median(times),
                            "rows": len(found),
                            "agrees": found == expected,
                        }
                    )
                    print(rows[-1], flush=True)
    write_results("xseq-opt", rows, {"queries": QUERIES, "repeat": repeat})
    plot(rows)
    print(table(rows))


def plot(rows: list[dict]) -> None:
    lines = {}
    styles = {"none": "--", "prefix": "-", "loops": "-.", "where": ":", "all": "-"}
    for name in dict.fromkeys(r["query"] for r in rows):
        for level, style in styles.items():
            label = f"{name}, {NAMES[level]}"
            points = [
                (r["bytes"], r["seconds"])
                for r in rows
                if r["query"] == name and r["level"] == level
            ]
            lines[label] = (points, style)
    title = "XSeq optimizations over input size (seed Figure 6)"
    log_log_plot("xseq-opt", lines, "input bytes (XMark, thinned)", title)


def table(rows: list[dict] | None = None) -> str:
    import json

    if rows is None:
        rows = json.loads((RESULTS / "xseq-opt.json").read_text())["results"]
    heads = " | ".join(f"{NAMES[level]} s" for level in LEVELS)
    out = [
        f"| query | bytes | {heads} | naive ÷ Opt-All | rows |",
        "|---|---|" + "---|" * len(LEVELS) + "---|---|",
    ]
    for name in dict.fromkeys(r["query"] for r in rows):
        for size in sorted({r["bytes"] for r in rows if r["query"] == name}):
            cell = {r["level"]: r for r in rows if r["query"] == name and r["bytes"] == size}
            times = " | ".join(f"{cell[level]['seconds']:.4f}" for level in LEVELS)
            same = "" if all(c["agrees"] for c in cell.values()) else " (rows differ!)"
            ratio = cell["none"]["seconds"] / cell["all"]["seconds"]
            out.append(
                f"| {name} | {size:,} | {times} | {ratio:.2f}{same} | {cell['none']['rows']:,} |"
            )
    return "\n".join(out)
