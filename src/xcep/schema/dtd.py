"""DTD facts for the optimizers: content models, child order, attributes.

``parse_dtd(text)`` reads ``<!ELEMENT>`` and ``<!ATTLIST>`` declarations (an
external DTD file or an internal subset; parameter entities, conditional
sections and comments are skipped). The facts:

- ``children(e)``: the element names that may appear in ``e``, in the order the
  content model first mentions them;
- ``precedes(a, b)``: ``a`` must come before ``b`` whenever both are children
  of the same element (the seed's order relation of XPush §5). Attributes
  (``@name``) precede every element; ``#text`` is ordered with nothing;
- ``attributes(e)``: the attribute names declared for ``e``;
- ``parents(e)``: the elements that may have ``e`` as a child;
- ``can_contain(a, b)``: ``b`` may appear below ``a`` (transitively);
- ``fixed_children(e)``: the one child sequence every ``e`` has, if any.

``xcep.schema.learn`` gives the same facts learned from a sample of documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product

from xcep.errors import XcepError, read_text


class DtdError(XcepError):
    pass


_DECLARATION = re.compile(
    r"<!(ELEMENT|ATTLIST)\s+([^\s>]+)\s+((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.S
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_PARAMETER_ENTITY = re.compile(
    r"<!ENTITY\s+%\s+([^\s>]+)\s+(?:\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC)[^>]*)\s*>", re.S
)
_REFERENCE = re.compile(r"%([A-Za-z_:][\w.:\-]*);")
EXPANSION_LIMIT = 1 << 20  # characters a DTD may grow to by its parameter entities
NESTING_LIMIT = 32  # entities in entities
_ATTRIBUTE = re.compile(
    r"""([^\s"']+)\s+(\([^)]*\)|NOTATION\s*\([^)]*\)|[A-Z]+)\s+(\#REQUIRED|\#IMPLIED|(?:\#FIXED\s+)?(?:"[^"]*"|'[^']*'))""",
    re.S,
)


@dataclass(frozen=True)
class Model:
    """A content model: ``kind`` is name, seq, choice, empty, any or mixed."""

    kind: str
    name: str | None = None
    items: tuple[Model, ...] = ()
    repeat: str = ""  # "", "?", "*" or "+"

    def names(self) -> list[str]:
        if self.kind == "name":
            return [self.name]
        return list(dict.fromkeys(n for item in self.items for n in item.names()))

    def fixed(self) -> tuple[str, ...] | None:
        """The one sequence of names this model allows, or ``None``."""
        if self.repeat:
            return None
        if self.kind == "name":
            return (self.name,)
        if self.kind == "empty":
            return ()
        if self.kind == "seq":
            parts = [item.fixed() for item in self.items]
            return None if None in parts else tuple(n for part in parts for n in part)
        if self.kind == "choice" and len(self.items) == 1:
            return self.items[0].fixed()
        return None

    def before_pairs(self) -> set[tuple[str, str]]:
        """(u, v) such that some child sequence has a u before a v."""
        if self.kind == "name":
            pairs = set()
        elif self.kind == "seq":
            pairs = set().union(*(item.before_pairs() for item in self.items))
            for i, left in enumerate(self.items):
                for right in self.items[i + 1 :]:
                    pairs |= set(product(left.names(), right.names()))
        elif self.kind in ("choice", "mixed"):
            pairs = set().union(*(item.before_pairs() for item in self.items))
        else:
            pairs = set()
        if self.repeat in ("*", "+") or self.kind == "mixed":
            pairs |= set(product(self.names(), repeat=2))
        return pairs


@dataclass
class Dtd:
    elements: dict[str, Model] = field(default_factory=dict)
    attribute_names: dict[str, list[str]] = field(default_factory=dict)

    def children(self, element: str) -> list[str]:
        model = self.elements.get(element)
        if model is None or model.kind == "any":
            return list(self.elements) if model is not None else []
        return model.names()

    def attributes(self, element: str) -> list[str]:
        return self.attribute_names.get(element, [])

    def has_text(self, element: str) -> bool:
        model = self.elements.get(element)
        return model is not None and model.kind in ("mixed", "any")

    @cached_property
    def _before(self) -> set[tuple[str, str]]:
        pairs: set[tuple[str, str]] = set()
        for model in self.elements.values():
            if model.kind == "any":
                pairs |= set(product(self.elements, repeat=2))
            else:
                pairs |= model.before_pairs()
        return pairs

    @cached_property
    def _siblings(self) -> set[tuple[str, str]]:
        pairs = set()
        for name in self.elements:
            kids = self.children(name)
            pairs |= set(product(kids, repeat=2))
        return pairs

    def precedes(self, a: str, b: str) -> bool:
        """``a`` must come before ``b`` when both are children of one element."""
        if a.startswith("@") or b.startswith("@"):
            return a.startswith("@") and not b.startswith(("@", "#"))
        if a.startswith("#") or b.startswith("#") or a == b:
            return False
        return (b, a) not in self._before and (a, b) in self._siblings

    @cached_property
    def _below(self) -> dict[str, set[str]]:
        below = {name: set(self.children(name)) for name in self.elements}
        changed = True
        while changed:
            changed = False
            for reach in below.values():
                extra = set().union(*(below.get(k, set()) for k in reach)) - reach
                if extra:
                    reach |= extra
                    changed = True
        return below

    @cached_property
    def _parents(self) -> dict[str, set[str]]:
        parents: dict[str, set[str]] = {}
        for name in self.elements:
            for child in self.children(name):
                parents.setdefault(child, set()).add(name)
        return parents

    def parents(self, element: str) -> set[str]:
        """The elements that may have ``element`` as a child (none: only a root)."""
        return self._parents.get(element, set())

    def can_contain(self, a: str, b: str) -> bool:
        return b in self._below.get(a, set())

    def fixed_children(self, element: str) -> tuple[str, ...] | None:
        """The one sequence of child elements every ``element`` has (``()`` for
        EMPTY), or ``None`` when it varies or may hold text."""
        model = self.elements.get(element)
        if model is None or model.kind in ("any", "mixed"):
            return None
        return model.fixed()


def _parse_model(text: str, element: str) -> Model:
    text = text.strip()
    if text == "EMPTY":
        return Model("empty")
    if text == "ANY":
        return Model("any")
    tokens = re.findall(r"#PCDATA|[^\s()|,?*+]+|[()|,?*+]", text)
    pos = 0

    def cp() -> Model:
        nonlocal pos
        if pos >= len(tokens):
            raise DtdError(f"element {element}: content model ends early")
        token = tokens[pos]
        pos += 1
        if token == "(":
            items = [cp()]
            separator = None
            while tokens[pos] in ("|", ","):
                separator = tokens[pos]
                pos += 1
                items.append(cp())
            if tokens[pos] != ")":
                raise DtdError(f"element {element}: expected ) in content model")
            pos += 1
            kind = "choice" if separator == "|" else "seq"
            if any(i.kind == "pcdata" for i in items):
                kind = "mixed"
                items = [i for i in items if i.kind != "pcdata"]
            model = Model(kind, None, tuple(items))
        elif token == "#PCDATA":
            model = Model("pcdata")
        else:
            model = Model("name", token)
        if pos < len(tokens) and tokens[pos] in ("?", "*", "+"):
            model = Model(model.kind, model.name, model.items, tokens[pos])
            pos += 1
        return model

    model = cp()
    if model.kind == "pcdata":
        return Model("mixed")
    return model


def _expand_parameter_entities(text: str) -> str:
    """The DTD with its internal parameter entities (``<!ENTITY % inline "b|c">``)
    declared away and their references (``%inline;``) replaced, nested ones too. An
    external one (``SYSTEM``/``PUBLIC``) is never read: a reference to it, or to one
    never declared, is an error, and so is a DTD that grows past ``EXPANSION_LIMIT``."""
    values: dict[str, str | None] = {}
    for match in _PARAMETER_ENTITY.finditer(text):
        name, double, single, external = match.groups()
        values.setdefault(name, None if external else (double if double is not None else single))
    text = _PARAMETER_ENTITY.sub("", text)

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise DtdError(f"parameter entity %{name}; is not declared")
        if values[name] is None:
            raise DtdError(f"parameter entity %{name}; is external: xcep never reads one")
        return values[name]

    limit = max(EXPANSION_LIMIT, 2 * len(text))
    for _ in range(NESTING_LIMIT):
        if not _REFERENCE.search(text):
            return text
        text = _REFERENCE.sub(value, text)
        if len(text) > limit:
            raise DtdError("parameter entities expand past the limit (an entity bomb?)")
    raise DtdError(
        f"parameter entities nest more than {NESTING_LIMIT} deep (or refer to themselves)"
    )


def parse_dtd(text: str) -> Dtd:
    dtd = Dtd()
    text = _expand_parameter_entities(_COMMENT.sub("", text))
    for kind, name, body in _DECLARATION.findall(text):
        if kind == "ELEMENT":
            dtd.elements[name] = _parse_model(body, name)
        else:
            names = dtd.attribute_names.setdefault(name, [])
            names.extend(a for a, _, _ in _ATTRIBUTE.findall(body) if a not in names)
    if not dtd.elements:
        raise DtdError("no <!ELEMENT> declarations found")
    return dtd


def read_dtd(path) -> Dtd:
    return parse_dtd(read_text(path))


_DOCTYPE = re.compile(rb"<!DOCTYPE\s+[^\s\[>]+[^\[>]*\[(.*?)\]\s*>", re.S)


def internal_subset(path, limit: int = 1 << 20) -> Dtd | None:
    """The DTD of the internal subset (``<!DOCTYPE r [ … ]>``) at the head of the XML
    file ``path`` (gzip too), or None when it has none (or no element declarations)."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        head = f.read(limit)
    found = _DOCTYPE.search(head)
    if found is None:
        return None
    try:
        return parse_dtd(found.group(1).decode("utf-8", "replace"))
    except DtdError:
        return None
