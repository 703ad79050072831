"""XSCL / MMQJP: the seed's running example (Table 4) and MMQJP against Sequential."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep.testing.xscl_sequential import SequentialEngine
from xcep.xscl.engine import XsclEngine, parse_document
from xcep.xscl.parser import XsclSyntaxError, parse_query

# Figures 1 and 2: node ids in pre-order (book 0, authors 1, author 2, author 3, title 4, ...)
D1 = (
    "<book><authors><author>Danny Ayers</author><author>Andrew Watt</author></authors>"
    "<title>Beginning RSS and Atom Programming</title>"
    "<category>Scripting &amp; Programming</category><category>Web Site Development</category>"
    "</book>"
)
D2 = (
    "<blog><link>http://example.org/rss</link><author>Danny Ayers</author>"
    "<title>Beginning RSS and Atom Programming</title><category>Book Announcement</category>"
    "<category>Scripting &amp; Programming</category></blog>"
)
TABLE2 = {
    "Q1": "S//book->x1[//author->x2][//title->x3] FOLLOWED BY{x2=x5 AND x3=x6, 10} "
    "S//blog->x4[//author->x5][//title->x6]",
    "Q2": "S//book->x1[//author->x2][//category->x7] FOLLOWED BY{x2=x5 AND x7=x8, 10} "
    "S//blog->x4[//author->x5][//category->x8]",
    "Q3": "S//blog->x4[//author->x5][//title->x6] FOLLOWED BY{x5=x5' AND x6=x6', 10} "
    "S//blog->x4'[//author->x5'][//title->x6']",
}


def running_example(batch_size: int = 1, join: str = "sql") -> tuple[XsclEngine, list]:
    engine = XsclEngine(batch_size=batch_size, join=join)
    for qid, text in TABLE2.items():
        engine.add(qid, text)
    docs = [("S", parse_document(D1), 1.0), ("S", parse_document(D2), 2.0)]
    return engine, list(engine.run(docs))


def test_one_template_for_the_three_queries():
    engine, _ = running_example()
    assert len(engine.templates) == 1  # Figure 5: Q1, Q2 and Q3 share the template


def test_witness_relations_are_table_4_b_to_e():
    engine, _ = running_example()
    r_doc = engine.db.execute("SELECT docid, node, strval FROM r_doc WHERE node > 0").fetchall()
    assert sorted(r_doc) == [
        (0, 2, "Danny Ayers"),
        (0, 3, "Andrew Watt"),
        (0, 4, "Beginning RSS and Atom Programming"),
        (0, 5, "Scripting & Programming"),
        (0, 6, "Web Site Development"),
        (1, 2, "Danny Ayers"),
        (1, 3, "Beginning RSS and Atom Programming"),
        (1, 4, "Book Announcement"),
        (1, 5, "Scripting & Programming"),
    ]
    pairs = engine.db.execute(
        "SELECT DISTINCT docid, node1, node2 FROM r_bin WHERE var1 <> var2"
    ).fetchall()
    assert sorted(pairs) == [
        (0, 0, 2), (0, 0, 3), (0, 0, 4), (0, 0, 5), (0, 0, 6),
        (1, 0, 2), (1, 0, 3), (1, 0, 4), (1, 0, 5),
    ]  # fmt: skip


def test_r_out_is_table_4_f():
    """Rows of the template's conjunctive query after d2, named back to each query's
    variables: Q1 (x1..x6) = (0, 2, 4, 0, 2, 3), Q2 (x1, x2, x7, x4, x5, x8) =
    (0, 2, 5, 0, 2, 5); nothing for Q3."""
    engine = XsclEngine(join="sql")
    for qid, text in TABLE2.items():
        engine.add(qid, text)
    list(engine.run([("S", parse_document(D1), 1.0)]))
    (template,) = engine.templates.values()
    list(engine.run([("S", parse_document(D2), 2.0)]))
    sql = engine.sql[template.index].format(lo=1, hi=1, left="IN (0)")
    rows = engine.db.execute(sql).fetchall()
    named = {}
    for rid, ldoc, _rdoc, *nodes in rows:
        (row,) = engine.rows[rid]  # three different queries: a row each
        query = row.registered.query
        variables = engine.db.execute(
            f"SELECT * FROM r_t_{template.index} WHERE rid = ?", [rid]
        ).fetchone()[4:]
        local = {}
        for _, names in row.registered.blocks:
            for var, global_name in names.items():
                local.setdefault(global_name, []).append(var)
        named[query.id] = (
            ldoc,
            {v: node for g, node in zip(variables, nodes, strict=True) for v in local[g]},
        )
    assert named == {
        "Q1": (0, {"x1": 0, "x2": 2, "x3": 4, "x4": 0, "x5": 2, "x6": 3}),
        "Q2": (0, {"x1": 0, "x2": 2, "x7": 5, "x4": 0, "x5": 2, "x8": 5}),
    }


@pytest.mark.parametrize("join", ["memory", "sql"])
def test_the_two_outputs(join):
    _, results = running_example(join=join)
    assert [(r.query, r.docs) for r in results] == [("Q1", [0, 1]), ("Q2", [0, 1])]
    book, blog = (parse_document(d).root.serialize() for d in (D1, D2))
    expected = f"<result>{book}{blog}</result>"
    assert results[0].output == results[1].output == expected


def test_windows_and_followed_by_order():
    engine = XsclEngine()
    engine.add("fb", "S/a->x[/k->y] FOLLOWED BY{y=z, 5} S/b->w[/k->z]")
    engine.add("join", "S/a->x[/k->y] JOIN{y=z, 5} S/b->w[/k->z]")
    docs = [
        ("S", parse_document("<b><k>1</k></b>"), 0.0),  # a b-event before the a-event
        ("S", parse_document("<a><k>1</k></a>"), 3.0),
        ("S", parse_document("<b><k>1</k></b>"), 3.0),  # same timestamp: not FOLLOWED BY
        ("S", parse_document("<b><k>1</k></b>"), 8.0),  # 5 after: inside the window
        ("S", parse_document("<b><k>1</k></b>"), 8.5),  # outside
    ]
    got = [(r.query, r.docs) for r in engine.run(docs)]
    assert got == [
        ("join", [1, 0]),
        ("join", [1, 2]),
        ("fb", [1, 3]),
        ("join", [1, 3]),
    ]


def test_published_streams_feed_other_queries():
    engine = XsclEngine()
    engine.add("pairs", "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/b->w[/k->z] PUBLISH P")
    engine.add("then", "P/result->r[/a/k->u] FOLLOWED BY{u=v, inf} S/c->c[/k->v]")
    docs = [
        ("S", parse_document("<a><k>1</k></a>"), 1.0),
        ("S", parse_document("<b><k>1</k></b>"), 2.0),
        ("S", parse_document("<c><k>1</k></c>"), 3.0),
    ]
    got = [(r.query, r.docs) for r in engine.run(docs)]
    assert got == [("pairs", [0, 1]), ("then", [2, 3])]  # doc 2 is the published result


def test_queries_come_and_go_while_the_stream_runs():
    engine = XsclEngine()
    engine.add("q", "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/b->w[/k->z]")
    a, b = parse_document("<a><k>1</k></a>"), parse_document("<b><k>1</k></b>")
    assert [r.query for r in engine.run([("S", a, 1.0), ("S", b, 2.0)])] == ["q"]
    engine.remove("q")
    assert list(engine.run([("S", b, 3.0)])) == []
    engine.add("q2", "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/b->w[/k->z]")
    assert list(engine.run([("S", b, 4.0)])) == []  # its a-event came before it was added
    assert [r.docs for r in engine.run([("S", a, 5.0), ("S", b, 6.0)])] == [[4, 5]]


def test_identical_queries_share_a_row_and_each_gets_its_results():
    join = "S/a->x[/k->y] JOIN{y=z, inf} S/a->w[/k->z]"  # symmetric: both directions alike
    follow = "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/a->w[/k->z]"
    engine, sequential = XsclEngine(), SequentialEngine()
    for qid, text in [("q1", join), ("q2", join), ("q3", join), ("f", follow)]:
        engine.add(qid, text)
        sequential.add(qid, text)
    assert len(engine.rows) == 2  # one row for the three joins' two directions, one for f

    def both(docs):
        return [[(r.query, r.docs, r.output) for r in e.run(docs)] for e in (engine, sequential)]

    stream = [("S", parse_document(f"<a><k>{v}</k></a>"), float(i)) for i, v in enumerate("121")]
    fast, slow = both(stream)
    assert fast == slow and {q for q, _, _ in fast} == {"q1", "q2", "q3", "f"}
    for qid in ("q2", "q1"):
        engine.remove(qid)
        sequential.remove(qid)
    fast, slow = both([("S", parse_document("<a><k>2</k></a>"), 5.0)])
    assert fast == slow and {q for q, _, _ in fast} == {"q3", "f"}
    engine.remove("q3")
    engine.remove("f")
    assert not engine.rows and not engine.patterns
    engine.add("q4", join)  # the parse is reused, its patterns registered again
    pair = [("S", parse_document("<a><k>7</k></a>"), 6.0)] * 2  # documents 4 and 5
    assert [(r.query, r.docs) for r in engine.run(pair)] == [("q4", [4, 5]), ("q4", [5, 4])]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("S//a->x FOLLOWED BY{x=y, 1} S//b->z", "unknown variable y"),
        ("S//a->x FOLLOWED BY{x=x, 1} S//b->z", "compares one block with itself"),
        ("S//a->x JOIN{x=z, 1} S//b->z JOIN{x=z, 1} S//c", "chain queries with PUBLISH"),
        ("S//a->x FOLLOWED BY{x=z} S//b->z", "expected ','"),
        ("S a", "expected '/' or '//'"),
        ("S//a->x[//b->x]", "bound twice"),
    ],
)
def test_errors_name_the_query_and_column(text, fragment):
    with pytest.raises(XsclSyntaxError) as info:
        parse_query(text, "Q7")
    assert str(info.value).startswith("query Q7, column ")
    assert fragment in str(info.value)


# -- MMQJP against Sequential on the seed's §6.1 workloads ---------------------------

VALUES = ["a", "b", "c"]


def zipf_k(rng: random.Random, top: int, skew: float) -> int:
    weights = [1 / (k**skew) for k in range(1, top + 1)]
    return rng.choices(range(1, top + 1), weights)[0]


def two_level(rng: random.Random, n_leaves: int = 5) -> tuple[str, callable]:
    def query(qid: int) -> str:
        k = zipf_k(rng, n_leaves, 0.8)
        left = rng.sample(range(n_leaves), k)
        right = rng.sample(range(n_leaves), k)
        lpath = "".join(f"[/f{j}->a{i}]" for i, j in enumerate(left))
        rpath = "".join(f"[/f{j}->b{i}]" for i, j in enumerate(right))
        joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
        op = rng.choice(["FOLLOWED BY", "JOIN"])
        window = rng.choice(["1", "2", "inf"])
        axis = rng.choice(["/", "//"])
        return f"S{axis}item->a{lpath} {op}{{{joins}, {window}}} S/item->b{rpath}"

    def document() -> str:
        leaves = "".join(
            f"<f{j}>{rng.choice(VALUES)}</f{j}>" for j in range(n_leaves) if rng.random() < 0.9
        )
        return f"<item>{leaves}</item>"

    return query, document


def three_level(rng: random.Random) -> tuple[str, callable]:
    def block(prefix: str, leaves: list[tuple[int, int]]) -> str:
        by_mid: dict[int, list[int]] = {}
        for m, leaf in leaves:
            by_mid.setdefault(m, []).append(leaf)
        parts = []
        for m, ls in by_mid.items():
            inner = "".join(f"[/l{leaf}->{prefix}{m}_{leaf}]" for leaf in ls)
            parts.append(f"[/m{m}->{prefix}m{m}{inner}]")
        return f"/r->{prefix}r" + "".join(parts)

    def query(qid: int) -> str:
        k = zipf_k(rng, 4, 0.8)
        all_leaves = [(m, leaf) for m in range(3) for leaf in range(3)]
        left = rng.sample(all_leaves, k)
        right = rng.sample(all_leaves, k)
        joins = " AND ".join(
            f"p{lm}_{ll}=q{rm}_{rl}" for (lm, ll), (rm, rl) in zip(left, right, strict=True)
        )
        window = rng.choice(["1", "3", "inf"])
        return f"S{block('p', left)} FOLLOWED BY{{{joins}, {window}}} S{block('q', right)}"

    def document() -> str:
        mids = "".join(
            f"<m{m}>"
            + "".join(f"<l{leaf}>{rng.choice(VALUES)}</l{leaf}>" for leaf in range(3))
            + f"</m{m}>"
            for m in range(3)
            if rng.random() < 0.9
        )
        return f"<r>{mids}</r>"

    return query, document


@settings(max_examples=40)
@given(
    seed=st.integers(0, 10**6),
    schema=st.sampled_from([two_level, three_level]),
    n_queries=st.integers(1, 12),
    n_docs=st.integers(1, 7),
    batch_size=st.integers(1, 4),
    join=st.sampled_from(["memory", "sql full", "sql cache", "sql none"]),
    budget=st.sampled_from([0, 3, 10**6]),
)
def test_mmqjp_equals_sequential(seed, schema, n_queries, n_docs, batch_size, join, budget):
    """MMQJP in memory and in SQL with every view (the view cache with budgets that
    force evictions or not), at any micro-batch size, equals each query evaluated
    on its own."""
    rng = random.Random(seed)
    make_query, make_document = schema(rng)
    queries = [(f"q{i}", make_query(i)) for i in range(n_queries)]
    stream = [make_document() for _ in range(n_docs)]
    times = sorted(rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]) for _ in stream)

    def docs():
        return [("S", parse_document(xml), t) for xml, t in zip(stream, times, strict=True)]

    join, _, view = join.partition(" ")
    mmqjp = XsclEngine(batch_size=batch_size, view=view or "full", view_budget=budget, join=join)
    sequential = SequentialEngine()
    for qid, text in queries:
        mmqjp.add(qid, text)
        sequential.add(qid, text)
    fast = [(r.query, r.docs, r.nodes, r.output) for r in mmqjp.run(docs())]
    slow = [(r.query, r.docs, r.nodes, r.output) for r in sequential.run(docs())]
    assert fast == slow


@pytest.mark.parametrize("budget", [0, 25, 10**6])
def test_view_cache_reuses_slices_within_its_budget(budget):
    """Algorithms 4 and 5: values seen again are hits; the cached rows stay within
    the budget (a budget of 0 keeps only the slices a batch uses); the results
    are those of the fully materialized view."""
    rng = random.Random(7)
    make_query, make_document = two_level(rng)
    queries = [(f"q{i}", make_query(i)) for i in range(8)]
    stream = [make_document() for _ in range(30)]
    runs = {}
    for view in ("full", "cache"):
        engine = XsclEngine(batch_size=3, view=view, view_budget=budget, join="sql")
        for qid, text in queries:
            engine.add(qid, text)
        docs = [("S", parse_document(xml), float(i)) for i, xml in enumerate(stream)]
        runs[view] = [(r.query, r.docs, r.nodes) for r in engine.run(docs)]
    stats = engine.view_cache.stats()
    assert runs["cache"] == runs["full"] and runs["full"]
    assert stats["hits"] > 0 and stats["misses"] > 0
    if budget == 10**6:
        assert stats["evicted"] == 0
        assert stats["rows"] == engine.state_size()["r_l"]
    else:
        assert stats["evicted"] > 0
        assert engine.state_size()["r_l"] == stats["rows"]


@pytest.mark.parametrize(
    "view",
    [
        [],
        ["--join", "sql"],
        ["--join", "sql", "--batch", "auto"],
        ["--group"],
        ["--join", "sql", "--view", "cache", "--view-budget", "0"],
        ["--join", "sql", "--view", "none"],
    ],
)
def test_cli_on_the_example_stream(view):
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples" / "xscl"
    done = subprocess.run(
        [
            sys.executable, "-m", "xcep", "xscl", "--queries", str(examples / "queries.txt"),
            "--timestamp", "@date", str(examples / "stream.xml"), *view,
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    if "--group" in view:  # Q1 and Q2 find the same pair: one line
        assert [r["queries"] for r in rows] == [["Q1", "Q2"], ["Q1"], ["Q3"]]
        rows = [{"query": query, **r} for r in rows for query in r["queries"]]
    assert [(r["query"], r["docs"]) for r in rows] == [
        ("Q1", [0, 1]),
        ("Q2", [0, 1]),
        ("Q1", [0, 2]),
        ("Q3", [1, 2]),
    ]
    assert rows[0]["output"].startswith("<result><book ")


def test_cli_reports_a_bad_query_and_runs_the_others(tmp_path):
    import subprocess
    import sys

    queries = tmp_path / "q.txt"
    queries.write_text("good\tS/a->x FOLLOWED BY{x=y, inf} S/b->y\nbad\tS/a->x JOIN{x=, 1} S/b\n")
    done = subprocess.run(
        [sys.executable, "-m", "xcep", "xscl", "--queries", str(queries)],
        input="<a>1</a><b>1</b>",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"xcep: error: {queries}, line 2, query bad, column 15: expected a variable, found ','"
    ]
    assert '"query":"good"' in done.stdout


# -- the in-memory join on the benchmark's workload families ---------------------------


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    family=st.sampled_from(["items", "items-skewed", "seed", "diverse", "fan-out"]),
    batch_size=st.sampled_from([1, 1, 3]),
)
def test_the_join_equals_per_query_hash_joins_as_queries_come_and_go(seed, family, batch_size):
    """On every benchmark family, with queries added and removed between documents:
    the in-memory join, the SQL join and a hash join per query find the same
    (query, documents) pairs, and the in-memory and SQL joins the same results."""
    from bench.xscl_stream import PerQueryHashJoin, workload

    rng = random.Random(seed)
    texts, documents = workload(family, 60, 40)
    texts = rng.sample(texts, 24)
    engines = {
        "memory": XsclEngine(batch_size=batch_size),
        "sql": XsclEngine(batch_size=batch_size, join="sql"),
        "grouped": XsclEngine(batch_size=batch_size, join=rng.choice(["memory", "sql"])),
        "per-query": PerQueryHashJoin(),
    }
    live: list[str] = []
    order: dict[str, int] = {}
    counter = itertools.count()
    found = {name: [] for name in engines}
    for position in range(0, len(documents), 5):
        for qid, text in rng.sample(texts, 4):  # queries come...
            if qid not in live:
                live.append(qid)
                order[qid] = next(counter)  # the order added (again, after a removal)
                for engine in engines.values():
                    engine.add(qid, text)
        for qid in rng.sample(live, min(len(live), 2)):  # ... and go
            live.remove(qid)
            for engine in engines.values():
                engine.remove(qid)
        chunk = [
            ("S", parse_document(xml), float(position + i) / 2)
            for i, xml in enumerate(documents[position : position + 5])
        ]
        for name, engine in engines.items():
            if name == "per-query":
                found[name] += engine.run(chunk)
            elif name == "grouped":
                for r in engine.run(chunk, grouped=True):
                    found[name].append((tuple(r.queries), tuple(r.docs), tuple(r.nodes), r.output))
                    added = [order[q] for q in r.queries]
                    assert added == sorted(added)  # its queries in the order they were added
            else:
                found[name] += [
                    (r.query, tuple(r.docs), tuple(r.nodes), r.output) for r in engine.run(chunk)
                ]
    assert found["memory"] == found["sql"]
    assert {(q, d) for q, d, _, _ in found["memory"]} == set(found["per-query"])
    # grouped: the same results, each (documents, nodes) once, its queries in order
    assert len({(d, n) for _, d, n, _ in found["grouped"]}) == len(found["grouped"])
    expanded = [(q, d, n, o) for qs, d, n, o in found["grouped"] for q in qs]
    assert sorted(expanded) == sorted(found["memory"])


def test_the_join_state_is_bounded_by_the_widest_window():
    """Documents leave the state once no window reaches them; with 'inf' the state
    grows until its budget, and then the run stops with a clear error."""
    from xcep.xscl.engine import StateBudgetError

    def docs(lo, hi):
        return [("S", parse_document(f"<a><k>{i % 4}</k></a>"), float(i)) for i in range(lo, hi)]

    engine = XsclEngine()
    engine.add("q", "S/a->x[/k->y] FOLLOWED BY{y=z, 3} S/a->w[/k->z]")
    assert list(engine.run(docs(0, 50))) == []  # k repeats every 4: outside a window of 3
    assert engine.state_size()["documents"] <= 4
    engine.add("r", "S/a->x[/k->y] FOLLOWED BY{y=z, 4} S/a->w[/k->z]")
    assert [(r.query, r.docs) for r in engine.run(docs(50, 60))] == [
        ("r", [i - 4, i]) for i in range(54, 60)
    ]
    size = engine.state_size()
    assert size["documents"] <= 5 and size["bindings"] <= 5 and size["values"] <= 4

    bounded = XsclEngine(state_budget=10)
    bounded.add("q", "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/a->w[/k->z]")
    with pytest.raises(StateBudgetError, match="document 10: the join state holds 10 documents"):
        list(bounded.run(docs(0, 50)))


def test_cli_stops_at_the_state_budget_and_refuses_views_without_sql(tmp_path):
    import subprocess
    import sys

    queries = tmp_path / "q.txt"
    queries.write_text("q\tS/a->x[/k->y] FOLLOWED BY{y=z, inf} S/a->w[/k->z]\n")
    stream = "".join(f"<a><k>{i % 3}</k></a>\n" for i in range(20))

    def xscl(*options):
        command = [sys.executable, "-m", "xcep", "xscl", "--queries", str(queries), *options]
        return subprocess.run(command, input=stream, capture_output=True, text=True, check=False)

    done = xscl("--state-budget", "5")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "xcep: error: document 5: the join state holds 5 documents, its budget "
        "(--state-budget); windows of 'inf' keep every document: use a finite window or a "
        "larger budget"
    ]
    assert [json.loads(line)["docs"] for line in done.stdout.splitlines()] == [[0, 3], [1, 4]]
    done = xscl("--view", "cache")
    assert done.returncode == 2 and "--view cache is a way to run --join sql" in done.stderr


@pytest.mark.parametrize("join", ["memory", "sql"])
def test_adaptive_batches_never_hold_a_result_for_a_batch_to_fill(join):
    """A producer that pauses after two joinable documents until their result is out:
    adaptive batching (at most 100 a batch) answers; the results of a stream that is
    all there at once are those of batches of one."""
    import threading

    answered = threading.Event()

    def producer():
        yield ("S", parse_document("<a><k>1</k></a>"), 1.0)
        yield ("S", parse_document("<b><k>1</k></b>"), 2.0)
        if not answered.wait(timeout=20):
            raise AssertionError("the result of the first two documents never came")
        yield ("S", parse_document("<b><k>1</k></b>"), 3.0)

    engine = XsclEngine(batch_size=100, join=join)
    engine.add("q", "S/a->x[/k->y] FOLLOWED BY{y=z, inf} S/b->w[/k->z]")
    got = []
    for result in engine.run(producer(), adaptive=True):
        got.append(result.docs)
        answered.set()
    assert got == [[0, 1], [0, 2]]

    rng = random.Random(3)
    make_query, make_document = two_level(rng)
    queries = [(f"q{i}", make_query(i)) for i in range(10)]
    stream = [("S", parse_document(make_document()), float(i)) for i in range(40)]
    runs = []
    for batch_size, adaptive in ((1, False), (7, True)):
        engine = XsclEngine(batch_size=batch_size, join=join)
        for qid, text in queries:
            engine.add(qid, text)
        runs.append([(r.query, r.docs, r.nodes) for r in engine.run(stream, adaptive=adaptive)])
    assert runs[0] == runs[1] and runs[0]


def test_adaptive_batches_raise_the_sources_error_after_its_items():
    from xcep.xscl.engine import ready_batches

    def source():
        yield from range(5)
        raise ValueError("bad document 5")

    seen = []
    with pytest.raises(ValueError, match="bad document 5"):
        for batch in ready_batches(source(), 2):
            assert 1 <= len(batch) <= 2
            seen += batch
    assert seen == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("join", ["memory", "sql"])
def test_queries_that_go_leave_nothing_behind(join):
    """Query churn: after many distinct queries come and go, the registries, the
    in-memory join's groups and the parse cache are empty again."""
    from bench.xscl_stream import Items

    maker, rng = Items(), random.Random(5)
    engine = XsclEngine(join=join)
    doc = ("S", parse_document(maker.document(rng, 0)), 0.0)
    for round_ in range(3):
        texts = {f"r{round_}q{i}": maker.query(rng) for i in range(200)}
        for qid, text in texts.items():
            engine.add(qid, text)
        list(engine.run([doc]))
        for qid in texts:
            engine.remove(qid)
    assert not engine.queries and not engine.rows and not engine.patterns
    assert not engine._parsed and not engine._plans
    if join == "memory":
        assert not engine.hashjoin.groups and not engine.hashjoin.by_pair
        assert not engine.hashjoin._group_of


@settings(max_examples=10, deadline=None)
@given(
    family=st.sampled_from(["items", "items-skewed", "seed", "diverse", "fan-out"]),
    batch_size=st.sampled_from([1, 4]),
    seed=st.integers(0, 10**6),
)
def test_the_join_equals_sequential_on_every_family(family, batch_size, seed):
    """The in-memory join gives Sequential's results (documents, nodes, outputs, order)
    on each benchmark family."""
    from bench.xscl_stream import workload

    texts, documents = workload(family, 40, 30)
    texts = random.Random(seed).sample(texts, 15)
    stream = [("S", parse_document(xml), float(i)) for i, xml in enumerate(documents)]
    fast, slow = XsclEngine(batch_size=batch_size), SequentialEngine()
    for qid, text in texts:
        fast.add(qid, text)
        slow.add(qid, text)
    got = [(r.query, r.docs, r.nodes, r.output) for r in fast.run(stream)]
    assert got == [(r.query, r.docs, r.nodes, r.output) for r in slow.run(stream)]


@pytest.mark.parametrize("join", ["memory", "sql"])
def test_deeply_nested_documents_are_joined_without_recursion(join):
    """String values and outputs of a 3,000-deep document (issue 28: 500 levels ended
    in RecursionError)."""
    depth = 3_000
    deep = "<a>" * depth + "x" + "</a>" * depth
    engine = XsclEngine(join=join)
    engine.add("q", "S/a->x FOLLOWED BY{x=y, 10} S/a->y")
    (result,) = engine.run([("S", parse_document(deep), 0.0), ("S", parse_document(deep), 1.0)])
    assert result.docs == [0, 1]
    assert result.output == f"<result>{deep}{deep}</result>"


@pytest.mark.parametrize("grouped", [False, True])
def test_json_lines_are_the_results_as_json(grouped):
    """``to_json`` (the CLI's lines, its tail shared by a row's results) is ``to_dict``
    encoded compactly, quotes, markup and non-ASCII text included."""
    engine = XsclEngine()
    for qid in ('q"1', "q2"):
        engine.add(qid, "S/a->x[/k->y] JOIN{y=z, inf} S/a->w[/k->z]")
    docs = [("S", parse_document(f'<a n="&quot;é"><k>{v}</k></a>'), 0.0) for v in "11"]
    results = list(engine.run(docs, grouped=grouped))
    assert results
    for result in results:
        want = json.dumps(result.to_dict(), ensure_ascii=False, separators=(",", ":"))
        assert result.to_json() == want
