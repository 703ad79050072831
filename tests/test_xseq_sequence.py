"""The flat sequence fast path (xcep.xseq.sequence) equals the reference evaluator and the
automaton on random sequence queries over random streams of sibling elements."""

from __future__ import annotations

import io
import json
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from xcep.cli import main
from xcep.events import EventStream, parse
from xcep.plans import compile_plan
from xcep.testing.xseq_reference import evaluate
from xcep.xseq import XSeqEngine, sequence_group
from xcep.xseq.engine import compile_fast_path
from xcep.xseq.parser import QuerySyntaxError
from xcep.xseq.sequence import SequencePattern
from xcep.xseq.vm import CompiledPlan

VALUES = ("1", "2", "3", "10", "2.5", "x", " 4 ")  # numbers, a non-number, spaces


@st.composite
def element(draw) -> str:
    name = draw(st.sampled_from(("t", "t", "u")))
    attributes = ""
    for attribute, choices in (("k", ("A", "B")), ("p", VALUES), ("q", ("a", "b"))):
        if draw(st.integers(0, 4)):  # sometimes missing
            attributes += f' {attribute}="{draw(st.sampled_from(choices))}"'
    inside = draw(
        st.sampled_from(
            (
                *(
                    "",
                    "",
                    "text",
                    "<t p='9'/>",
                    "<u><t/></u>",
                    "<v>3</v>",
                    "<v>x</v>a<v>1<w/>5</v>",
                ),
                "<s><t p='2'/><t p='1'><v>2</v></t></s>",  # lists inside lists: for //s/
                "<u><s><t k='A' p='3'/></s></u>",
            )
        )
    )
    return f"<{name}{attributes}>{inside}</{name}>"


@st.composite
def streams(draw) -> list[str]:
    """One to three documents <s> of flat lists, with text and other elements around."""
    docs = []
    for _ in range(draw(st.integers(1, 3))):
        children = draw(st.lists(element(), min_size=0, max_size=9))
        if draw(st.booleans()):
            children.insert(draw(st.integers(0, len(children))), "words")
        root = draw(st.sampled_from(("s", "s", "s", "o")))
        docs.append(f"<{root}>{''.join(children)}</{root}>")
    return docs


@st.composite
def sequence_queries(draw) -> str:
    head_var = draw(st.booleans())
    head = "$Z" if head_var else draw(st.sampled_from(("t", "*")))
    if draw(st.integers(0, 3)) == 0:
        head += draw(st.sampled_from(("[@p > 1]", "[@q = 'a']", "[not(@q)]", "[v/text() = 3]")))
    items, kleene, plain = [], [], ["Z"] if head_var else []
    for i in range(draw(st.integers(1, 3))):
        star = draw(st.booleans())
        var = draw(st.integers(0, 4)) > 0
        test = f"$V{i}" if var else draw(st.sampled_from(("t", "*")))
        if draw(st.integers(0, 4)) == 0:
            test += draw(st.sampled_from(("[@p != 'x']", "[@q]")))
        items.append(f"(\\ {test})*" if star else f"\\ {test}")
        if var:
            (kleene if star else plain).append(f"V{i}")
    conjuncts = []
    for _ in range(draw(st.integers(0, 3))):
        options = []
        for v in kleene:
            options += [
                f"${v}@p < prev(${v})@p",
                f"${v}@p >= prev(${v})@p",
                f"${v}@q = 'a'",
                f"first(${v})@p != last(${v})@p",
            ]
            options += [f"first(${v})@p < ${z}@p" for z in plain]
            options += [f"last(${v})@p + 1 > ${z}@p" for z in plain]
            options += [  # arithmetic on one value a side (computed inline), strings too
                f"${v}@p - prev(${v})@p < 2",
                f"last(${v})@p - first(${v})@p > 1",
                f"${v}@p * 2 != prev(${v})@p",
                f"${v}@q + 1 > 0",
                f"${v}@p - 1 < 'a'",
                f"last(${v})/v/text() - first(${v})/v/text() > 0",  # a child's first text
                f"${v}/v/text() + 1 > prev(${v})@p",
            ]
            options += [f"${v}@p div (${z}@p - 1) >= 1" for z in plain]
            options += [f"tag(${v}) = 't'", f"not(${v}@q = 'b')", f"${v}@p > 2"]
            options += [f"${v}/v/text() > prev(${v})/v/text()", f"${v}/v/text() = 3"]
            options += [f"last(${v})/v/text() >= ${z}/v/text()" for z in plain]
        for z in plain:
            options += [f"${z}@p > 1", f"tag(${z}) = 'u'", f"${z}@q != 'a' or ${z}@p = 3"]
            options += [f"${z}/v/text() != 'x'", f"${z}@q = 'b'", f"${z}@k = 'A'"]
        if options:
            conjuncts.append(draw(st.sampled_from(options)))
    variables = plain + kleene
    if not variables:  # nothing to return: bind the head (keeping its predicate)
        head, variables = "$Z" + (head[head.find("[") :] if "[" in head else ""), ["Z"]
    v = draw(st.sampled_from(variables))
    returns = draw(
        st.sampled_from(
            (
                f"count(${v})",
                f"${v}@p",
                f"${v}@p, tag(${v})",
                f"count(${v}), max(${v}@p)",
                f"sum(${v}@p), count(${variables[0]})",
                f"${variables[0]}@q, count(${v})",  # grouped: per partition
                f"${v}@p * 2",
                f"${v}/v/text(), ${v}@q",
                f"max(${v}/v/text())",
            )
        )
    )
    where = f" where {' and '.join(conjuncts)}" if conjuncts else ""
    partition = draw(st.sampled_from(("", " partition by /s/t@k", " partition by /s/*@k")))
    parents = ("/s/", "/s/", "//s/", "//*/", "//u/s/", "//s/*/")
    parent = "/s/" if partition else draw(st.sampled_from(parents))
    return f"return {returns} from {parent}{head} {' '.join(items)}{where}{partition}"


def _batches(text: str):
    return EventStream([io.BytesIO(text.encode())], batch_size=7).batches()


def _rows(query: str, text: str, **options) -> list:
    return list(XSeqEngine(query, **options).run(_batches(text)))


SELECTION = st.sampled_from(("all", "all", "maximal", "skip-past-last"))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(query=sequence_queries(), docs=streams(), selection=SELECTION)
@example(  # counted in place under all: a policy must see the matches first
    query="return count($Z) from /s/$Z (\\ $X)* where $X@p < prev($X)@p partition by /s/t@k",
    docs=['<s><t k="A" p="3"/><t k="A" p="2"/><t k="A" p="1"/></s>'],
    selection="maximal",
)
def test_fast_path_equals_reference_and_automaton(
    query: str, docs: list[str], selection: str
) -> None:
    try:
        engine = XSeqEngine(query, selection=selection, runtime="sequence")
    except QuerySyntaxError:
        return  # e.g. a condition relating two Kleene-* groups
    if selection == "skip-past-last" and " from //" in query:
        assert "skip-past-last" in engine.not_fast  # nested lists: not on the fast path
    else:
        assert isinstance(engine.fast_path, SequencePattern), (query, engine.fast_path)
    text = "".join(docs)
    expected = evaluate(query, parse(text), selection=selection)
    assert _rows(query, text, selection=selection, runtime="sequence") == expected, query
    assert _rows(query, text, selection=selection) == expected, query  # (auto: either)
    assert _rows(query, text, selection=selection, fast=False) == expected, query


@pytest.mark.parametrize("kernel", ["_lists", "_Stepper"])  # the list reader, the step
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=sequence_queries(),
    docs=streams(),
    selection=SELECTION,
    batch=st.integers(1, 40),
    cut=st.integers(0, 30),
)
def test_the_kernels_run_as_python_does(
    kernel: str, query: str, docs: list[str], selection: str, batch: int, cut: int
) -> None:
    """The list kernel's list reader (``_lists.read``: lists of attribute fields) and its
    step function (``_lists.Stepper``, from ``_StepProgram``) give the rows of their
    Python references (``ListReader.read``, ``_StepSource``), under every policy, with
    the run saved at a random batch and resumed by the other (the reader's cursor, the
    partial matches: the same Python data)."""
    from xcep.xseq import sequence

    compiled = getattr(sequence, kernel)
    if compiled is None:
        pytest.skip("the kernel is not built")
    try:
        engine = XSeqEngine(query, selection=selection)
    except QuerySyntaxError:
        return
    text = "".join(docs)
    found = []
    for first, then in ((True, False), (False, True), (True, True), (False, False)):
        with mock.patch.object(sequence, kernel, compiled if first else None):
            run, rows = engine.start(), []
        stream = EventStream([io.BytesIO(text.encode())], batch_size=batch)
        for number, events in enumerate(stream.batches()):
            on = first if number < cut else then
            with mock.patch.object(sequence, kernel, compiled if on else None):
                if number == cut:
                    run = engine.resume(run.snapshot())
                rows += run.feed([events])
        rows += run.finish()
        found.append(rows)
    assert found[0] == found[1] == found[2] == found[3], query


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(query=sequence_queries(), docs=streams(), cut=st.integers(1, 3), selection=SELECTION)
def test_fast_path_values_and_prefixes(query: str, docs: list[str], cut: int, selection) -> None:
    """--values prints the same; a prefix of the stream (whole documents, final=False)
    gives the rows the automaton gives (under a policy, the rows it gives and maybe more:
    the automaton waits while a thread that can no longer start a match lives), and
    those rows begin the rows of the whole stream."""
    try:
        XSeqEngine(query)
    except QuerySyntaxError:
        return
    text = "".join(docs)
    expected = evaluate(query, parse(text), selection=selection, values_only=True)
    assert _rows(query, text, values_only=True, selection=selection) == expected
    prefix = "".join(docs[:cut])
    fast, automaton = (
        list(XSeqEngine(query, fast=fast, selection=selection).run(_batches(prefix), final=False))
        for fast in (True, False)
    )
    if selection == "all":
        assert fast == automaton, query
    else:
        assert fast[: len(automaton)] == automaton, query
    whole = evaluate(query, parse(text), selection=selection)
    assert whole[: len(fast)] == fast, query


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    queries=st.lists(sequence_queries(), min_size=2, max_size=6),
    docs=streams(),
    cut=st.integers(0, 60),
    removed=st.integers(0, 5),
    selection=SELECTION,
)
@example(  # a template of two, one removed, saved: restored as it ran (its matches handed out)
    queries=[
        "return count($Z) from /s/$Z[@p > 1] \\ t[@p != 'x'] partition by /s/t@k",
        "return count($V1) from //s/t[v/text() = 3] (\\ t[@p != 'x'])* \\ $V1[@p != 'x']",
        "return count($V1) from //s/t[v/text() = 3] (\\ t[@p != 'x'])* \\ $V1[@p != 'x']",
    ],
    docs=["<s></s>"],
    cut=0,
    removed=1,
    selection="skip-past-last",
)
def test_sequence_groups_give_each_query_its_rows(
    queries: list[str], docs: list[str], cut: int, removed: int, selection: str
) -> None:
    """Several flat sequence queries in one plan (those that read one list alike in one
    ``SequenceGroup``: one list reader, each query's own lists and rows): each query's rows
    are its own engine's, also when the run is saved at batch ``cut`` and restored by
    another plan, and when a query is removed there (the rest go on unchanged)."""
    named = {}
    for i, query in enumerate(queries):
        try:
            XSeqEngine(query, selection=selection)
        except QuerySyntaxError:
            continue
        named[f"q{i}"] = query
    text = "".join(docs)
    gone = sorted(named)[removed] if removed < len(named) > 1 else None  # (one: no removing)
    _each_alone(compile_plan("xseq", named, selection=selection), text, cut, gone)


def _each_alone(plan, text: str, cut: int, gone) -> None:
    """A run of ``plan`` over ``text``, saved at batch ``cut`` and restored by another
    plan of its queries then, query ``gone`` removed there: each query's rows are its
    own engine's (the removed one's a prefix of them: its rows stop there)."""
    selection = plan.options.get("selection", "all")
    run, found = plan.start(), []
    for n, batch in enumerate(_batches(text)):
        if n == cut:
            if gone is not None:
                run.remove(gone)
            run = compile_plan("xseq", run.queries(), **plan.options).restore(run.snapshot())
        found += run.feed(batch)
    found += run.finish()
    rows: dict = {}
    for row in found:
        rows.setdefault(row.query, []).append(row.value)
    for qid, query in plan.queries.items():
        alone = _rows(query, text, selection=selection)
        if qid == gone:
            assert rows.get(qid, []) == alone[: len(rows.get(qid, []))], query
        else:
            assert rows.get(qid, []) == alone, (qid, query)


@st.composite
def template_families(draw) -> list[str]:
    """Four to seven fixed-length sequence queries of one shape that differ in their
    comparisons of attributes with constants (step predicates and where clause) and
    in their return clauses: a template's members."""
    length = draw(st.integers(1, 3))
    variables = ["Z", *(f"V{i}" for i in range(length))]
    partition = draw(st.sampled_from(("", " partition by /s/t@k")))
    family = []
    for _ in range(draw(st.integers(4, 7))):
        steps, where = [], []
        for var in variables:
            compare = draw(
                st.sampled_from(
                    (
                        "",
                        f"[@k = '{draw(st.sampled_from('AB'))}']",
                        f"[@p > {draw(st.sampled_from(VALUES[:5]))}]",
                        "[@q = 'b']",
                    )
                )
            )
            steps.append(f"${var}{compare}")
            if draw(st.integers(0, 2)) == 0:
                op = draw(st.sampled_from(("=", "<", ">=", ">")))
                constant = draw(st.sampled_from(("1", "2", "'x'")))
                where.append(f"${var}@p {op} {constant}")
        returns = draw(
            st.sampled_from(
                (
                    f"${variables[-1]}@p",
                    f"$Z@q, ${variables[-1]}@p",
                    "count($Z)",
                    f"sum(${variables[-1]}@p), count($Z)",
                    "$Z@p * 2",
                )
            )
        )
        path = " \\ ".join(steps)
        clause = f" where {' and '.join(where)}" if where else ""
        family.append(f"return {returns} from /s/{path}{clause}{partition}")
    return family


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(family=template_families(), docs=streams(), cut=st.integers(0, 60), gone=st.integers(0, 8))
def test_a_template_gives_each_member_its_rows(
    family: list[str], docs: list[str], cut: int, gone: int
) -> None:
    """Fixed-length sequence queries that differ only in comparisons with constants
    share one run of their template (``SequenceGroup``: the comparisons decided for all
    members at once): each member's rows are its own engine's, also when the run is
    saved at batch ``cut`` and restored, and a member removed there."""
    named = {f"m{i}": query for i, query in enumerate(family)}
    threshold, sequence_group.TEMPLATE = sequence_group.TEMPLATE, 0  # a template however few
    try:
        _template_rows(named, docs, cut, gone)
    finally:
        sequence_group.TEMPLATE = threshold


def _template_rows(named: dict, docs: list[str], cut: int, gone: int) -> None:
    plan = compile_plan("xseq", named)
    assume(any(len(indexes) > 1 for group in plan.groups for _, indexes, _ in group.units))
    _each_alone(plan, "".join(docs), cut, f"m{gone}" if gone < len(named) else None)


def test_a_query_file_of_one_list_shape_is_one_group() -> None:
    queries = {
        f"q{k}": f"return $X@p from /s/$Z \\ $X where $Z@q = 'a' and $X@p > {k}" for k in range(8)
    }
    queries["falls"] = "return count($Z) from /s/$Z (\\ $X)* where $X@p < prev($X)@p"
    queries["parts"] = "return count($Z) from /s/$Z \\ $X partition by /s/t@k"
    explained = json.loads(compile_plan("xseq", queries).explain())
    assert sorted(map(sorted, explained["sequence groups"])) == [
        ["falls", *(f"q{k}" for k in range(8))],
        ["parts"],
    ]
    # the eight pair queries are one template (eight tries an element); falls: Kleene-*
    assert explained["sequence templates"] == [[f"q{k}" for k in range(8)]]
    text = "<s>" + "".join(f"<t k='A' q='a' p='{p}'/>" for p in (3, 1, 4, 1, 5, 9, 2, 6)) + "</s>"
    plan = compile_plan("xseq", queries)
    run = plan.start()
    found = [row for batch in _batches(text) for row in run.feed(batch)] + run.finish()
    assert run.stats()["sequence groups"] == {"groups": 2, "queries": 10}
    for qid, query in queries.items():
        assert [r.value for r in found if r.query == qid] == _rows(query, text), qid


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("return $Z from /s/$Z (\\ $X)*", "content"),
        ("return count($Z) from /s/$Z (/t)*", "not"),
        ("return count($Z) from /s/$Z \\ $X where $X/t = 1", "more of an element"),
        ("return count($Z) from /s//t/$Z \\ $X", "child steps"),
        ("return count($Z) from //s/$Z \\ $X partition by //s/t@k", "//"),
    ],
)
def test_queries_that_are_not_flat_say_why(query: str, why: str) -> None:
    """(An automaton runs them: the compiled one where it takes them.)"""
    engine = XSeqEngine(query)
    reason = compile_fast_path(engine.analysis)
    assert isinstance(reason, str) and why in reason
    compiled = isinstance(engine.fast_path, CompiledPlan)
    assert engine.stats()["evaluator"] == ("compiled automaton" if compiled else "automaton")
    assert f"evaluated on the {engine.stats()['evaluator']}" in engine.explain().replace(
        "pushdown automaton", "automaton"
    )


def test_every_selection_and_not_the_switch_use_the_fast_path() -> None:
    query = "return count($Z) from /s/$Z (\\ $X)* partition by /s/t@k"
    for selection in ("all", "maximal", "skip-past-last"):
        engine = XSeqEngine(query, selection=selection)
        assert isinstance(engine.fast_path, SequencePattern)
        assert "flat-sequence runtime" in engine.explain()
    assert not isinstance(XSeqEngine(query, fast=False).fast_path, SequencePattern)


def test_cli_explains_and_runs_both_evaluators(tmp_path) -> None:
    data = tmp_path / "stocks.xml"
    prices = (5, 4, 3, 6, 2, 1, 7, 7, 3)
    data.write_text(
        "<s>" + "".join(f'<t k="{"AB"[i % 2]}" p="{p}"/>' for i, p in enumerate(prices)) + "</s>"
    )
    query = "return count($Z) from /s/$Z (\\ $X)* where $X@p < prev($X)@p partition by /s/t@k"
    out = io.StringIO()
    assert main(["xseq", query, "--explain"], out) == 0
    assert "evaluated on the flat-sequence runtime" in out.getvalue()
    out = io.StringIO()
    assert main(["xseq", query, "--explain", "--automaton"], out) == 0
    assert "not on a runtime: the fast path is off" in out.getvalue()
    rows = []
    for extra in ([], ["--automaton"]):
        out = io.StringIO()
        assert main(["xseq", query, str(data), *extra], out) == 0
        rows.append(out.getvalue())
    # A: 5 3 2 7 3 -> runs 5>3>2: {5},{5,3},{5,3,2},{3},{3,2},{2},{7},{7,3},{3} = 9
    # B: 4 6 1 7   -> {4},{6},{6,1},{1},{7} = 5
    assert rows[0] == rows[1] == "[9]\n[5]\n"


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    prices=st.lists(st.sampled_from((1, 2, 3, "2.5", "x", None)), max_size=12),
    query=st.sampled_from(
        (
            "return $Z/p/text(), $X/p/text() from /json/$Z (\\ $X)* "
            "where $X/p/text() < prev($X)/p/text() and first($X)/p/text() < $Z/p/text()",
            "return count($Z) from /json/$Z (\\ $X)* (\\ $Y)* "
            "where $X/p/text() < prev($X)/p/text() and $Y/p/text() > prev($Y)/p/text()",
            "return max($X/p/text()), count($X) from /json/$Z[c/text() = 'A'] (\\ $X)*",
        )
    ),
)
def test_json_arrays_run_on_the_fast_path(prices: list, query: str) -> None:
    """A JSON array of objects is a list of elements whose fields are children's text."""
    import json

    assert isinstance(XSeqEngine(query, runtime="sequence").fast_path, SequencePattern)
    objects = [{"c": "AB"[i % 2], "p": p} for i, p in enumerate(prices)]
    text = json.dumps({"s": objects})
    expected = evaluate(query, parse(text, format="json"))
    for fast in (True, False):
        stream = EventStream([io.BytesIO(text.encode())], format="json", batch_size=5)
        engine = XSeqEngine(query, fast=fast, runtime="sequence")
        assert list(engine.run(stream.batches())) == expected, fast


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["1", " 2 ", "-3.5", "1e3", "1_000", "inf", "-nan", "1e400", "x"]),
            st.text(st.sampled_from("0123456789.-+e_ naIf١"), max_size=6),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_compiled_list_reader_reads_numbers_as_to_number(values: list[str]) -> None:
    """An attribute field's number, read in C (``float`` of a str, finite, no ``_``), is
    ``values.to_number``'s, on numbers, words and what Python's float alone would take."""
    from xcep.xseq import sequence
    from xcep.xseq.values import to_number

    if sequence._lists is None:
        pytest.skip("the kernel is not built")
    items = "".join(f"<t k='a' p='{value}'/>" for value in values)
    batch = next(EventStream([io.BytesIO(f"<s>{items}</s>".encode())]).batches())
    names, got = batch.symbols, []
    sequence._lists.read(
        batch.kinds, batch.depths, batch.names, batch.docs, batch.nodes, batch.values,
        names.names, (names["s"], names["t"]), names["k"], {names["p"]: 0}, 1, False, False,
        True, [True, False, False], None, None, None, lambda key, e: got.append(e[3][0]),
        lambda what: None, "opens", "ends", {}, to_number,
    )  # fmt: skip
    assert got == [(value, to_number(value)) for value in values]


@pytest.mark.parametrize("compiled", [True, False])
def test_a_run_let_go_is_freed(compiled: bool) -> None:
    """A run holds its step function and the step its run's ``emit``: the collector must
    free the two (the kernel's ``Stepper`` takes part in it), with what they hold."""
    import gc
    import weakref

    from xcep.xseq import sequence

    if compiled and sequence._Stepper is None:
        pytest.skip("the kernel is not built")
    query = "return $Z@p, count($X) from /s/$Z (\\ $X)* where $X@p < prev($X)@p partition by /s/t@k"
    text = '<s><t k="A" p="3"/><t k="A" p="2"/><t k="B" p="1"/><t k="A" p="1"/></s>'
    with mock.patch.object(sequence, "_Stepper", sequence._Stepper if compiled else None):
        run = XSeqEngine(query).start()
    run.feed(_batches(text))
    freed = weakref.ref(run.runtime)
    del run
    gc.collect()
    assert freed() is None
