"""Counted filters (xcep.xpush.counting) against the machine without them and lxml."""

import io
import itertools
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from tests.test_xpush import ATTRS, CONSTANTS, LABELS, documents, filter_soups, lxml_answer

from xcep.events import EventStream
from xcep.xpush import MachineOptions, XPushMachine, parse_filter, workload
from xcep.xpush.ast import (
    ATTRIBUTE,
    CHILD,
    ELEMENT,
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
    walk,
)
from xcep.xpush.counted_plans import Plan, evaluate, plan_of
from xcep.xpush.counting import CountedFilters
from xcep.xpush.parser import FilterSyntaxError
from xcep.xpush.rewrite import UnsupportedFilter, normalize
from xcep.xpush.workload import compile_filter, filter_plan, filter_template


def relative_paths(tail=False):
    """A relative path of names (then ``@name`` or ``text()``), or ``.`` alone."""

    @st.composite
    def build(draw):
        names = draw(st.lists(st.sampled_from(LABELS), min_size=0 if not tail else 1, max_size=2))
        steps = [Step(CHILD, ELEMENT, name) for name in names]
        end = draw(st.sampled_from(["", "", "@", "text"]))
        if end == "@":
            steps.append(Step(CHILD, ATTRIBUTE, draw(st.sampled_from(ATTRS))))
        elif end == "text":
            steps.append(Step(CHILD, TEXT))
        if not steps:
            steps = [Step(CHILD, SELF)]
        return Path(tuple(steps))

    return build()


def counted_conditions():
    rel = relative_paths()
    compare = st.builds(
        Compare, rel, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.sampled_from(CONSTANTS)
    )
    strings = st.builds(
        Compare, rel, st.sampled_from(["starts-with", "contains"]), st.sampled_from(["a", "1", "x"])
    )
    leaves = st.builds(Exists, rel) | compare | strings | st.builds(Const, st.booleans())
    return st.recursive(
        leaves,
        lambda inner: (
            st.builds(lambda xs: And(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
            | st.builds(lambda xs: Or(tuple(xs)), st.lists(inner, min_size=2, max_size=3))
            | st.builds(Not, inner)
        ),
        max_leaves=5,
    )


@st.composite
def counted_filters(draw):
    """``/HEAD[C]/TAIL``: the form whose values are counted; one time in three with
    conditions on more steps of the head (``/a[C1]/b[C2]/TAIL``: nested anchors)."""
    head = [
        Step(CHILD, ELEMENT, n)
        for n in draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=3))
    ]
    if draw(st.booleans()):
        head[-1] = Step(CHILD, ELEMENT, head[-1].name, (draw(counted_conditions()),))
    if len(head) > 1 and draw(st.integers(0, 2)) == 0:
        for k in range(len(head) - 1):
            if draw(st.booleans()):
                head[k] = Step(CHILD, ELEMENT, head[k].name, (draw(counted_conditions()),))
    if draw(st.booleans()):
        head += draw(relative_paths(tail=True)).steps
    return Path(tuple(head), absolute=True)


def run(machine, trees, cuts=()):
    """The machine's answers, its batches cut at the positions ``cuts`` (documents go
    on from one batch to the next)."""
    data = b"".join(b'<?xml version="1.0"?>' + etree.tostring(t) + b"\n" for t in trees)
    stream = EventStream([io.BytesIO(data)], keep_whitespace=True)

    def pieces():
        for batch in stream.batches():
            at = sorted({0, len(batch), *(c % (len(batch) + 1) for c in cuts)})
            for start, end in itertools.pairwise(at):
                yield batch.slice(start, end)

    return [ids for _, ids in machine.run(pieces())]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(counted_filters(), min_size=1, max_size=8),
    st.lists(documents(), min_size=1, max_size=4),
    st.lists(st.integers(0, 400), max_size=3),
)
def test_counted_filters_answer_as_the_machine_and_lxml(paths, trees, cuts):
    texts = [to_text(p) for p in paths]
    # every filter of the form with one anchor is counted (but one the rewrite folds to
    # false: the machine's); with nested ones, where each inner condition needs an atom
    never = Path((Step(CHILD, SELF, None, (Const(False),)),), absolute=True)
    single = [
        t for p, t in zip(paths, texts, strict=True) if sum(bool(s.predicates) for s in p.steps) < 2
    ]
    assert all(filter_plan(t) is not None or compile_filter(t) == never for t in single), texts
    want = lxml_answer(trees, [to_text(p, existential=True) for p in paths])
    for options in (
        MachineOptions(counting=False),
        MachineOptions(),
        MachineOptions(compiled=False),
        MachineOptions(early=True),
    ):
        machine = XPushMachine(dict(enumerate(texts)), options)
        assert run(machine, trees + trees, cuts) == want + want, (options, texts)
        counted = sum(filter_template(text) is not None for text in texts)
        assert machine.stats_dict()["counted_filters"] == (counted if options.counting else 0)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(counted_filters(), min_size=1, max_size=5),
    st.lists(st.integers(1, 3), min_size=5, max_size=5),
    st.permutations(range(15)),
    st.lists(documents(), min_size=1, max_size=3),
)
def test_equal_filters_are_counted_once(paths, copies, order, trees):
    """A filter given again under other ids (ranks among the others') is counted once,
    and each of its ids is answered, as lxml answers each (written alike or not)."""
    texts = [to_text(p) for p in paths]
    given = [text for text, n in zip(texts, copies, strict=False) for _ in range(n)]
    given = [text if k % 2 else text.replace("[", " [ ") for k, text in enumerate(given)]
    ids = [f"f{order[k]:02}" for k in range(len(given))]  # the copies' ranks interleave
    found = lxml_answer(trees, [to_text(p, existential=True) for p in paths])
    want = [
        sorted(ids[k] for k, text in enumerate(given) if given_path(text, texts) in answer)
        for answer in found
    ]
    # filters written alike are one filter to the counter (written apart, where their plans
    # are equal: ``/a[b=1]``, ``/a [ b=1]``; not always, ``/a[. = 1]/b`` has two plans)
    counted = {text for text in given if filter_template(text) is not None}
    for options in (MachineOptions(), MachineOptions(compiled=False)):
        machine = XPushMachine(dict(zip(ids, given, strict=True)), options)
        assert run(machine, trees + trees) == want + want, (options, given)
        if not options.compiled and counted:  # (the Python plan keeps its groups)
            groups = machine.compiled.counted.groups
            assert len(groups) - len(machine.compiled.counted._inner) <= len(counted), given


def given_path(text: str, texts: list) -> int:
    """The number of the filter ``text`` is a copy of (written with spaces or not)."""
    return texts.index(text.replace(" [ ", "["))


HEADS = ["/a", "/a/b", "/c/a/b"]


def assert_same_plan(plan: Plan, whole: Plan, text: str) -> None:
    """``plan`` says what ``whole`` says: the same head and atoms, the same value on every
    choice of atoms."""
    assert plan.head == whole.head, text
    assert set(plan.atoms) == set(whole.atoms), text
    atoms = sorted(set(whole.atoms), key=repr)
    for values in itertools.islice(itertools.product((False, True), repeat=len(atoms)), 64):
        true = {atom for atom, value in zip(atoms, values, strict=False) if value}
        assert evaluate(plan.formula, lambda k, true=true: plan.atoms[k] in true) == evaluate(
            whole.formula, lambda k, true=true: whole.atoms[k] in true
        ), (text, true)


@settings(max_examples=200)
@given(
    st.sampled_from(HEADS),
    st.lists(counted_conditions(), min_size=2, max_size=4),
)
def test_a_conjunctions_plan_is_its_trees(head, conjuncts):
    """``HEAD[C1 and C2 …]``'s plan is put together from those of ``HEAD[C1]``, … where it
    can be (``counted_plans.conjunction``; where the compiled core is not built): it must say
    what the plan of the whole parsed and rewritten tree says."""
    text = f"{head}[{' and '.join(to_text(c) for c in conjuncts)}]"
    whole = plan_of(normalize(parse_filter(text)))
    plan = workload._conjunction_plan(text)
    assert (plan is None) == (whole is None), text
    if plan is not None:
        assert_same_plan(plan, whole, text)


def _read(text: str) -> Plan | None:
    if workload.read_plan is None:
        pytest.skip("the kernel is not built")
    read = workload.read_plan(text)
    return None if read is None else Plan(*read)


@settings(max_examples=300)
@given(counted_filters())
def test_a_plan_read_from_its_text_is_the_rewritten_trees(path):
    """``read_plan`` (C) reads a filter of the counted form straight into its plan: it
    must say what the plan of the parsed and rewritten tree says, and read every filter
    plainly of the form with one anchor (it leaves ``true()``, ``false()`` and a bare ``.``
    to the parser, whose rewrite folds them, and nested anchors)."""
    text = to_text(path)
    read, whole = _read(text), plan_of(normalize(parse_filter(text)))
    folded = any(
        type(node) is Const or (type(node) is Exists and node.path.steps[0].test == SELF)
        for node in walk(path)
    )
    nested = sum(bool(step.predicates) for step in path.steps) > 1
    if read is None:
        assert folded or nested, text
    else:
        assert whole is not None, text
        assert_same_plan(read, whole, text)


@settings(max_examples=600)
@given(filter_soups)
def test_a_plan_read_from_any_text_is_the_parsers_or_none(pieces):
    """On any text ``read_plan`` reads the plan the parser and the rewrite make, or says
    None (the parser's to read, or refuse): never a plan for a text the parser refuses."""
    text = "/" + "".join(pieces)
    read = _read(text)
    try:
        whole = plan_of(normalize(parse_filter(text)))
    except (FilterSyntaxError, UnsupportedFilter):
        assert read is None, text
        return
    if read is not None:
        assert whole is not None, text
        assert_same_plan(read, whole, text)


@pytest.mark.parametrize(
    ("xml", "text", "matches"),
    [
        # a formula true with no atom true: at some anchor, not at every one
        # nested anchors: the inner one's condition at the same node as its tail, below the
        # outer anchor where the outer one's holds
        ("<r><a><b>1</b><c><d>2</d><e/></c></a></r>", "/r/a[b = 1]/c[d = 2]/e", True),
        ("<r><a><b>1</b><c><d>2</d></c><c><e/></c></a></r>", "/r/a[b = 1]/c[d = 2]/e", False),
        ("<r><a><b>1</b></a><a><c><d>2</d><e/></c></a></r>", "/r/a[b = 1]/c[d = 2]/e", False),
        ("<r><a><b>2</b><c><d>2</d><e/></c></a><a><b>1</b></a></r>", "/r/a[b=1]/c[d=2]/e", False),
        ("<r><a x='1'><c><d>2</d><f><g>3</g></f></c></a></r>", "/r/a[@x=1]/c[d=2]/f[g=3]", True),
        (
            "<r><a x='1'><c><d>2</d></c><c><f><g>3</g></f></c></a></r>",
            "/r/a[@x=1]/c[d=2]/f[g=3]",
            False,
        ),
        ("<r><a><b/></a><a/></r>", "/r/a[not(b)]", True),
        ("<r><a><b/></a><a><b/></a></r>", "/r/a[not(b)]", False),
        ("<r/>", "/r/a[not(b)]", False),  # no anchor at all
        # the atoms of one anchor, not of two
        ("<r><a><b>1</b></a><a><c>2</c></a></r>", "/r/a[b = 1 and c = 2]", False),
        ("<r><a><b>1</b><c>2</c></a></r>", "/r/a[b = 1 and c = 2]", True),
        # an element's string value: all of its text, below it too
        ("<r><a>1<b>2</b>3</a></r>", "/r[a = '123']", True),
        ("<r><a>1<b>2</b>3</a></r>", "/r[a/text() = '13']", False),
        ("<r><a>1<b>2</b>3</a></r>", "/r[a/text() = '3']", True),
        ("<r><a>１</a></r>", "/r[a = 1]", False),  # a full-width digit is no number
        ("<r x='5'><a/></r>", "/r[@x > 4]/a", True),
        ("<r x='5'/>", "/r[@x > 4]/a", False),  # the path after the predicate must exist
        ("<r><a/></r>", "/r/a/@y", False),
        ("<r><a y=''/></r>", "/r/a/@y", True),
    ],
)
def test_counted_regressions(xml, text, matches):
    assert filter_plan(text) is not None
    tree = etree.fromstring(xml)
    assert lxml_answer([tree], [text]) == [[0] if matches else []]
    for compiled in (True, False):
        machine = XPushMachine({0: text}, MachineOptions(compiled=compiled))
        assert run(machine, [tree]) == [[0] if matches else []]


@pytest.mark.parametrize(
    "text",
    [
        "//a[b = 1]",
        "/a/*[b]",
        "/a[b[c = 1]]",
        "/a[b = 1]/c[not(d = 2)]",  # an inner anchor true with no atom true
        "/a[../b]",
        "/a[b = 1] or /c",
        "/a[@* = 1]",
    ],
)
def test_other_filters_are_the_machines(text):
    assert filter_plan(text) is None


def test_the_counter_checks_what_it_is_given():
    from xcep.xpush import counting

    if counting.Counter is None:
        pytest.skip("the compiled core is not built here (no C compiler)")
    counted = CountedFilters.of({0: filter_template("/a[b = 1 or not(c)]")}, compiled=False)
    assert evaluate(counted.codes[0], lambda atom: False)  # not(c): true with no atom
    good = counted.counter_arguments()
    assert counting.Counter(**good) is not None
    bad = [
        ("well formed", {"code": (array("i", [0, 2]), array("i", [0, 2]))}),  # a AND alone
        ("head", {"head_of": array("i", [-1, 5, -1, -1])}),
        ("one collect", {"collect": b"\x00"}),
        ("triples", {"children": array("i", [0, 1])}),
    ]
    for message, changed in bad:
        with pytest.raises(ValueError, match=message):
            counting.Counter(**(good | changed))


def test_trace_answers_for_the_counted_filters_too():
    filters = {1: "/a[b = 1]", 2: "//a[b = 2]", 3: "/a[not(c = 1)]", 4: "/a[c]"}
    for compiled in (True, False):
        machine = XPushMachine(filters, MachineOptions(compiled=compiled))
        assert machine.stats_dict()["counted_filters"] == 2  # (4 tests no value: the machine's)
        for _ in range(2):  # (the run's counter is reused: a trace starts a document)
            _, ids = machine.trace("<a><b>1</b><b>2</b></a>")
            assert ids == [1, 2, 3]


@settings(max_examples=200, deadline=None)
@given(st.lists(counted_filters(), min_size=1, max_size=10))
def test_the_plans_made_in_c_are_the_references(paths):
    """``_states.plan_counted`` makes the trie and each filter's atoms, formula and postings as
    ``CountedFilters._plan_in_python`` does: the same arrays for Counter, item for item."""
    from xcep.xpush import counting

    if counting.plan_counted is None:
        pytest.skip("the compiled core is not built here (no C compiler)")
    planned = {k: filter_template(to_text(p)) for k, p in enumerate(paths)}
    planned = {k: v for k, v in planned.items() if v is not None}
    python = CountedFilters.of(planned, compiled=False).counter_arguments()
    made_in_c = CountedFilters.of(planned, compiled=True).counter_arguments()
    for key, value in python.items():
        if key == "indexes" or value is None:  # (marks: None without inner filters)
            assert key == "indexes" or made_in_c[key] is None, key
            continue
        pairs = value if isinstance(value, tuple) else (value,)
        theirs = made_in_c[key] if isinstance(value, tuple) else (made_in_c[key],)
        assert [bytes(x) for x in pairs] == [bytes(x) for x in theirs], key


@pytest.mark.parametrize(
    ("text", "counted"),
    [
        ("/a[b = 1]", True),
        ("/a[b and c > 2]", True),
        ("/a[not(starts-with(b, 'x'))]", True),
        ("/a[b]/c", False),  # paths alone: no new states, and their answers cached by state
        ("/a/b/@c", False),
        ("/a[not(b) and c]", False),
    ],
)
def test_only_filters_that_test_values_are_counted(text, counted):
    assert filter_plan(text) is not None  # all of the form
    assert (filter_template(text) is not None) == counted
