"""XDM values as elementpath represents them: nodes, atomic values, sequences (lists).

Effective boolean value, atomization, string values, the keys of ``group
by`` and ``order by``, sequence-type tests and serialization.
"""

from __future__ import annotations

import copy
import functools
import math
import xml.etree.ElementTree as ET
from decimal import Decimal

from elementpath import datatypes as D
from elementpath.xpath_nodes import XPathNode

from xcep.xmltext import escape, quoteattr
from xcep.xquery.errors import XQueryError

XML_NAMESPACE = "http://www.w3.org/XML/1998/namespace"
XML_SCOPE = {"xml": XML_NAMESPACE}  # the one prefix bound everywhere: prefix → URI


def expanded_name(name: str, scope: dict, element: bool) -> str:
    """``{uri}local`` for a name in ``scope`` (prefix, '' the default → URI); an
    unprefixed attribute is in no namespace, a prefix the scope lacks is kept."""
    prefix, colon, local = name.partition(":")
    if not colon:
        uri = scope.get("") if element else None
        return f"{{{uri}}}{name}" if uri else name
    uri = scope.get(prefix)
    return f"{{{uri}}}{local}" if uri else name


def as_sequence(value) -> list:
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def as_value(items: list):
    """How a sequence is bound to a variable for elementpath: a lone item stands alone."""
    return items[0] if len(items) == 1 else items


def is_node(item) -> bool:
    return isinstance(item, XPathNode)


def ebv(items: list) -> bool:
    """The effective boolean value (XPath 3.1 §2.4.3)."""
    if not items:
        return False
    first = items[0]
    if is_node(first):
        return True
    if len(items) > 1:
        raise XQueryError("effective boolean value of several atomic values", "FORG0006")
    if isinstance(first, bool):
        return first
    if isinstance(first, (str, D.UntypedAtomic, D.AnyURI)):
        return len(str(first)) > 0
    if isinstance(first, (int, float, Decimal)):
        return not (first == 0 or first != first)
    raise XQueryError(f"no effective boolean value for {type(first).__name__}", "FORG0006")


def atomize(items: list) -> list:
    out = []
    for item in items:
        if is_node(item):
            value = item.typed_value
            out.extend(value if isinstance(value, list) else [value])
        else:
            out.append(item)
    return out


def string_value(item) -> str:
    """``fn:string`` of one item."""
    if is_node(item):
        return item.string_value
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, float):
        return double_text(item)
    if isinstance(item, Decimal):
        if item == item.to_integral_value():
            return str(item.quantize(Decimal(1)))
        return format(item.normalize(), "f")
    return str(item)


def double_text(v: float) -> str:
    """An ``xs:double`` cast to ``xs:string`` (XPath 3.1 §19.1.2.2): decimal notation
    from 1e-6 to 1e6, else scientific with one digit before the point (``1.0E-7``)."""
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "INF" if v > 0 else "-INF"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    d = Decimal(repr(v))
    if 1e-6 <= abs(v) < 1e6:
        text = format(d, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    sign, digits, exp = d.normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    exponent = exp + len(digits) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent}"


# -- group by and order by keys --------------------------------------------


def single_atom(items: list, what: str):
    atoms = atomize(items)
    if len(atoms) > 1:
        raise XQueryError(f"{what} must be a single atomic value, got {len(atoms)}", "XPTY0004")
    return atoms[0] if atoms else None


def group_key(atom) -> tuple:
    """Equal keys in the sense of ``group by`` (deep-equal on one atomic value)."""
    if atom is None:
        return ("empty",)
    if isinstance(atom, bool):
        return ("boolean", atom)
    if isinstance(atom, (str, D.UntypedAtomic, D.AnyURI)):
        return ("string", str(atom))
    if isinstance(atom, (int, float, Decimal)):
        return ("nan",) if atom != atom else ("number", atom)
    return (type(atom).__name__, str(atom))


def order_compare(a, b, empty_greatest: bool) -> int:
    """-1, 0 or 1 for two ``order by`` keys (atomic values or ``None`` for empty)."""
    rank_a, rank_b = _rank(a, empty_greatest), _rank(b, empty_greatest)
    if rank_a != rank_b or rank_a != 1:
        return (rank_a > rank_b) - (rank_a < rank_b)
    a = str(a) if isinstance(a, D.UntypedAtomic) else a
    b = str(b) if isinstance(b, D.UntypedAtomic) else b
    numbers = (int, float, Decimal)
    if isinstance(a, numbers) != isinstance(b, numbers) or isinstance(a, str) != isinstance(b, str):
        raise XQueryError("order by keys of different types cannot be compared", "XPTY0004")
    try:
        return (a > b) - (a < b)
    except TypeError:
        raise XQueryError("order by keys cannot be compared", "XPTY0004") from None


def _rank(atom, empty_greatest: bool) -> int:
    """Empty and NaN sort before (or, with ``empty greatest``, after) everything else."""
    if atom is None:
        return 3 if empty_greatest else 0
    if isinstance(atom, float) and atom != atom:
        return 2 if empty_greatest else 0.5
    return 1


def order_key(spec_flags: list[tuple[bool, bool]]):
    """A sort key function over lists of ``order by`` keys, one flag pair per spec."""

    def compare(left: list, right: list) -> int:
        for (descending, empty_greatest), a, b in zip(spec_flags, left, right, strict=True):
            c = order_compare(a, b, empty_greatest)
            if c:
                return -c if descending else c
        return 0

    return functools.cmp_to_key(compare)


# -- sequence types ---------------------------------------------------------

_ATOMIC_CLASSES = {
    "anyAtomicType": object,
    "untypedAtomic": D.UntypedAtomic,
    "string": str,
    "boolean": bool,
    "decimal": (int, Decimal),
    "integer": int,
    "double": float,
    "float": D.Float,
    "numeric": (int, float, Decimal),
    "date": D.Date10,
    "dateTime": D.DateTime10,
    "time": D.Time,
    "duration": D.Duration,
    "dayTimeDuration": D.DayTimeDuration,
    "yearMonthDuration": D.YearMonthDuration,
}


def matches_type(item, item_type) -> bool:
    """Does one item match a pattern variable's item type (``element(a)``, ``xs:integer``)?"""
    kind = item_type.kind
    if kind == "item":
        return True
    if kind == "atomic":
        if is_node(item):
            return False
        name = item_type.name
        if isinstance(item, bool) and name not in ("boolean", "anyAtomicType"):
            return False
        if name == "double" and isinstance(item, D.Float):  # xs:float is no xs:double
            return False
        found = _ATOMIC_CLASSES.get(name) or D.builtin_atomic_types[f"xs:{name}"]
        return isinstance(item, found)
    if not is_node(item):
        return False
    if kind == "node":
        return True
    node_kind = "document" if kind == "document-node" else kind
    if item.node_kind != node_kind:
        return False
    return item_type.name is None or item.name == item_type.name


def type_test(item_type):
    """A one-argument predicate for ``matches_type(item, item_type)``, quick for the
    usual ``item()`` and ``element(name)``."""
    if item_type.kind == "item":
        return lambda item: True
    if item_type.kind == "element":
        name = item_type.name

        def element(item) -> bool:
            kind = getattr(item, "node_kind", None)
            return kind == "element" and (name is None or item.name == name)

        return element
    return lambda item: matches_type(item, item_type)


def matches_sequence_type(items: list, declared) -> bool:
    """Do ``items`` match a ``SequenceType`` (its occurrence, and each its item type)?"""
    count_ok = {
        "": len(items) == 1,
        "?": len(items) <= 1,
        "*": True,
        "+": len(items) >= 1,
    }[declared.occurrence]
    if declared.item is None:
        return not items
    return count_ok and all(matches_type(i, declared.item) for i in items)


def check_type(items: list, declared, what: str) -> None:
    """Raise XPTY0004 unless ``items`` match the declared ``SequenceType``."""
    if declared is not None and not matches_sequence_type(items, declared):
        raise XQueryError(f"{what} does not match its declared type {declared}", "XPTY0004")


# -- constructed elements and serialization ------------------------------------


def element_of(node) -> ET.Element:
    """A copy of an element node's tree, without its tail."""
    elem = copy.deepcopy(node.elem)
    elem.tail = None
    return elem


def serialize_element(elem: ET.Element, prefixes: dict | None = None) -> str:
    """An element as XML without its tail, as ElementTree writes it (but ``<a/>``, and
    '>' escaped in text and attributes) — with a loop, not recursion: a document may
    nest as deep as the input allows (``--max-depth``). Qualified names (``{uri}a``)
    take their prefix from ``prefixes`` (URI → prefix, '' for the default namespace;
    ``ns0``, ``ns1``, ... where it has none), declared on the outermost element."""
    written = _write_element(elem, None)
    if written is None:  # a qualified name in it: prefixes chosen for the whole element
        written = _write_element(elem, _qualified_names(elem, prefixes or {}))
    return written


def _write_element(elem: ET.Element, names: dict | None) -> str | None:
    """``serialize_element`` with ``names`` (``_qualified_names``); without them, None at
    the first qualified name."""
    out: list[str] = []
    todo: list = [elem]  # elements to write, and the end tags (and tails) between them
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        tag = item.tag
        if tag is ET.Comment:
            out.append(f"<!--{item.text or ''}-->")
        elif tag is ET.ProcessingInstruction:
            out.append(f"<?{item.text or ''}?>")
        else:
            if names is None:
                if tag[:1] == "{" or any(k[:1] == "{" for k in item.attrib):
                    return None
            else:
                tag = names.get(tag, tag)
            out.append("<" + tag)
            if item is elem and names:
                out.append(names["declarations"])
            for key, value in item.attrib.items():
                key = names.get(key, key) if names else key
                out.append(f' {key}="{ET._escape_attrib(value)}"')
            if item.text or len(item):
                out.append(">")
                if item.text:
                    out.append(ET._escape_cdata(item.text))
                todo.append(f"</{tag}>")
                for child in reversed(item):
                    if child.tail:
                        todo.append(ET._escape_cdata(child.tail))
                    todo.append(child)
            else:
                out.append("/>")
    return "".join(out)


def _qualified_names(elem: ET.Element, prefixes: dict) -> dict:
    """``{uri}local`` → ``prefix:local`` (or ``local`` in the default namespace) for the
    qualified names under ``elem``, and under "declarations" the namespace declarations
    they need; {} when there are none. The default namespace is used only where no
    element is in no namespace and no attribute is in it."""
    element_uris: dict[str, None] = {}
    attribute_uris: set[str] = set()
    unqualified = False
    for node in elem.iter():
        if not isinstance(node.tag, str):
            continue
        if node.tag[:1] == "{":
            element_uris.setdefault(node.tag[1:].partition("}")[0])
        else:
            unqualified = True
        for key in node.attrib:
            if key[:1] == "{":
                attribute_uris.add(key[1:].partition("}")[0])
    uris = list(element_uris) + sorted(attribute_uris - element_uris.keys())
    if not uris:
        return {}
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for uri in uris:
        prefix = prefixes.get(uri)
        if uri == XML_NAMESPACE:
            prefix = "xml"
        elif prefix == "" and (unqualified or uri in attribute_uris):
            prefix = None
        if prefix is None or prefix in taken:
            prefix = next(f"ns{i}" for i in range(len(taken) + 1) if f"ns{i}" not in taken)
        chosen[uri] = prefix
        taken.add(prefix)
    names: dict[str, str] = {}
    for node in elem.iter():
        for name in (node.tag, *node.attrib):
            if isinstance(name, str) and name[:1] == "{" and name not in names:
                uri, _, local = name[1:].partition("}")
                names[name] = f"{chosen[uri]}:{local}" if chosen[uri] else local
    names["declarations"] = "".join(
        f' xmlns{":" + p if p else ""}="{ET._escape_attrib(uri)}"'
        for uri, p in chosen.items()
        if p != "xml"
    )
    return names


def _attribute_name(name: str, prefixes: dict | None) -> str:
    if name[:1] != "{":
        return name
    uri, _, local = name[1:].partition("}")
    prefix = "xml" if uri == XML_NAMESPACE else (prefixes or {}).get(uri)
    return f"{prefix}:{local}" if prefix else name


def serialize(item, prefixes: dict | None = None) -> str:
    """One result item as a line of text: nodes as XML, atomic values as their string
    (an ElementTree element, a constructed result not made a node, as XML);
    ``prefixes`` for qualified names (``serialize_element``)."""
    if isinstance(item, ET.Element):
        return serialize_element(item, prefixes)
    if not is_node(item):
        return string_value(item)
    kind = item.node_kind
    if kind == "element":
        return serialize_element(item.elem, prefixes)
    if kind == "document":
        return "".join(serialize(child, prefixes) for child in item.children)
    if kind == "attribute":
        return f"{_attribute_name(item.name, prefixes)}={quoteattr(item.string_value)}"
    if kind == "text":
        return escape(item.string_value)
    if kind == "comment":
        return f"<!--{item.string_value}-->"
    return item.string_value
