"""Many XSeq queries in one automaton (XSeqMultiEngine): every query's rows equal its
own engine's, in the same order, under every selection policy; subscriptions and
unsubscriptions while a stream runs; the union shares prefixes and templates."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.xseq_queries import documents, families, queries

from xcep.events import EventStream
from xcep.xseq import XSeqEngine, XSeqMultiEngine, compile_query
from xcep.xseq.parser import QuerySyntaxError
from xcep.xseq.vm import compiled_plan

SELECTION = st.sampled_from(("all", "all", "maximal", "skip-past-last"))
RUNTIME = st.sampled_from(("auto", "automaton"))  # (auto: compiled, where it takes them)


def batches(text: str, batch_size: int = 7, chunk_size: int = 65536):
    source = io.BytesIO(text.encode())
    return EventStream([source], batch_size=batch_size, chunk_size=chunk_size).batches()


def alone(query: str, text: str, selection: str = "all") -> list:
    return list(XSeqEngine(query, selection=selection).run(batches(text)))


def per_query(rows: list) -> dict:
    out: dict = {}
    for qid, *row in rows:
        out.setdefault(qid, []).append(row)
    return out


def streamable(queries: list[str]) -> dict:
    out = {}
    for i, query in enumerate(queries):
        try:
            XSeqEngine(query)
        except QuerySyntaxError:
            continue  # a documented stream limit: the property tests of the engine cover it
        out[f"q{i}"] = query
    return out


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(st.integers(1, 4).flatmap(families), min_size=1, max_size=4),
    text=documents(),
    selection=SELECTION,
    runtime=RUNTIME,
)
def test_union_equals_each_query_alone(groups, text: str, selection: str, runtime: str) -> None:
    """On the Python automaton and (selection all) the compiled one: a compiled run per
    template, its members' conditions and rows made in Python (xcep.xseq.vm_multi)."""
    queries = streamable([q for family in groups for q in family])
    engine = XSeqMultiEngine(queries, selection=selection, runtime=runtime)
    got = per_query(engine.run(batches(text)))
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text, selection), query


def _site(first: int) -> str:
    ids = range(first, first + 4)
    people = "".join(f"<person id='p{i}'><name>n{i}</name></person>" for i in ids)
    auctions = "".join(f"<auction><price>{p}</price></auction>" for p in (9, 7, 8, 5, 3))
    return f"<site><people>{people}</people><auctions>{auctions}</auctions></site>"


XMARKISH = "".join(_site(first) for first in range(3))
FAMILY = {
    **{f"person{i}": f"/site/people/person[@id = 'p{i}']/name/text()" for i in range(6)},
    **{
        f"falls{k}": "return last($X)/price/text() from /site/auctions/$Z (\\ $X)* "
        f"where $X/price/text() < prev($X)/price/text() and last($X)/price/text() < {k}"
        for k in (8, 6, 4)
    },
    "names": "//name/text()",
}


@pytest.mark.parametrize("runtime", ["auto", "automaton"])
def test_a_template_family_shares_its_automaton(runtime: str) -> None:
    engine = XSeqMultiEngine(FAMILY, runtime=runtime)
    stats = engine.stats()["none"]
    assert stats["queries"] == len(FAMILY)
    # the falls family is one template; so are the person filters, which differ in the
    # constant of a step predicate (lifted into a condition: xcep.xseq.lifting)
    assert stats["templates"] == 1 + 1 + 1
    single = sum(len(XSeqEngine(q).vpa.states) for q in FAMILY.values())
    assert stats["states"] < 0.7 * single  # the prefixes /site/people/person and /site once
    got = per_query(engine.run(batches(XMARKISH)))
    for qid, query in FAMILY.items():
        assert got.get(qid, []) == alone(query, XMARKISH)
    assert (engine.not_compiled is None) == (runtime == "auto")  # (each template compiled)


def stream_with(engine, text: str, actions: dict):
    """The batches of ``text`` (read 8 bytes at a time: no batch holds two documents'
    starts), calling ``actions[n]`` (on the engine) before document ``n``'s events."""
    for batch in batches(text, batch_size=3, chunk_size=8):
        for number, _, _ in batch.document_runs():
            action = actions.pop(number, None)
            if action:
                action(engine)
        yield batch


DOCS = ["<site><people><person id='p1'><name>a</name></person></people></site>"] * 4


@pytest.mark.parametrize("runtime", ["auto", "automaton"])
def test_subscribe_while_running_starts_at_the_next_document(runtime: str) -> None:
    text = "".join(DOCS)
    engine = XSeqMultiEngine({"first": "//name/text()"}, runtime=runtime)
    late = "return $P@id from //$P where tag($P) = 'person'"
    actions = {2: lambda e: e.subscribe("late", late)}
    got = per_query(engine.run(stream_with(engine, text, actions)))
    assert got["first"] == alone("//name/text()", text)
    assert got["late"] == alone(late, "".join(DOCS[2:]))  # documents 2 and 3 only


@pytest.mark.parametrize("runtime", ["auto", "automaton"])
def test_unsubscribe_while_running_stops_at_once(runtime: str) -> None:
    text = "".join(DOCS)
    count = "return count($N) from //$N where tag($N) = 'name'"
    engine = XSeqMultiEngine(
        {"a": "//name/text()", "b": "//name/text()", "c": count}, runtime=runtime
    )
    actions = {2: lambda e: (e.unsubscribe("b"), e.unsubscribe("c"))}
    got = per_query(engine.run(stream_with(engine, text, actions)))
    assert got["a"] == alone("//name/text()", text)
    assert got["b"] == alone("//name/text()", "".join(DOCS[:2]))
    assert "c" not in got  # an aggregate reports at the end: it was gone by then
    assert engine.stats()["none"]["queries"] == 1


@pytest.mark.parametrize("runtime", ["auto", "automaton"])
def test_partitioned_query_joins_every_partition_from_the_next_document(runtime: str) -> None:
    docs = [
        "<s>" + "".join(f"<t c='{c}' p='{p}'/>" for c, p in zip("ABAB", ps, strict=True)) + "</s>"
        for ps in ((5, 9, 4, 8), (3, 7, 2, 6), (1, 5, 0, 4))
    ]
    falls = "return $Z@p, count($X) from /s/$Z (\\ $X)* where $X@p < prev($X)@p partition by /s/t@c"
    engine = XSeqMultiEngine({"early": falls}, runtime=runtime)
    actions = {1: lambda e: e.subscribe("late", falls)}
    got = per_query(engine.run(stream_with(engine, "".join(docs), actions)))
    assert got["early"] == alone(falls, "".join(docs))
    assert sorted(got["late"]) == sorted(alone(falls, "".join(docs[1:])))


def test_a_query_the_compiled_runs_do_not_take_joins_on_its_own(monkeypatch) -> None:
    """Subscribed while the templates run compiled, a query they do not take (its
    plan is refused here: every query of the language compiles) runs on a Python automaton
    of its own from the next document; unsubscribed, it stops at once."""
    docs = ["<r k='p'><a x='1'><b>p</b></a><b><a x='2'/></b></r>"] * 4
    above = "return $X@x from //$X where tag($X) = 'a' and $X/../@k = $X/b"

    def refused(analysis, *args):
        found = compiled_plan(analysis, *args)
        return "refused by the test" if analysis.query.text == above else found

    monkeypatch.setattr("xcep.xseq.vm_multi.compiled_plan", refused)
    engine = XSeqMultiEngine({"a": "//a/@x"})
    alone_ones = []
    actions = {
        1: lambda e: e.subscribe("above", above),
        2: lambda e: alone_ones.extend(e._live.alone),
        3: lambda e: e.unsubscribe("above"),
    }
    got = per_query(engine.run(stream_with(engine, "".join(docs), actions)))
    assert engine.not_compiled is None  # (the templates ran compiled)
    assert alone_ones == ["above"]  # (on a Python automaton of its own)
    assert got["a"] == alone("//a/@x", "".join(docs))
    assert got["above"] == alone(above, "".join(docs[1:3])) != []


@pytest.mark.parametrize("runtime", ["auto", "automaton"])
def test_a_query_subscribed_while_running_stays_for_the_next_stream(runtime: str) -> None:
    """A query subscribed during a stream (joining at a next document, which here never
    comes; or on an automaton of its own) is one of the engine's queries when the next
    stream starts, and can be unsubscribed between streams."""
    text = "<r k='p'><a x='1'><b>p</b></a></r>"
    above = "return $X@x from //$X where tag($X) = 'a' and $X/../@k = $X/b"
    for late in ("//a/@x", above):
        engine = XSeqMultiEngine({"b": "//b/text()"}, runtime=runtime)
        driver = engine.start()
        (batch,) = list(batches(text, batch_size=1000))
        driver.feed(batch)
        engine.subscribe("late", late)  # (no document follows in this stream)
        driver.finish()
        engine._live = None  # (the stream is over: what run() does)
        assert per_query(engine.run(batches(text)))["late"] == alone(late, text)
        engine.unsubscribe("late")
        assert "late" not in per_query(engine.run(batches(text)))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(st.lists(st.integers(1, 6), max_size=6), min_size=1, max_size=3),
    bounds=st.lists(st.integers(1, 6), min_size=2, max_size=4, unique=True),
    selection=st.sampled_from(("maximal", "skip-past-last")),
    runtime=RUNTIME,
    cut=st.integers(0, 12),
)
def test_members_of_a_template_select_among_their_own_matches(
    runs, bounds, selection, runtime, cut
):
    """Under maximal and skip-past-last each member of a template (queries differing in a
    constant of a condition) selects among the matches its own condition passes, as it
    does alone — on the compiled runs too, where the template hands every match out;
    also when the run is saved and restored after batch ``cut``."""
    import pickle

    text = "".join("<r>" + "".join(f"<a x='{x}'/>" for x in xs) + "</r>" for xs in runs)
    queries = {
        f"k{k}": f"return first($X)@x, last($X)@x from /r/a (\\ $X)* where last($X)@x >= {k}"
        for k in bounds
    }
    engine = XSeqMultiEngine(queries, selection=selection, runtime=runtime)
    driver, rows = engine.start(), []
    assert engine.stats()["none"]["templates"] == 1
    assert (engine.not_compiled is None) == (runtime == "auto")
    for i, batch in enumerate(batches(text, batch_size=3, chunk_size=8)):
        rows += driver.feed(batch)
        if i == cut:
            engine, driver = pickle.loads(pickle.dumps((engine, driver)))
    got = per_query(rows + driver.finish())
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text, selection), query


def test_ids_are_checked() -> None:
    engine = XSeqMultiEngine({"a": "//a"})
    with pytest.raises(ValueError, match="already subscribed"):
        engine.subscribe("a", "//b")
    with pytest.raises(KeyError, match="no query"):
        engine.unsubscribe("zzz")
    with pytest.raises(QuerySyntaxError):
        engine.subscribe("bad", "//a[")
    assert "bad" not in engine.queries


def test_cli_runs_a_queries_file_and_reports_bad_lines(tmp_path) -> None:
    import json
    import subprocess
    import sys

    data = tmp_path / "site.xml"
    data.write_text(XMARKISH)
    queries = tmp_path / "queries.tsv"
    chosen = {q: FAMILY[q] for q in ("person1", "person2", "falls8", "names")}
    lines = ["# a comment", "", *(f"{qid}\t{text}" for qid, text in chosen.items())]
    queries.write_text("\n".join([*lines, "broken\t/site/people/person[", "lonely"]) + "\n")
    command = [sys.executable, "-m", "xcep", "xseq", "--queries", str(queries), str(data)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1  # invalid queries were reported; the others ran
    errors = done.stderr.splitlines()
    assert errors[0].startswith(f"xcep: error: {queries}, line 7, query broken: query column 21")
    assert errors[1] == f"xcep: error: {queries}, line 8: expected an id and a query"
    got = per_query(json.loads(line) for line in done.stdout.splitlines())
    for qid, query in chosen.items():
        assert got[qid] == alone(query, XMARKISH)
    strict = subprocess.run([*command, "--strict"], capture_output=True, text=True)
    assert strict.returncode == 2 and strict.stdout == ""


VALUES = st.sampled_from(["1", "2.5", " 3 ", "10", "-4", "x", "", "2e1"])


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(st.lists(VALUES, max_size=3), min_size=1, max_size=6),
    conditions=st.lists(
        st.tuples(
            st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
            st.sampled_from([-4, 0, 1, 2.5, 3, 10, 20]),
            st.booleans(),  # the constant on the left
            st.sampled_from(["$X/v/text()", "$X@w"]),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_indexed_thresholds_equal_each_comparison(items, conditions) -> None:
    """Members differing in thresholds are decided by binary search over sorted
    constants (xcep.xseq.conditions); each query's rows equal its own engine's."""
    text = (
        "<r>"
        + "".join(
            f"<i w='{vs[0] if vs else ''}'>" + "".join(f"<v>{v}</v>" for v in vs) + "</i>"
            for vs in items
        )
        + "</r>"
    )
    queries = {}
    for n, (op, constant, flipped, value) in enumerate(conditions):
        test = f"{constant} {op} {value}" if flipped else f"{value} {op} {constant}"
        queries[f"q{n}"] = f"return $X@w from /r/$X where {test} and tag($X) = 'i'"
    got = per_query(XSeqMultiEngine(queries).run(batches(text)))
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text), query


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(st.integers(1, 3).flatmap(families), min_size=2, max_size=4),
    text=documents(),
    dropped=st.sets(st.integers(0, 11)),
    runtime=RUNTIME,
)
def test_unsubscribed_queries_leave_the_others_intact(groups, text: str, dropped, runtime) -> None:
    queries = streamable([q for family in groups for q in family])
    engine = XSeqMultiEngine(queries, runtime=runtime)
    states = sum(stats["states"] for stats in engine.stats().values())
    gone = [qid for i, qid in enumerate(queries) if i in dropped]
    for qid in gone:
        engine.unsubscribe(qid)
    got = per_query(engine.run(batches(text)))
    for qid, query in queries.items():
        assert got.get(qid, []) == ([] if qid in gone else alone(query, text)), query
    left = sum(stats["states"] for stats in engine.stats().values())
    assert left <= states
    if len(gone) == len(queries):
        assert left == 0
    for qid in gone:  # an id can be taken again
        engine.subscribe(qid, queries[qid])
    got = per_query(engine.run(batches(text)))
    assert all(got.get(qid, []) == alone(query, text) for qid, query in queries.items())


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(st.sampled_from(["v1", "v2", "v3", "1", "01", "", "v1 "]), max_size=8),
    extra=st.sampled_from(["/r/a[@x]//b/@y", "/r/a//b/@y", "/r/a[@k = 'v2' or @x]//b/@y"]),
)
def test_attribute_index_of_many_predicates(keys, extra) -> None:
    """A split to 8+ steps ``a[@k = 'v']`` (not lifted: a descendant step follows)
    looks @k up (xcep.xseq.counting); numeric-looking constants ('1' equals '01' as
    numbers) are tested as written."""
    text = "<r>" + "".join(f"<a k='{k}' x='{i}'><b y='{i}'/></a>" for i, k in enumerate(keys))
    text += "<a/></r>"
    constants = [f"v{i}" for i in range(10)] + ["1", "v1 "]
    queries = {f"k{i}": f"/r/a[@k = '{c}']//b/@y" for i, c in enumerate(constants)}
    queries["extra"] = extra
    engine = XSeqMultiEngine(queries, runtime="automaton")  # (the Python automaton's index)
    got = per_query(engine.run(batches(text)))
    assert engine.groups[None].machine.fanout  # the index is in use
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text), query


ATTRIBUTE_VALUES = st.sampled_from(["1", "01", "2.5", " 3", "x", "X", "", "10", None])
CONSTANT = st.sampled_from(["1", "2.5", "3", "10", "'x'", "'01'", "'1'", "''", "'X'", "-1"])


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(
    elements=st.lists(st.tuples(ATTRIBUTE_VALUES, ATTRIBUTE_VALUES, ATTRIBUTE_VALUES), max_size=6),
    predicates=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["@k", "@n", "v/text()"]),
                st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
                CONSTANT,
                st.booleans(),  # the constant on the left
            ),
            min_size=1,
            max_size=3,
        ),
        min_size=8,
        max_size=16,
    ),
    joiner=st.sampled_from([" and ", "][", " or "]),
    tail=st.sampled_from(["/@x", "//v/text()"]),
)
def test_indexed_attribute_predicates_equal_each_query_alone(
    elements, predicates, joiner, tail
) -> None:
    """Queries that differ in constants compared with attributes: lifted into one
    template's member conditions (``/@x``), or steps under one split (``//v``
    follows) — both indexed (numbers, numerals and strings, either way round, other
    conjuncts checked one by one): each query's rows equal its own engine's."""
    text = "<r>"
    for i, (k, n, v) in enumerate(elements):
        attrs = "".join(f" {a}='{value}'" for a, value in (("k", k), ("n", n)) if value is not None)
        text += f"<a x='{i}'{attrs}>" + ("" if v is None else f"<v>{v}</v>") + "</a>"
    text += "</r>"
    queries = {}
    for q, conjunction in enumerate(predicates):
        tests = [
            f"{c} {op} {path}" if flipped else f"{path} {op} {c}"
            for path, op, c, flipped in conjunction
        ]
        queries[f"q{q}"] = f"/r/a[{joiner.join(tests)}]{tail}"
    engine = XSeqMultiEngine(queries)
    got = per_query(engine.run(batches(text)))
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text), query


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(), text=documents(), selection=SELECTION)
@example(  # a lifted variable binds the ancestor: matches still start at the query's own
    query="/*[not(@k = 'q')] /$V0", text="<r><a></a><a></a></r>", selection="maximal"
)
def test_lifted_predicates_give_the_same_rows(query: str, text: str, selection: str) -> None:
    """A query with its step predicates lifted into conditions (what the many-query
    engine runs, xcep.xseq.lifting) gives the rows of the query as written."""
    try:
        expected = alone(query, text, selection)
    except QuerySyntaxError:
        return  # a documented stream limit: the property tests of the engine cover it
    engine = XSeqEngine(compile_query(query, lift=True), selection=selection, fast=False)
    assert list(engine.run(batches(text))) == expected, query


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(st.integers(1, 4).flatmap(families), min_size=1, max_size=4),
    text=documents(),
    selection=SELECTION,
    batch_size=st.integers(1, 9),
)
def test_a_plan_of_several_queries_equals_each_query_alone(groups, text, selection, batch_size):
    """The plan ``xcep xseq --queries`` runs: the queries a runtime serves each on its
    own, the others in one automaton, every query's rows as it gives them alone."""
    from xcep.plans import compile_plan

    queries = streamable([q for family in groups for q in family])
    if len(queries) < 2:
        return
    plan = compile_plan("xseq", queries, selection=selection)
    got: dict = {}
    for row in plan.rows(batches(text, batch_size)):
        got.setdefault(row.query, []).append(row.value)
    for qid, query in queries.items():
        assert got.get(qid, []) == alone(query, text, selection), query
