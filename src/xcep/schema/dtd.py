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
from pathlib import Path

from xcep.errors import EXIT_USAGE, XcepError, read_text


class DtdError(XcepError):
    """A DTD that cannot be read (names the file and where)."""

    code = "XCEP0006"
    exit_code = EXIT_USAGE


_DECLARATION = re.compile(
    r"<!(ELEMENT|ATTLIST)\s+([^\s>]+)\s+((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.S
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_REFERENCE = re.compile(r"%([A-Za-z_:][\w.:\-]*);")
_DTD_TOKEN = re.compile(
    r"(?P<declare><!ENTITY\s+%\s+(?P<entity>[^\s>]+)\s+"
    r"(?:\"(?P<double>[^\"]*)\"|'(?P<single>[^']*)'"
    r"|(?:SYSTEM|PUBLIC\s+(?:\"[^\"]*\"|'[^']*'))\s+(?:\"(?P<system>[^\"]*)\"|'(?P<system2>[^']*)'))\s*>)"
    r"|(?P<reference>%(?P<name>[A-Za-z_:][\w.:\-]*);)"
    r"|(?P<section><!\[(?P<keyword>[^\[]*)\[)"
    r"|(?P<close>\]\]>)",
    re.S,
)
_SECTION_MARK = re.compile(r"<!\[|\]\]>")
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


class _Entities:
    """Parameter entities read in order, the way a validating parser reads a DTD: an
    entity's value has the references in it replaced when it is declared; a reference
    (``%inline;``) is replaced by its entity's text, itself read the same way; a
    conditional section (``<![INCLUDE[ ... ]]>``, ``<![%draft;[ ... ]]>``) is kept or
    skipped. An external entity (``SYSTEM``/``PUBLIC``: a DTD module) is read from a
    file beside the DTD, never from the network, and only when the DTD was read from
    a file. Undeclared and self-referring entities, nesting past ``NESTING_LIMIT`` and
    growth past ``EXPANSION_LIMIT`` are errors."""

    def __init__(self, base: Path | None, size: int) -> None:
        self.base = base
        self.values: dict[str, str | Path] = {}
        self.limit = max(EXPANSION_LIMIT, 2 * size)
        self.size = 0

    def read(self, text: str, depth: int = 0) -> str:
        if depth > NESTING_LIMIT:
            raise DtdError(
                f"parameter entities nest more than {NESTING_LIMIT} deep (or refer to themselves)"
            )
        out: list[str] = []
        sections: list[int] = []  # the depth of the open INCLUDE sections
        pos = 0
        for match in _DTD_TOKEN.finditer(text):
            if match.start() < pos:
                continue  # inside what an IGNORE section skipped
            out.append(text[pos : match.start()])
            pos = match.end()
            kind = match.lastgroup
            if kind == "declare":
                self._declare(match)
            elif kind == "reference":
                out.append(self.read(self._value(match.group("name")), depth + 1))
            elif kind == "section":
                keyword = _REFERENCE.sub(lambda m: self._value(m.group(1)), match.group("keyword"))
                keyword = keyword.strip()
                if keyword == "INCLUDE":
                    sections.append(1)
                elif keyword == "IGNORE":
                    pos = _section_end(text, pos)
                else:
                    raise DtdError(f"a conditional section is INCLUDE or IGNORE, not {keyword!r}")
            elif sections:  # "]]>"
                sections.pop()
            else:
                raise DtdError("']]>' closes no conditional section")
            self.size += len(out[-1]) if out else 0
            if self.size > self.limit:
                raise DtdError("parameter entities expand past the limit (an entity bomb?)")
        if sections:
            raise DtdError("a conditional section is not closed")
        out.append(text[pos:])
        return "".join(out)

    def _declare(self, match: re.Match) -> None:
        name = match.group("entity")
        if name in self.values:  # the first declaration binds
            return
        literal = match.group("double")
        if literal is None:
            literal = match.group("single")
        if literal is not None:
            self.values[name] = _REFERENCE.sub(lambda m: self._value(m.group(1)), literal)
            return
        system = match.group("system")
        if system is None:
            system = match.group("system2")
        self.values[name] = self._file(name, system)

    def _file(self, name: str, system: str) -> Path:
        if self.base is None:
            raise DtdError(
                f"parameter entity %{name}; is external ({system}): give the DTD as a file"
            )
        if re.match(r"[A-Za-z][\w+.-]*:", system) and not system.startswith("file:"):
            raise DtdError(
                f"parameter entity %{name}; is at {system}: xcep never reads the network"
            )
        return self.base / system.removeprefix("file:")

    def _value(self, name: str) -> str:
        value = self.values.get(name)
        if value is None:
            raise DtdError(f"parameter entity %{name}; is not declared")
        if isinstance(value, Path):
            try:
                text = read_text(value)
            except OSError as exc:
                raise DtdError(
                    f"parameter entity %{name}; cannot be read: {exc.strerror}"
                ) from None
            value = self.values[name] = _COMMENT.sub("", text)
        return value


def _section_end(text: str, pos: int) -> int:
    """Where the IGNORE section whose contents start at ``pos`` ends (nested ones too)."""
    depth = 1
    for match in _SECTION_MARK.finditer(text, pos):
        depth += 1 if match.group() == "<![" else -1
        if depth == 0:
            return match.end()
    raise DtdError("a conditional section is not closed")


def parse_dtd(text: str, base: Path | None = None) -> Dtd:
    """A DTD's facts; ``base`` is the folder its external parameter entities (modules)
    are read from (``read_dtd`` gives the DTD file's)."""
    dtd = Dtd()
    text = _COMMENT.sub("", text)
    text = _Entities(base, len(text)).read(text)
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
    return parse_dtd(read_text(path), Path(path).resolve().parent)


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
