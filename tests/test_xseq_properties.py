"""XSeq property tests: the streaming engine equals the reference evaluator on random
queries and documents, and plain Kleene-free paths equal lxml's XPath."""

from __future__ import annotations

import io
from unittest import mock

import lxml.etree as etree
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.xseq_queries import PREDICATES, documents, queries, to_xpath

from xcep.events import EventStream, parse
from xcep.schema import learn_schema
from xcep.testing.xseq_reference import evaluate
from xcep.xseq import XSeqEngine, parse_query, routing
from xcep.xseq.dom import Node
from xcep.xseq.evaluate import attribute_test, holds, required_attributes
from xcep.xseq.parser import QuerySyntaxError

SELECTION = st.sampled_from(("all", "all", "maximal", "skip-past-last"))


# what the streaming engine may refuse that the reference evaluates (docs/xseq.md, limits)
STREAM_LIMITS = ("cannot be followed by a", "must follow", "preceding_sibling", "outside the")


def engine_rows(query: str, text: str, **options) -> list | None:
    """The engine's rows, or None when it refuses the query for a documented stream limit."""
    try:
        engine = XSeqEngine(query, **options)
    except QuerySyntaxError as error:
        assert any(limit in str(error) for limit in STREAM_LIMITS), error
        return None
    stream = EventStream([io.BytesIO(text.encode())], batch_size=7)
    return list(engine.run(stream.batches()))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(), text=documents(), selection=SELECTION)
def test_engine_equals_reference(query: str, text: str, selection: str) -> None:
    try:
        expected = evaluate(query, parse(text), selection=selection)
    except QuerySyntaxError:
        return  # a generated query the language rejects (e.g. a variable bound twice)
    rows = engine_rows(query, text, selection=selection)
    assert rows is None or rows == expected, query


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=queries(),
    text=documents(),
    selection=SELECTION,
    level=st.sampled_from(("none", "prefix", "loops", "where", "all")),
)
def test_engine_equals_reference_at_every_optimization_level(query, text, selection, level):
    """The rewrites with the schema facts of the very documents keep the answers."""
    try:
        expected = evaluate(query, parse(text), selection=selection)
    except QuerySyntaxError:
        return
    stream = EventStream([io.BytesIO(text.encode())])
    schema = learn_schema(stream.batches(), documents=text.count("<r>"))
    rows = engine_rows(query, text, selection=selection, schema=schema, opt=level)
    assert rows is None or rows == expected, (query, level)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(), text=documents())
@example(  # an operand reaching the node both past a failing check and without one
    query="return $V0@x from /$V0 ((/a)* intersect (/a[b])* //a)", text="<r><a><a></a></a></r>"
)
def test_engine_equals_reference_values(query: str, text: str) -> None:
    try:
        expected = evaluate(query, parse(text), values_only=True)
    except QuerySyntaxError:
        return
    rows = engine_rows(query, text, values_only=True)
    assert rows is None or rows == expected, query


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(), text=documents())
def test_plain_paths_equal_lxml(query: str, text: str) -> None:
    xpath = to_xpath(query)
    if xpath is None:
        return
    expected = []
    for doc in etree.fromstring(f"<all>{text}</all>"):
        tree = etree.ElementTree(doc)
        for node in tree.xpath(xpath):
            expected.append([node if isinstance(node, str) else node.xpath("string(.)")])
    rows = engine_rows(query, text, values_only=True)
    assert rows is None or rows == expected, (query, xpath)


def automaton_rows(query: str, text: str, batch_size: int, stretches: bool) -> list | None:
    """The pushdown automaton's rows, reading quiet stretches in C or every event in
    Python; None when the engine refuses the query."""
    try:
        engine = XSeqEngine(query, fast=False)
    except QuerySyntaxError:
        return None
    stream = EventStream([io.BytesIO(text.encode())], batch_size=batch_size)
    with mock.patch.object(routing, "stretch", routing.stretch if stretches else None):
        return list(engine.run(stream.batches()))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(), text=documents(), batch_size=st.integers(1, 30))
@example(  # the text of a kept child after a child that is not kept (and skipped)
    query="return $V0@x from /$V0 where $V0/c/b/text() = 't'",
    text="<r><c><b><a></a>t</b></c></r>",
    batch_size=30,
)
def test_quiet_stretches_change_no_row(query: str, text: str, batch_size: int) -> None:
    """Reading the events no run needs in C (skipped subtrees, elements under ``//``
    waiters of other names) gives the rows of reading them all, however the batches
    cut the stretches."""
    expected = automaton_rows(query, text, batch_size, stretches=False)
    assert automaton_rows(query, text, batch_size, stretches=True) == expected, query


@pytest.mark.skipif(routing.stretch is None, reason="the kernel is not built")
@pytest.mark.parametrize(
    "query",
    [
        "//c/@x",  # a descendant waiter of another name
        "return $X@x from // $X[@k = 'p']",  # one for any element, but with a k
        "/r/b/@x",  # a waiter for the b children of r: no a is one
        "return $X@x from // $X partition by //c@k",  # the router's, outside the partitions
    ],
)
def test_a_quiet_stretch_is_read_outside_python(query: str) -> None:
    """The 50 a elements with no c (no k) below are one stretch, not Python's."""
    text = "<r>" + "<a><b x='1'>t</b><b/></a>" * 50 + "<a><c x='2' k='p'/></a><b x='2'/></r>"
    read = []

    def stretch(*args):
        found = routing_stretch(*args)
        read.append(found[0] - args[2])
        return found

    routing_stretch = routing.stretch
    with mock.patch.object(routing, "stretch", stretch):
        rows = list(
            XSeqEngine(query, fast=False).run(EventStream([io.BytesIO(text.encode())]).batches())
        )
    assert rows == [["2"]]
    assert max(read) > 50 * 6, read  # the 50 a elements at once (six events each and more)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("return $X/b/text() from /r/$X", [["t"], [None]]),  # b children only, not d/b
        ("return $X/c/b/@x from /r/$X", [[None], ["1"]]),  # c and b kept without subtrees
        ("return $X/text() from /r/$X", [["u"], [None]]),  # its text children
        ("return $X/c from /r/$X", [[None], ["wtv"]]),  # a value: all below c
    ],
)
def test_a_captured_subtree_keeps_what_its_readers_read(query: str, expected: list) -> None:
    """Readers of child paths keep only those children; skipped children between them
    lose nothing (``--values``: strings)."""
    text = "<r><a><d><b>no</b></d>u<b>t</b></a><a><c><d>w</d><b x='1'>t<e>v</e></b></c></a></r>"
    for stretches in (True, False):
        with mock.patch.object(routing, "stretch", routing.stretch if stretches else None):
            engine = XSeqEngine(query, fast=False, values_only=True)
            rows = list(engine.run(EventStream([io.BytesIO(text.encode())]).batches()))
        assert rows == expected, (query, stretches)
        assert rows == evaluate(query, parse(text), values_only=True)


ATTRIBUTE_PREDICATES = (
    *(p for p in PREDICATES if attribute_test(parse_query(f"/a[{p}]").path.preds[0])),
    "@x = @k",
    "2 < @x",
    "@x != '02' and @k",
    "not(@x >= 3 or @k = 'q')",
)


@settings(max_examples=500)
@given(
    pred=st.sampled_from(ATTRIBUTE_PREDICATES),
    attributes=st.dictionaries(
        st.sampled_from(("x", "k", "y")),
        st.sampled_from(("1", "2", " 2 ", "02", "3.5", "p", "q", "", "NaN", "1e0", "2_0")),
    ),
)
def test_attribute_tests_decide_as_the_evaluator(pred: str, attributes: dict) -> None:
    """A predicate decided at the open tag from its attribute list holds as ``holds``
    says on the element's node."""
    cond = parse_query(f"/a[{pred}]").path.preds[0]
    raw = [(name, value, i) for i, (name, value) in enumerate(attributes.items())]
    node = Node.element("a", 0, 0, None, raw)
    assert attribute_test(cond).test(raw) == holds(cond, node), (pred, attributes)
    if not required_attributes(cond) <= attributes.keys():  # one it needs is missing
        assert not holds(cond, node), (pred, attributes)


def test_only_attribute_predicates_are_decided_at_the_open_tag() -> None:
    readers = ("b", ". = 't'", "text() = 'u'", "parent::a", ".//b[@x = 1]", "@x + 1 = 2")
    assert [attribute_test(parse_query(f"/a[{p}]").path.preds[0]) for p in readers] == [None] * 6
    assert len(ATTRIBUTE_PREDICATES) >= 10
    needs = [
        sorted(required_attributes(parse_query(f"/a[{p}]").path.preds[0]))
        for p in ATTRIBUTE_PREDICATES
    ]
    assert ["x"] in needs and ["k", "x"] in needs and [] in needs, needs


def test_the_generator_reaches_the_interesting_cases() -> None:
    """The strategies produce Kleene-*, partitions, aggregates and XPath-comparable paths."""
    seen = {")*": 0, "partition by": 0, "sum(": 0, "xpath": 0, "prev(": 0, "$": 0}
    seen |= {"intersect": 0, "parent::": 0, "ancestor::": 0}

    @settings(max_examples=1000, database=None)
    @given(query=queries())
    def sample(query: str) -> None:
        for key in seen:
            if key in query.replace("avg(", "sum(").replace("max(", "sum("):
                seen[key] += 1
        if to_xpath(query):
            seen["xpath"] += 1

    sample()
    assert all(count > 0 for count in seen.values()), seen


@pytest.mark.parametrize(
    "query",
    ["/r/a", "//b[@x > 1]/@x", "//a \\ b", "/r/\\* c", "//a[.//b[@x = 1]]/text()"],
)
def test_known_paths_equal_lxml(query: str) -> None:
    text = '<r><a x="1">t<b x="1"/></a><b x="2"/><c/><a><c><b x="1"/></c>u</a></r>'
    tree = etree.ElementTree(etree.fromstring(text))
    expected = [
        [n if isinstance(n, str) else n.xpath("string(.)")] for n in tree.xpath(to_xpath(query))
    ]
    assert engine_rows(query, text, values_only=True) == expected
    assert expected  # the example selects something


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries())
def test_paths_print_back_to_the_same_path(query: str) -> None:
    """--explain prints paths and conditions as XSeq text that parses to the same tree."""
    from xcep.xseq.ast import to_text

    parsed = parse_query(query)
    again = parse_query(to_text(parsed.path))
    assert again.path == parsed.path, to_text(parsed.path)
    if parsed.where is not None:
        where = parse_query(f"return 1 from {to_text(parsed.path)} where {to_text(parsed.where)}")
        assert where.where == parsed.where


@pytest.mark.parametrize(("op", "expected"), [("<", []), (">", [["x"]])])
def test_a_value_that_is_no_number_compares_as_a_string(op, expected) -> None:
    """'x' > -4 compares 'x' with '-4' by code point (docs/xseq.md), and does not fail."""
    text = "<r><i><v>x</v></i></r>"
    query = f"return $X/v/text() from /r/$X where $X/v/text() {op} -4"
    assert engine_rows(query, text) == evaluate(query, parse(text)) == expected


def test_an_ancestor_step_above_an_operand_start_is_refused() -> None:
    """In an operand that starts at a node of the path, an ancestor step may climb above
    that node, which a stream has passed: refused with the limit named (it gave [])."""
    query = "//$V0 (/b intersect /a/ancestor::c //b)"
    with pytest.raises(QuerySyntaxError, match="must follow a step") as error:
        XSeqEngine(query)
    assert "column 24" in str(error.value)
    text = "<r><c><a><a></a><b></b></a></c></r>"
    assert evaluate(query, parse(text)) == [["<b/>"]]  # what the reference answers
    # a parent step after a self step (``a/..``) that climbs above the operand's start
    with pytest.raises(QuerySyntaxError, match="must follow a step"):  # (it gave one row)
        XSeqEngine("return $V0@x, $V1@x from //$V0 (/$V1 | /a/../parent::*) /a")
    top = "/r/c/a/ancestor::c"  # at the path's start the rewrite stays exact
    assert engine_rows(top, text) == evaluate(top, parse(text)) == [["<c><a><a/><b/></a></c>"]]
