"""Stage 1 (the seed's §3): all query blocks over one document, as witness relations.

Each distinct block is compiled once into a tree pattern (``Pattern``). For a
document, ``WitnessEvaluator.evaluate`` finds the nodes of every pattern node
that take part in a complete match (bottom-up: the nodes whose subtree
satisfies the pattern below; top-down: those also reachable from a match
above), sharing the bottom-up sets between blocks through a memo keyed by
the canonical text of the pattern subtree. It returns

- ``binW``: ``(var1, var2, node1, node2)`` for every pair of variables of a
  block where ``var1`` is above ``var2`` in the pattern (not only parent and
  child, so that templates may contract paths), plus ``(var, var, node,
  node)`` for each binding, so a template with a lone node still knows
  which variable its node is bound to;
- ``docW``: ``{node: string value}`` for the nodes bound to variables.

Because a block is matched as a whole, a global variable name stands for a
variable *in its block*: two variables share a name when their blocks are
the same up to variable names and they sit at the same place.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from xcep.xscl import ast as A
from xcep.xscl.documents import ATTRIBUTE, ELEMENT, Document, Node


@dataclass
class PatternNode:
    axis: str | None  # None for the root (the document)
    name: str
    var: str | None = None  # global variable name
    children: list[PatternNode] = field(default_factory=list)
    key: str = ""  # canonical text of the subtree (variables left out)


@dataclass
class Pattern:
    """A compiled block: its pattern tree and its variables' pattern nodes."""

    stream: str
    root: PatternNode
    variables: dict[str, PatternNode]
    paths: dict[str, list[PatternNode]]  # variable -> pattern nodes from the root down to it
    ancestor_pairs: list[tuple[str, str]] = field(default_factory=list)  # (upper, lower) vars
    key: tuple = ()  # the engine's name for it (canonical text, variables)


def canonical_block(block: A.Block, mark: A.Step | None = None) -> str:
    """The block's text with variables erased and predicates sorted; ``mark`` flags one step."""

    def steps_text(steps: list[A.Step]) -> str:
        out = []
        for step in steps:
            preds = sorted(steps_text(p) for p in step.predicates)
            flag = "#" if step is mark else ""
            out.append(f"{step.axis}{step.name}{flag}" + "".join(f"[{p}]" for p in preds))
        return "".join(out)

    return f"{block.stream}{steps_text(block.steps)}"


def compile_block(block: A.Block, names: dict[str, str]) -> Pattern:
    """The pattern of a block; ``names`` maps the query's variables to global names."""
    root = PatternNode(None, "")
    variables: dict[str, PatternNode] = {}
    paths: dict[str, list[PatternNode]] = {}

    def add(parent: PatternNode, steps: list[A.Step], trail: list[PatternNode]) -> None:
        node = parent
        for step in steps:
            child = PatternNode(step.axis, step.name, names.get(step.var) if step.var else None)
            node.children.append(child)
            here = [*trail, child]
            if child.var:
                variables[child.var] = child
                paths[child.var] = here
            for predicate in step.predicates:
                add(child, predicate, here)
            node, trail = child, here

    add(root, block.steps, [root])
    _set_keys(root)
    pattern = Pattern(block.stream, root, variables, paths)
    pattern.ancestor_pairs = _ancestor_pairs(pattern)
    return pattern


def _set_keys(node: PatternNode) -> str:
    inner = sorted(_set_keys(c) for c in node.children)
    node.key = f"{node.axis or ''}{node.name}" + "".join(f"[{k}]" for k in inner)
    return node.key


SHAPE_CACHE = 4096  # document structures whose witnesses are kept
SHAPE_NODES = 512  # a document with more nodes is matched without the cache


class Shape:
    """Stage 1's answer for one document structure (XSCL blocks test structure only,
    never values): the witness pairs ``binw`` and the bound nodes, shared by every
    document of that structure."""

    __slots__ = ("binw", "bound")

    def __init__(self, binw: frozenset, bound: tuple[int, ...]) -> None:
        self.binw = binw
        self.bound = bound


def shape_key(doc: Document) -> tuple:
    """A document's structure: each node's kind, name and parent, in node order."""
    return tuple((n.kind, n.name, -1 if n.parent is None else n.parent.id) for n in doc.nodes)


class WitnessEvaluator:
    """Evaluates every registered pattern over a document, sharing common subpatterns;
    the answer for each document structure is kept (``SHAPE_CACHE`` of them, cleared
    when the patterns change), so a stream of like messages matches each shape once."""

    def __init__(self) -> None:
        self.patterns: dict[str, list[Pattern]] = {}  # by stream
        self.memo_hits = 0
        self.memo_misses = 0
        self._shapes: dict[tuple, Shape] = {}

    def add(self, pattern: Pattern) -> None:
        self.patterns.setdefault(pattern.stream, []).append(pattern)
        self._shapes.clear()

    def remove(self, pattern: Pattern) -> None:
        self.patterns[pattern.stream].remove(pattern)
        self._shapes.clear()

    def evaluate(self, doc: Document, stream: str) -> tuple[frozenset, dict]:
        """``binW`` and ``docW`` of the document (see the module's comment)."""
        shape = self.shape(doc, stream)
        nodes = doc.nodes
        return shape.binw, {n: nodes[n].string_value for n in shape.bound}

    def shape(self, doc: Document, stream: str) -> Shape:
        """The witnesses of the document's structure, from the cache when it has them."""
        if len(doc.nodes) > SHAPE_NODES:
            return self._match(doc, stream)
        key = (stream, shape_key(doc))
        found = self._shapes.get(key)
        if found is None:
            if len(self._shapes) >= SHAPE_CACHE:
                self._shapes.clear()
            found = self._shapes[key] = self._match(doc, stream)
        return found

    def _match(self, doc: Document, stream: str) -> Shape:
        binw: set[tuple] = set()
        bound: set[int] = set()
        memo: dict[str, list[Node]] = {}
        for pattern in self.patterns.get(stream, ()):
            reach = self._reach(pattern.root, doc, memo)
            if reach is None:
                continue
            for var, pnode in pattern.variables.items():
                for node in reach[id(pnode)]:
                    binw.add((var, var, node.id, node.id))
                    bound.add(node.id)
            for upper, lower in pattern.ancestor_pairs:
                for pair in _pairs(pattern.paths[lower], len(pattern.paths[upper]) - 1, reach):
                    binw.add((upper, lower, pair[0], pair[1]))
        return Shape(frozenset(binw), tuple(sorted(bound)))

    # -- matching -----------------------------------------------------------------

    def _sat(self, pnode: PatternNode, doc: Document, memo: dict) -> list[Node]:
        """Nodes matching ``pnode``'s test whose subtrees satisfy the pattern below it."""
        found = memo.get(pnode.key)
        if found is not None:
            self.memo_hits += 1
            return found
        self.memo_misses += 1
        kind = ATTRIBUTE if pnode.axis == A.ATTRIBUTE else ELEMENT
        candidates = doc.named(kind, pnode.name)
        for child in pnode.children:
            below = self._sat(child, doc, memo)
            if not below:
                candidates = []
                break
            if child.axis == A.DESCENDANT:
                ids = [n.id for n in below]
                candidates = [n for n in candidates if _has_between(ids, n.id, n.end)]
            else:
                parents = {id(n.parent) for n in below}
                candidates = [n for n in candidates if id(n) in parents]
        memo[pnode.key] = candidates
        return candidates

    def _reach(self, root: PatternNode, doc: Document, memo: dict) -> dict | None:
        """Per pattern node (by id), the nodes that take part in a complete match."""
        reach: dict[int, list[Node]] = {}
        for child in root.children:  # the main path's first step, from the document
            nodes = self._sat(child, doc, memo)
            if child.axis == A.CHILD:
                nodes = [n for n in nodes if n.parent is None]
            if not nodes:
                return None
            reach[id(child)] = nodes
            self._down(child, doc, memo, reach)
        return reach

    def _down(self, pnode: PatternNode, doc: Document, memo: dict, reach: dict) -> None:
        above = reach[id(pnode)]
        above_ids = {id(n) for n in above}
        for child in pnode.children:
            nodes = self._sat(child, doc, memo)
            if child.axis == A.DESCENDANT:
                nodes = [n for n in nodes if _has_ancestor_in(n, above_ids)]
            else:
                nodes = [n for n in nodes if id(n.parent) in above_ids]
            reach[id(child)] = nodes
            self._down(child, doc, memo, reach)


def _has_between(ids: list[int], low: int, high: int) -> bool:
    i = bisect.bisect_right(ids, low)
    return i < len(ids) and ids[i] <= high


def _has_ancestor_in(node: Node, ids: set[int]) -> bool:
    up = node.parent
    while up is not None:
        if id(up) in ids:
            return True
        up = up.parent
    return False


def _ancestor_pairs(pattern: Pattern) -> list[tuple[str, str]]:
    """(upper, lower) for every two variables where upper's node is above lower's."""
    out = []
    for lower, path in pattern.paths.items():
        for upper, pnode in pattern.variables.items():
            if pnode is not path[-1] and any(p is pnode for p in path):
                out.append((upper, lower))
    return out


def _pairs(path: list[PatternNode], top: int, reach: dict) -> set[tuple[int, int]]:
    """(upper node, lower node) pairs joined by a chain of matching nodes along ``path``."""
    out = set()
    for low in reach[id(path[-1])]:
        current = {low}
        for level in range(len(path) - 1, top, -1):
            step, above = path[level], path[level - 1]
            allowed = {id(n): n for n in reach[id(above)]}
            nxt = set()
            for node in current:
                if step.axis == A.DESCENDANT:
                    up = node.parent
                    while up is not None:
                        if id(up) in allowed:
                            nxt.add(up)
                        up = up.parent
                elif node.parent is not None and id(node.parent) in allowed:
                    nxt.add(node.parent)
            current = nxt
        out.update((n.id, low.id) for n in current)
    return out
