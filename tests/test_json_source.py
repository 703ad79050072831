import io
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trees import as_tuples, expected_events, json_elements, to_json, to_xml
from xcep.errors import InputError
from xcep.events import EventStream, Kind, parse


@given(json_elements(), st.randoms(use_true_random=False))
def test_the_same_tree_as_xml_and_as_json_gives_the_same_events(tree, rnd):
    tree.name = "json"  # the root element of every JSON document
    text = to_json(tree, lambda: rnd.random() < 0.5)
    assert as_tuples(parse(text, format="json")) == as_tuples(parse(to_xml(tree)))
    assert as_tuples(parse(text, format="json")) == expected_events(tree)


@given(st.lists(json_elements(max_leaves=4), min_size=1, max_size=5), st.integers(1, 30))
def test_json_lines_are_documents_in_order(trees, chunk_size):
    rnd = random.Random(0)
    for tree in trees:
        tree.name = "json"
    text = "\n".join(to_json(t, lambda: rnd.random() < 0.5) for t in trees) + "\n"
    got = parse(text, format="jsonl", chunk_size=chunk_size)
    assert as_tuples(got) == [e for i, t in enumerate(trees) for e in expected_events(t, i)]


def _shape(events):
    return [(str(e.kind), e.name, e.value, e.depth) for e in events]


def test_scalars_keep_their_json_spelling():
    events = parse(
        '{"n": 1.50, "i": -7, "e": 1E3, "t": true, "f": false, "z": null, "s": ""}', format="json"
    )
    texts = {}
    current = None
    for e in events:
        if e.kind is Kind.OPEN:
            current = e.name
            texts[current] = None
        elif e.kind is Kind.TEXT:
            texts[current] = e.value
    assert texts == {
        "json": None,
        "n": "1.50",
        "i": "-7",
        "e": "1E3",
        "t": "true",
        "f": "false",
        "z": None,
        "s": None,
    }


def test_arrays_repeat_the_member_name_and_nested_arrays_use_item():
    events = parse('{"k": [1, [2, 3], {"x": 4}], "empty": []}', format="json")
    xml = "<json><k>1</k><k><item>2</item><item>3</item></k><k><x>4</x></k></json>"
    assert _shape(events) == _shape(parse(xml))


def test_top_level_array_and_scalar():
    assert _shape(parse("[1, 2]", format="json")) == _shape(
        parse("<json><item>1</item><item>2</item></json>")
    )
    assert _shape(parse('"hi"', format="json")) == _shape(parse("<json>hi</json>"))


def test_repeated_keys_are_all_kept_in_order():
    events = parse('{"a": 1, "b": 2, "a": 3}', format="json")
    assert [e.value for e in events if e.kind is Kind.TEXT] == ["1", "2", "3"]


def test_root_name_is_configurable():
    assert parse("{}", format="json", json_root="tick")[0].name == "tick"


def test_bad_json_line_costs_only_itself():
    text = b'{"a": 1}\n\n{"a": \n{"a": 3}\n\xff\xfe\n[1] [2]\n{"a": 5}'
    errors: list[InputError] = []
    stream = EventStream([io.BytesIO(text)], format="jsonl", errors=errors.append)
    docs = sorted({e.doc for e in stream})
    assert docs == [0, 2, 5]
    assert [(e.doc, e.line) for e in errors] == [(1, 3), (3, 5), (4, 6)]
    assert errors[0].column == 7 and errors[0].raw == b'{"a": '  # just past the end
    assert "extra data" in errors[2].message


def test_concatenated_and_pretty_json_documents_with_a_bad_one_between():
    text = '{\n  "a": 1\n}\n{"a": [1,\n}\n[\n  2\n]\n'
    errors: list[InputError] = []
    events = list(EventStream([io.BytesIO(text.encode())], format="json", errors=errors.append))
    assert sorted({e.doc for e in events}) == [0, 2]
    assert [(e.doc, e.line) for e in errors] == [(1, 5)]


def test_json_depth_limits():
    deep = "[" * 50 + "]" * 50
    assert max(e.depth for e in parse(deep, format="json")) == 50
    with pytest.raises(InputError, match="limit of 10"):
        parse(deep, format="json", max_depth=10)
    with pytest.raises(InputError, match="too deep"):
        parse("[" * 200_000 + "]" * 200_000, format="json")


def test_format_is_sniffed_from_the_content():
    for text, want in [
        ('{"a": 1}\n{"a": 2}\n', [0, 1]),  # JSON Lines
        ('{\n "a": 1\n}\n', [0]),  # one pretty JSON document
        ("<a/>\n<b/>", [0, 1]),  # XML
    ]:
        events = list(EventStream([io.BytesIO(text.encode())]))
        assert sorted({e.doc for e in events}) == want, text


def test_events_round_trip_through_json_dicts():
    events = parse('{"a": "x"}', format="json")
    assert json.loads(json.dumps([e.to_dict() for e in events]))[2] == {
        "doc": 0,
        "kind": "text",
        "value": "x",
        "depth": 3,
        "node": 2,
    }


# ---------- JSON faults cost only their document (issue 28) ----------


def _read(data: bytes, format: str) -> tuple[list[int], list]:
    from xcep.events import EventStream

    errors: list = []
    stream = EventStream([io.BytesIO(data)], format=format, errors=errors.append)
    roots = [e.doc for e in stream if str(e.kind) == "open" and e.depth == 1]
    return roots, errors


@pytest.mark.parametrize(
    "bad, message",
    [
        (b'{"k": NaN}', "NaN is not a JSON value"),
        (b'{"k": -Infinity}', "-Infinity is not a JSON value"),
        (b'{"k": "\\ud800"}', "lone surrogate"),
        (b'{"\\udfff": 1}', "lone surrogate"),
    ],
)
def test_what_json_is_not_is_one_bad_record(bad, message):
    roots, errors = _read(b'{"k": 1}\n' + bad + b'\n{"k": "\\ud83d\\ude00"}\n', "jsonl")
    assert roots == [0, 2]
    assert [(e.doc, message in e.message) for e in errors] == [(1, True)]


def test_a_byte_order_mark_before_json_lines_is_skipped():
    roots, errors = _read(b'\xef\xbb\xbf{"k": 1}\n{"k": 2}\n', "jsonl")
    assert roots == [0, 1] and not errors


def test_a_bad_byte_in_one_document_of_a_json_file_costs_that_document():
    data = b'{"a": 1}\n{"a": 2}\n{"a": "x\xffy"}\n{"a": 4}\n{"a": 5}\n'
    roots, errors = _read(data, "json")
    assert roots == [0, 1, 3, 4]
    assert [(e.doc, e.line, e.column) for e in errors] == [(2, 3, 9)]
    assert "not UTF-8" in errors[0].message


_json_values = st.recursive(
    st.none() | st.booleans() | st.sampled_from(["", "a", "b c", "1.50"]) | st.integers(-3, 3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(st.tuples(st.sampled_from(["k", "m", "n"]), inner), max_size=3)
        .map(lambda pairs: "{" + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in pairs) + "}")
        .map(json.loads)
    ),
    max_leaves=6,
)


def _retexted(value, rnd):
    """The same structure with other texts (an empty string may become text, and back)."""
    if isinstance(value, str):
        return rnd.choice(["", "x", "y z", "7"])
    if isinstance(value, bool):
        return rnd.random() < 0.5
    if isinstance(value, list):
        return [_retexted(item, rnd) for item in value]
    if isinstance(value, dict):
        return {key: _retexted(item, rnd) for key, item in value.items()}
    return value


@given(
    st.lists(st.sampled_from(range(4)), min_size=1, max_size=30),
    st.lists(_json_values, min_size=4, max_size=4),
    st.randoms(),
)
def test_documents_of_one_structure_give_the_events_each_gives_alone(picks, values, rnd):
    """Records repeat structures (the reader then copies a structure's events and puts
    the texts in): each record's events are those it has when read alone."""
    lines = [json.dumps(_retexted(values[i], rnd)) for i in picks]
    together = parse("\n".join(lines) + "\n", format="jsonl")
    alone = []
    for doc, line in enumerate(lines):
        alone += [event._replace(doc=doc) for event in parse(line + "\n", format="jsonl")]
    assert together == alone


@given(
    st.lists(st.sampled_from(range(4)), min_size=0, max_size=70),
    st.lists(_json_values, min_size=4, max_size=4),
    st.randoms(),
    st.sampled_from(["member", "top", "nested", "flat"]),
)
def test_a_long_array_of_records_gives_the_events_of_its_items_each_alone(
    picks, values, rnd, where
):
    """The items of a long array repeat structures (the reader then copies a structure's
    events and puts the texts in, ``_Items``): the events are those of reading every item
    on its own, in a member's array, a top-level one, arrays inside the records, and flat
    records of strings and numbers."""
    from xcep.events import json_source

    if where == "flat":
        values = [{"c": "A", "p": 1.5}, {"c": "", "p": "7"}, {"p": 2, "c": "B"}, {"c": "x"}]
    items = [_retexted(values[i], rnd) for i in picks]
    document = {
        "member": {"head": 1, "rows": items, "tail": [1, 2]},
        "top": items,
        "nested": {"rows": [{"k": items, "n": i} for i in range(17)]},
        "flat": {"rows": items},
    }[where]
    text = json.dumps(document)
    cached = parse(text, format="json")
    long = json_source._Items.LONG
    json_source._Items.LONG = 10**9  # every item on its own
    try:
        alone = parse(text, format="json")
    finally:
        json_source._Items.LONG = long
    assert cached == alone


def test_a_long_line_read_in_many_chunks_is_one_record():
    """A JSON Lines record much longer than a read (the line is joined once, not
    chunk by chunk: a 100 MB string took minutes; issue 28)."""
    value = "x" * 300_000
    data = json.dumps({"k": value}).encode() + b"\n" + b'{"k": "y"}\n'
    stream = EventStream([io.BytesIO(data)], format="jsonl", chunk_size=1024)
    texts = [event.value for event in stream if event.kind == Kind.TEXT]
    assert texts == [value, "y"]


@given(
    st.lists(json_elements(max_leaves=12), min_size=1, max_size=4),
    st.integers(1, 40),
    st.integers(4, 60),
    st.booleans(),
)
def test_a_large_json_input_read_as_it_comes_gives_the_same_events(trees, chunk_size, hold, pretty):
    """Past json_stream.WHOLE_LIMIT a .json input is read as it comes: containers too
    large to hold (past HOLD_LIMIT) are walked into, the rest decoded whole. Made tiny
    here, so that every document is walked: the events are those of reading it whole."""
    import xcep.events.json_stream as json_stream

    rnd = random.Random(0)
    for tree in trees:
        tree.name = "json"
    texts = [to_json(t, lambda: rnd.random() < 0.5) for t in trees]
    if pretty:
        texts = [json.dumps(json.loads(t), indent=2) for t in texts]
    text = ("\n" if pretty else " ").join(texts) + "\n"
    expected = [e for i, t in enumerate(trees) for e in expected_events(t, i)]
    old = json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT
    json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT = 1, hold
    try:
        got = parse(text, format="json", chunk_size=chunk_size)
    finally:
        json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT = old
    assert as_tuples(got) == expected


def test_a_bad_document_in_a_large_json_input_costs_only_itself(monkeypatch):
    import xcep.events.json_stream as json_stream

    monkeypatch.setattr(json_stream, "WHOLE_LIMIT", 1)
    monkeypatch.setattr(json_stream, "HOLD_LIMIT", 8)
    text = '{"id": "g0", "v": [1, 2, 3]}\n{"id": "b", "v": [1, NaN, 3]}\n{"id": "g1"}\n[1, 2'
    errors = []
    events = parse(text, format="json", chunk_size=5, errors=errors.append)
    ids = [e.value for e in events if e.value and e.value.startswith("g")]
    assert ids == ["g0", "g1"]
    assert [(e.doc, e.line) for e in errors] == [(1, 2), (3, 4)]  # NaN; the input ends


def test_a_large_json_array_is_read_in_memory_bounded_by_its_records(tmp_path):
    """One array of 25,000 and of 100,000 records (1.2 and 4.8 MB) read with the stream
    taking over at 256 KB and walking into values past 64 KB: the peak Python memory is
    the same for both (it depends on those limits, not on the input)."""
    import tracemalloc

    import xcep.events.json_stream as json_stream

    record = {"id": 0, "name": "n", "tags": ["a", "b"]}
    peaks = []
    for count in (25_000, 100_000):
        path = tmp_path / f"big{count}.json"
        path.write_text(
            "[" + ",\n".join(json.dumps({**record, "id": i}) for i in range(count)) + "]"
        )
        old = json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT
        json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT = 256 << 10, 64 << 10
        try:
            tracemalloc.start()
            events = sum(len(batch) for batch in EventStream([path]).batches())
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
            json_stream.WHOLE_LIMIT, json_stream.HOLD_LIMIT = old
        assert events == 2 + count * 14  # the root; per record an item, 4 members, 4 texts
    assert peaks[1] < 1.3 * peaks[0], peaks


_keys = st.sampled_from(["k", "m", "n", "é", "a b", ""])
_walked = st.recursive(
    st.none() | st.booleans() | st.sampled_from(["", "a", " ", "ü", "1.50"]) | st.integers(-3, 3),
    lambda inner: (
        st.lists(inner, max_size=20)  # (16 or more: a long array, read through _Items)
        | st.lists(st.tuples(_keys, inner), max_size=4).map(
            lambda pairs: (
                "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
            )
        )
    ).map(lambda v: json.loads(v) if isinstance(v, str) and v.startswith("{") else v),
    max_leaves=40,
)


@given(
    st.lists(_walked, min_size=1, max_size=3),
    st.integers(3, 12),
    st.sampled_from(["json", "jsonl"]),
)
def test_the_compiled_walk_gives_the_python_walks_events(values, max_depth, form):
    """A decoded document's events as the kernel walks it (``_tokenizer.json_events``)
    are the Python walk's, errors included: members, arrays (long ones through the
    structure cache), empty strings and nulls, nesting past ``max_depth``."""
    from xcep.events import json_source

    if json_source._tokenizer is None:
        pytest.skip("built without a C compiler")
    text = "\n".join(json.dumps(v, ensure_ascii=False) for v in values) + "\n"
    found = []
    for compiled in (True, False):
        errors: list = []
        events = parse(
            text, format=form, compiled=compiled, max_depth=max_depth, errors=errors.append
        )
        found.append((events, [str(e) for e in errors]))
    assert found[0] == found[1]
