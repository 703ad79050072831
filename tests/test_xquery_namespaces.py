"""Namespaces in XQuery: a query whose prolog declares them reads documents with theirs.

The reference is elementpath over the document as ``xml.etree`` parses it (expat,
namespace-aware), with the same namespace bindings: on random documents that declare,
redeclare and undeclare prefixes and the default namespace, xcep's documents (built from
its event stream, either tokenizer) select the same nodes, and its serialization of an
element reads back as the same element."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import elementpath
import pytest
from elementpath.xpath31 import XPath31Parser
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep import xquery
from xcep.cli import main
from xcep.events import EventStream, Input
from xcep.xquery.values import serialize

URIS = ("urn:one", "urn:two", "urn:three")
PREFIXES = ("p", "q")


@st.composite
def elements(draw, scope: frozenset = frozenset(), depth: int = 0) -> str:
    """An element whose names use only prefixes in scope (or just declared here)."""
    declarations = {}
    for prefix in PREFIXES:
        if draw(st.integers(0, 3)) == 0:
            declarations[f"xmlns:{prefix}"] = draw(st.sampled_from(URIS))
    if draw(st.integers(0, 3)) == 0:
        declarations["xmlns"] = draw(st.sampled_from((*URIS, "")))
    scope = scope | {k[6:] for k in declarations if k.startswith("xmlns:")}
    prefix = draw(st.sampled_from(["", *sorted(scope)]))
    name = f"{prefix}:" if prefix else ""
    name += draw(st.sampled_from(("a", "b")))
    attributes = dict(declarations)
    if draw(st.booleans()):
        attributes["x"] = "1"
    if scope and draw(st.booleans()):  # one: p:x and q:x may name one attribute
        prefix = draw(st.sampled_from(sorted(scope)))
        attributes[f"{prefix}:x"] = prefix
    children = []
    if depth < 3:
        for _ in range(draw(st.integers(0, 3))):
            children.append(draw(elements(scope, depth + 1)))
    text = draw(st.sampled_from(("", "t")))
    attrs = "".join(f' {k}="{v}"' for k, v in attributes.items())
    return f"<{name}{attrs}>{text}{''.join(children)}</{name}>"


PATHS = (
    "//p:a",
    "//q:b",
    "//a",
    "//*:a",
    "//p:*",
    "//@p:x",
    "//*[@q:x]",
    "/*/*",
    "//p:a/q:b",
    "//b[@x]",
)


def _reference(document: str, path: str, default: str | None) -> list[str]:
    namespaces = {"p": URIS[0], "q": URIS[1]}
    if default:
        namespaces[""] = default
    expr = f"({path}) ! concat(namespace-uri(.), '|', local-name(.), '|', string(.))"
    tree = ET.ElementTree(ET.fromstring(document))
    return elementpath.select(tree, expr, namespaces=namespaces, parser=XPath31Parser)


def _prolog(default: str | None) -> str:
    text = f'declare namespace p = "{URIS[0]}"; declare namespace q = "{URIS[1]}"; '
    if default:
        text += f'declare default element namespace "{default}"; '
    return text


@settings(max_examples=300)
@given(elements(), st.sampled_from(PATHS), st.sampled_from((None, *URIS)), st.booleans())
def test_selected_nodes_are_those_of_a_namespace_aware_parser(document, path, default, compiled):
    query = xquery.compile(
        _prolog(default) + f"({path}) ! concat(namespace-uri(.), '|', local-name(.), '|', .)"
    )
    source = EventStream(
        [Input("<doc>", file=io.BytesIO(document.encode()), format="xml")],
        namespaces=True,
        compiled=compiled,
    )
    assert query.evaluate(source) == _reference(document, path, default)


@settings(max_examples=200)
@given(elements(), st.sampled_from((*PATHS[:5], "/*")), st.sampled_from((None, *URIS)))
def test_a_result_element_is_written_as_the_same_element(document, path, default):
    """Serialized with prefixes of the query, then of the document, it parses back into
    the element the reference selects (names compared expanded)."""
    query = xquery.compile(_prolog(default) + path)
    got = [serialize(item, query.namespaces) for item in query.evaluate(document)]
    namespaces = {"p": URIS[0], "q": URIS[1], **({"": default} if default else {})}
    tree = ET.ElementTree(ET.fromstring(document))
    expected = elementpath.select(tree, path, namespaces=namespaces, parser=XPath31Parser)
    assert [_canonical(text) for text in got] == [
        _canonical(ET.tostring(e, encoding="unicode")) for e in expected
    ]


def _canonical(text: str) -> str:
    element = ET.fromstring(text)
    element.tail = None
    return ET.canonicalize(ET.tostring(element, encoding="unicode"), rewrite_prefixes=True)


def test_without_declarations_names_are_as_spelled():
    document = '<r xmlns:p="urn:one" xmlns="urn:two"><p:a>1</p:a><b>2</b></r>'
    assert xquery.compile("string(/r/b)").evaluate(document) == ["2"]
    assert xquery.compile("count(/r/*)").evaluate(document) == [2]
    with pytest.raises(xquery.XQueryError, match="XPST0081"):
        xquery.compile("//p:a")


def test_the_default_element_namespace_applies_to_the_fast_path_too():
    document = '<r xmlns="urn:d"><b>2</b><c xmlns="">3</c></r>'
    query = xquery.compile('declare default element namespace "urn:d"; /r/b, /r/c, /r/*:c')
    assert [serialize(i, query.namespaces) for i in query.evaluate(document)] == [
        '<b xmlns="urn:d">2</b>',
        "<c>3</c>",
    ]


def test_constructors_take_the_declared_namespaces():
    query = xquery.compile(
        'declare namespace p = "urn:one"; declare default element namespace "urn:two"; '
        '<r p:x="1"><p:a/><b xmlns:q="urn:three"><q:c/></b></r>'
    )
    (item,) = query.evaluate(None)
    root = ET.fromstring(serialize(item, query.namespaces))
    assert root.tag == "{urn:two}r"
    assert root.get("{urn:one}x") == "1"
    assert [e.tag for e in root.iter()] == [
        "{urn:two}r",
        "{urn:one}a",
        "{urn:two}b",
        "{urn:three}c",
    ]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ('declare namespace p = "urn:a"; declare namespace p = "urn:b"; 1', "XQST0033"),
        ('declare namespace xml = "urn:a"; 1', "XQST0070"),
        ('declare namespace p = "http://www.w3.org/2000/xmlns/"; 1', "XQST0070"),
        ('declare namespace p = ""; 1', "XQST0085"),
        (
            'declare default element namespace "urn:a"; '
            'declare default element namespace "urn:b"; 1',
            "XQST0066",
        ),
        ('<e xmlns:a="urn:x" xmlns:b="urn:x" a:n="1" b:n="2"/>', "XQST0040"),
        ('<e/>/processing-instruction("1x")', "XPTY0004"),
        ("for $Q{urn:undeclared}w in 1 return 1", "XPST0003"),
    ],
)
def test_static_errors(text, code):
    with pytest.raises(xquery.XQueryError, match=code):
        xquery.compile(text).evaluate(None)


def test_uri_qualified_variable_names_are_the_prefixed_ones():
    text = 'declare namespace w = "urn:w"; for $Q{urn:w}v in (1, 2) return $w:v * 10'
    assert xquery.compile(text).evaluate(None) == [10, 20]


def test_xml_prefix_is_always_bound():
    assert xquery.compile("string(/e/@xml:lang)").evaluate('<e xml:lang="en"/>') == ["en"]
    assert xquery.compile('string(<e xml:lang="de"/>/@xml:lang)').evaluate(None) == ["de"]


def test_an_event_stream_without_declarations_is_refused():
    query = xquery.compile('declare namespace p = "urn:one"; //p:a')
    source = EventStream([Input("<doc>", file=io.BytesIO(b"<a/>"), format="xml")])
    with pytest.raises(ValueError, match="namespaces=True"):
        query.evaluate(source)


def test_command_line_reads_namespaces_and_explains(tmp_path, capsys):
    path = tmp_path / "ns.xml"
    path.write_text('<r xmlns:p="urn:one"><p:a>1</p:a><p:a>2</p:a></r>')
    query = 'declare namespace x = "urn:one"; for $a in //x:a return string($a)'
    assert main(["xquery", query, str(path)]) == 0
    assert capsys.readouterr().out.split() == ["1", "2"]
    window = (
        'declare namespace x = "urn:one"; for tumbling window $w in $input/r/x:a '
        "start when true() return count($w)"
    )
    assert main(["xquery", "--explain", window]) == 0
    assert "the prolog declares namespaces" in capsys.readouterr().out
    assert main(["xquery", window, str(path)]) == 0
    assert capsys.readouterr().out.split() == ["1", "1"]


def test_standing_queries_refuse_a_query_that_declares_namespaces(tmp_path, capsys):
    queries = tmp_path / "q.txt"
    queries.write_text('1\tdeclare namespace x = "urn:one"; //x:a\n')
    path = tmp_path / "ns.xml"
    path.write_text('<r xmlns:p="urn:one"><p:a>1</p:a></r>')
    assert main(["run", "--xquery", str(queries), str(path)]) != 0
    assert "declares namespaces" in capsys.readouterr().err
