"""XPush against lxml: random documents, random filters, every optimisation setting."""

import io
import itertools
import os
import random
import re
from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from xcep.events import EventStream
from xcep.lexing import expression
from xcep.xpush import FilterError, MachineOptions, XPushMachine, parse_filter
from xcep.xpush.ast import (
    ATTRIBUTE,
    CHILD,
    DESCENDANT,
    ELEMENT,
    PARENT,
    SELF,
    TEXT,
    And,
    Compare,
    Const,
    Exists,
    Not,
    Or,
    Path,
    Step,
    to_text,
)

LABELS = ["a", "b", "c"]
ATTRS = ["x", "y"]
VALUES = ["1", "2", "10", "x", "y", "ab", " 1 "]
CONSTANTS = [1.0, 2.0, 10.0, -1.0, "1", "x", "ab", "a"]
OPTIONS = [
    MachineOptions(top_down=False, counting=False),  # (every filter in the AFA)
    MachineOptions(top_down=True),
    MachineOptions(top_down=True, early=True),
]


# ---------- random documents ----------
@st.composite
def documents(draw, depth=0):
    tag = draw(st.sampled_from(LABELS))
    attrs = draw(st.dictionaries(st.sampled_from(ATTRS), st.sampled_from(VALUES), max_size=2))
    element = etree.Element(tag, attrs)
    if depth < 4:
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                element.append(draw(documents(depth=depth + 1)))
            else:
                text = draw(st.sampled_from(VALUES))
                if len(element):
                    element[-1].tail = (element[-1].tail or "") + text
                else:
                    element.text = (element.text or "") + text
    return element


# ---------- random filters ----------
def steps_strategy(exprs, max_steps=3, relative=False):
    tests = st.sampled_from(
        [(ELEMENT, n) for n in [*LABELS, "*"]]
        + [(ATTRIBUTE, n) for n in [*ATTRS, "*"]]
        + [(TEXT, None), (SELF, None)]
    )

    @st.composite
    def build(draw):
        n = draw(st.integers(1, max_steps))
        steps = []
        for i in range(n):
            test, name = draw(tests)
            if relative and i == 0 and draw(st.integers(0, 4)) == 0:
                test, name = PARENT, None
            axis = draw(st.sampled_from([CHILD, CHILD, DESCENDANT]))
            if test == PARENT:
                axis = CHILD
            preds = (
                ()
                if exprs is None
                else tuple(draw(st.lists(exprs, max_size=1 if i < n - 1 else 2)))
            )
            steps.append(Step(axis, test, name, preds))
        return Path(tuple(steps), absolute=not relative)

    return build()


def expr_strategy():
    def leaves():
        rel = steps_strategy(None, max_steps=2, relative=True)
        compare = st.builds(
            Compare,
            rel,
            st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
            st.sampled_from(CONSTANTS),
        )
        strings = st.builds(
            Compare,
            rel,
            st.sampled_from(["starts-with", "contains"]),
            st.sampled_from(["a", "1", "x"]),
        )
        return st.builds(Exists, rel) | compare | strings | st.builds(Const, st.booleans())

    def extend(inner):
        return (
            st.builds(lambda xs: And(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
            | st.builds(lambda xs: Or(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
            | st.builds(Not, inner)
            | st.builds(Exists, steps_strategy(inner, max_steps=2, relative=True))
        )

    return st.recursive(leaves(), extend, max_leaves=4)


filters = steps_strategy(expr_strategy(), max_steps=3)


def lxml_answer(trees, texts):
    answers = []
    for tree in trees:
        doc = etree.ElementTree(tree)
        answers.append(
            sorted(i for i, text in enumerate(texts) if etree.XPath(f"boolean({text})")(doc))
        )
    return answers


def run_machine(machine, trees):
    data = b"".join(b'<?xml version="1.0"?>' + etree.tostring(t) + b"\n" for t in trees)
    stream = EventStream([io.BytesIO(data)], keep_whitespace=True)
    return [ids for _, ids in machine.run(stream.batches())]


def usable(path):
    try:
        from xcep.xpush.workload import compile_filter

        compile_filter(to_text(path))
        return True
    except FilterError:
        return False


CONSTANTS_AND_ONE_MORE = [*CONSTANTS, "x1"]
NAMES_AND_MORE = [*LABELS, *ATTRS, "or", "q-1", "p:r", "text"]  # (or: a word, kept in a shape)


@settings(max_examples=300)
@given(
    filters,
    st.permutations(CONSTANTS_AND_ONE_MORE),
    st.permutations(CONSTANTS_AND_ONE_MORE),
    st.permutations(NAMES_AND_MORE),
)
def test_filters_of_one_shape_compile_as_if_each_were_parsed_alone(path, one, two, names):
    """compile_filter parses a shape once: filters that differ only in their constants
    and names (equal ones kept equal, or not) compile as a fresh parse and rewrite of
    each."""
    from dataclasses import fields, is_dataclass

    from xcep.xpush.rewrite import normalize
    from xcep.xpush.workload import compile_filter

    def swap(node, mapping, renamed):  # the constants and names of a tree replaced
        if isinstance(node, Compare):
            return Compare(swap(node.path, mapping, renamed), node.op, mapping[node.value])
        if isinstance(node, Step):
            predicates = swap(node.predicates, mapping, renamed)
            return replace(node, name=renamed.get(node.name, node.name), predicates=predicates)
        if isinstance(node, tuple):
            return tuple(swap(item, mapping, renamed) for item in node)
        if is_dataclass(node):
            return replace(
                node,
                **{f.name: swap(getattr(node, f.name), mapping, renamed) for f in fields(node)},
            )
        return node

    values = CONSTANTS_AND_ONE_MORE
    renames = ({}, dict(zip(NAMES_AND_MORE, names, strict=True)))
    for k, mapping in enumerate(
        ({}, dict(zip(values, one, strict=True)), dict(zip(values, two, strict=True)))
    ):
        mapping = {**{v: v for v in values}, **mapping}
        text = to_text(swap(path, mapping, renames[k % 2]))
        try:
            fresh = normalize(parse_filter(text))
        except Exception as exc:
            with pytest.raises(FilterError):
                compile_filter(text)
            assert type(exc).__name__ in ("FilterSyntaxError", "UnsupportedFilter")
            continue
        assert compile_filter(text) == fresh


@settings(max_examples=300)
@given(filters)
def test_a_filter_without_parent_steps_skips_the_rewrite(path):
    """``normalize`` leaves out ``rewrite_path`` where ``_parent_steps(…, or_hoisted=True)``
    says it would change nothing that simplifying does not: it must give the same tree."""
    from xcep.xpush.rewrite import _parent_steps, _simplify_path, rewrite_path

    if not _parent_steps(path, or_hoisted=True):
        assert _simplify_path(rewrite_path(path)) == _simplify_path(path)
    text = to_text(path)  # a text with no "." and no "::" is plain (workload._tree)
    if "." not in text and "::" not in text:
        assert not _parent_steps(parse_filter(text), or_hoisted=True), text


HEADS = ["/a", "//b", "/a/*", "/*//c", "/a/b", "/a/.", "a", "/a/@x", "//a/text()", "/a = 1 or /b"]


@settings(max_examples=300)
@given(
    st.sampled_from(HEADS),
    st.lists(expr_strategy(), min_size=2, max_size=4),
    st.sampled_from([" and ", " and ", "  and\t", ") and ("]),
)
def test_a_conjunction_compiles_as_its_tree_does(head, conjuncts, joint):
    """``HEAD[C1 and C2 …]`` is compiled from the programs of ``HEAD[C1]``, ``HEAD[C2]``,
    … where it can be (``afa.conjunction_program``): the program must be the one its
    parsed and rewritten tree records, step for step, with the same constants and names
    in the same places, and ``compile_filter`` still gives that tree."""
    from xcep.xpush.afa import Recorder
    from xcep.xpush.rewrite import normalize
    from xcep.xpush.workload import compile_filter, filter_program, shape_of

    body = joint.join(to_text(c) for c in conjuncts)
    text = f"{head}[({body})]" if joint.startswith(")") else f"{head}[{body}]"
    try:
        tree = normalize(parse_filter(text))
    except Exception:
        with pytest.raises(FilterError):
            filter_program(text)
        return
    _, constants, names = shape_of(text)
    expected = Recorder.program(tree, constants, names)
    program, used, used_names, _ = filter_program(text)
    assert (program, program.places, program.name_places) == (
        expected,
        expected.places,
        expected.name_places,
    )
    assert (used, used_names) == (expected.uses(constants), expected.uses_names(names))
    assert compile_filter(text) == tree


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("/a[b and c = 'x and y']", ("/a", ["b", "c = 'x and y'"])),
        ("/a[b and (c or d) and not(e and f)]", ("/a", ["b", "(c or d)", "not(e and f)"])),
        ("//a/b[x[y and z] and w]", ("//a/b", ["x[y and z]", "w"])),
        ("/a[b or c and d]", None),  # and binds tighter: no cut at the top
        ("/a[b and c]/d", None),  # the first bracket closes before the end
        ("/a[b][c and d]", None),
        ("/a[b and and = 1]", None),  # an element named and
        ("/a[b]", None),  # one conjunct
        ("/a[b and(c)]", None),  # no white space after and: not cut (the parser reads it)
        ("[a and b]", None),
    ],
)
def test_conjuncts_are_cut_only_at_the_top(text, cut):
    from xcep.xpush.workload import conjuncts

    assert conjuncts(text) == cut


@settings(max_examples=60)
@given(st.lists(filters, min_size=1, max_size=8), st.booleans())
def test_the_watchers_made_in_c_are_the_reference_s(paths, order):
    """``watch_lists`` (C) gives the ε-lists and watchers ``_watchers`` gives, as the
    core reads them."""
    from xcep.xpush import compiled

    if compiled.watch_lists is None:
        pytest.skip("the state kernel is not built here (no C compiler)")
    workload = {i: to_text(p) for i, p in enumerate(paths) if usable(p)}
    c = XPushMachine(workload, MachineOptions(compiled=False)).compiled
    afa = c.afa
    values = bytes(isinstance(p, compiled.Predicate) for p in afa.predicate)
    eps, watchers = compiled.watch_lists(bytes(afa.kind), afa.eps, afa.target, values)
    as_bytes = [
        tuple(map(bytes, pair))
        for pair in (compiled.offsets(afa.eps), compiled.offsets(c.watchers))
    ]
    assert [eps, watchers] == as_bytes


@settings(max_examples=60)
@given(st.lists(filters, min_size=1, max_size=9), st.lists(documents(), min_size=1, max_size=3))
def test_answers_as_json_are_the_answers(paths, trees):
    """``run(..., as_json=True)`` writes the ids in C: the same ids, in the same order,
    whatever they are (integers, strings needing escapes, beyond ASCII, longer than 32
    bytes, 15 and 16 bytes of JSON: the longest in a slot of its own and the shortest
    not), an answer seen first (written from the states) or again (from its ranks)."""
    import json

    names = [7, "long" * 9, 'f"1', "s\u00e9", -3, "\U0001f600", "a b", "m" * 13, "n" * 14]
    workload = {
        names[i % len(names)] if i < len(names) else i: to_text(p)
        for i, p in enumerate(p for p in paths if usable(p))
    }
    workload.update({f"c{t}": f"/{t}[not(@x = 2)]" for t in LABELS})  # counted ones too
    data = b"".join(etree.tostring(t) + b"\n" for t in trees) * 2
    for compiled in (True, False):
        machine = XPushMachine(workload, MachineOptions(compiled=compiled))
        as_lists = [ids for _, ids in machine.run(EventStream([io.BytesIO(data)]).batches())]
        machine = XPushMachine(workload, MachineOptions(compiled=compiled))
        texts = [t for _, t in machine.run(EventStream([io.BytesIO(data)]).batches(), as_json=True)]
        assert [json.loads(t) for t in texts] == as_lists


@settings(max_examples=150)
@given(st.lists(filters, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_shape_programs_build_the_automaton_that_the_trees_build(paths, unique_early, kernel):
    """A workload compiles each filter by replaying its shape's program with the
    filter's constants (in C with the kernel, else in Python); the AFA must be the one
    compiling each tree makes, state for state (the same states, numbered alike, the
    same initial and early states); a filter equal to one before it (replayed once, its
    initial state the earlier one's) too."""
    from xcep.xpush import afa
    from xcep.xpush.workload import compile_filter, filter_program

    texts = [to_text(p) for p in paths if usable(p)]
    texts += texts[::2]  # equal filters again
    by_tree, by_program = afa.AFA(), afa.AFA()
    with mock.patch.object(afa, "replay", afa.replay if kernel else None):
        for number, text in enumerate(texts):
            by_tree.add_filter(number, compile_filter(text), unique_early)
            program, constants, names, owner = filter_program(text)
            owner = owner if unique_early else None
            by_program.add_program(number, program, constants, names, owner)
    for column in ("kind", "eps", "label", "target", "predicate", "initial", "early"):
        assert getattr(by_program, column) == getattr(by_tree, column), column


# filters as soups of tokens and pieces of tokens: the compiled readers of filter text (the
# shape cut, the tokenizer, read_plan) against their references on any text
FILTER_PIECES = (
    *("a", "b:c", "(", ")", "'", '"', "-", ".", "..", "1", "2.5", "-2.5", ".5", " ", "\t"),
    *("é", "·", "_", "@", "@x", "@*", "/", "//", "[", "]", "=", "!=", "<", "<=", ">="),
    *("and", "or", "not(", "text()", "text", "starts-with(", "contains(", ",", "'s'", '"t"'),
    *("true()", "self::node()", "\u0661", "\uff11", "\U0001d400", ":", "::", "x\u00c0"),
    *("\x1c", "\u00a0", "#", "*", "!", "x-1"),
)
filter_soups = st.lists(st.sampled_from(FILTER_PIECES), max_size=16)


@settings(max_examples=500)
@given(filter_soups, filter_soups)
def test_the_compiled_shape_cut_is_the_regular_expression_s(pieces, more):
    """``filter_shape`` (C) cuts a filter's text exactly as ``_shape`` (its regular
    expression) does: the same parts, places, constants and names, or the same error;
    ``filter_shapes`` cuts a list of texts as ``_shapes`` does."""
    from xcep.xpush import workload

    if workload.shape_of is workload._shape:
        pytest.skip("the kernel is not built")
    text, other = "".join(pieces), "".join(more)
    try:
        expected = workload._shape(text)
    except ValueError as error:  # a number float() does not read
        with pytest.raises(type(error)):
            workload.shape_of(text)
        return
    assert workload.shape_of(text) == expected, text
    try:
        expected = workload._shapes([text, other, text])
    except ValueError as error:
        with pytest.raises(type(error)):
            workload.shapes_of([text, other, text])
        return
    got = workload.shapes_of([text, other, text])
    assert got == expected and [type(x) for x in got[1][0]] == [type(x) for x in expected[1][0]]


@settings(max_examples=500)
@given(filter_soups)
def test_the_compiled_tokenizer_is_the_regular_expression_s(pieces):
    """``filter_tokens`` (C) reads a filter's tokens as ``TOKEN_PATTERN`` does (the same
    kinds, values and offsets, as ``Token``s), or leaves a text it cannot read to it (None):
    never a list of tokens for a text the regular expression refuses."""
    from xcep.lexing import scan
    from xcep.xpush import parser

    if parser.filter_tokens is None:
        pytest.skip("the kernel is not built")
    text = "".join(pieces)
    got = parser.filter_tokens(text, parser.Token)
    try:
        expected = scan(
            text,
            expression(parser.TOKEN_PATTERN, re.VERBOSE),
            lambda message, at: ValueError(message),
        )
    except ValueError:
        assert got is None, text
        return
    assert got is None or (got == expected and {type(t) for t in got} == {parser.Token}), text
    assert got is not None or not text.isascii(), text  # ASCII text: read in C


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "b-1",
                "x1.5",
                "@c",
                "..",
                "[",
                "]",
                "=",
                "!=",
                "<",
                " ",
                "/",
                "//",
                "(",
                ")",
                "and",
                "'",
                '"',
                "-",
                ".",
                "*",
                "starts-with(",
                ",",
                "1",
                "-2.5",
                ".5",
                "'x'",
                '"y"',
                "'1'",
                "or",
                "not(",
                "text()",
                "self::",
                "p:q",
                "b",
                "f (",
            ]
        ),
        max_size=12,
    ),
    st.data(),
)
def test_a_filter_shape_cuts_out_exactly_the_constant_tokens(pieces, data):
    """Two filters of one shape (the text with its constants and names cut out) must
    parse alike but for those: a filter whose constants and names are replaced by
    others of their kind parses as the first filter with them put in (or both fail)."""
    from xcep.xpush import workload
    from xcep.xpush.parser import FilterSyntaxError
    from xcep.xpush.workload import _put, _shape

    text = "".join(pieces)
    key, constants, names = _shape(text)
    replacements = data.draw(st.permutations(["n", "m-2", "k.1", "ns:z", "é", "a", "b", "c"]))
    new_names = dict(zip(names, replacements[: len(names)], strict=True))
    others = {
        c: data.draw(
            st.sampled_from([3.0, -0.5, 12.0])
            if isinstance(c, float)
            else st.sampled_from(["", "q", "1", "z z"])
        )
        for c in constants
    }
    if len(set(others.values())) < len(others) or any(
        isinstance(v, float) != isinstance(c, float) for c, v in others.items()
    ):
        return  # distinct constants must stay distinct

    def replace_piece(match):
        if match.group(1) is not None:
            return "'" + others[match.group(1)[1:-1]] + "'"
        if match.group(3) is not None:
            return new_names.get(match.group(3), match.group(3))  # (and, or: kept)
        value = others[float(match.group(2))]
        return f"{value:g}" if value != int(value) else str(int(value))

    renamed = expression(workload.PIECE_PATTERN).sub(replace_piece, text)
    if _shape(renamed)[0] != key:
        return  # a string constant that now reads otherwise ("'" inside): not one shape
    try:
        first = parse_filter(text)
    except FilterSyntaxError:
        with pytest.raises(FilterSyntaxError):
            parse_filter(renamed)
        return
    assert parse_filter(renamed) == _put(first, others, new_names)


@settings(max_examples=150)
@given(st.lists(filters, min_size=1, max_size=6), st.lists(documents(), min_size=1, max_size=4))
def test_machine_agrees_with_lxml(paths, trees):
    paths = [p for p in paths if usable(p)]
    ours = [to_text(p) for p in paths]
    theirs = [to_text(p, existential=True) for p in paths]
    want = lxml_answer(trees, theirs)
    for options in OPTIONS:
        machines = []
        for compiled in (True, False):  # the compiled core (states, tables, walk) and Python
            machine = XPushMachine(dict(enumerate(ours)), replace(options, compiled=compiled))
            # twice: the second pass runs on the tables the first one built (the compiled walk)
            assert run_machine(machine, trees + trees) == want + want, (options, compiled, ours)
            machines.append(machine)
        # the same states, built in the same order
        assert list(machines[0].sets) == list(machines[1].sets), (options, ours)


boolean_filters = st.recursive(  # a filter as any boolean of absolute paths (issue 20)
    filters.map(Exists)
    | st.builds(
        Compare,
        filters,
        st.sampled_from(["=", "!=", "<", ">=", "contains"]),
        st.sampled_from(CONSTANTS),
    ).map(lambda c: c if c.op != "contains" else Compare(c.path, c.op, str(c.value))),
    lambda inner: (
        st.builds(lambda xs: And(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
        | st.builds(lambda xs: Or(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
        | st.builds(Not, inner)
    ),
    max_leaves=3,
)


@settings(max_examples=80)
@given(
    st.lists(boolean_filters, min_size=1, max_size=4),
    st.lists(documents(), min_size=1, max_size=3),
)
def test_boolean_filters_agree_with_lxml(exprs, trees):
    """``//c/text() = 3``, ``//a and not(//b)``: a filter is any boolean expression of
    the fragment's paths, read at the document node."""
    exprs = [e for e in exprs if usable_text(to_text(e))]
    ours = [to_text(e) for e in exprs]
    want = lxml_answer(trees, [to_text(e, existential=True) for e in exprs])
    for options in OPTIONS:
        machine = XPushMachine(dict(enumerate(ours)), options)
        assert run_machine(machine, trees) == want, (options, ours)


def usable_text(text: str) -> bool:
    from xcep.xpush.workload import compile_filter

    try:
        compile_filter(text)
        return True
    except FilterError:
        return False


def test_running_example_reproduces_the_seeds_trace():
    # Fig. 3: after the first </b> the common subquery [b/text()=1] of P1 and P2 has
    # matched (q3 = {3, 12}); after the second </b> also [@c > 2] (q5 = {3, 6, 10, 12});
    # at the end both filters match. Equal subqueries of P1 and P2 are one state here.
    filters = {1: "//a[b/text()=1 and ../a[@c>2]]", 2: "//a[@c>2 and b/text()=1]"}
    machine = XPushMachine(filters, MachineOptions(top_down=False))
    steps, ids = machine.trace('<a><b>1</b><a c="3"><b>1</b></a></a>')
    after = [state for event, state in steps if event == "</b>"]
    assert after == [["b/text() = 1"], ["@c > 2", "b/text() = 1"]]
    assert ids == [1, 2]
    assert steps[-1][1] == [
        "//[a/@c > 2 and a/b/text() = 1]",  # P1 after rewriting its `..`
        "//a[@c > 2 and b/text() = 1]",  # P2
        "a/b/text() = 1",
    ]


def test_running_example_of_the_seed():
    doc = etree.fromstring(b'<a> <b> 1 </b> <a c="3"> <b> 1 </b> </a> </a>')
    filters = {1: "//a[b/text()=1 and ../a[@c>2]]", 2: "//a[@c>2 and b/text()=1]"}
    machine = XPushMachine(filters, MachineOptions(top_down=False))
    assert run_machine(machine, [doc]) == [[1, 2]]
    assert lxml_answer([doc], list(filters.values())) == [[0, 1]]


@pytest.mark.parametrize(
    ("xml", "filters"),
    [
        # found by the property test: "1" is a text node's value, not an element's ("11", "")
        (b"<a>1<a/>1</a>", {1: "/self::node()[.. or a//. = 1]", 2: "/a[.//. = 1]", 3: "/a[. = 1]"}),
        # found by the property test: with early notification, a filter whose predicates
        # reduce to true() (`./.`) had an AND of nothing as its first branching state
        (b"<a/>", {1: "/a[./.]", 2: "/a[. and ./.]", 3: "/b[./.]"}),
    ],
)
def test_regressions_found_by_the_property_test(xml, filters):
    doc = etree.fromstring(xml)
    assert lxml_answer([doc], list(filters.values())) == [[0, 1]]
    for options in OPTIONS:
        assert run_machine(XPushMachine(filters, options), [doc]) == [[1, 2]], options


@pytest.mark.parametrize(
    ("xml", "xpath", "matches"),
    [  # '..' inside predicates of compared or continued paths (issue 20)
        (b"<a>1<b>2</b></a>", "/a[b[..] = 2]", True),
        (b"<a><b>2</b><c>3</c></a>", "/a[b[../c] = 2]", True),
        (b'<a y="5"><c y="10"/></a>', "/a[c[..]/@y = 10]", True),
        (b"<b><c/>abc</b>", "/b[contains(*[parent::node()], 'ab')]", False),
        (b"<c/>", "/c[not(self::node()[b]/..)]", True),
        (b"<a><b>2</b></a>", "/a[b[../c] = 2]", False),
        (b"<a><b>1</b><b>2<c/></b></a>", "/a[b[c][..] = 2]", True),
        (b"<a><b>1</b><b>2<c/></b></a>", "/a[b[c][..] = 1]", False),
        (b"<a><c/></a>", "/a[c/self::node()[..]/..]", True),
    ],
)
def test_parent_steps_inside_compared_and_continued_paths(xml, xpath, matches):
    doc = etree.fromstring(xml)
    want = [[0]] if matches else [[]]
    assert lxml_answer([doc], [xpath]) == want
    for options in OPTIONS:
        got = run_machine(XPushMachine({1: xpath}, options), [doc])
        assert got == ([[1]] if matches else [[]]), options


@pytest.mark.parametrize("digit", ["\uff11", "\u0661", "1\u00a0"])
def test_only_ascii_digits_and_xml_white_space_make_numbers(digit):
    """A full-width or Arabic-Indic one, or a one followed by NBSP, is no number in
    XPath (issue 20): ``/a[. = 1]`` does not match it; the string itself does."""
    xml = f"<a>{digit}</a>".encode()
    filters = {1: "/a[. = 1]", 2: f"/a[. = '{digit}']", 3: "/a[. > 0]", 4: "/a[. != 1]"}
    doc = etree.fromstring(xml)
    assert lxml_answer([doc], list(filters.values())) == [[1, 3]]
    for options in OPTIONS:
        assert run_machine(XPushMachine(filters, options), [doc]) == [[2, 4]], options


def test_answers_survive_flushes_and_workload_changes():
    rng = random.Random(7)
    trees = [
        etree.fromstring(f'<a x="{rng.choice(VALUES)}"><b>{rng.choice(VALUES)}</b></a>')
        for _ in range(30)
    ]
    texts = ["/a[@x=1]", "/a[b='x']", "//b[. > 1]", "/a[not(b) or @x='y']"]
    want = lxml_answer(trees, texts)
    machine = XPushMachine(dict(enumerate(texts)), MachineOptions(max_entries=10))
    assert run_machine(machine, trees) == want
    assert machine.stats.flushes > 0
    machine.remove_filter(0)
    machine.add_filter(9, "/a/b[starts-with(., 'a')]")
    got = run_machine(machine, trees)
    want2 = lxml_answer(trees, [*texts[1:], "/a/b[starts-with(., 'a')]"])
    renumber = {0: 1, 1: 2, 2: 3, 3: 9}
    assert got == [[renumber[i] for i in ids] for ids in want2]


@settings(max_examples=60)
@given(
    st.lists(filters, min_size=1, max_size=6),
    st.lists(st.tuples(st.booleans(), filters, st.integers(0, 20)), min_size=1, max_size=6),
    st.lists(documents(), min_size=1, max_size=3),
    st.sampled_from(OPTIONS),
)
def test_workload_changes_answer_like_a_new_machine(paths, changes, trees, options):
    """Filters added and removed between documents: the machine keeps its AFA (adding
    the new filters to it, dropping the removed ones' initial and early states) and
    answers as a machine built afresh on the workload it ends with."""
    texts = {i: to_text(p) for i, p in enumerate(paths) if usable(p)}
    machine = XPushMachine(dict(texts), options)
    run_machine(machine, trees)
    afa = machine.compiled.afa
    removed = 0
    for number, (adding, path, pick) in enumerate(changes):
        if adding and usable(path):
            texts[100 + number] = to_text(path)
            machine.add_filter(100 + number, texts[100 + number])
        elif not adding and texts:
            fid = sorted(texts)[pick % len(texts)]
            del texts[fid]
            machine.remove_filter(fid)
            removed += 1
    assert run_machine(machine, trees) == run_machine(XPushMachine(dict(texts), options), trees)
    if 4 * removed <= len(texts):  # few removed: the AFA was kept, not rebuilt
        assert machine.compiled.afa is afa


@settings(max_examples=80, deadline=None)
@given(
    st.lists(filters, min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 2), filters, st.integers(0, 40)), max_size=30),
    st.lists(documents(), min_size=3, max_size=10),
    st.sampled_from(OPTIONS),
    st.booleans(),
)
def test_changes_while_documents_flow(paths, changes, trees, options, as_json):
    """Filters added and removed after each answer, while the run goes on: each document
    is answered by the filters of the moment it starts. With tiny limits the changes
    go through delta machines (nested ones too), removals are left out of answers,
    removed ids come back with other filters, and machines merge and rebuild."""
    import json
    from unittest import mock

    from xcep.xpush import machine as M

    texts = {i: to_text(p) for i, p in enumerate(paths) if usable(p)}
    theirs = {i: to_text(p, existential=True) for i, p in enumerate(paths) if usable(p)}
    usable_changes = [
        (op, to_text(p), to_text(p, existential=True), pick) for op, p, pick in changes if usable(p)
    ]
    data = b"".join(etree.tostring(t) + b"\n" for t in trees)
    with mock.patch.object(M, "DELTA_SMALL", 2), mock.patch.object(M, "DELTA_SHARE", 2):
        machine = XPushMachine(dict(texts), options)
        removed: list = []
        got, want = [], []
        stream = EventStream([io.BytesIO(data)], keep_whitespace=True, batch_size=7)
        for doc, answer in machine.run(stream.batches(), as_json=as_json):
            got.append(json.loads(answer) if as_json else answer)
            current = sorted(texts)
            answer_now = lxml_answer([trees[doc]], [theirs[f] for f in current])[0]
            want.append([current[i] for i in answer_now])
            for op, text, their_text, pick in usable_changes[doc * 3 : doc * 3 + 3]:
                if op == 0 or not texts:  # a new id, or one removed before
                    fid = removed.pop() if removed and pick % 2 else 1000 + len(want) * 10 + pick
                    if fid in texts:
                        continue
                    texts[fid], theirs[fid] = text, their_text
                    machine.add_filter(fid, text)
                elif op == 1:
                    fid = sorted(texts)[pick % len(texts)]
                    del texts[fid]
                    removed.append(fid)
                    machine.remove_filter(fid)
            assert len(machine) == len(texts)
    assert got == want


def test_a_long_stream_with_a_change_after_every_answer():
    """200 documents in few batches, a filter added or removed after each answer: the
    delta machines must read each document only after the changes before it (a delta
    that read its batch ahead answered with the filters of an earlier moment)."""
    from unittest import mock

    from xcep.xpush import machine as M

    rng = random.Random(3)
    docs = [f'<a x="{rng.randint(0, 5)}"><b>{rng.randint(0, 5)}</b></a>' for _ in range(200)]
    kinds = [f"/a[@x = {k}]" for k in range(6)] + [f"/a[b = {k}]" for k in range(6)]
    kinds += [f"/a[b > {k} and @x < {k}]" for k in range(6)]
    live = {0: kinds[0], 1: kinds[1], 2: kinds[2]}
    data = "\n".join(docs).encode()
    got, want, fresh = [], [], 100
    with mock.patch.object(M, "DELTA_SMALL", 2), mock.patch.object(M, "DELTA_SHARE", 2):
        machine = XPushMachine(dict(live))
        for doc, ids in machine.run(EventStream([io.BytesIO(data)]).batches()):
            tree = etree.fromstring(docs[doc])
            want.append(sorted(f for f, x in live.items() if etree.XPath(f"boolean({x})")(tree)))
            got.append(ids)
            if rng.random() < 0.6 or len(live) < 3:
                live[fresh] = rng.choice(kinds)
                machine.add_filter(fresh, live[fresh])
                fresh += 1
            else:
                fid = rng.choice(sorted(live))
                del live[fid]
                machine.remove_filter(fid)
    assert got == want


def test_malformed_document_gets_no_answer_and_costs_nothing_else():
    decl = b'<?xml version="1.0"?>'
    data = decl + b"<a><b>1</b></a>\n" + decl + b"<a><b>\n" + decl + b"<a/>"
    machine = XPushMachine({1: "/a", 2: "/a/b"})
    stream = EventStream([io.BytesIO(data)], errors="skip")
    assert list(machine.run(stream.batches())) == [(0, [1, 2]), (2, [1])]


@pytest.mark.parametrize(
    "text, column",
    [("/a b", 4), ("/a[", 4), ("/a[b=]", 6), ("/a[foo(b)]", 4), ("/a[b = 'x' and]", 15)],
)
def test_syntax_errors_name_the_column(text, column):
    with pytest.raises(Exception) as info:
        parse_filter(text)
    assert info.value.position == column


# ---------- optimisations that use a DTD: order and training ----------
TEST_DTD = """
<!ELEMENT a (b*, c?, a*)>
<!ATTLIST a x CDATA #IMPLIED y CDATA #IMPLIED>
<!ELEMENT b (#PCDATA)>
<!ELEMENT c (b | a)*>
"""


@st.composite
def valid_documents(draw, name="a", depth=0):
    """Random documents that obey TEST_DTD (the order optimisation assumes valid input)."""
    element = etree.Element(name)
    if name == "b":
        element.text = draw(st.sampled_from(VALUES))
        return element
    if name == "a":
        for attr in ATTRS:
            if draw(st.booleans()):
                element.set(attr, draw(st.sampled_from(VALUES)))
        kids = ["b"] * draw(st.integers(0, 2))
        if depth < 3:
            kids += ["c"] * draw(st.integers(0, 1)) + ["a"] * draw(st.integers(0, 2))
    else:
        kids = draw(st.lists(st.sampled_from(["a", "b"] if depth < 3 else ["b"]), max_size=3))
    for kid in kids:
        element.append(draw(valid_documents(kid, depth + 1)))
    return element


@settings(max_examples=100)
@given(
    st.lists(filters, min_size=1, max_size=6), st.lists(valid_documents(), min_size=1, max_size=3)
)
def test_order_and_training_keep_answers(paths, trees):
    from xcep.schema import parse_dtd

    dtd = parse_dtd(TEST_DTD)
    paths = [p for p in paths if usable(p)]
    ours = [to_text(p) for p in paths]
    want = lxml_answer(trees, [to_text(p, existential=True) for p in paths])
    for options in [
        MachineOptions(top_down=False, order=True),
        MachineOptions(order=True),
        MachineOptions(order=True, early=True),
    ]:
        machine = XPushMachine(dict(enumerate(ours)), options, order_facts=dtd)
        machine.train(dtd)
        assert run_machine(machine, trees) == want, (options, ours)
    untrained = XPushMachine(dict(enumerate(ours)))
    untrained.train()
    assert run_machine(untrained, trees) == want


def test_order_optimization_needs_fewer_states():
    from xcep.schema import parse_dtd

    dtd = parse_dtd(
        "<!ELEMENT p (name, age, phone)><!ELEMENT name (#PCDATA)>"
        "<!ELEMENT age (#PCDATA)><!ELEMENT phone (#PCDATA)>"
    )
    texts = {i: f"/p[name='n{i % 7}' and age={i % 5} and phone='t{i % 3}']" for i in range(60)}
    rng = random.Random(3)
    docs = [
        etree.fromstring(
            f"<p><name>n{rng.randrange(7)}</name><age>{rng.randrange(5)}</age>"
            f"<phone>t{rng.randrange(3)}</phone></p>"
        )
        for _ in range(200)
    ]
    # (the AFA's states: the filters in it, not counted)
    plain = XPushMachine(texts, MachineOptions(counting=False))
    ordered = XPushMachine(texts, MachineOptions(order=True, counting=False), order_facts=dtd)
    assert run_machine(plain, docs) == run_machine(ordered, docs)
    assert ordered.stats_dict()["average_state_size"] < plain.stats_dict()["average_state_size"]


def test_training_warms_the_tables():
    texts = {i: f"/a[b={i}]" for i in range(50)}
    docs = [etree.fromstring(f"<a><b>{i}</b></a>") for i in range(50)]
    cold = XPushMachine(texts)
    run_machine(cold, docs)
    warm = XPushMachine(texts)
    assert warm.train() == 50
    assert run_machine(warm, docs) == run_machine(XPushMachine(texts), docs)
    assert warm.stats.hit_ratio > cold.stats.hit_ratio


def test_early_needs_top_down():
    with pytest.raises(ValueError, match="top-down"):
        MachineOptions(top_down=False, early=True)


def test_workload_errors_name_id_line_and_column(tmp_path):
    from xcep.xpush import Workload

    path = tmp_path / "filters.txt"
    path.write_text(
        "# subscriptions\n\n1 /a/b\n2 /a[b=]\nlonely\n1 /c\n3 //x[../y]\n4 //x[../../y]\n"
    )
    workload, errors = Workload.from_file(path)
    assert list(workload.paths) == [1, 3]
    assert [str(e) for e in errors] == [
        "line 4, filter 2, column 6: expected a number or a string constant, found ']'",
        "line 5, filter lonely: expected an id and a filter",
        "line 6, filter 1: duplicate filter id",
        "line 8, filter 4: '..' here would need the parent of a '//' step's start; not supported",
    ]
    with pytest.raises(FilterError):
        Workload.from_file(path, strict=True)


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["1", "2", "3", "x", "-4", "#", ""]),
            st.sampled_from(
                ["/a/b", "/a[b = 1]", "/a[@x = 'ab']", "//x[../../y]", "/a[b=]", "/a[", "", "/c"]
            ),
        ),
        max_size=12,
    ),
    st.sampled_from([1, 2, 5]),
    st.booleans(),
)
def test_a_file_is_added_as_each_of_its_filters_would_be(tmp_path_factory, lines, block, strict):
    """``Workload.from_file`` adds a file's filters a block at a time: the same filters,
    numbered alike, and the same errors (the first in line order where ``strict``) as
    adding them one by one (``Workload.add``), whatever the block."""
    from xcep.idlines import parse_id
    from xcep.xpush import Workload
    from xcep.xpush import workload as module

    path = tmp_path_factory.mktemp("filters") / "filters.txt"
    path.write_bytes(b"".join(f"{fid} {text}\n".encode() for fid, text in lines) + b"\xff\n")
    one_by_one, expected = Workload(), []
    for number, (fid, text) in enumerate(lines, 1):
        line = f"{fid} {text}".strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            expected.append((number, "expected an id and a filter"))
            continue
        try:
            one_by_one.add(parse_id(parts[0]), parts[1], number)
        except FilterError as error:
            expected.append((error.line, error.message))
    expected.append((len(lines) + 1, "not UTF-8: invalid start byte (byte 0xff)"))
    with mock.patch.object(module, "BLOCK", block), mock.patch.object(module, "COMPILE_EVERY", 3):
        if strict:
            with pytest.raises(FilterError) as raised:
                Workload.from_file(path, strict=True)
            assert (raised.value.line, raised.value.message) == expected[0]
            return
        workload, errors = Workload.from_file(path)
    assert [(e.line, e.message) for e in errors] == expected
    assert workload.numbers == one_by_one.numbers
    assert workload.texts == one_by_one.texts
    assert (workload.names_of, workload.text_of) == (one_by_one.names_of, one_by_one.text_of)
    assert set(workload.plans) == set(one_by_one.plans)


@settings(max_examples=25)
@given(
    st.integers(0, 10_000),
    st.sampled_from([1.15, 3.0]),
    st.sampled_from([0.0, 0.3]),
    st.sampled_from([0.0, 0.3]),
)
def test_generated_workloads_agree_with_lxml(data_dir, seed, predicates, p_wild, p_desc):
    """Filters from the benchmark's generator (the seed's §7) on XMark messages."""
    from bench.xpush_workload import FilterGenerator, as_stream, split_documents

    docs = _xmark_messages(data_dir, split_documents)
    rng = random.Random(seed)
    sample = rng.sample(docs, 12)
    generator = FilterGenerator(sample, seed=seed)
    texts = generator.workload(40, predicates=predicates, p_wild=p_wild, p_desc=p_desc)
    trees = [etree.fromstring(d) for d in sample]
    want = lxml_answer(trees, texts)
    data = as_stream(sample) * 2  # the second pass on the tables of the first
    for options in OPTIONS:
        runs = []
        for compiled in (True, False):  # the compiled core and the Python machine
            machine = XPushMachine(dict(enumerate(texts)), replace(options, compiled=compiled))
            stream = EventStream([io.BytesIO(data)], keep_whitespace=True)
            answers = [ids for _, ids in machine.run(stream.batches())]
            runs.append((answers, machine.stats, list(machine.sets)))
        assert runs[0] == runs[1]
        assert runs[0][0] == want + want, options


_MESSAGES: list = []


def _xmark_messages(data_dir, split_documents):
    if not _MESSAGES:
        _MESSAGES.extend(split_documents(data_dir / "xmark" / "xmark-f0.01.xml"))
    return _MESSAGES


def test_the_compiled_kernels_are_built():
    """CI builds the kernels (a C compiler is there); elsewhere they are optional."""
    from xcep.xpush import compiled

    built = compiled.StateKernel is not None
    if not built and not os.environ.get("CI"):
        pytest.skip("the compiled kernels are not built here (no C compiler)")
    assert built
    assert XPushMachine({1: "/a[b]"}).kernel is not None
    assert XPushMachine({1: "/a[b]"}, MachineOptions(compiled=False)).kernel is None


def _bare_kernel(n: int):
    """A compiled core over n states with no moves (skips the test when it is not built)."""
    from xcep.xpush import compiled

    if compiled.StateKernel is None:
        pytest.skip("the compiled core is not built here (no C compiler)")
    return compiled.StateKernel(
        b"\0" * n, b"", *[compiled.offsets([()] * n)] * 4, 1, ([None] * n, [None] * n)
    )  # fmt: skip


@settings(max_examples=200)
@given(
    st.lists(
        st.builds(  # up to 400 items over a narrow or a wide range (sorted differently)
            lambda size, top, seed: random.Random(seed).choices(range(-1, top), k=size),
            st.integers(0, 400),
            st.sampled_from([40, 300, 20_000]),  # -1: the top-down state "all"
            st.integers(),
        ),
        min_size=1,
        max_size=6,
    ),
    st.randoms(use_true_random=False),
)
def test_the_compiled_store_interns_sets(sets, rng):
    """The core's SetStore against the Python reference: the same ids for the same sets,
    whatever the order and repeats of their items, and the same memory measure."""
    from xcep.xpush.compiled import SetStore

    kernel = _bare_kernel(20_000)
    store, reference = kernel.states, SetStore()
    for items in sets:
        shuffled = items * 2
        rng.shuffle(shuffled)
        ident = store.intern(shuffled)
        assert ident == reference.intern(frozenset(items)) == store.intern(sorted(set(items)))
        assert store[ident] == frozenset(items)
    assert len(store) == len(reference) and store.held == reference.held


def test_the_state_kernel_checks_what_it_is_given():
    from array import array

    from xcep.xpush import compiled as machine

    if machine.StateKernel is None:
        pytest.skip("the state kernel is not built here (no C compiler)")
    c = XPushMachine({1: "/a[b and c]"}, MachineOptions(compiled=False, counting=False)).compiled
    n = len(c.afa)
    good = dict(
        kind=bytes(c.afa.kind),
        true_leaves=array("i", sorted(c.true_leaves)),
        eps=machine.offsets(c.afa.eps),
        watchers=machine.offsets(c.watchers),
        early=machine.offsets([()] * n),
        initial=machine.offsets([c.initial.get(s, ()) for s in range(n)]),
        filters=1,
        steps=(c.afa.label, c.afa.target),
    )
    kernel = machine.StateKernel(**good)
    none, every, everywhere = (kernel.states.intern(x) for x in ((), range(n), (-1,)))
    found = kernel.accept((every,), everywhere)  # every state matched: the filter is proven
    assert kernel.states[found] == frozenset(c.initial)
    assert kernel.ids_of(kernel.answer(found, ()), ["f"]) == ["f"]
    assert kernel.accept((frozenset(range(n)),), everywhere) == found  # bases given by states
    assert kernel.accept((none,), everywhere) == none
    assert kernel.answer(none, (none, found)) == b""  # proven: early states only
    bad = {
        "eps": (good["eps"][0], array("i", [n] * len(good["eps"][1]))),  # a state out of range
        "watchers": (array("i", [1] * (n + 1)), good["watchers"][1]),  # offsets not from 0
        "initial": (good["initial"][0], array("i", [5] * len(good["initial"][1]))),  # no filter 5
        "kind": bytes([7]) * n,
        "steps": (c.afa.label[:-1], c.afa.target),
        "true_leaves": array("i", [n]),
        "prec": (machine.offsets([()] * n), machine.offsets([[n]])),  # a set of no state
    }
    for name, value in bad.items():
        with pytest.raises(ValueError):
            machine.StateKernel(**{**good, name: value})
    for labels in ([1] * n, [b"a"] * n):  # a label is a str (or None: no step)
        with pytest.raises(TypeError):
            machine.StateKernel(**{**good, "steps": (labels, c.afa.target)})
    with pytest.raises(TypeError):
        machine.StateKernel(**{**good, "steps": [c.afa.label, c.afa.target]})
    with pytest.raises(TypeError):
        machine.StateKernel(**{**good, "prec": (1, 2, 3)})
    with pytest.raises(ValueError, match="out of range"):
        machine.StateKernel(**{**good, "steps": (["a"] * n, [n] * n)})
    with pytest.raises(ValueError, match="out of range"):
        kernel.accept((frozenset([n]),), everywhere)
    with pytest.raises(ValueError, match="out of range"):
        kernel.states.intern([n])
    with pytest.raises(IndexError):
        kernel.eval_pop((every,), 99, "a", everywhere)  # no top-down state 99
    with pytest.raises(IndexError):
        kernel.add(every, 99)
    assert kernel.push(everywhere, "b") == everywhere  # no top-down pruning: "all" stays
    with pytest.raises(IndexError):
        kernel.push(99, "a")
    with pytest.raises(TypeError):
        kernel.set_values(every, c.index)  # a ValueIndex (PredicateIndex.compiled) is needed
    with pytest.raises(ValueError, match="filters expected"):
        kernel.ids_of(b"", ["f", "g"])
    with pytest.raises(ValueError, match="out of range"):
        kernel.ids_of(array("i", [1]).tobytes(), ["f"])
    kernel.clear()
    assert len(kernel.states) == 0


SMALL = st.integers(0, 5)


@given(st.lists(st.tuples(SMALL, SMALL, SMALL, st.sampled_from("ab")), max_size=40))
def test_the_cores_tables_are_mappings_like_dicts(writes):
    """Each table of the core against a dict: the same entries, lengths and misses; entries
    by value are the very dicts stored; clear forgets them all."""
    n = 8
    kernel = _bare_kernel(n)
    for s in range(n):
        kernel.states.intern([s])
    names = ("push", "leaf", "close", "add", "values")
    tables = {name: kernel.table(name) for name in names}
    dicts = {name: {} for name in names}

    def key(name, a, b, c, label):
        return {
            "push": (a, label),
            "leaf": (a, label),
            "close": (a, b, c, label),
            "add": (a, b),
            "values": a,
        }[name]

    for a, b, c, label in writes:
        for name in names:
            k = key(name, a, b, c, label)
            value = {"leaf": (a, b), "close": (b, a)}.get(name, b)
            if name in ("leaf", "values") and a % 2:  # entries by value
                value = tables[name].setdefault(k, {})
                assert value is dicts[name].setdefault(k, value)
                value[str(b)] = b
            else:
                tables[name][k] = value
                dicts[name][k] = value
    for a, b, c, label in [*writes, (6, 7, 0, "c"), (7, 6, 1, "b")]:
        for name in names:
            k = key(name, a, b, c, label)
            assert tables[name].get(k) == dicts[name].get(k)
            assert (k in tables[name]) == (k in dicts[name])
            assert tables[name].get(k, "none") == dicts[name].get(k, "none")
    for name in names:
        assert len(tables[name]) == len(dicts[name])
    kernel.clear()
    assert all(len(kernel.table(name)) == 0 for name in names)
    for s in range(n):
        kernel.states.intern([s])
    rng = random.Random(len(writes))  # many keys differing in one item: long probe chains
    close, reference = kernel.table("close"), {}
    for _ in range(3000):
        k = (rng.randrange(n), rng.randrange(n), rng.randrange(n), rng.choice("abcdefgh"))
        close[k] = reference[k] = (rng.randrange(n), rng.randrange(n))
    for a, b, c in itertools.product(range(n), repeat=3):
        for label in "abcdefghi":
            assert close.get((a, b, c, label)) == reference.get((a, b, c, label))
    kernel.table("values")[7] = False  # no value tested there
    assert kernel.table("values")[7] is False
    with pytest.raises(KeyError):
        kernel.table("push")[(7, "never")]
    with pytest.raises(KeyError):
        kernel.table("push")[(7,)]  # a key of the wrong shape
    with pytest.raises(IndexError):
        kernel.table("add")[(0, 1)] = n  # no such set
    with pytest.raises(TypeError):
        kernel.table("close")[(0, 0, 0, "a")] = 1  # a pair expected
    with pytest.raises(TypeError):
        kernel.table("add")[(0, 1)] = {}  # only leaf and values entries go by value
    with pytest.raises(KeyError):
        kernel.table("nothing")


def test_a_workload_compiled_as_it_is_loaded_answers_as_one_compiled_at_once(monkeypatch):
    """Large workloads are compiled into the AFA every COMPILE_EVERY filters (their
    trees then go; ``paths`` parses them again): the answers are the same."""
    from xcep.xpush import workload as W

    texts = {i: f"/a[b = {i % 4}]" if i % 3 else f"/a/c[@x = 'v{i % 5}']" for i in range(40)}
    docs = [etree.fromstring(f'<a><b>{i}</b><c x="v{i}"/></a>') for i in range(6)]
    want = run_machine(XPushMachine(texts), docs)
    monkeypatch.setattr(W, "COMPILE_EVERY", 7)
    workload = W.Workload(texts)
    assert len(workload._uncompiled) < 7  # the others were compiled as they came
    assert sorted(workload.paths) == sorted(texts)  # parsed again on request
    machine = XPushMachine(workload)
    assert run_machine(machine, docs) == want
    machine.remove_filter(5)
    machine.add_filter(99, "/a[b = 1]")
    fresh = {**{k: v for k, v in texts.items() if k != 5}, 99: "/a[b = 1]"}
    assert run_machine(machine, docs) == run_machine(XPushMachine(fresh), docs)


def test_filters_that_name_alike_share_one_names_tuple(tmp_path):
    """A million filters are mostly a few namings: their names are one tuple each, not
    one per filter (``filter_shapes`` keeps the ones met lately; ``_shapes`` alike)."""
    from xcep.xpush import Workload

    path = tmp_path / "filters.txt"
    path.write_text("".join(f"f{i} /a[b = {i} and c/@d = 'x{i}']\n" for i in range(5_000)))
    workload, errors = Workload.from_file(path)
    assert not errors and len(workload) == 5_000
    assert len({id(names) for names in workload.names}) == 1
    assert workload.names[0] == ("a", "b", "c", "d")
