"""The XSeq optimizer: every rewrite keeps the answers on documents the schema describes."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep.events import EventStream, Input
from xcep.schema import learn_schema, parse_dtd, read_dtd
from xcep.xseq import XSeqEngine
from xcep.xseq import ast as A
from xcep.xseq.optimize import (
    LEVELS,
    explicit_prefix,
    optimize,
    unrolled_descendants,
    where_into_steps,
)
from xcep.xseq.parser import parse_query

DTD_TEXT = """
    <!ELEMENT r (a*, b?)>
    <!ELEMENT a (c | d)*>  <!ATTLIST a x CDATA #IMPLIED>
    <!ELEMENT b (c, e)>
    <!ELEMENT c (#PCDATA)>
    <!ELEMENT d (e*)>
    <!ELEMENT e (#PCDATA | f)*>
    <!ELEMENT f EMPTY>     <!ATTLIST f y CDATA #IMPLIED>
"""
DTD = parse_dtd(DTD_TEXT)
VALUES = ["1", "2", "3"]


@st.composite
def valid_documents(draw) -> str:
    """A document valid against ``DTD``."""

    def text() -> str:
        return draw(st.sampled_from(VALUES))

    def e() -> str:
        parts = [
            f'<f y="{text()}"/>' if draw(st.booleans()) else text()
            for _ in range(draw(st.integers(0, 3)))
        ]
        return f"<e>{''.join(parts)}</e>"

    def a() -> str:
        kids = []
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                kids.append(f"<c>{text()}</c>")
            else:
                kids.append("<d>" + "".join(e() for _ in range(draw(st.integers(0, 2)))) + "</d>")
        attribute = f' x="{text()}"' if draw(st.booleans()) else ""
        return f"<a{attribute}>{''.join(kids)}</a>"

    body = "".join(a() for _ in range(draw(st.integers(0, 3))))
    if draw(st.booleans()):
        body += f"<b><c>{text()}</c>{e()}</b>"
    return f"<r>{body}</r>"


QUERIES = [
    "//a",
    "//a/@x",
    "//a[@x = 2]/c/text()",
    "//d/e/f/@y",
    "//c/text()",
    "//c[text() = 1]",
    "//e/f",
    "//f/@y",
    "//r/b/c",
    "//d//f",
    "return $X from //a/$X",
    "return count($X) from //a/$X",
    "return $X@y from //e/$X (\\ $Y)* where tag($X) = 'f'",
    # Opt-2: a // below a named step
    "/r/a//f/@y",
    "//a[.//f/@y = 2]/@x",
    "/r/b//c",
    "/r/a[.//e = 1]//e",
    "//a//e (\\ e)*",
    # Opt-3: tag() and attribute conditions into the steps
    "return $X, $Y@y from /r/$X//$Y where tag($X) = 'a' and tag($Y) = 'f' and $Y@y >= 2",
    "return $A@x, count($C) from //$A (/$C)* where tag($A) = 'a' and $C@x = 1",
    "return $X from (//$X | //b) where tag($X) = 'c'",  # a branch's variable stays
    "return $X from //$X where tag($X) = 'c' or $X@x = 1",  # not a conjunct about one step
    "return count($X) from //$X where tag($X) = 'c' or tag($X) = 'e'",  # a union of names
    "return $X, $Y from /r/a/$X (\\ $Y)* where (tag($X) = 'c' or tag($X) = 'd') "
    "and tag($Y) = 'd' and tag($X) = 'd'",
]


def rows(query: str, xml: str, **options) -> list:
    stream = EventStream([Input("<test>", file=io.BytesIO(xml.encode()), format="xml")])
    return list(XSeqEngine(query, **options).run(stream.batches()))


@settings(max_examples=120)
@given(
    st.lists(valid_documents(), min_size=1, max_size=3),
    st.sampled_from(QUERIES),
    st.sampled_from(LEVELS[1:]),
)
def test_every_rewrite_keeps_the_answers(documents, query, level):
    xml = "".join(documents)
    plain = rows(query, xml, opt="none")
    assert rows(query, xml, schema=DTD, opt=level) == plain
    learned = learn_schema(
        EventStream([Input("<t>", file=io.BytesIO(xml.encode()), format="xml")]).batches(),
        documents=len(documents),
    )
    assert rows(query, xml, schema=learned, opt=level) == plain


@pytest.mark.parametrize(
    ("query", "rewritten"),
    [
        ("//a/@x", "/r/a@x"),
        ("//d/e", "/r/a/d/e"),
        ("//c/text()", "/r/*/c/text()"),  # under a or b: one level, several names
        ("//r", "/r"),
        ("//e", "//e"),  # under b (depth 2) or d (depth 3): two depths
        ("//f", "//f"),
        ("/r//d", "/r//d"),  # only a leading //name
        ("//$X", "//$X"),
    ],
)
def test_which_prefixes_are_spelled_out(query, rewritten):
    assert A.to_text(explicit_prefix(parse_query(query), DTD).path) == rewritten


def test_xmark_prefixes(data_dir):
    dtd = read_dtd(data_dir / "xmark" / "auction.dtd")
    cases = {
        "//increase/text()": "/site/open_auctions/open_auction/bidder/increase/text()",
        "//item/name": "/site/regions/*/item/name",
        "//keyword": "//keyword",  # recursive (parlist/listitem)
    }
    for query, expected in cases.items():
        assert A.to_text(explicit_prefix(parse_query(query), dtd).path) == expected


@pytest.mark.parametrize(
    ("query", "rewritten"),
    [
        ("/r/a//f", "/r/a/d/e/f"),  # every f below an a is at depth 3
        ("/r//f", "/r//f"),  # below r: depth 3 (under b) or 4 (under a)
        ("/r/a//c", "/r/a/c"),
        ("/r/b//c", "/r/b/c"),
        ("/r/a[.//f]", "/r/a[/self::node()/d/e/f]"),
        ("/r/a//b", "/r/a//b"),  # no b below an a: left alone
        ("/r/$X//f", "/r/$X//f"),  # which element: unknown
    ],
)
def test_which_descendant_loops_are_unrolled(query, rewritten):
    assert A.to_text(unrolled_descendants(parse_query(query), DTD).path) == rewritten


def test_where_conjuncts_move_into_steps():
    query = parse_query(
        "return $X from /r/$X (\\ $Y)* where tag($X) = 'a' and $X@x > 1 and "
        "$Y@x = prev($Y)@x and tag($Y) = 'a'"
    )
    moved = where_into_steps(query)
    assert A.to_text(moved.path) == "/r/$X(a)[@x > 1] (\\$Y(a))*"
    assert A.to_text(moved.where) == "$Y@x = prev($Y)@x"


def test_partition_paths_are_rewritten_with_the_from_path():
    query = parse_query("return count($X) from //a/$X partition by //a@x")
    optimized = optimize(query, DTD)
    assert A.to_text(optimized.path) == "/r/a/$X"
    assert A.to_text(optimized.partition[0]) == "/r/a"
    xml = '<r><a x="1"><c>1</c></a><a x="2"><c>2</c><d/></a><a x="1"><d/></a></r>'
    text = "return count($X) from //a/$X partition by //a@x"
    assert rows(text, xml, schema=DTD) == rows(text, xml, opt="none")


def test_the_levels_are_the_rules_and_each_rewrites_alone():
    from xcep.xseq.optimize import LEVELS, RULES, optimize

    assert set(LEVELS) == {"none", "all", *(rule.level for rule in RULES)}
    query = parse_query("return $X from //item/$X where tag($X) = 'name'")
    for rule in RULES:  # a level runs its rule and no other
        alone = optimize(query, DTD, rule.level)
        assert alone == rule.rewrite(query, DTD)


def test_unknown_levels_are_refused():
    with pytest.raises(ValueError, match="optimization level"):
        XSeqEngine("//a", schema=DTD, opt="everything")


def test_cli_dtd_and_opt(tmp_path, data_dir):
    import subprocess
    import sys

    dtd = str(data_dir / "xmark" / "auction.dtd")
    xmark = str(data_dir / "xmark" / "xmark-f0.01.xml")

    def xseq(*args):
        done = subprocess.run(
            [sys.executable, "-m", "xcep", "xseq", *args], capture_output=True, text=True
        )
        return done.returncode, done.stdout, done.stderr

    query = "//bidder[increase > 40]/date/text()"
    code, plain, _ = xseq(query, xmark)
    assert code == 0 and plain.count("\n") > 3
    code, optimized, err = xseq(query, "--dtd", dtd, xmark)
    assert code == 0 and optimized == plain, err
    code, explained, _ = xseq(query, "--dtd", dtd, "--explain")
    assert "/site/open_auctions/open_auction/bidder" in explained
    code, explained, _ = xseq(query, "--dtd", dtd, "--opt", "none", "--explain")
    assert "/site/open_auctions" not in explained
    code, learned, err = xseq(query, "--learn-schema", "1", xmark)
    assert code == 0 and learned == plain, err
    code, explained, _ = xseq(query, "--learn-schema", "1", "--explain", "text", xmark)
    assert "/site/open_auctions/open_auction/bidder" in explained
    code, _, err = xseq(query, "--learn-schema", "1")  # stdin cannot be read twice
    assert code == 2 and "give files" in err
    (tmp_path / "bad.dtd").write_text("no declarations")
    code, _, err = xseq(query, "--dtd", str(tmp_path / "bad.dtd"), xmark)
    assert code == 2 and "--dtd" in err and "no <!ELEMENT>" in err


def test_the_internal_subset_is_the_schema(tmp_path):
    import subprocess
    import sys

    from xcep.schema import internal_subset

    body = "<r><a x='1'><d><e>2<f y='3'/></e></d></a><b><c>1</c><e>1</e></b></r>\n"
    inline = tmp_path / "inline.xml"
    subset = "\n".join(line.strip() for line in DTD_TEXT.strip().splitlines())
    inline.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE r [\n{subset}\n]>\n{body}')
    plain = tmp_path / "plain.xml"
    plain.write_text(body)
    assert internal_subset(plain) is None
    assert internal_subset(inline).children("a") == DTD.children("a")

    def xseq(*args):
        command = [sys.executable, "-m", "xcep", "xseq", *args]
        return subprocess.run(command, capture_output=True, text=True).stdout

    assert "/r/a/d/e/f" in xseq("--explain", "text", "//a//f", str(inline))
    assert "/r/a/d/e/f" not in xseq("--explain", "text", "//a//f", str(plain))
    assert xseq("//a//f/@y", str(inline)) == xseq("//a//f/@y", str(plain)) == '["3"]\n'
