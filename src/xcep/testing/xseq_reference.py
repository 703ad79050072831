"""The XSeq reference evaluator: whole documents in memory, paths walked on the tree.

Slow and obviously correct; the tests compare the streaming engine with it.
It follows docs/xseq.md literally: a path maps a (node, binding) pair to the
pairs it can reach; a Kleene-* is the union of 0, 1, 2, … iterations, each
checked by the group's per-iteration conditions; matches are (end node,
binding) pairs, checked by the per-match conditions, ordered by end node
then binding; partitions are virtual documents whose root has the
partitioned elements as children.
"""

from __future__ import annotations

from xcep.events import Event
from xcep.xseq import ast as A
from xcep.xseq.dom import ROOT, Node, axis_nodes, build_documents, clone, test_matches
from xcep.xseq.evaluate import holds, select
from xcep.xseq.matches import (
    Aggregator,
    Binding,
    conditions_hold,
    match_start,
    output_row,
    select_matches,
)
from xcep.xseq.semantics import Analysis, analyze


def evaluate(
    query, events: list[Event], selection: str = "all", values_only: bool = False
) -> list[list]:
    """The output rows of ``query`` (text or ``Analysis``) over a list of events."""
    analysis = query if isinstance(query, Analysis) else analyze(query)
    documents = build_documents(events)
    contexts = []  # (partition key, context node)
    if analysis.partition is None:
        contexts = [(None, doc) for doc in documents]
    else:
        element_path, attribute = analysis.partition
        groups: dict[str, Node] = {}
        members = [
            (node, node.attribute(attribute))
            for doc in documents
            for node in select(element_path, doc)
            if node.attribute(attribute) is not None
        ]
        member_ids = {id(node) for node, _ in members}
        for node, key in members:
            if key not in groups:
                groups[key] = Node(ROOT, None, -1, -1)
            groups[key].children.append(clone(node, groups[key], member_ids))
        contexts = list(groups.items())
    found = []  # (end key, context index, binding key, start, end, binding)
    for position, (key, context) in enumerate(contexts):
        start = Binding.empty(analysis)
        matches = {}
        for end, binding in walk(analysis, analysis.path, context, start):
            matches.setdefault((id(end), binding.match_key()), (end, binding))
        kept = [
            (match_start(b, e), e.key, (e.key, b.sort_key()), (key, position, e, b))
            for e, b in matches.values()
            if conditions_hold(analysis, analysis.per_match, b, iteration=False)
        ]
        kept.sort(key=lambda m: m[2])
        for _, _, order, item in select_matches(kept, selection):
            found.append(((order[0], item[1], order[1]), item))
    found.sort(key=lambda f: f[0])
    if analysis.mode in ("nodes", "rows"):
        return [output_row(analysis, b, e, values_only) for _, (_, _, e, b) in found]
    aggregator = Aggregator(analysis, values_only)
    ordered = sorted(found, key=lambda f: f[1][1])  # partitions in order of first appearance
    for _, (key, _, _, binding) in ordered:
        aggregator.add(key, binding)
    return aggregator.rows()


def walk(analysis: Analysis, path, node: Node, binding: Binding) -> list[tuple[Node, Binding]]:
    """The (node, binding) pairs ``path`` reaches from ``node`` with ``binding``."""
    if isinstance(path, A.Step):
        out = []
        for candidate in axis_nodes(node, path.axis, path.kind):
            if not test_matches(path, candidate):
                continue
            if not all(holds(pred, candidate) for pred in path.preds):
                continue
            bound = binding
            if path.var:
                index = analysis.index[path.var]
                bound = binding.bind(index, candidate, path.var in analysis.kleene)
            out.append((candidate, bound))
        return out
    if isinstance(path, A.Seq):
        pairs = [(node, binding)]
        for item in path.items:
            pairs = _unique([p for n, b in pairs for p in walk(analysis, item, n, b)])
        return pairs
    if isinstance(path, A.Union):
        return _unique([p for item in path.items for p in walk(analysis, item, node, binding)])
    if isinstance(path, A.Intersect):
        sides = [walk(analysis, item, node, binding) for item in path.items]
        common = set.intersection(*({id(n) for n, _ in side} for side in sides))
        return _unique([(n, b) for n, b in sides[0] if id(n) in common])
    if isinstance(path, A.Star):
        entered = binding.enter(path.group, node)
        conjuncts = analysis.iteration.get(path.group, [])
        result = frontier = [(node, entered)]
        seen = {(id(node), entered)}
        while frontier:  # until an iteration reaches nothing new (a body may come back: /a/..)
            frontier = [
                (n, b)
                for n, b in _unique(
                    [
                        (n, b)
                        for here, start in frontier
                        for n, b in walk(analysis, path.body, here, start)
                        if conditions_hold(analysis, conjuncts, b, iteration=True)
                    ]
                )
                if (id(n), b) not in seen
            ]
            seen.update((id(n), b) for n, b in frontier)
            result = result + frontier
        return _unique(result)
    raise TypeError(f"not a path: {path!r}")


def _unique(pairs: list) -> list:
    seen = {}
    for node, binding in pairs:
        seen.setdefault((id(node), binding), (node, binding))
    return list(seen.values())
