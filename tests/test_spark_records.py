"""The record splitter and units, without Spark: against the tree reference."""

import gzip
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trees import Element, elements, expected_events, to_xml
from xcep.errors import InputError
from xcep.events import EventStream, parse
from xcep.spark.records import parse_record_path, root_attribute, split_records
from xcep.spark.units import document_id, is_data_file, read_unit


def _reference(tree: Element, steps: tuple) -> list[Element]:
    """The elements at the path, in document order, by walking the tree."""
    if tree.name != steps[0]:
        return []
    level = [tree]
    for name in steps[1:]:
        level = [c for e in level for c in e.children if isinstance(c, Element) and c.name == name]
    return level


def _paths(tree: Element) -> list[tuple]:
    out = []

    def walk(e: Element, prefix: tuple) -> None:
        path = (*prefix, e.name)
        out.append(path)
        for child in e.children:
            if isinstance(child, Element) and len(path) < 4:
                walk(child, path)

    walk(tree, ())
    return out


@settings(max_examples=150)
@given(elements(max_leaves=20), st.data(), st.booleans())
def test_records_are_the_subtrees_at_the_path(tree, data, declared):
    steps = data.draw(st.sampled_from(_paths(tree)))
    xml = ('<?xml version="1.0"?>\n' if declared else "") + to_xml(tree)
    records = list(split_records(xml.encode(), "/" + "/".join(steps)))
    want = _reference(tree, steps)
    assert [r.position for r in records] == list(range(len(want)))
    got = [[e[1:] for e in expected] for expected in (expected_events(w) for w in want)]
    parsed = [
        [(str(e.kind), e.name, e.value, e.depth, e.node) for e in parse(r.content)] for r in records
    ]
    assert parsed == got


@settings(max_examples=150)
@given(st.lists(elements(max_leaves=12), min_size=1, max_size=3), st.data(), st.integers(1, 9))
def test_records_of_an_event_stream_are_the_records_of_the_splitter(trees, data, batch):
    """``--record-path`` in-process (events/records.py, on the event stream) gives each
    record the events the byte splitter's record gives, at every batch size, over
    several documents."""
    for tree in trees[1:]:
        tree.name = trees[0].name
    steps = data.draw(st.sampled_from(_paths(trees[0])))
    path = "/" + "/".join(steps)
    xml = "".join(to_xml(tree) + "\n" for tree in trees)
    want = [
        [(e.doc, str(e.kind), e.name, e.value, e.depth, e.node) for e in parse(r.content)]
        for tree in trees
        for r in split_records(to_xml(tree).encode(), path)
    ]
    want = [[(n, *e[1:]) for e in events] for n, events in enumerate(want)]
    stream = EventStream([io.BytesIO(xml.encode())], batch_size=batch, record_path=path)
    got = [(e.doc, str(e.kind), e.name, e.value, e.depth, e.node) for e in stream]
    assert got == [e for events in want for e in events]


def test_records_keep_their_encoding_and_quoted_brackets():
    xml = '<?xml version="1.0" encoding="ISO-8859-1"?><s><t a="x>y"/><t>é</t></s>'.encode("latin-1")
    records = list(split_records(xml, "/s/t"))
    assert [r.content for r in records] == [b'<t a="x>y"/>', "<t>é</t>".encode()]
    assert root_attribute(records[0].content, "a") == "x>y"
    assert root_attribute(records[1].content, "a") is None


def test_a_malformed_document_keeps_the_records_before_the_error():
    got = []
    with pytest.raises(InputError, match="line 1, column 25: mismatched tag"):
        got.extend(split_records(b"<s><t>1</t><t>2</t><u></s>", "/s/t", "in.xml"))
    assert [r.content for r in got] == [b"<t>1</t>", b"<t>2</t>"]


@pytest.mark.parametrize("path", ["s/t", "/", "//s/t", "/s/*", "/s//t", "/s/."])
def test_a_record_path_is_absolute_names_only(path):
    with pytest.raises(ValueError, match="absolute path of element names"):
        parse_record_path(path)


def test_units_name_their_documents():
    assert document_id("f.xml", None, 0, 1) == "f.xml"
    assert document_id("f.jsonl", None, 2, 3) == "f.jsonl#2"
    assert document_id("f.xml", 7, 0, 1) == "f.xml#7"
    assert is_data_file("file:/d/a.xml.gz") and is_data_file("b.jsonl")
    assert not is_data_file("file:/d/.hidden.xml") and not is_data_file("/d/README.md")
    assert not is_data_file("/d/_SUCCESS")


def test_a_unit_of_several_documents_isolates_the_bad_one():
    content = gzip.compress(b"<a>1</a>\n<a><b></a>\n<a>3</a>\n")
    unit = read_unit("f.xml.gz", None, content)
    assert [doc_id for doc_id, _ in unit.good()] == ["f.xml.gz#0", "f.xml.gz#2"]
    [(bad_id, message)] = list(unit.bad())
    assert bad_id == "f.xml.gz#1" and "mismatched tag" in message


def test_worker_caches_keep_the_last_few_and_the_glob_names_the_data_files():
    from fnmatch import fnmatchcase

    from xcep.spark.units import WorkerCache, data_glob, is_data_file

    made = []
    cache = WorkerCache(size=2)
    for key in [1, 2, 1, 3, 1, 2]:
        cache.get(key, lambda key=key: made.append(key) or key * 10)
    assert made == [1, 2, 3, 2] and list(cache.items) == [1, 2]
    patterns = data_glob()[1:-1].split(",")
    for name in ["a.xml", "b.JSON", "c.jsonl.gz", "d.NDJSON.GZ", "e.txt", "f.xml.bz2", "g.gz"]:
        assert any(fnmatchcase(name, p) for p in patterns) == is_data_file(name), name
