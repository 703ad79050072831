"""Schema-aware rewrites of an XSeq query (seed §4.2), each a small pure function
from a ``Query`` to an equivalent ``Query`` on the documents the schema describes.

- **Opt-1, the inferable prefix** (``prefix``). The seed's engine starts a
  run at every element, so it gains by *cutting* a prefix the schema implies
  (``//issue/articles/authors/author`` → ``//author``). This engine is the
  other way round: a child step lets its runs skip whole subtrees, while a
  ``//`` step watches every element below it. Measured on XMark, cutting made
  queries 1.3-2× slower and spelling the prefix out made them 1.3-2× faster.
  So Opt-1 here uses the same inference in the direction that pays: a path
  that starts with ``//n`` becomes the one chain of ancestors the schema
  allows for ``n`` (``//increase`` → ``/site/open_auctions/open_auction/bidder/increase``,
  ``//item`` → ``/site/regions/*/item``: a level with several possible
  elements becomes ``*``), when every ``n`` sits at the same depth.
- **Opt-2, self-loops the schema rules out** (``loops``). A ``//n`` step after a
  step on element ``c`` (in the path or in a predicate: ``book[.//year = 2000]``)
  is the seed's E state with a self-loop, which watches every element below
  ``c``. When every ``n`` below a ``c`` sits at the same depth, the loop can only
  run a fixed number of times: it is unrolled into child steps
  (``open_auction//increase`` → ``open_auction/bidder/increase``), and a run skips
  the subtrees that cannot hold an ``n``. (The seed's A states do not exist here:
  attributes are read with their open tag.)
- **Opt-3, the where clause** (``where``). A conjunct ``tag($X) = 'n'`` becomes the
  node test of ``$X``'s step (a run reaches only ``n`` elements instead of every
  element, checking later), and a conjunct that reads only ``$X``'s own subtree
  (``$X@price > 100``, ``$X/note or $X@sold``) becomes a predicate of the step.
  These need no schema.

``optimize(query, schema, level)``: ``none``, one of them, or ``all``. The schema is
a ``Dtd`` or a ``LearnedSchema`` (``xcep.schema``); answers are the same on every
document the schema describes (for a learned one: every document like the sample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from xcep.xseq import ast as A

_DEEPEST = 64  # longer chains are not worth spelling out


class Rule(NamedTuple):
    """One rewrite: its level's name, whether it needs a schema, the pure function
    ``(query, schema) -> query``."""

    level: str
    needs_schema: bool
    rewrite: Callable


def optimize(query: A.Query, schema, level: str = "all") -> A.Query:
    """``query`` rewritten by the rules of ``level`` (``RULES``, in their order; the
    schema-aware ones only when ``schema`` is given)."""
    if level not in LEVELS:
        raise ValueError(f"optimization level must be one of {', '.join(LEVELS)}, not {level!r}")
    for rule in RULES:
        if level in (rule.level, "all") and (schema is not None or not rule.needs_schema):
            query = rule.rewrite(query, schema)
    return query


def explicit_prefix(query: A.Query, schema) -> A.Query:
    """Opt-1: ``//n…`` as the one ancestor chain of ``n`` the schema allows."""
    items = list(query.path.items) if isinstance(query.path, A.Seq) else [query.path]
    first = items[0]
    if not (
        isinstance(first, A.Step)
        and first.axis == A.DESCENDANT
        and first.kind == A.ELEMENT
        and first.name != A.WILDCARD
    ):
        return query
    chain = ancestor_chain(first.name, schema.parents)
    if chain is None:
        return query
    steps = [
        A.Step(A.CHILD, A.ELEMENT, next(iter(level)) if len(level) == 1 else A.WILDCARD)
        for level in chain
    ]
    path = A.Seq((*steps, replace(first, axis=A.CHILD), *items[1:]))
    rewritten = replace(query, path=path)
    if query.partition is not None:  # its path is a prefix of the from-path: the same rewrite
        partition_path, *rest = query.partition  # (path, attribute, position)
        partition = replace(query, path=partition_path, partition=None)
        new_path = explicit_prefix(partition, schema).path
        rewritten = replace(rewritten, partition=(new_path, *rest))
    return rewritten


def ancestor_chain(name: str, parents) -> list[set[str]] | None:
    """The possible elements at each level above ``name``, root first, when every
    ``name`` has the same depth (each level's elements all have parents, the top
    level's none); ``None`` otherwise (recursion, several depths, undeclared)."""
    levels: list[set[str]] = []
    current = {name}
    for _ in range(_DEEPEST):
        above = [parents(n) for n in current]
        if not any(above):  # the roots: ``name`` sits under exactly these levels
            return levels[::-1]
        if not all(above):
            return None  # some are roots, some are not: two depths
        current = set().union(*above)
        levels.append(current)
    return None


def unrolled_descendants(query: A.Query, schema) -> A.Query:
    """Opt-2: ``c//n`` as ``c/l1/…/n`` when every ``n`` below a ``c`` has the same depth."""
    path = _unroll(query.path, None, schema)
    return query if path == query.path else replace(query, path=path)


def _unroll(item, context: str | None, schema):
    """``item`` rewritten, its first step read from an element named ``context``."""
    if isinstance(item, A.Step):
        return _unroll_step(item, context, schema)
    if isinstance(item, A.Seq):
        items = []
        for part in item.items:
            new = _unroll(part, context, schema)
            items += new.items if isinstance(new, A.Seq) and not isinstance(part, A.Seq) else [new]
            context = _name_after(part, context)
        return A.Seq(tuple(items))
    if isinstance(item, A.Union | A.Intersect):
        return replace(item, items=tuple(_unroll(part, context, schema) for part in item.items))
    if isinstance(item, A.Star):  # an iteration starts where the last one ended: unknown
        return replace(item, body=_unroll(item.body, None, schema))
    return item


def _name_after(item, context: str | None) -> str | None:
    """The element name a run stands on after ``item`` (None: several or unknown)."""
    if isinstance(item, A.Step):
        if item.axis == A.SELF:
            return context
        if item.kind == A.ELEMENT and item.axis != A.ATTRIBUTE and item.name != A.WILDCARD:
            return item.name
        return None
    if isinstance(item, A.Seq):
        for part in item.items:
            context = _name_after(part, context)
        return context
    return None


def _unroll_step(step: A.Step, context: str | None, schema):
    preds = tuple(_unroll_predicate(p, _name_after(step, context), schema) for p in step.preds)
    step = replace(step, preds=preds) if preds != step.preds else step
    if not (
        context is not None
        and step.axis == A.DESCENDANT
        and step.kind == A.ELEMENT
        and step.name != A.WILDCARD
    ):
        return step
    chain = chain_below(context, step.name, schema)
    if chain is None:
        return step
    steps = [A.Step(A.CHILD, A.ELEMENT, level) for level in chain]
    return A.Seq((*steps, replace(step, axis=A.CHILD)))


def _unroll_predicate(cond, context: str | None, schema):
    """Predicates read relative paths from the step's node: unroll them too."""
    if context is None:
        return cond

    def unrolled(node):
        if isinstance(node, A.RelPath):
            return replace(node, path=_unroll(node.path, context, schema))
        return None

    return A.map_condition(cond, unrolled)


def chain_below(context: str, name: str, schema) -> list[str] | None:
    """The element names (``*`` for a level with several) between a ``context`` element
    and the ``name`` elements below it, when all of them sit at one depth below it;
    ``None`` otherwise (two depths, recursion, or no ``name`` below ``context``)."""
    levels: list[set[str]] = []  # levels[d]: the elements with a ``name`` d + 1 levels below
    current = {name}
    for _ in range(_DEEPEST):
        current = set().union(*(schema.parents(n) for n in current))
        if not current:
            break
        levels.append(current)
    else:
        return None  # recursion: no end to the ancestors
    depths = [d for d, level in enumerate(levels) if context in level]
    if len(depths) != 1:
        return None
    chain, above = [], {context}
    for level in reversed(levels[: depths[0]]):  # down from the context
        above = {c for a in above for c in schema.children(a)} & level
        chain.append(next(iter(above)) if len(above) == 1 else A.WILDCARD)
    return chain


def where_into_steps(query: A.Query, schema=None) -> A.Query:
    """Opt-3: where-clause conjuncts about one variable's own node become its step's
    node test (``tag($X) = 'n'``; ``tag($X) = 'a' or tag($X) = 'b'``: a union of the
    step with each name) or predicates (conditions that read only ``$X``'s subtree)."""
    if query.where is None:
        return query
    steps: dict = {}  # var -> its one step on every path of a match (None: not so)
    for node in A.walk(query.path):
        if isinstance(node, A.Step) and node.var:
            steps[node.var] = None if node.var in steps else node
    for node in A.walk(query.path):  # a branch's variable may be unbound in a match
        if isinstance(node, A.Union | A.Intersect):
            for inner in A.walk(node):
                if isinstance(inner, A.Step) and inner.var:
                    steps[inner.var] = None
    if query.partition is not None:  # the steps up to the partitioned one keep their form
        items = query.path.items if isinstance(query.path, A.Seq) else (query.path,)
        depth = len(query.partition[0].items) if isinstance(query.partition[0], A.Seq) else 1
        for item in items[:depth]:
            for inner in A.walk(item):
                if isinstance(inner, A.Step) and inner.var:
                    steps[inner.var] = None
    kept, moved = [], {}  # var -> (names or None for any, predicates)
    for conjunct in A.conjuncts(query.where):
        var, names, pred = _about_one_step(conjunct)
        step = steps.get(var)
        old_names, preds = moved.get(var, (None, ()))
        if names is not None and step is not None:
            if step.name != A.WILDCARD:
                names &= {step.name}
            if old_names is not None:
                names &= old_names
        if step is None or names == set():  # no name left: keep it, the answer is empty
            kept.append(conjunct)
            continue
        moved[var] = (names or old_names, (*preds, pred) if pred is not None else preds)
    if not moved:
        return query

    def rewrite(node):
        if isinstance(node, A.Step):
            if node.var in moved:
                names, preds = moved[node.var]
                step = replace(node, preds=(*node.preds, *preds))
                if names is None:
                    return step
                steps = tuple(replace(step, name=name) for name in sorted(names))
                return steps[0] if len(steps) == 1 else A.Union(steps, node.pos)
            return node
        if isinstance(node, A.Seq | A.Union | A.Intersect):
            return replace(node, items=tuple(rewrite(i) for i in node.items))
        if isinstance(node, A.Star):
            return replace(node, body=rewrite(node.body))
        return node

    where = None
    for conjunct in kept:
        where = conjunct if where is None else A.And(where, conjunct)
    return replace(query, path=rewrite(query.path), where=where)


def _tag_names(cond) -> tuple:
    """(variable, {names}) for ``tag($X) = 'n'`` or a disjunction of such on one
    variable; (None, None) else."""
    if isinstance(cond, A.Or):
        left, right = _tag_names(cond.left), _tag_names(cond.right)
        if left[0] is not None and left[0] == right[0]:
            return left[0], left[1] | right[1]
        return None, None
    if isinstance(cond, A.Compare) and cond.op == "=":
        for tag, const in ((cond.left, cond.right), (cond.right, cond.left)):
            if (
                isinstance(tag, A.Tag)
                and tag.ref.func is None
                and tag.ref.path is None
                and isinstance(const, A.Const)
                and isinstance(const.value, str)
            ):
                return tag.ref.var, {const.value}
    return None, None


_LOCAL = A.Compare | A.Arith | A.Const | A.VarRef | A.Step | A.Seq | A.And | A.Or | A.Not
_BELOW = (A.SELF, A.CHILD, A.ATTRIBUTE, A.DESCENDANT, A.DESCENDANT_OR_SELF)


def _about_one_step(cond) -> tuple:
    """(variable, {element names}, None) for ``tag($X) = 'n'`` (or a disjunction of
    them); (variable, None, predicate) for a condition that reads only ``$X``'s own
    subtree (``$X@a > 3``, ``$X/b or not($X/c/text() = 'x')``, ``$X = 't'``); (None,
    None, None) else."""
    var, names = _tag_names(cond)
    if var is not None:
        return var, names, None
    refs = [n for n in A.walk(cond) if isinstance(n, A.VarRef)]
    if not refs:
        return None, None, None
    var = refs[0].var
    for node in A.walk(cond):
        if not isinstance(node, _LOCAL):
            return None, None, None
        if isinstance(node, A.VarRef) and (node.var != var or node.func is not None):
            return None, None, None
        if isinstance(node, A.Step) and (node.axis not in _BELOW or node.var):
            return None, None, None

    def relative(node):
        if not isinstance(node, A.VarRef):
            return None
        path = node.path if node.path is not None else A.Step(A.SELF, A.NODE, A.WILDCARD)
        return A.RelPath(path, node.pos)

    return var, None, A.map_condition(cond, relative)


RULES = (  # applied in this order
    Rule("where", False, where_into_steps),
    Rule("prefix", True, explicit_prefix),
    Rule("loops", True, unrolled_descendants),
)
LEVELS = ("none", "prefix", "loops", "where", "all")  # (the command line's order)
