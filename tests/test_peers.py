"""The event source against lxml on the bundled XMark document (a peer, not our code)."""

import gzip

from lxml import etree

from xcep.events import EventStream


def lxml_events(root) -> list[tuple]:
    """Events by walking lxml's tree: element, attributes, then text and children's tails."""
    out = []
    counter = [0]

    def text(value, depth):
        if value and not value.isspace():
            out.append(("text", None, value, depth, counter[0]))
            counter[0] += 1

    def walk(e, depth):
        me = counter[0]
        counter[0] += 1
        out.append(("open", e.tag, None, depth, me))
        for name, value in e.attrib.items():
            out.append(("attr", name, value, depth + 1, counter[0]))
            counter[0] += 1
        text(e.text, depth + 1)
        for child in e:
            if isinstance(child.tag, str):
                walk(child, depth + 1)
            text(child.tail, depth + 1)
        out.append(("close", e.tag, None, depth, me))

    walk(root, 1)
    # lxml splits text around comments and PIs; the event source coalesces it
    merged = []
    for event in out:
        if event[0] == "text" and merged and merged[-1][0] == "text":
            continue
        merged.append(event)
    return merged


def ours(path) -> list[tuple]:
    return [(str(e.kind), e.name, e.value, e.depth, e.node) for e in EventStream([path])]


def test_xmark_small_matches_lxml(data_dir):
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    assert ours(path) == lxml_events(etree.parse(str(path)).getroot())


def test_xmark_gz_counts_match_lxml(data_dir):
    path = data_dir / "xmark" / "xmark-f0.1.xml.gz"
    with gzip.open(path) as f:
        root = etree.parse(f).getroot()
    elements = sum(1 for _ in root.iter(tag=etree.Element))
    attributes = sum(len(e.attrib) for e in root.iter(tag=etree.Element))
    stream = EventStream([path])
    for _ in stream.batches():
        pass
    assert stream.stats.documents == 1
    assert stream.stats.events["open"] == elements
    assert stream.stats.events["attr"] == attributes
