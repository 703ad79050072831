import gzip
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trees import Element, as_tuples, elements, expected_events, to_xml
from xcep.errors import InputError
from xcep.events import EventStream, Kind, parse

SEPARATORS = st.sampled_from(["", "\n", " \n\t", "\n\n", "<!-- between -->\n"])


@given(elements(), st.booleans(), st.booleans(), st.integers(1, 64))
def test_random_trees_give_the_reference_events(tree, cdata, keep_ws, chunk_size):
    xml = to_xml(tree, cdata=cdata)
    got = parse(xml, keep_whitespace=keep_ws, chunk_size=chunk_size)
    assert as_tuples(got) == expected_events(tree, keep_whitespace=keep_ws)


@given(
    st.lists(elements(max_leaves=5), min_size=1, max_size=5),
    SEPARATORS,
    st.booleans(),
    st.integers(1, 40),
)
def test_concatenated_documents_are_numbered_in_order(trees, separator, declared, chunk_size):
    decl = '<?xml version="1.0" encoding="UTF-8"?>\n' if declared else ""
    text = separator.join(decl + to_xml(t) for t in trees)
    got = parse(text, chunk_size=chunk_size)
    want = [e for doc, t in enumerate(trees) for e in expected_events(t, doc)]
    assert as_tuples(got) == want


@given(st.lists(elements(max_leaves=5), min_size=1, max_size=5), st.integers(1, 40))
def test_a_batchs_depth_facts_are_its_events(trees, batch_size):
    """``EventBatch.depth_facts`` (the events kernel where built, else Python): the largest
    depth and the closes at depth 1 of the batch's events, both ways."""
    from unittest import mock

    from xcep.events import model

    text = "".join(to_xml(t) for t in trees).encode()
    for batch in EventStream([io.BytesIO(text)], batch_size=batch_size).batches():
        pairs = list(zip(batch.kinds, batch.depths, strict=True))
        want = (max(d for _, d in pairs), sum(k == Kind.CLOSE and d == 1 for k, d in pairs))
        assert batch.depth_facts() == want
        with mock.patch.object(model, "depth_facts", None):
            assert batch.depth_facts() == want


def _corrupt(xml: str, how: int) -> str:
    if how == 0:  # truncated
        return xml[: len(xml) // 2]
    if how == 1:  # mismatched close tag
        return xml.replace("</", "</zz", 1) if "</" in xml else xml[:-1]
    cut = xml.index(">") + 1
    return xml[:cut] + "&undefined;" + xml[cut:]  # an undefined entity


def _undeclared_corruption(tree: Element, how: int | None) -> int | None:
    if how is None or "\n<" in to_xml(tree):
        return None
    return 1 if how == 0 else how


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(elements(max_leaves=5), st.none() | st.integers(0, 2)), min_size=1, max_size=6
    ),
    st.booleans(),
    st.integers(3, 50),
)
def test_malformed_documents_cost_only_themselves(docs, declared, chunk_size):
    # Declared streams resync at the next <?xml; undeclared ones at the next line starting a
    # tag. Without declarations a truncated document swallows what follows (documented), so
    # undeclared streams get the other corruptions only, and only in documents with no line
    # of their own starting with a tag (the reader would resync there, as documented).
    decl = '<?xml version="1.0"?>\n' if declared else ""
    if not declared:
        docs = [(t, _undeclared_corruption(t, bad)) for t, bad in docs]
    texts = [decl + (to_xml(t) if bad is None else _corrupt(to_xml(t), bad)) for t, bad in docs]
    errors: list[InputError] = []
    stream = EventStream(
        [io.BytesIO("\n".join(texts).encode())], errors=errors.append, chunk_size=chunk_size
    )
    got = as_tuples(stream)
    want = [e for i, (t, bad) in enumerate(docs) if bad is None for e in expected_events(t, i)]
    assert got == want
    assert [e.doc for e in errors] == [i for i, (_, bad) in enumerate(docs) if bad is not None]
    assert stream.stats.bad_documents == len(errors)
    assert stream.stats.documents == len(docs) - len(errors)


def test_error_names_source_document_line_and_column():
    text = '<?xml version="1.0"?>\n<a>1</a>\n<?xml version="1.0"?>\n<b>\n  <c></d>\n</b>\n'
    with pytest.raises(InputError) as info:
        list(EventStream([io.BytesIO(text.encode())]))
    error = info.value
    assert (error.doc, error.line, error.column) == (1, 5, 8)  # at the name in </d>
    assert str(error).endswith("document 1, line 5, column 8: mismatched tag")


def test_error_column_counts_from_the_start_of_the_line_for_a_mid_line_document():
    errors = []
    list(EventStream([io.BytesIO(b"<a/><b></c>")], errors=errors.append))
    assert (errors[0].doc, errors[0].line, errors[0].column) == (1, 1, 10)


def test_fail_policy_raises_and_skip_policy_drops():
    text = b'<?xml version="1.0"?><a/>\n<?xml version="1.0"?><a>\n<?xml version="1.0"?><b/>'
    with pytest.raises(InputError):
        list(EventStream([io.BytesIO(text)]))
    events = list(EventStream([io.BytesIO(text)], errors="skip"))
    assert [(e.doc, e.name) for e in events] == [(0, "a"), (0, "a"), (2, "b"), (2, "b")]


def test_text_is_coalesced_over_cdata_entities_and_character_references():
    events = parse("<a>x<![CDATA[<y>]]>&amp;&#65;&#x42;<!-- c -->z<?pi x?>w</a>")
    assert [e.value for e in events if e.kind is Kind.TEXT] == ["x<y>&ABzw"]


def test_whitespace_only_text_is_dropped_unless_kept():
    xml = "<a>\n  <b> x </b>\n  \n</a>"
    assert [e.value for e in parse(xml) if e.kind is Kind.TEXT] == [" x "]
    kept = [e.value for e in parse(xml, keep_whitespace=True) if e.kind is Kind.TEXT]
    assert kept == ["\n  ", " x ", "\n  \n"]


def test_namespace_prefixes_are_kept_and_declarations_are_not_attributes():
    events = parse('<p:a xmlns:p="urn:p" xmlns="urn:d" p:k="1"><b/></p:a>')
    assert [(str(e.kind), e.name) for e in events] == [
        ("open", "p:a"),
        ("attr", "p:k"),
        ("open", "b"),
        ("close", "b"),
        ("close", "p:a"),
    ]


def test_internal_entities_expand():
    xml = '<!DOCTYPE a [<!ENTITY who "world"><!ENTITY hi "hello &who;">]><a t="&hi;">&hi;!</a>'
    events = parse(xml)
    assert [e.value for e in events if e.value] == ["hello world", "hello world!"]


def test_names_are_interned_per_stream():
    stream = EventStream([io.BytesIO(b"<a><b/><a x='1'/></a>")])
    batches = list(stream.batches())
    ids = [n for b in batches for n in b.names]
    assert ids == [0, 1, 1, 0, 2, 0, 0]
    assert stream.symbols.names == ["a", "b", "x"]


def test_batches_do_not_split_small_documents_and_split_large_ones():
    small = b"".join(b"<d><e>%d</e></d>" % i for i in range(100))
    batches = list(EventStream([io.BytesIO(small)], batch_size=7).batches())
    for batch in batches:  # a batch ends at a document boundary
        assert batch.kinds[-1] == Kind.CLOSE and batch.depths[-1] == 1
    big = b"<r>" + b"<e/>" * 1000 + b"</r>"
    assert len(list(EventStream([io.BytesIO(big)], batch_size=100, chunk_size=256).batches())) > 5


def test_deep_nesting_up_to_the_limit_and_not_beyond():
    def nested(n):
        return "<a>" * n + "</a>" * n

    assert max(e.depth for e in parse(nested(10_000))) == 10_000
    with pytest.raises(InputError, match="deeper than the limit of 10000"):
        parse(nested(10_001))
    with pytest.raises(InputError, match="limit of 5"):
        parse(nested(6), max_depth=5)


def test_gzip_input_gives_the_same_events(tmp_path):
    xml = b"<a><b>text</b></a>"
    path = tmp_path / "doc.xml.gz"
    path.write_bytes(gzip.compress(xml))
    plain = tmp_path / "doc.xml"
    plain.write_bytes(xml)
    assert list(EventStream([path])) == list(EventStream([plain]))
    # gzip is recognised by its magic bytes, not only by the name
    other = tmp_path / "doc.data"
    other.write_bytes(gzip.compress(xml))
    assert list(EventStream([other])) == list(EventStream([plain]))


def test_empty_input_has_no_documents():
    stream = EventStream([io.BytesIO(b"  \n ")])
    assert list(stream) == []
    assert stream.stats.documents == 0


def test_trailing_garbage_is_a_bad_document_of_its_own():
    errors = []
    events = list(EventStream([io.BytesIO(b"<a/>\nnot xml")], errors=errors.append))
    assert [e.doc for e in events] == [0, 0]
    assert [(e.doc, e.line) for e in errors] == [(1, 2)]


def test_bad_gzip_is_reported_not_crashed(tmp_path):
    path = tmp_path / "bad.xml.gz"
    body = b"".join(b"<b>%d</b>" % (i * 7919 % 10007) for i in range(20000))
    packed = gzip.compress(b"<a>" + body + b"</a>")
    path.write_bytes(packed[: len(packed) // 2])
    errors = []
    list(EventStream([path], errors=errors.append))
    assert len(errors) == 1 and errors[0].source == str(path)


def test_single_element_tree():
    assert as_tuples(parse("<a/>")) == expected_events(Element("a"))


def test_documents_without_declarations_after_a_bad_declared_one_are_read():
    """The first document has an XML declaration and is malformed; the ones after it
    have none: they are found by lines (no declaration comes), not lost (issue 28)."""
    from xcep.events import EventStream

    errors = []
    data = b'<?xml version="1.0"?><t id="0"><k>x</q></t>\n<t id="1"/>\n<t id="2"/>\n'
    stream = EventStream([io.BytesIO(data)], errors=errors.append)
    opened = [event.doc for event in stream if str(event.kind) == "open"]
    assert opened == [1, 2]
    assert len(errors) == 1 and errors[0].doc == 0
