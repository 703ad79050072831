"""XSeq queries on the pushdown automaton, end to end, over XMark (issue 21).

The queries no compiled runtime takes — sibling steps after ``//``, first-child
steps, Kleene-* chains of variables, a variable for any element with a
predicate, ``partition by //`` — run on the automaton (``--explain`` says so).
A family of such shapes, each a fresh ``xcep xseq QUERY FILE`` process writing
its rows to a file, beside the event source alone (``xcep events --stats``) and,
where XPath 1.0 says the same, lxml in a fresh process (the file parsed into a
tree, the rows counted from one XPath; counts checked equal). Knobs: the
predicate's selectivity (one element, or nearly all of them) and the output
(a row per match: from one to tens of thousands).

``XCEP_BASELINE_SRC=/path/to/other/src`` adds a contender *before*: the same
queries on another xcep source tree (another commit), in the same rounds.
"""

from __future__ import annotations

import gzip
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import write_results
from bench.xseq_paths import DATA, isolated

# name -> (query, lxml XPath whose node count is the row count, or None)
CASES = {
    "Q10 sibling after //, one": (
        "return $X/name/text(), $Y/name/text() from //category[@id='category10'] \\ $X \\ $Y",
        "//category[@id='category10'][following-sibling::*[2]]",
    ),
    "Q10 sibling after //, all": (
        "return $X/name/text(), $Y/name/text() from //category[@id!='category10'] \\ $X \\ $Y",
        "//category[@id!='category10'][following-sibling::*[2]]",
    ),
    "Q12 first child, sibling": (
        "return $Y/@id from //person[@id='person10'] /\\ $X \\ $Y",
        "//person[@id='person10'][*[2]]",
    ),
    "Q8 following siblings": (
        "return $S/name/text() from // $D[@id='person10'] $S "
        "where tag($D)='person' and tag($S)='person'",
        "//person[@id='person10']/following-sibling::person",
    ),
    "Q2 union, next sibling": (
        "return $B/increase/text() from //open_auction (/initial | /reserve) \\ $B",
        "//open_auction/*[self::initial or self::reserve]/following-sibling::*[1]",
    ),
    "Q6 Kleene-* of children": (
        "return $B/@id from //parlist (/$A)* /$B where tag($A)='listitem' and tag($B)='listitem'",
        None,
    ),
    "Q24 any element, predicate": (
        "return last($Z)/@id from // $X[@featured='yes'] (/$Y/$Z)*",
        None,
    ),
    "Q24 any element, broad": (
        "return count($Z) from // $X[@id] (/$Y/$Z)*",
        None,
    ),
    "Q14 partition by //": (
        "return $X@id, count($X) from // $X partition by //item@featured where tag($X) = 'item'",
        None,
    ),
}

LXML = """
import sys
from lxml import etree
tree = etree.parse(sys.argv[1])
for _ in tree.xpath(sys.argv[2]):
    print(1)
"""


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    baseline = os.environ.get("XCEP_BASELINE_SRC")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        xmark = work / "xmark.xml"
        name = "xmark-f0.1.xml.gz" if quick else "xmark-f1.xml.gz"
        with gzip.open(DATA / "xmark" / name) as src, xmark.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        size = xmark.stat().st_size
        script = work / "lxml_count.py"
        script.write_text(LXML)
        out = str(work / "out.jsonl")
        xcep = [sys.executable, "-m", "xcep"]
        before = ["env", f"PYTHONPATH={baseline}", *xcep] if baseline else None
        times: dict = {}
        counts: dict = {}
        peaks: dict = {}

        def measure(key, command) -> None:
            found = isolated(command, out)
            times.setdefault(key, []).append(found["seconds"])
            counts[key], peaks[key] = found["rows"], found["peak_rss_mb"]

        for round_ in range(repeat):
            measure("event source", [*xcep, "events", "--stats", str(xmark)])
            for case, (query, xpath) in CASES.items():
                measure(("xcep", case), [*xcep, "xseq", query, str(xmark)])
                if before:
                    measure(("before", case), [*before, "xseq", query, str(xmark)])
                if xpath and round_ == 0:  # lxml once: its tree costs the same every time
                    measure(("lxml", case), [sys.executable, str(script), str(xmark), xpath])
            print(f"round {round_ + 1}/{repeat} done", flush=True)
        source_s = statistics.median(times["event source"])
        for case, (query, xpath) in CASES.items():
            xcep_s = statistics.median(times[("xcep", case)])
            row = {
                "case": case,
                "query": query,
                "bytes": size,
                "xcep_s": xcep_s,
                "xcep_mb_per_s": size / 1e6 / xcep_s,
                "event_source_s": source_s,
                "vs_event_source": source_s / xcep_s,
                "rows": counts[("xcep", case)],
                "peak_rss_mb": peaks[("xcep", case)],
            }
            if xpath:
                row["lxml_s"] = times[("lxml", case)][0]
                row["vs_lxml"] = row["lxml_s"] / xcep_s
                assert counts[("lxml", case)] == row["rows"], (case, counts[("lxml", case)])
            if before:
                row["before_s"] = statistics.median(times[("before", case)])
                row["speedup"] = row["before_s"] / xcep_s
                assert counts[("before", case)] == row["rows"], case
            rows.append(row)
            print(
                f"{case:30} xcep {xcep_s:6.2f} s {row['xcep_mb_per_s']:6.1f} MB/s"
                f"  x source {row['vs_event_source']:5.2f}"
                f"  x lxml {row.get('vs_lxml', float('nan')):5.2f}"
                f"  before {row.get('before_s', float('nan')):6.2f} s"
                f"  rows {row['rows']:>7}",
                flush=True,
            )
    write_results("xseq-automaton", rows)
    print(readme_table(rows))
    return rows


def readme_table(rows: list[dict]) -> str:
    lines = [
        "| case | xcep s | MB/s | × event source | lxml s | × lxml | before s | × before | rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lxml = f"{r['lxml_s']:.2f} | {r['vs_lxml']:.2f}" if "lxml_s" in r else "– | –"
        before = f"{r['before_s']:.2f} | {r['speedup']:.1f}×" if "before_s" in r else "– | –"
        lines.append(
            f"| {r['case']} | {r['xcep_s']:.2f} | {r['xcep_mb_per_s']:.1f} | "
            f"{r['vs_event_source']:.2f} | {lxml} | {before} | {r['rows']:,} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run(repeat=1, quick=True)
