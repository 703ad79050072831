"""The window clause against Saxon (saxonche) on random event sequences and conditions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep import xquery

pytest.importorskip("saxonche")


def events_xml(events: list[tuple[str, int]]) -> str:
    body = "".join(f'<e id="{i}" t="{t}" v="{v}"/>' for i, (t, v) in enumerate(events, 1))
    return f"<log>{body}</log>"


EVENTS = st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 5)), max_size=12)

# conditions over the start variables ($s at $sp previous $sv next $sn) ...
START = [
    "true()",
    "$s/@t eq 'A'",
    "$s/@t = ('A', 'B')",
    "$s/@v > 2",
    "$sp mod 2 = 0",
    "$sn/@t = 'B'",
    "$sv/@v < $s/@v",
    "not($sv/@t = $s/@t)",
]
# ... and over the end variables ($e at $ep previous $ev next $en), which may use the start's
END = [
    "true()",
    "$e/@t eq 'C'",
    "$e/@v > $s/@v",
    "$ep - $sp ge 2",
    "$en/@t = 'A'",
    "$e/@t = $s/@t and $ep > $sp",
    "empty($en)",
    "$ev/@v >= $e/@v",
]


@st.composite
def window_queries(draw) -> str:
    sliding = draw(st.booleans())
    has_end = sliding or draw(st.booleans())
    start = draw(st.sampled_from(START))
    clause = f"for {'sliding' if sliding else 'tumbling'} window $w in /log/e "
    clause += f"start $s at $sp previous $sv next $sn when {start} "
    ret = "string-join(($w/@id, '|', $s/@id"
    if has_end:
        only = "only " if draw(st.booleans()) else ""
        end = draw(st.sampled_from(END))
        clause += f"{only}end $e at $ep previous $ev next $en when {end} "
        ret += ", '|', $e/@id, $ep, $ev/@id, $en/@id"
    ret += "), ',')"
    return f"string-join({clause}return {ret}, ';')"


@settings(max_examples=150)
@given(window_queries(), EVENTS)
def test_window_clause_agrees_with_saxon(saxon, query, events):
    xml = events_xml(events)
    assert list(xquery.compile(query).run(xml)) == saxon(query, xml), query


def test_window_examples_from_the_specification(saxon):
    """XQuery 3.1 §3.12.4's own examples over (2, 4, 6, 8, 10, 12, 14)."""
    queries = [
        "for tumbling window $w in (2, 4, 6, 8, 10, 12, 14) start at $s when fn:true() "
        "only end at $e when $e - $s eq 2 return <window>{ $w }</window>",
        "for tumbling window $w in (2, 4, 6, 8, 10, 12, 14) start at $s when $s mod 3 = 1 "
        "return <window>{ $w }</window>",
        "for sliding window $w in (2, 4, 6, 8, 10, 12, 14) start at $s when fn:true() "
        "only end at $e when $e - $s eq 2 return <window>{ $w }</window>",
        "for sliding window $w in (2, 4, 6, 8, 10, 12, 14) start at $s when fn:true() "
        "end at $e when $e - $s eq 2 return avg($w)",
        "for tumbling window $w in (2, 4, 6, 8, 10, 12, 14) "
        "start $first at $s when fn:true() end $last at $e when $last > 10 "
        "return <window>{ $first, $last }</window>",
    ]
    for query in queries:
        assert list(xquery.compile(query).run()) == saxon(query, "<x/>"), query
