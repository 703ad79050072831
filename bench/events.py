"""Event-source throughput: xcep's source against the parse floor and the usual parsers.

Contenders, each reading the same file in the same run:
- expat (no handlers): the parse floor of the standard library's parser;
- lxml iterparse / xml.etree iterparse: the usual streaming idiom (start/end
  events, elements cleared as they end);
- lxml → events: what an lxml-based event source would cost (the same
  open/attr/text/close columns as ours, built from lxml's iterparse);
- xcep EventStream: our source, delivering columnar batches.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from pyexpat import ParserCreate

from lxml import etree

from bench.generators import stock_stream
from bench.harness import Case, bar_plot, markdown_table, measure, summarise, write_results
from xcep.events import EventStream

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def expat_floor(path: Path) -> int:
    parser = ParserCreate()
    with open(path, "rb") as f:
        parser.ParseFile(f)
    return 0


def lxml_iterparse(path: Path) -> int:
    n = 0
    for event, element in etree.iterparse(str(path), events=("start", "end")):
        n += 1
        if event == "end":
            element.clear(keep_tail=True)
    return n


def etree_iterparse(path: Path) -> int:
    n = 0
    for event, element in ET.iterparse(path, events=("start", "end")):
        n += 1
        if event == "end":
            element.clear()
    return n


def lxml_events(path: Path) -> int:
    """What an lxml-based source would cost: the same columns as ours, built from iterparse.

    Text must wait: an element's text is known at its first child's start (or its end), a
    child's tail at the next sibling's start (or the parent's end).
    """
    docs, kinds, names, values, depths, nodes = [], [], [], [], [], []
    ids: dict[str, int] = {}
    stack: list[list] = []  # [node, last child element or None] per open element
    node = 0

    def text(value, depth):
        nonlocal node
        if value and not value.isspace():
            docs.append(0)
            kinds.append(2)
            names.append(-1)
            values.append(value)
            depths.append(depth)
            nodes.append(node)
            node += 1

    for event, element in etree.iterparse(str(path), events=("start", "end")):
        depth = len(stack) + 1
        if event == "start":
            if stack:
                parent = stack[-1]
                last = parent[1]
                text(element.getparent().text if last is None else last.tail, depth)
                if last is not None:
                    last.clear(keep_tail=False)
            docs.append(0)
            kinds.append(0)
            names.append(ids.setdefault(element.tag, len(ids)))
            values.append(None)
            depths.append(depth)
            nodes.append(node)
            stack.append([node, None])
            node += 1
            for name, value in element.attrib.items():
                docs.append(0)
                kinds.append(1)
                names.append(ids.setdefault(name, len(ids)))
                values.append(value)
                depths.append(depth + 1)
                nodes.append(node)
                node += 1
        else:
            me, last = stack.pop()
            text(element.text if last is None else last.tail, depth)
            docs.append(0)
            kinds.append(3)
            names.append(ids[element.tag])
            values.append(None)
            depths.append(depth - 1)
            nodes.append(me)
            if stack:
                stack[-1][1] = element
    return len(kinds)


def xcep_source(path: Path) -> int:
    return sum(len(batch) for batch in EventStream([path]).batches())


def xcep_expat_source(path: Path) -> int:
    return sum(len(batch) for batch in EventStream([path], compiled=False).batches())


CONTENDERS = {
    "expat (no handlers)": expat_floor,
    "lxml iterparse": lxml_iterparse,
    "etree iterparse": etree_iterparse,
    "lxml → events": lxml_events,
    "xcep EventStream, expat callbacks only": xcep_expat_source,
    "xcep EventStream": xcep_source,
}


def prepare(workdir: Path, quick: bool) -> dict[str, Path]:
    inputs = {}
    xmark = DATA / "xmark" / ("xmark-f0.1.xml.gz")
    if xmark.exists():
        target = workdir / "xmark-f0.1.xml"
        with gzip.open(xmark) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        inputs["XMark f0.1 (11.7 MB)"] = target
    megabytes = 5 if quick else 50
    inputs[f"stock stream ({megabytes} MB)"] = stock_stream(
        workdir / "stocks.xml", megabytes=megabytes
    )
    return inputs


def run(repeat: int = 5, quick: bool = False) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        inputs = prepare(Path(tmp), quick)
        cases = [
            Case(name, label, (lambda f=fn, p=path: f(p)), path.stat().st_size)
            for label, path in inputs.items()
            for name, fn in CONTENDERS.items()
        ]
        measure(cases, repeat)
        rows = [summarise(c) for c in cases]
        events = {c.input: c.count for c in cases if c.contender == "xcep EventStream"}
    for row in rows:
        row["events_per_s"] = events[row["input"]] / row["median_s"]  # xcep events, same input
    write_results("events", rows, {"repeat": repeat})
    bar_plot("events", rows, "mb_per_s", "MB/s (median, whiskers min–max)")
    print(
        markdown_table(
            rows,
            "xcep EventStream",
            [
                ("median_s", "median s", ".3f"),
                ("mb_per_s", "MB/s", ".1f"),
                ("events_per_s", "events/s", ",.0f"),
            ],
        )
    )
    return rows
