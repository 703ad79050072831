"""Schema facts: from a DTD, and learned from a sample of the stream."""

from __future__ import annotations

import io
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trees import Element, elements, to_xml
from xcep.events import EventStream, Input
from xcep.schema import learn_schema, parse_dtd, read_dtd


def stream(xml: str) -> EventStream:
    return EventStream([Input("<test>", file=io.BytesIO(xml.encode()), format="xml")])


def test_fixed_child_sequences_from_the_dtd(data_dir):
    dtd = read_dtd(data_dir / "xmark" / "auction.dtd")
    assert dtd.fixed_children("bidder") == ("date", "time", "personref", "increase")
    assert dtd.fixed_children("incategory") == ()  # EMPTY
    assert dtd.fixed_children("item") is None  # incategory+
    assert dtd.fixed_children("name") is None  # #PCDATA
    small = parse_dtd("<!ELEMENT a ((b, c), (d))> <!ELEMENT e (b | c)> <!ELEMENT f (b?)>")
    assert small.fixed_children("a") == ("b", "c", "d")
    assert small.fixed_children("e") is None and small.fixed_children("f") is None


def test_facts_learned_from_xmark_agree_with_its_dtd(data_dir):
    dtd = read_dtd(data_dir / "xmark" / "auction.dtd")
    learned = learn_schema(stream((data_dir / "xmark" / "xmark-f0.01.xml").read_text()).batches())
    assert learned.documents == 1 and len(learned.elements) > 50
    for element in learned.elements:
        kids = learned.children(element)
        assert set(kids) <= set(dtd.children(element)), element
        assert set(learned.attributes(element)) <= set(dtd.attributes(element)), element
        if learned.has_text(element):
            assert dtd.has_text(element), element
        for a in kids:
            for b in kids:
                if dtd.precedes(a, b):
                    assert learned.precedes(a, b), (element, a, b)
        for below in learned.elements:
            if learned.can_contain(element, below):
                assert dtd.can_contain(element, below), (element, below)
        if dtd.fixed_children(element) is not None:
            assert learned.fixed_children(element) == dtd.fixed_children(element), element


def _walk(element: Element):
    yield element
    for child in element.children:
        if isinstance(child, Element):
            yield from _walk(child)


@settings(max_examples=150)
@given(st.lists(elements(with_attributes=True, max_leaves=10), min_size=1, max_size=4))
def test_learned_facts_hold_for_the_sample_and_no_more(trees):
    xml = "".join(to_xml(t) for t in trees)
    learned = learn_schema(stream(xml).batches(), documents=len(trees))
    assert learned.documents == len(trees)
    sequences: dict[str, set] = {}
    texts, edges = set(), set()
    for tree in trees:
        for e in _walk(tree):
            kids = tuple(c.name for c in e.children if isinstance(c, Element))
            sequences.setdefault(e.name, set()).add(kids)
            edges |= {(e.name, k) for k in kids}
            if any(isinstance(c, str) and c.strip() for c in e.children):
                texts.add(e.name)
            assert {a for a, _ in e.attributes} <= set(learned.attributes(e.name))
    before, siblings = set(), set()
    for name, seqs in sequences.items():
        kids = {n for seq in seqs for n in seq}
        assert set(learned.children(name)) == kids  # what was seen, nothing else
        assert learned.has_text(name) == (name in texts)
        fixed = next(iter(seqs)) if len(seqs) == 1 and name not in texts else None
        assert learned.fixed_children(name) == fixed
        siblings |= {(a, b) for a in kids for b in kids}
        before |= {pair for seq in seqs for pair in combinations(seq, 2)}
        if name in texts:  # mixed content: no order among the children
            before |= {(a, b) for a in kids for b in kids}
    names = sorted(sequences)
    for a in names:
        for b in names:
            # a precedes b: siblings somewhere, and b never before a under any parent
            expected = a != b and (a, b) in siblings and (b, a) not in before
            assert learned.precedes(a, b) == expected, (a, b)
    reach = set(edges)  # can_contain: the transitive closure of parent -> child names
    while True:
        more = {(a, d) for a, b in reach for c, d in edges if b == c} - reach
        if not more:
            break
        reach |= more
    for a in names:
        for b in names:
            assert learned.can_contain(a, b) == ((a, b) in reach), (a, b)


def test_learning_stops_after_the_sample():
    xml = "<a><b/></a><a><c/></a><a><d/></a>"
    learned = learn_schema(stream(xml).batches(), documents=2)
    assert learned.documents == 2
    assert learned.children("a") == ["b", "c"]


def test_parameter_entities_are_expanded_and_bombs_refused():
    """`<!ENTITY % inline "b|c">` and `%inline;` (most published DTDs are written so):
    the children of `a` are b and c, not `%inline;` (issue 29); external, undeclared,
    self-referring and exploding parameter entities are errors."""
    from xcep.schema.dtd import DtdError, parse_dtd

    dtd = parse_dtd(
        "<!ENTITY % inline \"b|c\"> <!ENTITY % block '(%inline;)*'>"
        "<!ELEMENT a %block;> <!ELEMENT b (#PCDATA)> <!ELEMENT c EMPTY>"
        '<!ENTITY % common "id ID #IMPLIED"> <!ATTLIST b %common;>'
    )
    assert sorted(dtd.children("a")) == ["b", "c"]
    assert dtd.attribute_names["b"] == ["id"]
    bomb = '<!ENTITY % g "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx">' + "".join(
        f'<!ENTITY % {a} "{("%" + b + ";") * 10}">' for a, b in zip("fedcba", "gfedcb", strict=True)
    )
    for bad, message in [
        ("<!ELEMENT a (%x;)>", "not declared"),
        ('<!ENTITY % x SYSTEM "http://example.com/x"><!ELEMENT a (%x;)>', "external"),
        ('<!ENTITY % s "%s;"><!ELEMENT a (%s;)>', "not declared"),  # not yet, in its own value
        (bomb + "<!ELEMENT a (%a;)>", "limit"),
        ("<![ IGNORE [ <!ELEMENT a EMPTY>", "not closed"),
        ("<!ELEMENT a EMPTY> ]]>", "closes no"),
    ]:
        with pytest.raises(DtdError, match=message):
            parse_dtd(bad)


def test_a_modular_dtd_reads_as_libxml2_reads_it(tmp_path):
    """A DTD written the way published ones are: modules in files of their own
    (external parameter entities), switched by conditional sections; the children of
    every element are libxml2's (lxml.etree.DTD as the oracle)."""
    from lxml import etree

    from xcep.schema.dtd import read_dtd

    (tmp_path / "inline.mod").write_text(
        '<!ENTITY % inline "em|strong"><!ELEMENT em (#PCDATA)><!ELEMENT strong (#PCDATA)>'
    )
    (tmp_path / "lists.mod").write_text(
        "<!ELEMENT list (item+)><!ELEMENT item (#PCDATA|%inline;)*>"
    )
    (tmp_path / "tables.mod").write_text("<!ELEMENT table (row*)><!ELEMENT row EMPTY>")
    main = tmp_path / "doc.dtd"
    main.write_text(
        '<!ENTITY % inline.module SYSTEM "inline.mod"> %inline.module;\n'
        '<!ENTITY % lists "INCLUDE"> <!ENTITY % tables "IGNORE">\n'
        '<![%lists;[ <!ENTITY % lists.module SYSTEM "lists.mod"> %lists.module; ]]>\n'
        '<![%tables;[ <!ENTITY % tables.module SYSTEM "tables.mod"> %tables.module; ]]>\n'
        '<!ENTITY % block "list|p"> <!ELEMENT p (#PCDATA|%inline;)*>\n'
        "<!ELEMENT doc (%block;)*>\n"
    )
    ours = read_dtd(main)
    theirs = etree.DTD(str(main))

    def names(content) -> set[str]:
        if content is None:
            return set()
        found = {content.name} if content.type == "element" else set()
        return found | names(content.left) | names(content.right)

    libxml2 = {element.name: names(element.content) for element in theirs.elements()}
    assert set(ours.elements) == set(libxml2) == {"doc", "p", "list", "item", "em", "strong"}
    for name, children in libxml2.items():
        assert set(ours.children(name)) == children, name
