"""Filter workloads for XPush, like the seed's §7 (a modified YFilter generator).

Filters are drawn from documents, so every predicate is true on some document:

- a document is picked (uniformly, or Zipf-skewed with ``zipf > 0``: a few
  documents get most filters, so filters share predicates);
- the main path is a random walk down that document from its root, ``depth``
  steps at most; each step becomes ``*`` with probability ``p_wild`` and is
  reached by ``//`` (skipping 0–2 levels) with probability ``p_desc``;
- ``k`` predicates (``k`` averages ``predicates``: 1.15 means 85 % one, 15 %
  two) hang at random levels of the main path (bushy trees); each compares a
  leaf below that level — an attribute or an element with text — with the
  document's own value (numbers sometimes with ``<=``/``>=``).

``split_documents`` cuts XMark into pub/sub messages (person, item,
open_auction elements); ``protein_documents`` makes a flat Protein-like stream.
"""

from __future__ import annotations

import json
import random
import re
from xml.sax.saxutils import escape

from lxml import etree

_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def split_documents(path, tags=("person", "item", "open_auction")) -> list[bytes]:
    """The elements named ``tags`` of a large document, each as a document of its own."""
    out = []
    for _, element in etree.iterparse(str(path), events=("end",), tag=tags):
        out.append(etree.tostring(element, with_tail=False))
        element.clear(keep_tail=True)
    return out


def as_stream(documents: list[bytes]) -> bytes:
    """Documents one after another, each with an XML declaration (resynchronisable)."""
    return b"".join(b'<?xml version="1.0"?>\n' + d + b"\n" for d in documents)


def _quote(value: str) -> str:
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _leaves(element) -> list[tuple[list[str], str]]:
    """(relative labels, value) for attributes and text-holding elements below ``element``."""
    out = []
    for name, value in element.attrib.items():
        out.append(([f"@{name}"], value))
    for child in element:
        if not isinstance(child.tag, str):
            continue
        text = (child.text or "").strip()
        if text and len(child) == 0 and len(text) <= 40:
            out.append(([child.tag], text))
        for labels, value in _leaves(child):
            out.append(([child.tag, *labels], value))
    return out


class FilterGenerator:
    def __init__(self, documents: list[bytes], seed: int = 0) -> None:
        self.trees = [etree.fromstring(d) for d in documents]
        self.rng = random.Random(seed)

    def _pick_tree(self, zipf: float):
        if zipf <= 0:
            return self.rng.choice(self.trees)
        # Zipf over documents: rank r chosen with weight 1 / r^zipf
        n = len(self.trees)
        if not hasattr(self, "_cum") or self._cum[0] != zipf:
            weights = [1 / (r + 1) ** zipf for r in range(n)]
            total, acc = sum(weights), []
            running = 0.0
            for w in weights:
                running += w / total
                acc.append(running)
            self._cum = (zipf, acc)
        x = self.rng.random()
        acc = self._cum[1]
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if acc[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return self.trees[lo]

    def predicate(self, leaves) -> str:
        labels, value = leaves.pop(self.rng.randrange(len(leaves)))
        path = "/".join(labels)
        if _NUMBER.fullmatch(value) and self.rng.random() < 0.5:
            op = self.rng.choice(["=", "<=", ">="])
            return f"{path} {op} {value}"
        return f"{path} = {_quote(value)}"

    def filter(self, depth=4, predicates=1.15, p_wild=0.0, p_desc=0.0, zipf=0.0) -> str:
        rng = self.rng
        node = self._pick_tree(zipf)
        chain = [node]
        while len(chain) < depth:
            kids = [c for c in chain[-1] if isinstance(c.tag, str)]
            if not kids:
                break
            chain.append(rng.choice(kids))
        k = int(predicates) + (rng.random() < predicates - int(predicates))
        attach: dict[int, list[str]] = {}
        leaves = {i: _leaves(element) for i, element in enumerate(chain)}
        for _ in range(k):
            levels = [i for i, found in leaves.items() if found]
            if not levels:
                break
            level = rng.choice(levels)
            attach.setdefault(level, []).append(self.predicate(leaves[level]))
        parts = []
        skip = 0
        for level, element in enumerate(chain):
            if skip and level not in attach and level != len(chain) - 1:
                skip -= 1
                continue
            sep = "/"
            if level > 0 and rng.random() < p_desc and level not in attach:
                skip = rng.randrange(0, 2)
                sep = "//"
            label = "*" if (rng.random() < p_wild and level not in attach) else element.tag
            preds = attach.get(level, [])
            condition = f"[{' and '.join(preds)}]" if preds else ""
            parts.append(f"{sep}{label}{condition}")
        return "".join(parts)

    def workload(self, n: int, **options) -> list[str]:
        return [self.filter(**options) for _ in range(n)]


# ---------- a flat, Protein-like stream (the seed's data set, synthesised) ----------

PROTEIN_DTD = """
<!ELEMENT ProteinEntry (header, protein, organism, reference+, classification?, keywords?)>
<!ATTLIST ProteinEntry id CDATA #REQUIRED>
<!ELEMENT header (uid, accession+, created_date)>
<!ELEMENT uid (#PCDATA)>
<!ELEMENT accession (#PCDATA)>
<!ELEMENT created_date (#PCDATA)>
<!ELEMENT protein (name)>
<!ELEMENT name (#PCDATA)>
<!ELEMENT organism (source, common?)>
<!ELEMENT source (#PCDATA)>
<!ELEMENT common (#PCDATA)>
<!ELEMENT reference (refinfo)>
<!ELEMENT refinfo (authors, citation, year)>
<!ATTLIST refinfo refid CDATA #REQUIRED>
<!ELEMENT authors (author+)>
<!ELEMENT author (#PCDATA)>
<!ELEMENT citation (#PCDATA)>
<!ELEMENT year (#PCDATA)>
<!ELEMENT classification (superfamily)>
<!ELEMENT superfamily (#PCDATA)>
<!ELEMENT keywords (keyword+)>
<!ELEMENT keyword (#PCDATA)>
"""


def protein_documents(n: int, seed: int = 1) -> list[bytes]:
    """``n`` ProteinEntry documents (depth ≤ 5), values from mildly skewed vocabularies."""
    rng = random.Random(seed)

    def pick(prefix: str, size: int) -> str:
        # mildly skewed toward small ranks: a value is in well under 1 % of entries
        return f"{prefix}{int(size * rng.random() ** 1.5)}"

    out = []
    for i in range(n):
        refs = "".join(
            f'<reference><refinfo refid="R{rng.randrange(5000)}"><authors>'
            + "".join(f"<author>{pick('Author', 3000)}</author>" for _ in range(rng.randint(1, 4)))
            + f"</authors><citation>{pick('Journal', 200)}</citation>"
            f"<year>{rng.randint(1970, 2003)}</year></refinfo></reference>"
            for _ in range(rng.randint(1, 3))
        )
        keywords = "".join(
            f"<keyword>{pick('kw', 500)}</keyword>" for _ in range(rng.randint(0, 4))
        )
        doc = (
            f'<ProteinEntry id="P{i}"><header><uid>U{i}</uid>'
            f"<accession>A{rng.randrange(100000)}</accession>"
            f"<created_date>{rng.randint(1, 28)}-Jan-{rng.randint(1985, 2003)}</created_date>"
            "</header>"
            f"<protein><name>{pick('protein ', 2000)}</name></protein>"
            f"<organism><source>{pick('Organism', 800)}</source></organism>{refs}"
            f"<classification><superfamily>{pick('family', 300)}</superfamily></classification>"
            + (f"<keywords>{keywords}</keywords>" if keywords else "")
            + "</ProteinEntry>"
        )
        out.append(doc.encode())
    return out


# ---------- workload families (issue 20): subscriptions, structural, mixed ----------

# leaves that nearly identify one message: a subscription on one of them is selective
SELECTIVE = frozenset(
    {
        "name",
        "emailaddress",
        "phone",
        "creditcard",
        "homepage",
        "@id",
        "@person",
        "@item",
        "date",
        "initial",
        "current",
        "quantity",
        "street",
        "zipcode",
    }
)


def _constant(value: str) -> str:
    return value if _NUMBER.fullmatch(value) else _quote(value)


class SubscriptionGenerator:
    """*subscriptions*: one filter per user, on the message kinds of ``documents``
    (``/person``, ``/item``, ``/open_auction``): 1-3 value predicates on leaves and
    attributes with constants drawn from the data — equality, numeric ranges,
    ``starts-with``, ``contains`` —, some ``or`` and ``not``; the structure is
    the message's own (fixed). Seven filters in ten test a nearly unique leaf (a
    name, an id, an e-mail address), the others two or three general ones."""

    selective = SELECTIVE  # the labels of the nearly unique leaves

    def __init__(self, documents: list[bytes], seed: int = 0) -> None:
        self.trees = [etree.fromstring(d) for d in documents]
        self.rng = random.Random(seed)

    def atom(self, labels: list[str], value: str) -> str:
        rng = self.rng
        path = "/".join(labels)
        if _NUMBER.fullmatch(value):  # an equality, or a range that holds ~1 in 10
            op = rng.choice(["=", "<", ">"])
            if op == "=":
                return f"{path} = {value}"
            bound = float(value) * (0.9 if op == "<" else 1.1)
            return f"{path} {op} {bound:.2f}"
        words = [w for w in value.split() if len(w) >= 5]
        roll = rng.random()
        if roll < 0.15 and " " in value:  # a name or an address less its last letters
            return f"starts-with({path}, {_quote(value[:-2])})"
        if roll < 0.25 and words:
            return f"contains({path}, {_quote(rng.choice(words))})"
        return f"{path} = {_quote(value)}"

    def filter(self) -> str:
        rng = self.rng
        while True:
            tree = rng.choice(self.trees)
            leaves = _leaves(tree)
            if leaves:
                break
        selective = [leaf for leaf in leaves if leaf[0][-1] in self.selective]
        other = [leaf for leaf in leaves if leaf[0][-1] not in self.selective] or leaves
        k = rng.choice([1, 2, 2, 3])
        # a user's own value (a name, an id) in most filters; else several general ones
        chosen = [rng.choice(selective)] if selective and rng.random() < 0.7 else []
        k = max(k, 1 if chosen else 2)
        while len(chosen) < k:
            chosen.append(rng.choice(other))
        atoms = [self.atom(*leaf) for leaf in chosen]
        if chosen[0][0][-1] in self.selective and rng.random() < 0.15:  # this or another one
            labels = chosen[0][0]
            others = [v for ls, v in _leaves(rng.choice(self.trees)) if ls == labels]
            if others:
                atoms[0] = f"({atoms[0]} or {self.atom(labels, others[0])})"
        if len(atoms) >= 2 and rng.random() < 0.1:
            atoms[-1] = f"not({atoms[-1]})"
        return f"/{tree.tag}[{' and '.join(atoms)}]"

    def workload(self, n: int) -> list[str]:
        return [self.filter() for _ in range(n)]


class JsonSubscriptionGenerator(SubscriptionGenerator):
    """*subscriptions* over a JSON feed (``json_messages``): the same users' filters on
    the messages as JSON gives them (no attributes: members)."""

    selective = frozenset(label.lstrip("@") for label in SELECTIVE)

    def __init__(self, documents: list[bytes], seed: int = 0) -> None:
        super().__init__(documents, seed)
        self.trees = [tree[0] for tree in self.trees]  # the message below <json>

    def filter(self) -> str:
        return "/json" + super().filter()  # /json/person[name = '…' and …]


def json_messages(documents: list[bytes]) -> tuple[list[str], list[bytes]]:
    """The messages as a JSON feed: one JSON object per message (``{"person": {...}}``:
    attributes and children as members, repeated children as arrays, an element's own
    text as ``text`` where it has members too), and each as the XML of the events
    JSON input gives (``<json><person>…``, docs/events.md): what the peers read."""
    feed, xml = [], []
    for document in documents:
        root = etree.fromstring(document)
        message = {root.tag: _json_value(root)}
        feed.append(json.dumps(message, ensure_ascii=False))
        xml.append(("<json>" + _as_events(message) + "</json>").encode())
    return feed, xml


def _json_value(element):
    children = [c for c in element if isinstance(c.tag, str)]
    text = _own_text(element)
    if not element.attrib and not children:
        return text
    value: dict = dict(element.attrib)
    if text.strip():
        value["text"] = text
    for child in children:
        value.setdefault(child.tag, []).append(_json_value(child))
    return {k: v[0] if isinstance(v, list) and len(v) == 1 else v for k, v in value.items()}


def _own_text(element) -> str:
    parts = [element.text or ""] + [c.tail or "" for c in element]
    return "".join(parts)


def _as_events(value) -> str:
    """A JSON object's members as the elements JSON input makes of them."""
    out = []
    for key, member in value.items():
        for item in member if isinstance(member, list) else [member]:
            inner = _as_events(item) if isinstance(item, dict) else escape(item)
            out.append(f"<{key}>{inner}</{key}>")
    return "".join(out)


class StructuralGenerator:
    """*structural*: paths down the deep, recursive parts of the messages (XMark
    ``description/parlist/listitem``...), with ``//`` and ``*`` steps and nested
    existence predicates, few values (one filter in four compares a value)."""

    def __init__(self, documents: list[bytes], seed: int = 0) -> None:
        self.trees = [etree.fromstring(d) for d in documents]
        self.rng = random.Random(seed)

    def _below(self, element, depth: int) -> str | None:
        """A relative path from ``element`` to one of its descendants, maybe with a
        nested predicate, or None at a leaf."""
        rng = self.rng
        kids = [c for c in element if isinstance(c.tag, str)]
        if not kids or depth == 0:
            return None
        node, parts = element, []
        for _ in range(rng.randint(1, depth)):
            kids = [c for c in node if isinstance(c.tag, str)]
            if not kids:
                break
            node = rng.choice(kids)
            sep = "//" if parts and rng.random() < 0.4 else "/"
            parts.append(sep + ("*" if rng.random() < 0.2 else node.tag))
        path = "".join(parts)[1:]
        if path.startswith("/"):
            path = "." + path
        inner = self._below(node, 2) if rng.random() < 0.3 else None
        return f"{path}[{inner}]" if inner else path

    def filter(self) -> str:
        rng = self.rng
        tree = rng.choice(self.trees)
        chain = [tree]
        while len(chain) < 8:  # down, into the deep parts mostly
            kids = [c for c in chain[-1] if isinstance(c.tag, str)]
            inner = [c for c in kids if len(c)]
            if not kids:
                break
            chain.append(rng.choice(inner if inner and rng.random() < 0.85 else kids))
        chain = chain[: rng.randint(min(4, len(chain)), len(chain))]  # deep paths
        parts, skipped = [], False
        for level, element in enumerate(chain):
            if 0 < level < len(chain) - 1 and rng.random() < 0.35:  # reached by //
                skipped = True
                continue
            label = "*" if level > 0 and rng.random() < 0.25 else element.tag
            below = self._below(element, 3) if rng.random() < 0.3 else None
            parts.append(("//" if skipped else "/") + label + (f"[{below}]" if below else ""))
            skipped = False
        text = "".join(parts)
        if rng.random() < 0.25:
            leaves = _leaves(chain[-1])
            if leaves:
                labels, value = rng.choice(leaves)
                text += f"[{'/'.join(labels)} = {_constant(value)}]"
        return text

    def workload(self, n: int) -> list[str]:
        return [self.filter() for _ in range(n)]
