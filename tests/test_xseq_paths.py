"""The plain path fast path (xcep.xseq.paths) equals the reference evaluator and the
automaton on random paths of child and descendant steps with predicates, Kleene-*
groups and a last text() or attribute step, over random documents cut into small
batches."""

from __future__ import annotations

import io
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.xseq_queries import TAGS, documents

from xcep.events import EventStream, parse
from xcep.plans import compile_plan
from xcep.testing.xseq_reference import evaluate
from xcep.xseq import XSeqEngine
from xcep.xseq import atoms as atoms_module
from xcep.xseq.atoms import Atom, Operand
from xcep.xseq.paths import PlainPath

# predicates the path runtime decides itself (xcep.xseq.atoms): on attributes, children,
# texts and the element's own string value, combined with and, or and not
PREDICATES = (
    "@x",
    "@x = 2",
    "@x > 1",
    "3 > @x",
    "@k = 'p'",
    "not(@k = 'q')",
    "@x = 1 or @k = 'p'",
    "b",
    "a/@x >= 2",
    "*/b",
    ". = 't'",
    ". = 7",
    "text() = 'u'",
    "not(c)",
    "b and @x != 4",
    "c/text() = 't' or a/b",
    ".//b",
    "b[@x > 1]",
    "*//c",
    ".//text() = 't'",
    "a[b]/@x = 3",
    "not(.//c[@k = 'p'])",
    "b//text() = 'u'",
)


@st.composite
def steps(draw, size: int) -> str:
    out = ""
    for _ in range(size):
        axis = draw(st.sampled_from(("/", "/", "//")))
        out += axis + draw(st.sampled_from((*TAGS, "*")))
        if draw(st.integers(0, 2)) == 0:
            out += f"[{draw(st.sampled_from(PREDICATES))}]"
    return out


@st.composite
def plain_paths(draw) -> str:
    path = draw(steps(draw(st.integers(1, 3))))
    if draw(st.booleans()):
        path += f"({draw(steps(draw(st.integers(1, 2))))})*"
        if draw(st.booleans()):
            path += draw(steps(1))
    if draw(st.integers(0, 3)) == 0:
        path += f"({draw(steps(1))} | {draw(steps(2))})"
    if draw(st.integers(0, 3)) == 0:  # count the nodes of a variable (a tag() test or not)
        axis = draw(st.sampled_from(("/", "//")))
        where = draw(
            st.sampled_from(("", " where tag($V) = 'a'", " where tag($V) = 'b' or tag($V) = 'c'"))
        )
        terms = draw(st.sampled_from(("count($V)", "count($V), count($V)")))
        return f"return {terms} from {path}{axis}$V{where}"
    if draw(st.integers(0, 3)) == 0:  # rows of one variable's fields, children, or aggregates
        axis = draw(st.sampled_from(("/", "//")))
        pred = draw(st.sampled_from(("", "", "[@x > 1]", "[b]")))
        where = draw(
            st.sampled_from(
                (
                    "",
                    " where $V@k = 'p'",
                    " where $V/b or $V@x = 3",
                    " where $V/a/text() = 't' or not($V//b/@x)",
                )
            )
        )
        terms = draw(
            st.sampled_from(
                (
                    "$V@x",
                    "$V@x, $V@k",
                    "$V/text(), $V/b/@x",
                    "$V/a/text()",
                    "$V",
                    "$V/b, tag($V)",
                    "max($V@x), count($V)",
                    "count($V@x), $V@k",
                )
            )
        )
        return f"return {terms} from {path}{axis}$V{pred}{where}"
    last = draw(st.sampled_from(("", "", "/text()", "/@x", "/@k")))
    return path + last


def _rows(query: str, text: str, batch: int = 7, **options) -> list:
    stream = EventStream([io.BytesIO(text.encode())], batch_size=batch)
    options.setdefault("runtime", "path")  # (fast=False: the Python automaton)
    return list(XSeqEngine(query, **options).run(stream.batches()))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(query=plain_paths(), text=documents(), values_only=st.booleans(), batch=st.integers(1, 12))
def test_plain_paths_equal_reference_and_automaton(query, text, values_only, batch) -> None:
    engine = XSeqEngine(query, runtime="path")
    assert isinstance(engine.fast_path, PlainPath), (query, engine.fast_path)
    expected = evaluate(query, parse(text), values_only=values_only)
    assert _rows(query, text, batch, values_only=values_only) == expected, query
    assert _rows(query, text, values_only=values_only, fast=False) == expected, query


@pytest.mark.parametrize(
    "query",
    [
        "//parlist/listitem(/parlist/listitem)*",
        "//listitem/text/text()",
        "//parlist//keyword",
        "/site//item/name/text()",
        "/site/*/*/@id",
        "/site/regions/*/item[location = 'United States']/name/text()",
        "//open_auction[bidder/increase > 10 and not(reserve)]/@id",
        "/site/people/person[profile/@income > 50000]/name",
        "//person[@id = 'person0']//text()",
        "/site[people/person]/regions//item[@featured]/@id",  # held: the whole document
        "//*[. = 'Creditcard']",
    ],
)
def test_xmark_paths_at_every_batch_size(data_dir, query: str) -> None:
    """Elements open across batch boundaries at every depth (a bug once took the state of a
    later sibling for the parent's)."""
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    expected = list(XSeqEngine(query, fast=False).run(EventStream([path]).batches()))
    assert expected
    for size in (1, 7, 100, 500, 8192):
        stream = EventStream([path], batch_size=size)
        assert list(XSeqEngine(query, runtime="path").run(stream.batches())) == expected, size
    spaced = list(XSeqEngine(query, fast=False).run(_spaced(path, 8192)))
    for size in (1, 7, 100):  # whitespace text between the elements, at every level
        assert list(XSeqEngine(query, runtime="path").run(_spaced(path, size))) == spaced, size


def _spaced(path, size: int):
    return EventStream([path], batch_size=size, keep_whitespace=True).batches()


def test_a_recursive_path_on_xmark(data_dir) -> None:
    """The seed's Q3 on XMark: the same rows as the automaton, nested listitems included."""
    query = "//parlist/listitem(/parlist/listitem)*"
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    rows = [
        list(XSeqEngine(query, fast=f, runtime="path").run(EventStream([path]).batches()))
        for f in (1, 0)
    ]
    assert rows[0] == rows[1]
    assert len(rows[0]) > 100 and any(r[0].count("<listitem>") > 1 for r in rows[0])


def test_a_broken_document_loses_what_the_automaton_loses(tmp_path) -> None:
    """A document cut short: the rows of its elements that never closed are dropped."""
    data = tmp_path / "three.xml"
    data.write_text('<r><a x="1"/></r>\n<r><a x="2"><b/><c>t</c></r>\n<r><a x="3"/></r>\n')
    for query in ("//a", "//a/@x", "/r/a", "//c/text()", "//b"):
        for size in (2, 5, 100):  # small batches release a broken document's first events
            rows = [
                list(XSeqEngine(query, fast=f, runtime="path").run(_skipping(data, size)))
                for f in (True, False)
            ]
            assert rows[0] == rows[1], (query, size)


def _skipping(path, size: int):
    return EventStream([path], errors="skip", batch_size=size).batches()


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("//a[b = c]", "the predicate"),
        ("//a[parent::a]", "the predicate"),
        ("//a[@x = @k]", "the predicate"),
        ("//a/..", "the step"),
        ("//a \\ b", "the step"),
        ("//a/text()[. = 'u']", "the step"),
        ("//$X", "the variable"),
        ("return first($Y)/b from //$X (/$Y)*", "child steps"),  # nor a flat sequence
        ("return count($X) from //$X where $X/b = $X@k", "child steps"),
        ("return $X, $Y from //$X/$Y", "child steps"),  # two variables
    ],
)
def test_paths_that_are_not_plain_say_why(query: str, why: str) -> None:
    engine = XSeqEngine(query)
    assert not isinstance(engine.fast_path, PlainPath)
    explained = engine.explain()
    assert why in explained
    assert "evaluated on the compiled automaton" in explained or "pushdown automaton" in explained


def test_explain_and_stats_name_the_evaluator() -> None:
    engine = XSeqEngine("//a/b", runtime="path")
    assert "evaluated on the path runtime" in engine.explain()
    stream = EventStream([io.BytesIO(b"<a><b/><a><b>t</b></a></a>")])
    assert list(engine.run(stream.batches())) == [["<b/>"], ["<b>t</b>"]]
    assert engine.stats()["evaluator"] == "path runtime"
    assert engine.stats()["dfa states"] >= 3
    assert "off" in XSeqEngine("//a/b", fast=False).fast_path


def test_answers_survive_table_flushes(monkeypatch, data_dir) -> None:
    """With a tiny budget the transition table starts over again and again: same rows."""
    import xcep.xseq.paths as paths

    query = "//parlist/listitem(/parlist/listitem)*/text()"
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    expected = list(XSeqEngine(query, fast=False).run(EventStream([path]).batches()))
    monkeypatch.setattr(paths, "TABLE_BUDGET", 4)
    engine = XSeqEngine(query, runtime="path")
    assert list(engine.run(EventStream([path], batch_size=500).batches())) == expected
    assert engine.stats()["table flushes"] > 0


@settings(
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    depths=st.lists(st.booleans(), max_size=80),
    probes=st.lists(st.tuples(st.integers(0, 79), st.integers(0, 9)), max_size=20),
)
def test_both_ways_to_the_owner_at_a_depth_agree(monkeypatch, depths, probes) -> None:
    """``_owner_at_depth``: the sorted search (small batches) and the search per depth
    (large ones) give the same owners, at any depth, for events of the batch or not."""
    import numpy as np

    from xcep.xseq import pathrun

    level, kinds, at = 0, [], []
    for opening in depths:  # a well-nested run of opens and closes
        opening = opening or level == 0
        level += 1 if opening else 0
        kinds.append(opening)
        at.append(level)
        level -= 0 if opening else 1
    depth_of = np.array(at, dtype=np.int32)
    opens = np.flatnonzero(np.array(kinds, dtype=bool))
    found = np.array(sorted({p for p, _ in probes if p < len(at)}), dtype=np.int64)
    want = np.array([w for _, w in probes][: len(found)], dtype=np.int32)
    answers = []
    for threshold in (0, 10**9):  # the search per depth, then the sorted one
        with monkeypatch.context() as patch:
            patch.setattr(pathrun, "SORTED_OPENS", threshold)
            answers.append(pathrun._owner_at_depth(opens, depth_of, found, want).tolist())
            parents = pathrun._owner_at_depth(opens, depth_of, opens, depth_of[opens] - 1)
            answers.append(parents.tolist())
    assert answers[0] == answers[2] and answers[1] == answers[3]


# several queries on one path runtime: the plan of a query file (xcep xseq --queries)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    queries=st.lists(plain_paths(), min_size=2, max_size=6),
    text=documents(),
    values_only=st.booleans(),
    batch=st.integers(1, 12),
    cut=st.integers(0, 40),
)
def test_many_queries_on_one_path_runtime(queries, text, values_only, batch, cut) -> None:
    """Every query's rows, in its own order, are those of the reference evaluator, with the
    run saved and restored at a random batch."""
    ids = {f"q{i}": query for i, query in enumerate(queries)}
    plan = compile_plan("xseq", ids, values_only=values_only)
    assert set(plan.path_ids) == set(ids)  # every one on the shared path runtime
    stream = EventStream([io.BytesIO(text.encode())], batch_size=batch)
    run, found = plan.start(), {qid: [] for qid in ids}
    for number, events in enumerate(stream.batches()):
        if number == cut:
            run = plan.restore(run.snapshot())
        for row in run.feed(events):
            found[row.query].append(row.value)
    for row in run.finish():
        found[row.query].append(row.value)
    document = parse(text)
    for qid, query in ids.items():
        assert found[qid] == evaluate(query, document, values_only=values_only), query


def test_a_thousand_thresholds_are_one_operand() -> None:
    """Queries that compare one attribute with many constants read it once: the path
    runtime takes a thousand of them (more atoms than a mask's bits), and selects as
    each alone does."""
    rows = "".join(f'<t p="{i % 97}.5" c="{"ab"[i % 2]}"/>' for i in range(300))
    text = f"<s>{rows}</s>"
    ids = {
        f"q{i}": f"/s/t[@p {op} {i % 90} and @c {'=' if i % 3 else '!='} 'a']/@p"
        for i, op in zip(range(1000), ["<", "<=", ">", ">=", "=", "!="] * 200, strict=False)
    }
    plan = compile_plan("xseq", ids)
    assert len(plan.path_ids) == 1000 and len(plan.paths.operands) == 2
    run = plan.start()
    found: dict = {qid: [] for qid in ids}
    for row in run.feed(next(EventStream([io.BytesIO(text.encode())]).batches())):
        found[row.query].append(row.value)
    document = parse(text)
    for qid in ("q0", "q1", "q2", "q3", "q4", "q5", "q501", "q998"):
        assert found[qid] == evaluate(ids[qid], document), ids[qid]
    assert sum(map(len, found.values())) > 10_000


@settings(max_examples=300)
@given(
    constants=st.lists(
        st.one_of(
            st.integers(-3, 3).map(float),
            st.sampled_from(["2", "02", "2.0", " 2", "b", "ab", "", "1e0", "inf", "1_0", "x"]),
        ),
        min_size=1,
        max_size=6,
    ),
    ops=st.lists(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), min_size=6, max_size=6),
    equality=st.booleans(),
    values=st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(["2", "02", "2.0", " 2 ", "b", "ab", "", "-1", "1e0", "nan", "1_0"]),
            st.integers(-4, 4).map(str),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_an_operand_codes_values_as_its_atoms_compare_them(
    constants, ops, equality, values
) -> None:
    """An element's code tells exactly the atoms that hold on one of its values (each atom
    alone: ``Atom.test``), for numbers, strings, numeric strings and missing values; a
    batch's codes (``codes``: strings compared for equality only, looked up by constant;
    ``codes_at``: the values at positions, looked up in C — numbers by their place among
    the constants — or in Python) are the values' codes one by one."""
    if equality:  # (with string constants only: the codes that need no number)
        ops = ["=" if op in ("=", "<", ">") else "!=" for op in ops]
    atoms = [Atom("t", (), "@p", op, const) for op, const in zip(ops, constants, strict=False)]
    atoms.append(Atom("t", (), "@p", None, None))  # [@p]: exists
    operand = Operand(atoms[0])
    for index, atom in enumerate(atoms):
        operand.add(atom, index)
    assert operand.codes(values).tolist() == [operand.code(value) for value in values]
    at = np.arange(len(values))[::-1]  # a batch's values coded where they are, both ways
    kernels = (atoms_module._mapped, atoms_module._number_places)
    for mapped, places in (kernels, (None, None)):
        with (
            mock.patch.object(atoms_module, "_mapped", mapped),
            mock.patch.object(atoms_module, "_number_places", places),
        ):
            fresh = Operand(atoms[0])  # (its memo empty: the values met for the first time)
            for index, atom in enumerate(atoms):
                fresh.add(atom, index)
            assert fresh.codes_at(values, at).tolist() == [fresh.code(values[i]) for i in at]
            assert fresh.codes_at(values, at).tolist() == [fresh.code(values[i]) for i in at]
    codes = {operand.code(value) for value in values}
    code = codes.pop() if len(codes) == 1 else operand.code_of_set(codes | codes)
    mask = operand.truths(code)
    for index, atom in enumerate(atoms):
        expected = atom.op is None or any(atom.test(v or "") for v in values)
        assert bool(mask >> index & 1) == expected, (atom.op, atom.const, values)


def test_queries_share_their_prefixes_and_each_keeps_its_rows() -> None:
    """Paths share the states of their common steps (one `//` loop for all of them, not a
    thousand), and the same query twice under two ids gives its rows to each."""
    text = (
        "<s>" + "".join(f'<t c="{"ab"[i % 2]}" p="{i}"><n>{i}</n></t>' for i in range(40)) + "</s>"
    )
    ids = {f"q{i}": f"//t[@p > {i % 37}]/n/text()" for i in range(1000)}
    ids["same"] = ids["again"] = "//t[@c = 'a']/n/text()"
    plan = compile_plan("xseq", ids)
    run = plan.start()
    found: dict = {qid: [] for qid in ids}
    for row in run.feed(next(EventStream([io.BytesIO(text.encode())]).batches())):
        found[row.query].append(row.value)
    document = parse(text)
    assert found["same"] == found["again"] == evaluate(ids["same"], document)
    for qid in ("q0", "q5", "q36", "q999"):
        assert found[qid] == evaluate(ids[qid], document), ids[qid]
    moves = plan.paths.nfa.moves  # one loop over any names for the thousand `//t`
    assert sum(1 for state, out in enumerate(moves) if (None, None, state) in out) == 1
