"""The engine interface (xcep.plans), the same for the four engines: a run fed batch by
batch gives what the engine gives in one pass; a run saved at any batch and restored
goes on with the same rows; queries added or removed take effect at the next
document; the statistics have the same keys."""

from __future__ import annotations

import io
import random

import pytest

from xcep.errors import StateError
from xcep.events import EventStream
from xcep.plans import PLANS, Row, compile_plan

STOCKS = "".join(
    f'<s><t company="{"ABC"[i % 3]}" price="{p}"><v>{p % 4}</v></t>'
    f'<t company="{"CAB"[i % 3]}" price="{p + 1}"><v>{(p + 1) % 4}</v></t></s>\n'
    for i, p in enumerate([5, 3, 8, 1, 9, 2, 7, 7, 4, 6, 0, 3])
).encode()

CASES = {
    "filter": {1: "/s/t[@price > 5]", "b": "/s/t[v = 1]", 3: "//t[@company = 'A']"},
    "xseq": {"q": "/s/t[@price > 4]/@price"},
    "xseq-sequence": {"q": "return count($Z) from /s/$Z (\\ $X)* where $X@price < prev($X)@price"},
    "xseq-multi": {"a": "/s/t/@price", "b": "/s/t[@company='B']/v/text()", "c": "//v/text()"},
    "xseq-mixed": {  # one query on its runtime, two on the automaton (no runtime takes them)
        "a": "/s/t[@company='B']/v/text()",
        "b": "//t \\ t/@price",
        "c": "return $T@price from //$T where $T@price > $T/v/text()",
    },
    "xquery": {"q": "for $t in $input/s/t where $t/@price > 5 return string($t/@price)"},
    "xquery-window": {
        "q": "for tumbling window $w in $input/s/t start $a when true() end $b next $c "
        "when $c/@company != $b/@company return <w n='{count($w)}' c='{$a/@company}'/>"
    },
    "xscl": {
        "j": "S/s/t->x1[/v->x2] JOIN{x2 = y2, 3} S/s/t->y1[/v->y2]",
        "k": "S/s/t->x1[/@company->x2] JOIN{x2 = y2, 2} S/s/t->y1[/@company->y2]",
    },
}


def kind_of(case: str) -> str:
    return case.split("-")[0]


def batches(chunk: int) -> list:
    """The stream read ``chunk`` bytes at a time: batches end inside documents too."""
    return list(EventStream([io.BytesIO(STOCKS)], chunk_size=chunk, batch_size=4).batches())


def whole(plan, size: int = 50) -> list[Row]:
    run = plan.start()
    rows = [row for batch in batches(size) for row in run.feed(batch)]
    return rows + run.finish()


def engine_rows(case: str) -> list:
    """The engines' own one-pass answers, as the command line runs them."""
    queries = CASES[case]
    stream = EventStream([io.BytesIO(STOCKS)]).batches()
    if case == "filter":
        from xcep.xpush import XPushMachine

        return [(None, doc, ids) for doc, ids in XPushMachine(queries).run(stream)]
    if case in ("xseq", "xseq-sequence"):
        from xcep.xseq import XSeqEngine

        ((qid, text),) = queries.items()
        return [(qid, None, row) for row in XSeqEngine(text).run(stream)]
    if case in ("xseq-multi", "xseq-mixed"):
        from xcep.xseq import XSeqMultiEngine

        engine = XSeqMultiEngine()
        for qid, text in queries.items():
            engine.subscribe(qid, text)
        return [(row[0], None, row[1:]) for row in engine.run(stream)]
    if case in ("xquery", "xquery-window"):
        from xcep import xquery
        from xcep.xquery.documents import documents_from_batches

        ((qid, text),) = queries.items()
        return [
            (qid, None, line)
            for line in xquery.compile(text).run(list(documents_from_batches(stream)))
        ]
    from xcep.xscl import XsclEngine
    from xcep.xscl.documents import documents_from_batches

    engine = XsclEngine()
    for qid, text in queries.items():
        engine.add(qid, text)
    docs = [("S", doc, float(i)) for i, doc in enumerate(documents_from_batches(stream))]
    return [(r.query, None, r.to_json()) for r in engine.process(docs)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("size", [16, 50, 10_000])
def test_a_run_fed_batch_by_batch_gives_the_engines_answer(case, size):
    rows = whole(compile_plan(kind_of(case), CASES[case]), size)
    if case in ("xseq-multi", "xseq-mixed"):  # each query's rows in its order (side by side)
        assert per_query(rows) == per_query(engine_rows(case))
    else:
        assert [tuple(r) for r in rows] == engine_rows(case)


def per_query(rows) -> dict:
    found: dict = {}
    for query, doc, value in rows:
        found.setdefault(query, []).append((doc, value))
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_saved_anywhere_goes_on_with_the_same_rows(case):
    plan = compile_plan(kind_of(case), CASES[case])
    want = whole(plan)
    parts = batches(16)  # documents cut into batches: a run is saved inside one too
    for cut in sorted(random.Random(case).sample(range(len(parts) + 1), 6)):
        run = plan.start()
        rows = [row for batch in parts[:cut] for row in run.feed(batch)]
        try:
            data = run.snapshot()
        except StateError as error:
            assert "snapshot" not in plan.can, error  # it says it cannot, and it cannot
            return
        assert "snapshot" in plan.can
        run = compile_plan(kind_of(case), CASES[case]).restore(bytes(data))  # another plan
        rows += [row for batch in parts[cut:] for row in run.feed(batch)]
        rows += run.finish()
        if case in ("xseq-multi", "xseq-mixed"):  # (side by side: a batch's rows by query)
            assert per_query(rows) == per_query(want), cut
        else:
            assert rows == want, cut


CHANGING = {  # a plan's kind, options and the texts of the queries added and removed
    "xscl-memory": ("xscl", {"join": "memory"}),
    "xscl-sql": ("xscl", {"join": "sql"}),
    "xseq-multi": ("xseq", {}),
    "xseq-mixed": ("xseq", {}),
}
MORE = {
    "xscl": [
        *CASES["xscl"].values(),
        "S/s/t->x1[/@price->x2] JOIN{x2 = y2, 4} S/s/t->y1[/@price->y2]",
    ],
    "xseq": [
        *CASES["xseq-multi"].values(),
        "return $Z@price, $Y@price from /s /$Z (\\ $Y)* where $Y@price < prev($Y)@price "
        "partition by /s/t@company",
        "return count($Z) from /s/$Z[v > 1]",
    ],
}
MORE["xseq-mixed"] = [*CASES["xseq-mixed"].values(), *MORE["xseq"]]  # starts: own, automaton


@pytest.mark.parametrize("case", sorted(CHANGING))
def test_a_run_saved_among_changes_goes_on_as_if_never_stopped(case):
    kind, options = CHANGING[case]
    texts = MORE.get(case, MORE[kind])
    parts = batches(16)
    rng = random.Random(case)
    for _ in range(4):
        changes, present = {}, ["q"]
        for n, at in enumerate(sorted(rng.sample(range(len(parts)), 5))):
            if len(present) > 1 and rng.random() < 0.4:
                changes[at] = ("remove", present.pop(rng.randrange(len(present))), None)
            else:
                changes[at] = ("add", f"q{n}", rng.choice(texts))
                present.append(f"q{n}")

        def rows(save_at, changes=changes):
            plan = compile_plan(kind, {"q": texts[0], "r": texts[1]}, **options)
            run, out = plan.start(), []
            for i, batch in enumerate(parts):
                if i == save_at:  # restored by a plan of the queries it has now
                    data = run.snapshot()
                    if run.queries() != plan.queries:
                        with pytest.raises(StateError, match="another plan"):
                            plan.restore(data)
                    run = compile_plan(kind, run.queries(), **options).restore(data)
                op, qid, text = changes.get(i, (None, None, None))
                if op:
                    run.add(qid, text) if op == "add" else run.remove(qid)
                out += run.feed(batch)
            return out + run.finish()

        want = rows(None)
        assert want  # the queries find something
        for cut in rng.sample(range(len(parts)), 3):
            assert rows(cut) == want, (cut, changes)


def test_a_filter_plan_of_a_parsed_workload_keeps_the_filters_it_was_given():
    """The CLI hands a ``Workload`` read from a file to the plan, which lends it to its
    first run: the run's changes do not change the plan's queries (made when asked for),
    nor what the plan pickles as."""
    import pickle

    from xcep.xpush import Workload

    given = {1: "/s/t[@price > 5]", "b": "/s/t[v = 1]", 3: "//t[@company = 'A']"}
    plan = compile_plan("filter", Workload(given))
    run = plan.start()
    run.remove("b"), run.add("c", "/s/t[v = 2]")
    rows = [row for batch in batches(16) for row in run.feed(batch)] + run.finish()
    assert any("c" in row.value for row in rows) and not any("b" in row.value for row in rows)
    assert run.queries() == {1: given[1], 3: given[3], "c": "/s/t[v = 2]"}
    assert plan.queries == given
    assert pickle.loads(pickle.dumps(plan)).queries == given
    again = compile_plan("filter", Workload(given))
    assert pickle.loads(pickle.dumps(again)).queries == given  # pickled before asked for
    changed = Workload(given)  # changed before the plan is made: what it holds then
    changed.remove("b"), changed.remove(1), changed.add(1, "/s/t[v = 3]")
    assert compile_plan("filter", changed).queries == {3: given[3], 1: "/s/t[v = 3]"}


def test_a_snapshot_of_another_plan_or_damaged_is_refused():
    plan = compile_plan("filter", {1: "/s/t"})
    data = plan.start().snapshot()
    with pytest.raises(StateError, match="another plan"):
        compile_plan("filter", {1: "/s/t[v]"}).restore(data)
    with pytest.raises(StateError, match="damaged"):
        plan.restore(data[:-5])
    with pytest.raises(StateError, match="not a run snapshot"):
        plan.restore(b"junk")


@pytest.mark.parametrize("case", ["filter", "xseq-multi", "xseq-mixed", "xscl"])
def test_queries_added_and_removed_take_effect_at_the_next_document(case):
    kind = kind_of(case)
    queries = dict(CASES[case])
    (first, text), *_ = queries.items()
    plan = compile_plan(kind, {k: v for k, v in queries.items() if k != first})
    run = plan.start()
    assert "add" in plan.can
    rows = []
    for i, batch in enumerate(batches(16)):
        rows += run.feed(batch)
        if i == 10:
            run.add(first, text)
            before = len(rows)
    rows += run.finish()
    if kind == "filter":  # the added filter answers from the next document on
        assert not any(first in r.value for r in rows[:before])
        assert any(first in r.value for r in rows[before:])
    else:
        assert not any(r.query == first for r in rows[:before])
        assert any(r.query == first for r in rows[before:])
    run = plan.start()
    run.remove(next(iter(plan.queries)))
    rest = [row for batch in batches(50) for row in run.feed(batch)] + run.finish()
    gone = next(iter(plan.queries))
    assert (
        all(gone not in r.value for r in rest)
        if kind == "filter"
        else all(r.query != gone for r in rest)
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_run_has_the_same_statistics_and_a_plan_explains_itself(case):
    plan = compile_plan(kind_of(case), CASES[case])
    run = plan.start()
    for batch in batches(50):
        run.feed(batch)
    run.finish()
    stats = run.stats()
    assert {"queries", "documents", "rows"} <= set(stats)
    assert stats["documents"] == STOCKS.count(b"<s>") and stats["queries"] >= 1
    assert plan.explain()


def test_the_kinds_are_the_four_engines():
    assert sorted(PLANS) == ["filter", "xquery", "xscl", "xseq"]
    with pytest.raises(ValueError, match="one of filter"):
        compile_plan("sql", {})


def test_a_window_over_a_stream_answers_as_windows_close():
    plan = compile_plan("xquery", CASES["xquery-window"])
    assert plan.streams and "snapshot" in plan.can
    run = plan.start()
    early = [row for batch in batches(50)[:-1] for row in run.feed(batch)]
    assert early  # before the stream ends
    rows = early + [row for batch in batches(50)[-1:] for row in run.feed(batch)] + run.finish()
    assert [tuple(r) for r in rows] == engine_rows("xquery-window")


def test_an_error_in_a_threaded_pass_reaches_the_caller():
    plan = compile_plan(
        "xquery",
        {
            "q": "for tumbling window $w in $input/s/t "
            "start $a when xs:integer($a/@price) idiv 0 = 1 return 1"
        },
    )
    run = plan.start()
    with pytest.raises(Exception, match=r"FOAR0001|division"):
        for batch in batches(50):
            run.feed(batch)
        run.finish()


def test_closing_a_threaded_run_ends_its_thread():
    import threading

    plan = compile_plan("xquery", CASES["xquery-window"])
    before = threading.active_count()
    runs = [plan.start() for _ in range(5)]
    for run in runs:
        run.feed(batches(50)[0])
    assert threading.active_count() == before + 5
    for run in runs:
        run.close()
    assert threading.active_count() == before
