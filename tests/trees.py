"""Random trees for property tests, with an obviously correct event reference."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from hypothesis import strategies as st

NAMES = ["a", "b", "item", "p:x", "_y", "é", "data-1"]


@dataclass
class Element:
    name: str
    attributes: list[tuple[str, str]] = field(default_factory=list)
    children: list = field(default_factory=list)  # Element or str


xml_text = st.text(
    # XML 1.0 characters: no surrogates, no controls, and not U+FFFE or U+FFFF
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="\ufffe\uffff")
    | st.sampled_from("\n\t <>&'\""),
    max_size=8,
)


def elements(text=xml_text, with_attributes=True, max_leaves=12):
    attributes = (
        st.lists(st.tuples(st.sampled_from(NAMES), text), max_size=3, unique_by=lambda a: a[0])
        if with_attributes
        else st.just([])
    )

    def extend(children):
        return st.builds(
            Element, st.sampled_from(NAMES), attributes, st.lists(children, max_size=4)
        )

    leaf = st.builds(Element, st.sampled_from(NAMES), attributes, st.lists(text, max_size=1))
    return st.recursive(leaf, lambda kids: extend(kids | text), max_leaves=max_leaves)


def to_xml(element: Element, cdata: bool = False) -> str:
    attrs = "".join(f" {n}={quoteattr(v)}" for n, v in element.attributes)
    body = []
    for child in element.children:
        if isinstance(child, Element):
            body.append(to_xml(child, cdata))
        elif cdata and child and "]]>" not in child and "\r" not in child:
            body.append(f"<![CDATA[{child}]]>")
        else:
            body.append(escape(child).replace("\r", "&#13;"))
    return f"<{element.name}{attrs}>{''.join(body)}</{element.name}>"


def expected_events(element: Element, doc: int = 0, keep_whitespace: bool = False) -> list[tuple]:
    """(doc, kind, name, value, depth, node) by walking the tree: the reference."""
    out: list[tuple] = []
    counter = [0]

    def walk(e: Element, depth: int) -> None:
        me = counter[0]
        counter[0] += 1
        out.append((doc, "open", e.name, None, depth, me))
        for n, v in e.attributes:
            out.append((doc, "attr", n, v, depth + 1, counter[0]))
            counter[0] += 1
        merged: list = []
        for child in e.children:
            if isinstance(child, str) and merged and isinstance(merged[-1], str):
                merged[-1] += child
            else:
                merged.append(child)
        for child in merged:
            if isinstance(child, Element):
                walk(child, depth + 1)
            elif child and (keep_whitespace or not child.isspace()):
                out.append((doc, "text", None, child, depth + 1, counter[0]))
                counter[0] += 1
        out.append((doc, "close", e.name, None, depth, me))

    walk(element, 1)
    return out


def as_tuples(events) -> list[tuple]:
    return [(e.doc, str(e.kind), e.name, e.value, e.depth, e.node) for e in events]


# JSON-shaped trees: an element holds one non-blank text, or element children whose
# equal names stand together (JSON arrays group them), or nothing.
json_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1
).filter(lambda s: not s.isspace())


def json_elements(max_leaves=10):
    leaf = st.builds(
        lambda n, t: Element(n, [], t), st.sampled_from(NAMES), st.lists(json_text, max_size=1)
    )

    def extend(children):
        def grouped(name, kids):
            kids = sorted(kids, key=lambda k: NAMES.index(k.name))  # equal names together
            return Element(name, [], kids)

        return st.builds(
            grouped, st.sampled_from(NAMES), st.lists(children, min_size=1, max_size=4)
        )

    return st.recursive(leaf, extend, max_leaves=max_leaves)


def to_json(element: Element, draw_bool) -> str:
    """The JSON text of an element's content, by the documented convention."""
    kids = element.children
    if not kids:
        return "null" if draw_bool() else "{}"
    if isinstance(kids[0], str):
        return json.dumps(kids[0], ensure_ascii=draw_bool())
    members = []
    i = 0
    while i < len(kids):
        j = i
        while j < len(kids) and kids[j].name == kids[i].name:
            j += 1
        group = [to_json(k, draw_bool) for k in kids[i:j]]
        value = group[0] if len(group) == 1 and draw_bool() else f"[{', '.join(group)}]"
        members.append(f"{json.dumps(kids[i].name)}: {value}")
        i = j
    return "{" + ", ".join(members) + "}"
