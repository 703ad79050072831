"""The seed's Figure 7(c) and 7(d): XSeq against XPath/XQuery engines on the queries
those engines can run too.

``python -m bench xseq-xpath``. Same data, same run, every count checked equal:

- **7(c), Regular XPath** R1–R4 (seed §6.2: ``/FILE/EMPTY(/VP)*/NP``, ``(/S)*/NP``,
  ``(/S)*/VP``, ``(/S/VP)*/NP``) on a generated Treebank-like corpus: deep,
  recursive parse trees of sentences (S, VP, NP, PP, …; a few sentences reach
  depth 36, most about 8, like the seed's Treebank). Saxon and BaseX run the
  Kleene-* as a recursive XQuery function (``local:k($n) { $n, $n/VP ! local:k(.) }``).
- **7(d), XMark queries** that XSeq expresses (10 of Q1–Q20, as counts) on XMark
  f0.1, against lxml, elementpath, Saxon and BaseX. Every contender parses the file
  and answers; Saxon is timed inside its process, BaseX is wall time less the JVM
  start-up, lxml and elementpath in this process.
"""

from __future__ import annotations

import gzip
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.harness import bar_plot, write_results
from bench.peers import PeerTimeout, available
from xcep.events import EventStream
from xcep.xseq import XSeqEngine

XMARK = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "xmark"
TIMEOUT = 120.0

# The peers count; so does xcep: a query that selects elements is written as the count
# of its matches (the same number as its node set: a match is one node), so no one
# prints XML. Text and attribute results stay node sets (their rows are short strings).
REGULAR = {  # name: (XSeq count of R1-R4, the step the recursive function repeats, the last)
    f"R{i}": (f"return count($N) from /FILE/EMPTY({body})*/$N where tag($N) = '{last}'", rep, last)
    for i, (body, rep, last) in enumerate(
        [("/VP", "VP", "NP"), ("/S", "S", "NP"), ("/S", "S", "VP"), ("/S/VP", "S/VP", "NP")], 1
    )
}

XMARK_QUERIES = {  # name: (XSeq, XPath 1.0 of the same node set)
    "Q1": (
        "/site/people/person[@id = 'person0']/name/text()",
        "/site/people/person[@id = 'person0']/name/text()",
    ),
    "Q2": (
        "/site/open_auctions/open_auction(/initial | /reserve) \\ bidder/increase/text()",
        "/site/open_auctions/open_auction/bidder[1]/increase/text()",
    ),
    "Q5": (
        "return count($P) from /site/closed_auctions/closed_auction[price >= 40]/$P "
        "where tag($P) = 'price'",
        "/site/closed_auctions/closed_auction[price >= 40]/price",
    ),
    "Q6": ("return count($I) from /site/regions//$I where tag($I) = 'item'", "/site/regions//item"),
    "Q7": (
        "return count($D) from //$D where tag($D) = 'description' or tag($D) = 'annotation' "
        "or tag($D) = 'emailaddress'",
        "//description | //annotation | //emailaddress",
    ),
    "Q13": (
        "return count($I) from /site/regions/australia/$I where tag($I) = 'item'",
        "/site/regions/australia/item",
    ),
    "Q15": (
        "/site/closed_auctions/closed_auction/annotation/description/parlist/listitem/"
        "parlist/listitem/text/emph/keyword/text()",
        "/site/closed_auctions/closed_auction/annotation/description/parlist/listitem/"
        "parlist/listitem/text/emph/keyword/text()",
    ),
    "Q16": (
        "/site/closed_auctions/closed_auction[annotation/description/parlist/listitem/"
        "parlist/listitem/text/emph/keyword/text()]/seller/@person",
        "/site/closed_auctions/closed_auction[annotation/description/parlist/listitem/"
        "parlist/listitem/text/emph/keyword/text()]/seller/@person",
    ),
    "Q17": (
        "/site/people/person[not(homepage/text())]/name/text()",
        "/site/people/person[not(homepage/text())]/name/text()",
    ),
    "Q20": (
        "return count($P) from /site/people/person/$P[@income >= 100000] where tag($P) = 'profile'",
        "/site/people/person/profile[@income >= 100000]",
    ),
}


def treebank(path: Path, size: int, seed: int = 5) -> Path:
    """A Treebank-like corpus of about ``size`` bytes: ``<FILE>`` of ``<EMPTY>`` sentences."""
    if path.exists():
        return path
    rnd = random.Random(seed)
    words = {"DT": "the a", "NN": "dog market price stock", "VB": "saw rose fell is"}
    words |= {"IN": "of in on", "JJ": "big small", "CC": "and but"}
    words = {k: v.split() for k, v in words.items()}

    def leaf(tag: str) -> str:
        return f"<{tag}>{rnd.choice(words[tag])}</{tag}>"

    def node(tag: str, depth: int, budget: int, deep: bool = False) -> str:
        """A subtree; ``deep``: it is the spine of a deep sentence, recursing to the budget."""
        if depth >= budget:  # the sentence's depth is reached: close with words
            return {"S": leaf("NN"), "VP": leaf("VB"), "NP": leaf("NN"), "PP": leaf("IN")}[tag]
        grow = rnd.random() * (0.24 if deep else 1)  # the spine takes the recursive forms
        if tag == "S":
            parts = ("S", "CC", "S") if grow < 0.15 else ("NP", "VP")
        elif tag == "VP":
            parts = ("VB", "VP") if grow < 0.3 else ("VB", "S") if grow < 0.55 else ("VB", "NP")
            parts = (*parts, "PP") if rnd.random() < 0.2 else parts
        elif tag == "NP":
            parts = (
                ("NP", "PP") if grow < 0.25 else ("DT", "JJ", "NN") if grow < 0.5 else ("DT", "NN")
            )
        else:
            parts = ("IN", "NP")
        spine = max((i for i, t in enumerate(parts) if t not in words), default=-1) if deep else -1
        inner = "".join(
            leaf(t) if t in words else node(t, depth + 1, budget, i == spine)
            for i, t in enumerate(parts)
        )
        return f"<{tag}>{inner}</{tag}>"

    with open(path, "w", encoding="utf-8") as out:
        out.write("<FILE>")
        written = 6
        while written < size:
            deep = rnd.random() < 0.01
            budget = 36 if deep else rnd.randint(4, 12)
            top = rnd.choices(["S", "VP", "NP"], [8, 1, 1])[0]
            sentence = f"<EMPTY>{node(top, 1, budget, deep)}</EMPTY>\n"
            out.write(sentence)
            written += len(sentence)
        out.write("</FILE>\n")
    return path


def recursive_xquery(name: str) -> str:
    _, repeat, last = REGULAR[name]
    return (
        f"declare function local:k($n) {{ $n, (for $c in $n/{repeat} return local:k($c)) }};\n"
        f"count(/FILE/EMPTY/local:k(.)/{last})"
    )


def _xcep(query: str, path: Path) -> tuple[int, float]:
    """The count: the aggregate's value, or the number of rows of a node set."""
    start = time.perf_counter()
    rows = list(XSeqEngine(query).run(EventStream([path]).batches()))
    seconds = time.perf_counter() - start
    return (rows[0][0] if query.startswith("return count(") else len(rows)), seconds


def _lxml(xpath: str, path: Path) -> tuple[int, float]:
    import lxml.etree as etree

    start = time.perf_counter()
    count = int(etree.parse(str(path)).xpath(f"count({xpath})"))
    return count, time.perf_counter() - start


def _elementpath(xpath: str, path: Path) -> tuple[int, float]:
    import xml.etree.ElementTree as ET

    import elementpath

    start = time.perf_counter()
    count = int(elementpath.select(ET.parse(path), f"count({xpath})"))
    return count, time.perf_counter() - start


def _measure(rows, figure, query, data, contender, call, expected, repeat) -> None:
    times, found = [], None
    for _ in range(repeat):
        try:
            found, seconds = call()
        except PeerTimeout:
            print(f"{contender} {query}: over {TIMEOUT:.0f} s")
            break
        times.append(seconds)
    seconds = statistics.median(times) if times else None
    rows.append(
        {
            "figure": figure,
            "query": query,
            "data": data,
            "contender": contender,
            "seconds": seconds,
            "count": found,
            "agrees": found == expected,
        }
    )
    print(rows[-1], flush=True)


def run(repeat: int = 3, quick: bool = False) -> None:
    peers = available()
    rows: list = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for size in [1_000_000] if quick else [1_000_000, 10_000_000]:
            corpus = treebank(work / f"treebank-{size}.xml", size)
            data = f"Treebank-like {size // 1_000_000} MB"
            for name, (query, *_) in REGULAR.items():
                expected, _ = _xcep(query, corpus)
                _measure(
                    rows,
                    "7c",
                    name,
                    data,
                    "xcep XSeq",
                    lambda q=query, corpus=corpus: _xcep(q, corpus),
                    expected,
                    repeat,
                )
                xquery = recursive_xquery(name)
                for peer, count in peers.items():
                    call = lambda c=count, x=xquery, f=corpus: c(x, f, TIMEOUT)  # noqa: E731
                    _measure(rows, "7c", name, data, peer, call, expected, repeat)
        xmark = work / "xmark-f0.1.xml"
        with gzip.open(XMARK / "xmark-f0.1.xml.gz") as src:
            xmark.write_bytes(src.read())
        for name, (query, xpath) in XMARK_QUERIES.items():
            expected, _ = _xcep(query, xmark)
            contenders = {
                "xcep XSeq": lambda q=query: _xcep(q, xmark),
                "lxml": lambda x=xpath: _lxml(x, xmark),
                "elementpath": lambda x=xpath: _elementpath(x, xmark),
            }
            for peer, count in peers.items():
                contenders[peer] = lambda c=count, x=xpath: c(f"count({x})", xmark, TIMEOUT)
            for contender, call in contenders.items():
                _measure(rows, "7d", name, "XMark f0.1", contender, call, expected, repeat)
    write_results("xseq-xpath", rows, {"timeout_s": TIMEOUT, "repeat": repeat})
    for figure in ("7c", "7d"):
        picked = [
            {**r, "input": f"{r['query']} {r['data'].split()[-2] if figure == '7c' else ''}"}
            for r in rows
            if r["figure"] == figure and r["seconds"]
        ]
        bar_plot(f"xseq-xpath-{figure}", picked, "seconds", "seconds (parse + query)")
    print(table(rows))


def table(rows: list[dict]) -> str:
    out = []
    for figure, title in (("7c", "Regular XPath"), ("7d", "XMark")):
        picked = [r for r in rows if r["figure"] == figure]
        contenders = list(dict.fromkeys(r["contender"] for r in picked))
        peers = [c for c in contenders if c != "xcep XSeq"]
        out += [
            f"**{title}** — seconds, and peer ÷ xcep (> 1: xcep is faster)",
            "",
            "| data | query | count | xcep s | " + " | ".join(peers) + " |",
            "|---|---|---|---|" + "---|" * len(peers),
        ]
        for data in dict.fromkeys(r["data"] for r in picked):
            for query in dict.fromkeys(r["query"] for r in picked if r["data"] == data):
                cell = {
                    r["contender"]: r for r in picked if (r["data"], r["query"]) == (data, query)
                }
                mine = cell["xcep XSeq"]
                parts = []
                for peer in peers:
                    r = cell.get(peer)
                    if r is None or r["seconds"] is None:
                        parts.append("–")
                    else:
                        same = "" if r["agrees"] else " (count differs!)"
                        parts.append(
                            f"{r['seconds']:.3f} s = {r['seconds'] / mine['seconds']:.1f}×{same}"
                        )
                out.append(
                    f"| {data} | {query} | {mine['count']:,} | {mine['seconds']:.3f} | "
                    + " | ".join(parts)
                    + " |"
                )
        out.append("")
    return "\n".join(out)
