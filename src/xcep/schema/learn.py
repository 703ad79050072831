"""Schema facts learned from a sample of the stream, when no DTD is given.

``learn_schema(batches, documents=N)`` reads the first ``N`` documents of an
event stream and returns a ``LearnedSchema``: the same facts a ``Dtd`` gives
(``children``, ``attributes``, ``has_text``, ``precedes``, ``can_contain``,
``fixed_children``), as observed. The facts hold for every document of the
sample; for the rest of the stream they are a guess, as good as the sample
(an optimizer that relies on them must say so).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from itertools import combinations, product

from xcep.events import ATTR, CLOSE, OPEN, TEXT, EventBatch
from xcep.schema.dtd import Dtd, Model


class LearnedSchema(Dtd):
    """A ``Dtd`` whose facts come from observed documents: element-only content is
    ``(a | b | …)*`` over the children seen, the order relation is the one observed."""

    def __init__(self) -> None:
        super().__init__()
        self.sequences: dict[str, set[tuple[str, ...]]] = {}  # element -> child name sequences
        self.texts: set[str] = set()  # elements seen with non-blank text
        self.seen: dict[str, dict[str, None]] = {}
        self.documents = 0

    def observe(self, element: str, children: tuple[str, ...], attributes, text: bool) -> None:
        self.sequences.setdefault(element, set()).add(children)
        names = self.attribute_names.setdefault(element, [])
        names.extend(a for a in attributes if a not in names)
        if text:
            self.texts.add(element)
        self.seen.setdefault(element, {}).update(dict.fromkeys(children))  # first seen first

    def settle(self) -> LearnedSchema:
        """The content models of what was observed: ``(a | b | …)*`` over the children
        seen (mixed when text was seen), EMPTY for none; the derived facts recomputed."""
        for element, seen in self.seen.items():
            kids = tuple(Model("name", n) for n in seen)
            if element in self.texts:
                self.elements[element] = Model("mixed", None, kids, "*" if kids else "")
            elif kids:
                self.elements[element] = Model("choice", None, kids, "*")
            else:
                self.elements[element] = Model("empty")
        for fact in ("_before", "_siblings", "_below", "_parents"):
            self.__dict__.pop(fact, None)
        return self

    @cached_property
    def _before(self) -> set[tuple[str, str]]:
        pairs: set[tuple[str, str]] = set()
        for element, sequences in self.sequences.items():
            if element in self.texts:  # mixed content: text can stand anywhere
                names = {n for seq in sequences for n in seq}
                pairs |= set(product(names, repeat=2))
            for seq in sequences:
                pairs |= set(combinations(seq, 2))
        return pairs

    def fixed_children(self, element: str) -> tuple[str, ...] | None:
        sequences = self.sequences.get(element)
        if sequences is None or len(sequences) != 1 or element in self.texts:
            return None
        return next(iter(sequences))


def learn_schema(batches: Iterable[EventBatch], documents: int = 100) -> LearnedSchema:
    """The facts of the first ``documents`` documents of the stream."""
    schema = LearnedSchema()
    stack: list[list] = []  # per open element: [name, child names, attributes, has text]
    current = None
    for batch in batches:
        names = batch.symbols.names
        for doc, kind, name, value in zip(
            batch.docs, batch.kinds, batch.names, batch.values, strict=True
        ):
            if doc != current:  # a new document (a malformed one before it never closed)
                if schema.documents >= documents:
                    return schema.settle()
                current, stack = doc, []
            if kind == OPEN:
                if stack:
                    stack[-1][1].append(names[name])
                stack.append([names[name], [], [], False])
            elif kind == ATTR:
                stack[-1][2].append(names[name])
            elif kind == TEXT:
                if stack and value.strip():
                    stack[-1][3] = True
            elif kind == CLOSE:
                element, children, attributes, text = stack.pop()
                schema.observe(element, tuple(children), attributes, text)
                if not stack:
                    schema.documents += 1
    return schema.settle()
