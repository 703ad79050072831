"""Every query of the XSeq seed on data made for it, with the expected rows and why.

Each query runs on the streaming engine and on the reference evaluator; both
must give the expected rows. Seed typos are fixed as docs/xseq.md explains.
"""

from __future__ import annotations

import io
import subprocess
import sys

import lxml.etree as etree
import pytest

from xcep.events import EventStream, parse
from xcep.testing.xseq_reference import evaluate
from xcep.xseq import QuerySyntaxError, XSeqEngine

FAMILY = """<family>
<daughter Cname="Mary" Bdate="1950" Bplace="NY">
  <son Cname="Al" Bdate="1970" Bplace="NY">
    <son Cname="Bo" Bdate="1990" Bplace="LA"><son Cname="Cy" Bdate="2010" Bplace="NY"/></son>
  </son>
  <son Cname="Dan" Bdate="1972" Bplace="LA"/>
  <daughter Cname="Eve" Bdate="1975" Bplace="SF"/>
</daughter>
<son Cname="Fred" Bdate="1952" Bplace="NY"/>
<daughter Cname="Gina" Bdate="1955" Bplace="LA"/>
</family>"""

STOCKS = (
    "<stocks>"
    + "".join(
        f'<transaction company="{c}" price="{p}"/>'
        for c, p in [
            ("A", 10),
            ("B", 5),
            ("A", 8),
            ("B", 3),
            ("A", 6),
            ("A", 9),
            ("B", 4),
            ("A", 12),
        ]
    )
    + "</stocks>"
)

TWEETS = (
    "<twitter>"
    + "".join(
        f'<tweet userid="u1" date="{d}"><message>m</message></tweet>'
        + (f'<tweet userid="u2" date="{d}"><message>m</message></tweet>' if d % 10 == 0 else "")
        for d in range(33)
    )
    + "</twitter>"
)

EVENTS = (
    "<events>"
    + "".join(
        f'<event itemid="{i}" eventtype="{t}" ts="{n}"><message/></event>'
        for n, (i, t) in enumerate(
            [
                ("i1", "removed from shelf"),
                ("i2", "removed from shelf"),
                ("i1", "moved"),
                ("i2", "paid at register"),
                ("i2", "removed from store"),
                ("i1", "removed from store"),
            ]
        )
    )
    + "</events>"
)

FOLDERS = (
    '<folder hidden="false"><file name="a"/><folder hidden="true"><file name="b"/></folder>'
    '<folder hidden="false"><file name="c"/><folder hidden="false"><file name="d"/></folder>'
    "</folder></folder>"
)

ANCESTRY = (
    '<p Cname="G" haemophilia="true"><p Cname="P1"><p Cname="C1"><p Cname="GC">'
    '<p Cname="GGC"/></p></p></p><p Cname="P2"/></p>'
)

EMPLOYEES = (
    "<employees>"
    + "".join(
        f'<employee id="{i}" tstart="{s}" tend="{e}"><name>n</name><salary>{pay}</salary>'
        "<dept>d</dept></employee>"
        for i, s, e, pay in [
            ("e1", 0, 10, 100),
            ("e2", 0, 5, 50),
            ("e1", 10, 20, 200),
            ("e1", 20, 30, 300),
            ("e2", 5, 9, 40),
            ("e1", 30, 40, 250),
        ]
    )
    + "</employees>"
)

TREEBANK = (
    "<FILE><EMPTY><S><NP>a</NP><VP><NP>b</NP><S><VP>c</VP></S></VP></S><NP>d</NP></EMPTY></FILE>"
)

CASES = [
    # (name, data, query, options, expected rows, why)
    (
        "Q3",
        FAMILY,
        "//daughter[@Cname='Mary']/son/@Bdate",
        {},
        [["1970"], ["1972"]],
        "Mary's sons are Al and Dan; Bo is a grandson",
    ),
    (
        "Q5",
        FAMILY,
        "//son[@Bplace='NY'](/son[@Bplace='LA'])*/son[@Bplace='NY']/@Cname",
        {},
        [["Cy"]],
        "Al (NY) -> Bo (LA) -> Cy (NY) is the only NY-LA*-NY chain of sons",
    ),
    (
        "Q6",
        FAMILY,
        "return $B@Cname from //son[@Bplace='NY'] (/$A)* /$B[@Bplace='NY'] "
        "where tag($A)='son' and $A[@Bplace='LA'] and tag($B)='son'",
        {},
        [["Cy"]],
        "Query 5 with variables and a where clause",
    ),
    (
        "Q8",
        FAMILY,
        "return $S@Cname from // $D[@Cname='Mary'] $S where tag($D)='daughter' and tag($S)='son'",
        {},
        [["Fred"]],
        "Fred is the only son among Mary's following siblings",
    ),
    (
        "Q10",
        FAMILY,
        "return $X@Cname, $Y@Cname from //daughter[@Cname='Mary'] \\ $X \\ $Y",
        {},
        [["Fred", "Gina"]],
        "the two siblings right after Mary",
    ),
    (
        "Q12",
        FAMILY,
        "return $Y@Cname from //daughter[@Cname='Mary'] /\\ $X \\ $Y",
        {},
        [["Dan"]],
        "Mary's first child is Al, the second Dan",
    ),
    (
        "Q14",
        FAMILY,
        "return $X@Bplace, min($X@Bdate) from // $X partition by //son@Bplace "
        "where tag($X) = 'son'",
        {},
        [["NY", 1952], ["LA", 1972]],
        "NY sons Al 1970, Cy 2010, Fred 1952; LA sons Bo 1990, Dan 1972; NY appears first",
    ),
    (
        "Q16",
        STOCKS,
        "return $Z@price, last($X)@price, last($Y)@price "
        "from /stocks /$Z (\\ $X)* (\\ $Y)* where tag($Z) = 'transaction' "
        "and $X@price < prev($X)@price and $Y@price > prev($Y)@price "
        "and first($X)@price < $Z@price and last($Y)@price > $Z@price "
        "partition by /stocks/transaction@company",
        {"selection": "maximal"},
        [["10", "6", "12"], ["8", "6", "12"]],
        "A goes 10 8 6 9 12: V shapes from 10 and from 8 closing above the start; "
        "B's 5 3 4 closes below 5; B's prices interleave but do not break A's partition",
    ),
    (
        "Q18",
        TWEETS,
        "return first($T) @userid from /twitter /$Z (\\ $T)* "
        "where tag($Z) = 'tweet' and tag($T) = 'tweet' and $T@date-prev($T)@date < 2 "
        "and last($T)@date-first($T)@date > 30 partition by /twitter /tweet @userid",
        {},
        [["u1"]],
        "u1 tweets daily 0..32 (one chain spans 31 > 30 days); u2 every 10 days",
    ),
    (
        "Q20",
        EVENTS,
        "return $T@itemid from /events /$T \\ $W* \\ $X "
        "where tag($T) = 'event' and tag($W) = 'event' and tag($X) = 'event' "
        "and $T@eventtype = 'removed from shelf' and $X@eventtype = 'removed from store' "
        "and $W@eventtype != 'paid at register' partition by /events/event@itemid",
        {},
        [["i1"]],
        "i1 left the store unpaid; i2 was paid at the register in between",
    ),
    (
        "Q22",
        FOLDERS,
        "/folder[@hidden='false'](/folder[@hidden='false'])*/file/@name",
        {},
        [["a"], ["c"], ["d"]],
        "b sits in a hidden folder",
    ),
    (
        "Q24",
        ANCESTRY,
        "return last($Z)@Cname from // $X[@haemophilia = 'true'] (/$Y/$Z)*",
        {},
        [[None], ["C1"], ["GGC"]],
        "G itself (distance 0), its grandchild, its great-great-grandchild",
    ),
    (
        "Q26",
        EMPLOYEES,
        "return max(last($X) @tend - first($X) @tstart) from // $Z ($X)* "
        "where tag($X) = 'employee' and $X/salary/text() > prev($X)/salary/text() "
        "and $X@tstart <= prev($X)@tend partition by //employee@id",
        {},
        [[20], [None]],
        "e1's salary rises 100 200 300 over [10, 30]; e2's only falls",
    ),
    ("R1", TREEBANK, "/FILE/EMPTY(/VP)*/NP/text()", {}, [["d"]], "EMPTY has no VP child"),
    ("R2", TREEBANK, "/FILE/EMPTY(/S)*/NP/text()", {}, [["a"], ["d"]], "EMPTY/S/NP, EMPTY/NP"),
    ("R3", TREEBANK, "/FILE/EMPTY(/S)*/VP", {"values_only": True}, [["bc"]], "EMPTY/S/VP"),
    (
        "R4",
        TREEBANK,
        "/FILE/EMPTY(/S/VP)*/NP/text()",
        {},
        [["b"], ["d"]],
        "EMPTY/S/VP/NP and EMPTY/NP, in document order",
    ),
]


def engine_rows(query: str, text: str, **options) -> list:
    stream = EventStream([io.BytesIO(text.encode())], batch_size=5)
    return list(XSeqEngine(query, **options).run(stream.batches()))


@pytest.mark.parametrize(("name", "data", "query", "options", "expected", "why"), CASES)
def test_seed_query(name, data, query, options, expected, why) -> None:
    assert engine_rows(query, data, **options) == expected, why
    assert evaluate(query, parse(data), **options) == expected, why


def test_partitions_change_the_answer() -> None:
    """Without partition by, B's prices sit between A's and break the V shapes."""
    query = CASES[7][2].replace(" partition by /stocks/transaction@company", "")
    assert engine_rows(query, STOCKS, selection="maximal") != CASES[7][4]


def _xmark_tree(data_dir):
    return etree.parse(str(data_dir / "xmark" / "xmark-f0.01.xml"))


@pytest.mark.parametrize(
    ("query", "xpath"),
    [
        ("/site/people/person[@id = 'person0']/name/text()", None),  # Q1 flat
        (
            "/site/closed_auctions/closed_auction/annotation/description/parlist/listitem/"
            "parlist/listitem/text/emph/keyword/text()",
            None,
        ),  # Q2 deep
        ("//parlist/listitem(/parlist/listitem)*", "//parlist/listitem"),  # Q3 recursive
    ],
)
def test_section_6_4_queries_equal_lxml(data_dir, query: str, xpath: str | None) -> None:
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    stream = EventStream([path], keep_whitespace=True)
    rows = list(XSeqEngine(query, values_only=True).run(stream.batches()))
    found = _xmark_tree(data_dir).xpath(xpath or query)
    assert rows == [[n if isinstance(n, str) else n.xpath("string(.)")] for n in found]
    assert rows


def test_section_6_4_monotonic_query(data_dir) -> None:
    """Q4: one match per closed auction Z and per length of the strictly falling run after it."""
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    query = (
        "return last($X)/price/text() from //closed_auctions/$Z (\\ $X)* "
        "where tag($X) = 'closed_auction' and $X/price/text() < prev($X)/price/text()"
    )
    rows = list(XSeqEngine(query).run(EventStream([path]).batches()))
    prices = [float(p) for p in _xmark_tree(data_dir).xpath("//closed_auction/price/text()")]
    expected = 0
    for i in range(len(prices)):
        run = 0
        while i + run + 1 < len(prices) and prices[i + run + 1] < prices[i + run]:
            run += 1
        expected += run + 1
    assert len(rows) == expected > len(prices)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("//a[@x = ", "column 10: expected a value"),
        ("return $Y from //$X", "$Y is not bound"),
        ("return $X from //$X where prev($X)@a = 1", "prev() needs a variable under a Kleene-*"),
        ("//a/@b/c", "must be the last step"),
        ("(.)*", "must move to another node"),
        ("return $X from //$X (\\$Y)* (\\$Z)* where $Y@a < $Z@a", "different Kleene-* groups"),
        ("//a partition by //b@k", "partition by: the from path selects a, not b"),
        ("/a/b partition by //b@k", "must be a prefix of the from path"),
        ("//a/preceding_sibling::b", "supported in the reference evaluator only"),
        ("//a (/b/..)*", "cannot use the parent axis"),
        ("//$X/parent::b", "$X cannot be followed by a parent step"),
        ("//a[following-sibling::b]", "outside the node's subtree"),
        # (a where condition reads as a predicate does: its node's subtree and ancestors)
        ("return $X from //$X where $X/../b = 1", "column 32: a where condition or output"),
        ("return $X/preceding-sibling::b from //$X", "cannot use the preceding-sibling axis"),
        ("return $X from //$X where $X[../b]", "a predicate cannot use the child axis"),
        ("//a[.. = 't']", "column 5: a condition cannot compare the value of an ancestor"),
        ("return $X from //$X where $X/ancestor::b != 1", "the value of an ancestor"),
        ("return $X/.. from //c/$X", "column 11: an output cannot be an ancestor's value"),
    ],
)
def test_query_errors_name_the_place(query: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        XSeqEngine(query)
    assert message in str(caught.value)
    assert str(caught.value).startswith("query column ")


def test_cli_runs_a_query_and_reports_errors(tmp_path) -> None:
    data = tmp_path / "family.xml"
    data.write_text(FAMILY)
    command = [sys.executable, "-m", "xcep", "xseq"]
    done = subprocess.run(
        [*command, "return $X@Cname from //$X[@Bplace='LA']", str(data)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert done.stdout.splitlines() == ['["Bo"]', '["Dan"]', '["Gina"]']
    bad = subprocess.run([*command, "//a[", str(data)], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("xcep: error: query column 5")
    dot = subprocess.run([*command, "//a/b", "--explain", "dot"], capture_output=True, text=True)
    assert dot.stdout.startswith("digraph") and "wait" in dot.stdout


def _stock_file(path, transactions: int):
    with open(path, "w") as out:
        out.write("<stocks>")
        for i in range(transactions):
            price = 100 + (i * 7919 % 23) - (i % 5)
            out.write(f'<transaction company="C{i % 4}" price="{price}"><v>{i}</v></transaction>')
        out.write("</stocks>")
    return path


@pytest.mark.parametrize(
    ("query", "flat"),
    [
        (
            "return last($X)@price from /stocks /$Z (\\ $X)* "
            "where $X@price < prev($X)@price and $X/v != prev($X)/v "
            "partition by /stocks/transaction@company",
            False,  # reads the v children's string values: the automaton
        ),
        (
            "return last($X)@price, $Z@company from /stocks /$Z (\\ $X)* "
            "where $X@price < prev($X)@price and $X/v/text() != prev($X)/v/text() "
            "partition by /stocks/transaction@company",
            True,  # attributes and children's text: the flat sequence fast path
        ),
    ],
)
def test_flat_streams_run_in_constant_memory(tmp_path, query: str, flat: bool) -> None:
    """Memory is bounded by depth and automaton state, not by the length of the stream."""
    import tracemalloc

    from xcep.xseq.sequence import SequencePattern

    assert isinstance(XSeqEngine(query, runtime="sequence").fast_path, SequencePattern) == flat
    peaks = []
    for count in (2_000, 16_000):
        path = _stock_file(tmp_path / f"s{count}.xml", count)
        tracemalloc.start()
        rows = 0
        engine = XSeqEngine(query, runtime="sequence")  # (the flat-sequence runtime: asked for)
        for _ in engine.run(EventStream([path], batch_size=1024).batches()):
            rows += 1
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert rows > count // 4  # the query does find falling runs
    assert peaks[1] < peaks[0] * 1.6, peaks  # 8 times the input; a leak would be ~8 times


def test_json_streams_run_the_same_queries() -> None:
    """A JSON array of objects is a sequence of sibling elements: XSeq patterns apply."""
    text = '{"stocks":[{"c":"A","p":10},{"c":"A","p":8},{"c":"A","p":7},{"c":"A","p":9}]}'
    query = (
        "return $Z/p/text(), $X/p/text() from /json/$Z (\\ $X)* "
        "where $X/p/text() < prev($X)/p/text() and first($X)/p/text() < $Z/p/text()"
    )
    stream = EventStream([io.BytesIO(text.encode())], format="json")
    rows = list(XSeqEngine(query, selection="maximal").run(stream.batches()))
    assert rows == [["10", ["8", "7"]], ["8", ["7"]]]


def test_a_malformed_document_costs_only_itself(tmp_path) -> None:
    data = tmp_path / "three.xml"
    data.write_text('<r><a x="1"/></r>\n<r><a x="2"></r>\n<r><a x="3"/></r>\n')
    done = subprocess.run(
        [sys.executable, "-m", "xcep", "xseq", "//a/@x", str(data)], capture_output=True, text=True
    )
    assert done.stdout.splitlines() == ['["1"]', '["3"]']
    assert done.returncode == 1
    assert "document 1, line 2" in done.stderr


@pytest.mark.parametrize(
    "condition",
    ["$A@price * 2 > 10", "$A@price*2 > 10", "2 * $A@price > 10", "$A/p/text() * 2 > 10",
     "$A/p/text()*2 > 10", "$A@price * $A/p/text() > 60"],
)  # fmt: skip
def test_a_field_reference_multiplied(condition):
    """``*`` after a field reference multiplies (issue 21: it was read as a wildcard step
    or a Kleene star), here and in the reference evaluator."""
    xml = '<stocks><t price="3"><p>4</p></t><t price="7"><p>9</p></t></stocks>'
    query = f"return $A@price from /stocks/$A where {condition}"
    stream = EventStream([io.BytesIO(xml.encode())])
    assert list(XSeqEngine(query).run(stream.batches())) == [["7"]]
    assert evaluate(query, parse(xml)) == [["7"]]


def test_explain_takes_the_query_after_it(tmp_path):
    """``--explain @q.xseq data.xml`` explains q.xseq (it failed: 'invalid choice'); the
    format still follows it when given (issue 26)."""
    query = tmp_path / "q.xseq"
    query.write_text("return $A@price from /stocks/$A")
    data = tmp_path / "s.xml"
    data.write_text('<stocks><t price="3"/></stocks>')

    def xseq(*args):
        command = [sys.executable, "-m", "xcep", "xseq", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    for args, first in [
        (["--explain", f"@{query}", str(data)], "query: return $A@price from /stocks/$A"),
        (["--explain", "dot", f"@{query}"], "digraph xseq {"),
        ([f"@{query}", "--explain"], "query: return $A@price from /stocks/$A"),
    ]:
        done = xseq(*args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == first
