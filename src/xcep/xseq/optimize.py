"""Schema-aware rewrites of an XSeq query (seed §4.2), each a small pure function
from a ``Query`` to an equivalent ``Query`` on the documents the schema describes.

Built so far: **Opt-1, the inferable prefix.** The seed's engine starts a
run at every element, so it gains by *cutting* a prefix the schema implies
(``//issue/articles/authors/author`` → ``//author``). This engine is the
other way round: a child step lets its runs skip whole subtrees, while a
``//`` step watches every element below it. Measured on XMark, cutting made
queries 1.3-2× slower and spelling the prefix out made them 1.3-2× faster.
So Opt-1 here uses the same inference in the direction that pays: a path
that starts with ``//n`` becomes the one chain of ancestors the schema
allows for ``n`` (``//increase`` → ``/site/open_auctions/open_auction/bidder/increase``,
``//item`` → ``/site/regions/*/item``: a level with several possible
elements becomes ``*``). Only when every ``n`` sits at the same depth under
the same chain (no recursion, no choice of depth) is the path rewritten.

The schema is a ``Dtd`` or a ``LearnedSchema`` (``xcep.schema``); answers are
the same on every document the schema describes (for a learned one: every
document like the sample). Opt-2 (loops) and Opt-3 (where) are not built yet.
"""

from __future__ import annotations

from dataclasses import replace

from xcep.xseq import ast as A

LEVELS = ("none", "prefix")
_DEEPEST = 64  # longer chains are not worth spelling out


def optimize(query: A.Query, schema, level: str = "prefix") -> A.Query:
    """``query`` rewritten by the optimizations of ``level``."""
    if level not in LEVELS:
        raise ValueError(f"optimization level must be one of {', '.join(LEVELS)}, not {level!r}")
    if level == "none" or schema is None:
        return query
    return explicit_prefix(query, schema)


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
