"""The parts of XPush against obviously correct references and peers."""

import math
import random

from hypothesis import given
from hypothesis import strategies as st
from lxml import etree

from xcep.schema import parse_dtd, read_dtd
from xcep.schema.dtd import Model
from xcep.xpush.predicates import Predicate, PredicateIndex, xpath_number

VALUE_TEXT = st.text(st.sampled_from("0123456789.- abx"), max_size=6)
CONSTANTS = st.one_of(
    st.floats(-20, 20, allow_nan=False).map(lambda x: round(x, 1)),
    VALUE_TEXT,
)
OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "starts-with", "contains"])


# values for the compiled index too: white space and digits beyond ASCII (Python parses
# those), and numbers too long for its buffer
ANY_VALUE_TEXT = st.one_of(
    st.text(st.sampled_from("0123456789.- abx\t\n\r\v\x1c\xa0\u0663\uff11"), max_size=8),
    st.integers(0, 10**80).map(str),
)


@given(
    st.lists(st.tuples(OPS, CONSTANTS), max_size=30),
    st.lists(st.one_of(VALUE_TEXT, ANY_VALUE_TEXT), max_size=10),
)
def test_index_finds_exactly_the_true_predicates(specs, values):
    predicates = {}
    for i, (op, constant) in enumerate(specs):
        if op in ("starts-with", "contains"):
            constant = str(constant)
        predicates[3 * i + 1] = Predicate(op, constant)  # states as in an AFA: not all of them
    index = PredicateIndex(predicates)
    compiled = index.compiled(3 * len(specs) + 2)  # the compiled core's twin, when built
    for value in values:
        want = {i for i, p in predicates.items() if p.holds(value)}
        assert index.true_states(value) == want
        if compiled is not None:
            assert compiled.true_states(value) == sorted(want), value


# starts-with and contains beyond ASCII: two- and three-byte characters, a character
# whose UTF-8 ends with the bytes another's starts with, a lone surrogate (from JSON)
TEXT_ALPHABET = st.sampled_from("abé\u00e9\u0101\u3042\u0301\ud800x")


@given(
    st.lists(
        st.tuples(st.sampled_from(["starts-with", "contains"]), st.text(TEXT_ALPHABET, max_size=4)),
        max_size=12,
    ),
    st.lists(st.text(TEXT_ALPHABET, max_size=10), max_size=10),
)
def test_text_predicates_beyond_ascii(specs, values):
    """The compiled index matches UTF-8 bytes: it must agree with str's own tests."""
    predicates = {2 * i + 1: Predicate(op, constant) for i, (op, constant) in enumerate(specs)}
    compiled = PredicateIndex(predicates).compiled(2 * len(specs) + 2)
    for value in values:
        want = {i for i, p in predicates.items() if p.holds(value)}
        assert PredicateIndex(predicates).true_states(value) == want
        if compiled is not None:
            assert compiled.true_states(value) == sorted(want), value


@given(st.one_of(VALUE_TEXT, st.text("12 .-\t\n\r\xa0\u2003\uff11\u0663")))
def test_number_conversion_agrees_with_lxml(text):
    """XPath's digits are ASCII and its white space XML's: a full-width one (U+FF11) and
    an Arabic-Indic three are no digits, NBSP and an em space no white space. (Control
    characters such as \\x1c cannot be in XML text; lxml refuses them.) libxml2 sums
    the digits in a double, so its value may be a few units in the last place off the
    nearest double (``1.36`` -> 1.3599999999999999): the values agree to that."""
    theirs = etree.XPath("number($v)")(etree.Element("x"), v=text)
    ours = xpath_number(text)
    assert math.isclose(ours, theirs, rel_tol=1e-12) or (ours != ours and theirs != theirs)


@given(VALUE_TEXT, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), CONSTANTS)
def test_comparisons_agree_with_lxml(value, op, constant):
    doc = etree.fromstring("<a/>")
    doc.text = value
    literal = repr(constant) if isinstance(constant, float) else f"'{constant}'"
    if isinstance(constant, float):
        literal = f"{constant:.1f}"
    theirs = etree.XPath(f"boolean(/a[. {op} {literal}])")(doc.getroottree())
    assert Predicate(op, constant).holds(value) == theirs


def _words(model: Model, rng: random.Random) -> list[str]:
    """A random child sequence allowed by a content model (the reference)."""
    count = {"": 1, "?": rng.randint(0, 1), "*": rng.randint(0, 3), "+": rng.randint(1, 3)}
    out: list[str] = []
    for _ in range(count[model.repeat] if model.kind not in ("mixed",) else rng.randint(0, 4)):
        if model.kind == "name":
            out.append(model.name)
        elif model.kind == "seq":
            for item in model.items:
                out.extend(_words(item, rng))
        elif model.kind in ("choice", "mixed") and model.items:
            out.extend(_words(rng.choice(model.items), rng))
    return out


def test_order_facts_hold_on_every_generated_child_sequence(data_dir):
    dtd = read_dtd(data_dir / "xmark" / "auction.dtd")
    rng = random.Random(5)
    for name, model in dtd.elements.items():
        for _ in range(200):
            word = _words(model, rng)
            for i, later in enumerate(word):
                for earlier in word[:i]:
                    assert not dtd.precedes(later, earlier), (name, word)


def test_dtd_facts():
    dtd = parse_dtd(
        """<!-- a comment <!ELEMENT fake (x)> -->
        <!ELEMENT p (name, (age | born)?, phone*, note)>
        <!ATTLIST p id ID #REQUIRED kind (a|b) "a">
        <!ELEMENT name (#PCDATA)> <!ELEMENT age (#PCDATA)> <!ELEMENT born (#PCDATA)>
        <!ELEMENT phone (#PCDATA)> <!ELEMENT note (#PCDATA | b)*> <!ELEMENT b EMPTY>"""
    )
    assert dtd.children("p") == ["name", "age", "born", "phone", "note"]
    assert dtd.attributes("p") == ["id", "kind"]
    assert dtd.precedes("name", "phone") and dtd.precedes("age", "note")
    assert not dtd.precedes("phone", "phone") and not dtd.precedes("note", "name")
    # never siblings together: vacuously ordered both ways (dropping either is sound)
    assert dtd.precedes("age", "born") and dtd.precedes("born", "age")
    assert dtd.precedes("@id", "name") and not dtd.precedes("name", "@id")
    assert dtd.can_contain("p", "b") and not dtd.can_contain("name", "b")
    assert dtd.has_text("note") and not dtd.has_text("p")
    assert "fake" not in dtd.elements


@given(st.text(st.sampled_from("-+ 0123456789١٢²a.\t"), max_size=6))
def test_a_filter_id_is_an_integer_exactly_when_it_reads_as_one(text):
    """``parse_id``: ``-?\\d+`` (Unicode decimal digits too) is an int, anything else the
    text itself."""
    import re

    from xcep.idlines import parse_id

    expected = int(text) if re.fullmatch(r"-?\d+", text) else text
    found = parse_id(text)
    assert found == expected and type(found) is type(expected)


@given(
    st.lists(
        st.text(st.sampled_from(" \t\r\x0b\x1c\u00a0\u3000#-+0123456789١²ab/[]=é"), max_size=12),
        max_size=8,
    ),
    st.integers(1, 10**6),
)
def test_a_blocks_id_lines_read_in_c_are_the_loops(lines, first):
    """``filter_blocks`` reads a block's ``ID TEXT`` lines in C (``id_columns``) where every
    line is good: the same line numbers, ids (ints and strs alike) and texts as its loop,
    else None (the loop says what is wrong)."""
    from unittest import mock

    from xcep import idlines

    if idlines.id_columns is None:
        return  # the events kernel is not built
    got = idlines.id_columns(lines, first)
    with mock.patch.object(idlines, "text_blocks", lambda path: [(first, lines, {})]):
        errors: list = []
        with mock.patch.object(idlines, "id_columns", None):
            expected = [tuple(columns) for columns in idlines.filter_blocks("-", errors)]
    if errors:
        assert got is None
    else:
        assert got is not None and [got] == expected
        assert [type(fid) for fid in got[1]] == [type(fid) for fid in expected[0][1]]


@given(
    st.lists(
        st.tuples(st.sampled_from(["starts-with", "contains"]), st.text("abcab\u00e9", max_size=5)),
        max_size=20,
    ),
    st.lists(st.text("abcab\u00e9x", max_size=12), max_size=8),
    st.sampled_from([1, 7, 40, 2**23]),
)
def test_text_matcher_rows_under_any_budget(specs, values, rows):
    """The contains automaton read as a DFA where its rows fit the budget and by its edges
    and failures elsewhere: the same states as str's own tests, whatever the budget."""
    from xcep.xpush import compiled

    if compiled.StateKernel is None:
        return  # the compiled core is not built here
    from xcep.xpush._states import TextMatcher

    patterns: tuple[dict, dict] = ({}, {})
    for state, (op, pattern) in enumerate(specs):
        patterns[op == "contains"].setdefault(pattern.encode(), []).append(state)
    matcher = TextMatcher(len(specs), *patterns, rows=rows)
    for value in values:
        want = {
            state
            for state, (op, pattern) in enumerate(specs)
            if (pattern in value if op == "contains" else value.startswith(pattern))
        }
        assert set(matcher(value)) == want, value


@given(
    st.one_of(
        st.lists(st.text()),
        st.lists(st.integers(-(10**30), 10**30)),
        st.lists(st.one_of(st.text(), st.integers())),
    )
)
def test_ids_as_json_are_what_a_json_encoder_writes(ids):
    """The answers' ids written as JSON text a list at a time (all strings, all integers,
    or both) are the text ``json`` writes for each, and read back as the id."""
    import json

    from xcep.xpush.compiled import ids_json

    written = ids_json(ids)
    assert written == [json.dumps(i, ensure_ascii=False) for i in ids]
    assert [json.loads(w) for w in written] == ids


@given(st.lists(st.tuples(st.one_of(st.text(), st.integers(), st.none()), st.integers())))
def test_a_hashed_dict_is_an_empty_dict_of_its_kind(items):
    """``hashed_dict`` (a table that keeps its keys' hashes) starts empty, is of the kind
    asked for, and holds what a plain one holds (``None`` a key like any other)."""
    from collections import defaultdict
    from functools import partial

    from xcep.dicts import hashed_dict

    plain, hashed = dict(items), hashed_dict()
    assert type(hashed) is dict and not hashed
    hashed.update(items)
    assert hashed == plain and list(hashed) == list(plain)
    lists = hashed_dict(partial(defaultdict, list))
    assert type(lists) is defaultdict and not lists
    for key, value in items:
        lists[key].append(value)
    assert sorted(map(len, lists.values())) == sorted(
        sum(1 for k, _ in items if k == key) for key in plain
    )
