"""Windows over a stream: a FLWOR that opens with a window clause over
``$input/a/b/c`` is evaluated item by item as the events come.

``plan(tree)`` decides whether a query can run so, and says why not otherwise
(``--explain`` prints it). It can when:

- the query is a FLWOR (after a prolog that declares variables only) whose
  first clause is a window clause binding ``$input/NAME/NAME/...`` (child steps
  from the document node), and whose other clauses are ``for``, ``let`` and
  ``where`` (each window's tuples are then finished before the next window:
  ``count``, ``group by`` and ``order by`` need every tuple first);
- nothing else reads ``$input``, the context item (a relative path or ``.`` at
  the top of an expression), an absolute path, or above an item: no ``..``,
  ``parent::``, ``ancestor::``, ``preceding::``, ``following::`` axes, no
  ``root()``, ``id()``. Such a query sees in each item the same tree it would
  see in the whole document.

Each item is built as a small tree of its own when its element closes
(``items``); its nodes are numbered after the previous item's, so document
order across items is stream order, as in the whole document. The window
clause (``Evaluator.window``) reads the items through ``LazyItems``, as far as
its conditions look (``next`` looks one ahead), and forgets those no window can
reach: memory holds the open windows, not the stream. Output comes as windows
close. One difference: a document found malformed after some of its items were
read (only a document of more than ``batch_size`` events is read before it
completes) keeps those items; the whole-document path drops the document.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from elementpath.xpath_nodes import ElementNode, EtreeElementNode, TextNode

from xcep.events import OPEN, TEXT, EventBatch
from xcep.xquery import ast as A
from xcep.xquery.documents import ElementBuilder

_BINDING = re.compile(r"\s*\$input((?:\s*/\s*[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)+)\s*\Z")
# what reads outside an item: axes that go up or sideways, the root and ids
_OUTSIDE = {
    "..": "'..'",
    "parent": "the parent axis",
    "ancestor": "the ancestor axis",
    "ancestor-or-self": "the ancestor axis",
    "preceding": "the preceding axis",
    "preceding-sibling": "the preceding-sibling axis",
    "following": "the following axis",
    "following-sibling": "the following-sibling axis",
    "root": "root()",
    "id": "id()",
    "idref": "idref()",
    "element-with-id": "element-with-id()",
}
# what reads the context item when it stands at the top of an expression
_CONTEXT = {
    "(name)",
    ".",
    "@",
    "text",
    "node",
    "element",
    "attribute",
    "comment",
    "processing-instruction",
    "document-node",
    "child",
    "descendant",
    "descendant-or-self",
    "self",
    "namespace",
    "position",
    "last",
}
# functions that read the context item when called without arguments
_CONTEXT_FUNCTIONS = {
    "string",
    "data",
    "name",
    "local-name",
    "namespace-uri",
    "number",
    "normalize-space",
    "string-length",
    "node-name",
    "base-uri",
    "document-uri",
    "generate-id",
    "has-children",
    "path",
    "lang",
    "nilled",
}


@dataclass(frozen=True)
class StreamPlan:
    """How a query runs over a stream: the element names of its items' path (below the
    document node), its prolog (or None) and its FLWOR."""

    path: tuple[str, ...]
    prolog: A.Prolog | None
    flwor: A.FLWOR
    ordered: bool  # the query compares nodes by document order (union, <<, ...)

    def describe(self) -> str:
        answered = (
            "each window is answered when it closes"
            if isinstance(self.flwor.clauses[0], A.Window)
            else "each pattern instance is answered when its start is done"
        )
        return (
            f"streaming: the items of $input/{'/'.join(self.path)} are read one at a time, "
            + answered
        )


def plan(tree: A.Expr) -> tuple[StreamPlan | None, str]:
    """(the plan, "") when the query can run over a stream, else (None, why not)."""
    prolog, body = (tree, tree.body) if isinstance(tree, A.Prolog) else (None, tree)
    if prolog is not None and prolog.runtime.get("functions"):
        return None, "the prolog declares functions"
    if prolog is not None and prolog.runtime.get("namespaces"):
        return None, "the prolog declares namespaces (items are matched by names as spelled)"
    first = body.clauses[0] if isinstance(body, A.FLWOR) else None
    if not isinstance(first, A.Window | A.Pattern):
        return None, "the query is not a FLWOR that opens with a window or pattern clause"
    what = "window" if isinstance(first, A.Window) else "pattern"
    binding = first.expr
    match = _BINDING.match(binding.text) if isinstance(binding, A.XPath) else None
    if match is None or binding.placeholders:
        return None, f"the {what} clause does not bind $input/NAME/... (child steps)"
    for clause in body.clauses[1:]:
        if not isinstance(clause, A.For | A.Let | A.Where):
            return None, f"a {type(clause).__name__.lower()} clause follows the {what}"
    if isinstance(first, A.Window):
        parts: list = [first.start.when, first.end.when if first.end else None]
    else:
        nested = [v.name for v in first.variables if v.nested]
        if nested:  # its condition reads the rest of the sequence
            return None, f"the pattern variable ${nested[0]} is nested (reads ahead)"
        parts = [v.when for v in first.variables]
    parts.append(body.result)
    parts += [getattr(clause, "expr", None) for clause in body.clauses[1:]]
    parts += [value for _, value, _ in prolog.variables] if prolog is not None else []
    for part in parts:
        why = _reads_outside_item(part)
        if why:
            return None, why
    path = tuple(step.strip() for step in match.group(1).split("/")[1:])
    ordered = any(_orders_nodes(part) for part in parts)
    return StreamPlan(path, prolog, body, ordered), ""


_ORDERING = {"|", "union", "intersect", "except", "<<", ">>", "is", "innermost", "outermost"}


def _orders_nodes(expr) -> bool:
    """Does ``expr`` compare nodes by their document order (or identity)? Then the items'
    nodes are numbered after each other (else the numbering is skipped: it costs)."""
    if isinstance(expr, A.XPath):
        tokens = [expr.token]
        while tokens:
            token = tokens.pop()
            if token.symbol in _ORDERING:
                return True
            tokens.extend(token)
        return any(_orders_nodes(sub) for _, sub in expr.placeholders)
    if isinstance(expr, A.Sequence):
        return any(map(_orders_nodes, expr.items))
    if isinstance(expr, A.Element):
        parts = [p for _, value in expr.attributes for p in value] + list(expr.content)
        return any(_orders_nodes(p) for p in parts if not isinstance(p, str))
    if isinstance(expr, A.Computed):
        return any(
            _orders_nodes(part)
            for part in (expr.content, expr.name)
            if part is not None and not isinstance(part, str)
        )
    return isinstance(expr, A.FLWOR)  # (nested: not looked into; numbering only costs)


def _reads_outside_item(expr) -> str:
    """Why ``expr`` would see something else in an item than in the whole document
    ("" when it would not)."""
    if expr is None or isinstance(expr, str):
        return ""
    if isinstance(expr, A.XPath):
        return _token_reads_outside(expr.token, True) or next(
            (why for _, sub in expr.placeholders if (why := _reads_outside_item(sub))), ""
        )
    if isinstance(expr, A.Sequence):
        return next((why for item in expr.items if (why := _reads_outside_item(item))), "")
    if isinstance(expr, A.Element):
        parts = [p for _, value in expr.attributes for p in value] + list(expr.content)
        return next((why for part in parts if (why := _reads_outside_item(part))), "")
    if isinstance(expr, A.FLWOR):
        inner: list = [expr.result]
        for clause in expr.clauses:
            if isinstance(clause, A.Pattern):
                return "a pattern clause inside the query"
            if isinstance(clause, A.Window):
                inner += [clause.expr, clause.start.when, clause.end.when if clause.end else None]
            elif isinstance(clause, A.GroupBy | A.OrderBy):
                inner += [spec.expr for spec in clause.specs]
            else:
                inner.append(getattr(clause, "expr", None))
        return next((why for part in inner if (why := _reads_outside_item(part))), "")
    if isinstance(expr, A.External):
        return _reads_outside_item(expr.default)
    if isinstance(expr, A.Computed):
        parts = [expr.content, None if isinstance(expr.name, str) else expr.name]
        return next((why for part in parts if (why := _reads_outside_item(part))), "")
    return f"a {type(expr).__name__} expression"


def _token_reads_outside(token, top: bool) -> str:
    """The same for one of elementpath's tokens; ``top``: it is evaluated against the
    query's context item (not inside a path step or a predicate)."""
    symbol = token.symbol
    if symbol == "$":
        return "$input outside the window clause" if token.value == "input" else ""
    if symbol in _OUTSIDE:
        return f"{_OUTSIDE[symbol]} looks outside an item"
    if symbol in ("/", "//"):
        if len(token) == 1:
            return "an absolute path"
        return _token_reads_outside(token[0], top) or _token_reads_outside(token[1], False)
    if symbol == ":" and len(token) == 2 and "function" in token[1].label:
        return _token_reads_outside(token[1], top)  # fn:count(...), xs:integer(...)
    if symbol == "[":
        return _token_reads_outside(token[0], top) or next(
            (why for p in list(token)[1:] if (why := _token_reads_outside(p, False))), ""
        )
    reads_context = symbol in _CONTEXT and (len(token) == 0 or symbol not in ("position", "last"))
    if not token and (symbol in _CONTEXT_FUNCTIONS or symbol == "*"):  # string(), a bare *
        reads_context = True
    if top and reads_context:
        return "the context item (a relative path or '.' outside a path from a variable)"
    return next((why for child in token if (why := _token_reads_outside(child, top))), "")


_FOCUS_FREE = {"$", "#", "function", "inline"}  # variables, f#1, inline functions' bodies


def reads_focus(token, top: bool = True) -> bool:
    """Does this elementpath token read the focus (the context item, its position or
    size, or the root of its tree) where it is evaluated? With no context item, such an
    expression is XPDY0002."""
    symbol = token.symbol
    if symbol in _FOCUS_FREE:
        return False
    if symbol in ("/", "//"):
        if len(token) < 2:  # '/' or an absolute path: the root of the context item's tree
            return top or any(reads_focus(child, False) for child in token)
        return reads_focus(token[0], top) or reads_focus(token[1], False)
    if symbol == "[" and token.label == "array":  # [a, b]: its members, where it stands
        return any(reads_focus(child, top) for child in token)
    if symbol in ("[", "!"):
        return reads_focus(token[0], top) or any(reads_focus(p, False) for p in list(token)[1:])
    if symbol == ":" and len(token) == 2 and "function" in token[1].label:
        return reads_focus(token[1], top)
    if symbol == "root" and len(token):  # root($x)
        return reads_focus(token[0], top)
    if symbol in ("instance", "treat", "cast", "castable"):  # the type is no expression
        return reads_focus(token[0], top)
    if top and (symbol in _CONTEXT or symbol in _OUTSIDE):
        return symbol not in ("position", "last") or len(token) == 0
    if top and not token and symbol in _CONTEXT_FUNCTIONS:
        return True
    return any(reads_focus(child, top) for child in token)


def items(batches: Iterable[EventBatch], path: tuple[str, ...], ordered: bool = True) -> Iterator:
    """The elements at ``path`` below each document node, in stream order, each an
    elementpath node of a tree of its own; with ``ordered`` its nodes are numbered after
    the items' before it (document order across items is stream order)."""
    return ItemReader(path, ordered).items(batches)


class ItemReader:
    """``items``, read a batch at a time. Between two batches its state is which
    ancestors are on the path, the nodes numbered so far and the events of the item
    being built (slices of the batches it began in): it pickles, and one unpickled
    builds that item again from its events."""

    def __init__(self, path: tuple[str, ...], ordered: bool) -> None:
        self.path = path
        self.ordered = ordered
        self.on_path = [True] + [False] * len(path)  # by depth: its ancestors and it match
        self.building: ElementBuilder | None = None
        self.partial: list[EventBatch] = []  # the events of the item being built
        self.numbered = 0  # the nodes numbered so far

    def items(self, batches: Iterable[EventBatch]) -> Iterator:
        for batch in batches:
            yield from self.read(batch)

    def feed(self, batch: EventBatch) -> list:
        """The items that close in ``batch``."""
        return list(self.read(batch))

    def read(self, batch: EventBatch) -> Iterator:
        """The items that close in ``batch``, each as soon as it is built (its state is
        kept once the batch is read)."""
        path, on_path, building, ordered = self.path, self.on_path, self.building, self.ordered
        depth_wanted = len(path)
        names = batch.symbols.names
        began_here = False
        for kind, name, value, depth in zip(
            batch.kinds, batch.names, batch.values, batch.depths, strict=True
        ):
            if building is None:
                if kind == OPEN and depth <= depth_wanted:
                    matched = on_path[depth - 1] and names[name] == path[depth - 1]
                    on_path[depth] = matched
                    if matched and depth == depth_wanted:
                        building, began_here = ElementBuilder(), True
                        building.add(kind, names[name], value)
                continue
            element = building.add(kind, None if kind == TEXT else names[name], value)
            if element is not None:
                node = ItemNode(element)
                if ordered:
                    _renumber(node, self.numbered)
                    self.numbered += sum(4 + len(e.attrib) for e in element.iter())
                building = None
                yield node
        self.building = building
        if building is None:
            self.partial = []
        elif began_here:  # the item still open began at the last open tag of its depth
            kinds = np.frombuffer(batch.kinds, np.uint8)
            depths = np.frombuffer(batch.depths, np.int32)
            at = int(np.flatnonzero((kinds == OPEN) & (depths == depth_wanted))[-1])
            self.partial = [batch.slice(at, len(batch))]
        else:
            self.partial.append(batch)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["building"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        partial, self.partial, self.building = self.partial, [], None
        for batch in partial:  # the item being built: its events again (it does not close)
            self.feed(batch)


class StreamState:
    """Where a window over a stream stands between two batches: its item reader and the
    items a window can still reach (``LazyItems``, with the window clause's position).
    It pickles (``xcep.plans`` saves it): the items as their ElementTree elements with
    their numbering, built into nodes again when unpickled."""

    def __init__(self, plan: StreamPlan) -> None:
        self.reader = ItemReader(plan.path, plan.ordered)
        self.items = LazyItems(iter(()))

    def start(self, batches: Iterable[EventBatch]) -> LazyItems:
        """The items, read from ``batches`` after those held."""
        self.items.iterator = self.reader.items(batches)
        self.items.done = False
        return self.items

    def __getstate__(self) -> dict:
        held = [(node.elem, node.position - 1) for node in self.items.items]
        items = self.items
        return {
            "reader": self.reader,
            "held": held,
            "base": items.base,
            "top": items.top,
            "progress": dict(items.progress) if items.progress else None,
        }

    def __setstate__(self, state: dict) -> None:
        self.reader = state["reader"]
        self.items = LazyItems(iter(()))
        for element, offset in state["held"]:
            node = ItemNode(element)
            _renumber(node, offset)
            self.items.items.append(node)
        self.items.base, self.items.top = state["base"], state["top"]
        self.items.progress = state.get("progress")


_CHILDREN = ElementNode.__dict__["children"]  # the slot ElementNode keeps its children in


class ItemNode(EtreeElementNode):
    """The element node of an item read from a stream, whose descendants' nodes are made
    when first asked for: a window's conditions mostly read an item's attributes (made
    lazily by elementpath already), and an item's seven nodes cost more than building
    its elements. Then they are made exactly as elementpath's ``build_node_tree`` makes
    them (same classes, same positions): ``children`` is that slot, filled on first
    read."""

    __slots__ = ()

    def __init__(self, elem: ET.Element, position: int = 1) -> None:
        super().__init__(elem, None, position)
        _CHILDREN.__delete__(self)  # not made yet

    @property
    def children(self) -> list:
        try:
            return _CHILDREN.__get__(self, ItemNode)
        except AttributeError:
            _CHILDREN.__set__(self, [])
            self._descendants()
            return _CHILDREN.__get__(self, ItemNode)

    @children.setter
    def children(self, value: list) -> None:
        _CHILDREN.__set__(self, value)

    def _descendants(self) -> None:
        """``build_node_tree`` below this node (no namespaces: two positions before an
        element's attributes, as there)."""
        elem = self.value
        position = self.position + 2 + len(elem.attrib)
        if elem.text is not None:
            TextNode(elem.text, self, position)
            position += 1
        stack = [(self, iter(elem))]
        while stack:
            parent, children = stack[-1]
            for child_elem in children:
                child = EtreeElementNode(child_elem, parent, position)
                position += 2 + len(child_elem.attrib)
                if child_elem.text is not None:
                    TextNode(child_elem.text, child, position)
                    position += 1
                if len(child_elem):
                    stack.append((child, iter(child_elem)))
                    break
                if child_elem.tail is not None:
                    TextNode(child_elem.tail, parent, position)
                    position += 1
            else:
                stack.pop()
                if stack and parent.value.tail is not None:
                    TextNode(parent.value.tail, stack[-1][0], position)
                    position += 1


def _renumber(node, offset: int) -> None:
    """Move the positions of a tree's elements and texts by ``offset``: its attribute
    and namespace nodes, made when first asked for, take theirs from their element's."""
    todo = [node]
    while todo:
        node = todo.pop()
        node.position += offset
        todo.extend(getattr(node, "children", None) or ())


class LazyItems:
    """A sequence read from an iterator as far as it is looked at; the items before a
    ``release``d index are forgotten (indexes stay those of the whole sequence)."""

    def __init__(self, iterator: Iterator) -> None:
        self.iterator = iterator
        self.items: list = []
        self.base = 0  # the index of items[0]
        self.done = False
        self.top = 0  # where the window clause looks for the next start (it sets it)
        self.progress: dict | None = None  # where the pattern clause stands (it sets it)

    def has(self, i: int) -> bool:
        """Is there an item ``i`` (reading up to it)?"""
        if i < self.base + len(self.items):
            return True
        while not self.done and i >= self.base + len(self.items):
            for item in self.iterator:
                self.items.append(item)
                break
            else:
                self.done = True
        return i < self.base + len(self.items)

    def __getitem__(self, i):
        if isinstance(i, slice):  # items[start:end], read up to end
            self.has(i.stop - 1)
            return self.slice(i.start, i.stop)
        if i >= self.base + len(self.items):
            self.has(i)
        return self.items[i - self.base]

    def slice(self, start: int, end: int) -> list:
        """Items ``start`` to ``end - 1`` (read)."""
        return self.items[start - self.base : end - self.base]

    def last(self) -> int:
        """The index of the last item (reading them all)."""
        while self.has(self.base + len(self.items)):
            pass
        return self.base + len(self.items) - 1

    def release(self, i: int) -> None:
        """Forget the items before ``i``."""
        if i > self.base:
            del self.items[: i - self.base]
            self.base = i


class LazyMasks:
    """Per position of a stream's items, the pattern variables' bitmask, computed as the
    pattern asks for it: ``compute(items)`` for the items read since the last call (a
    list of masks, or None: then ``one(position)`` for each)."""

    def __init__(self, items: LazyItems, compute, one) -> None:
        self.items, self.compute, self.one = items, compute, one
        self.masks: dict[int, int] = {}
        self.end = 0  # the positions before it are computed
        self.low = 0  # the positions before it are forgotten

    def __getitem__(self, i: int) -> int:
        if i >= self.end:
            self.items.has(i)
            first, top = max(self.end, self.items.base), self.items.base + len(self.items.items)
            masks = self.compute(self.items.slice(first, top))
            if masks is None:
                masks = [self.one(p) for p in range(first, top)]
            self.masks.update(zip(range(first, top), masks, strict=True))
            self.end = top
        return self.masks[i]

    def forget(self, i: int) -> None:
        """Drop the masks before position ``i``."""
        for p in range(self.low, i):
            self.masks.pop(p, None)
        self.low = max(self.low, i)
