"""The Sequential baseline of the seed's §6: every query evaluated on its own.

For each new document and each query, each earlier document in the query's
window is tried: every complete match of one block in one document (every
assignment of its pattern nodes, found by brute force) is paired with every
complete match of the other block in the other, and the pair is kept when
all value joins hold on string values. Slow and obviously correct: the
tests compare ``XsclEngine`` with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from xcep.xscl import ast as A
from xcep.xscl.documents import ATTRIBUTE, ELEMENT, Document, Node
from xcep.xscl.engine import Match, Result, parse_document
from xcep.xscl.parser import parse_query


class SequentialEngine:
    def __init__(self) -> None:
        self.queries: list[A.Query] = []
        self.history: list[tuple[int, str, Document, float]] = []

    def add(self, query_id: str, text: str) -> None:
        query = parse_query(text, query_id)
        for n, block in enumerate(query.blocks(), 1):
            if block.output.var is None:
                block.output.var = f"_out{n}"
        self.queries.append(query)

    def remove(self, query_id: str) -> None:
        self.queries = [q for q in self.queries if q.id != query_id]

    def run(self, documents: Iterable[tuple[str, Document, float]]) -> Iterator[Result]:
        queue = list(documents)
        while queue:
            stream, doc, ts = queue.pop(0)
            docid = len(self.history)
            self.history.append((docid, stream, doc, ts))
            results = []
            for order, query in enumerate(self.queries):
                found = self._query(query, docid)
                results += [(r, order) for r in found]
            results.sort(
                key=lambda pair: (max(pair[0].docs), pair[1], min(pair[0].docs), pair[0].nodes)
            )
            published = []
            for result, order in results:
                query = self.queries[order]
                if query.publish:
                    when = max(self.history[d][3] for d in result.docs)
                    published.append((query.publish, parse_document(result.output), when))
                yield result
            queue = published + queue

    def _query(self, query: A.Query, docid: int) -> list[Result]:
        _, stream, doc, ts = self.history[docid]
        if query.right is None:
            if query.left.stream != stream:
                return []
            var = (query.select or [query.left.output.var])[0]
            nodes = sorted({m[var].id for m in matches(query.left, doc)})
            return [Result(query.id, Match([docid], [n], doc.nodes[n].serialize())) for n in nodes]
        out = {}
        sides = [(query.left, query.right, False)]
        if query.op == A.JOIN:
            sides.append((query.right, query.left, True))
        for earlier_block, later_block, swapped in sides:
            if later_block.stream != stream:
                continue
            later = matches(later_block, doc)
            for prev_id, prev_stream, prev_doc, prev_ts in self.history[:docid]:
                if prev_stream != earlier_block.stream:
                    continue
                if query.op == A.FOLLOWED_BY and not (0 < ts - prev_ts <= query.window):
                    continue
                if query.op == A.JOIN and not abs(ts - prev_ts) <= query.window:
                    continue
                for a in matches(earlier_block, prev_doc):
                    for b in later:
                        left, right = (b, a) if swapped else (a, b)
                        if all(
                            left[e.left.var].string_value == right[e.right.var].string_value
                            for e in query.predicates
                        ):
                            docs = [docid, prev_id] if swapped else [prev_id, docid]
                            result = self._result(query, docs, left, right)
                            out.setdefault((tuple(result.docs), tuple(result.nodes)), result)
        return list(out.values())

    def _result(self, query: A.Query, docs: list[int], left: dict, right: dict) -> Result:
        terms = query.select or [query.left.output.var, query.right.output.var]
        picked = [left[v] if v in left else right[v] for v in terms]
        body = "".join(node.serialize() for node in picked)
        return Result(query.id, Match(docs, [n.id for n in picked], f"<result>{body}</result>"))


def matches(block: A.Block, doc: Document) -> list[dict[str, Node]]:
    """Every complete match of the block: variable -> node (brute force)."""
    out = []
    for assignment in _match_path(block.steps, [doc.root], doc, from_document=True):
        out.append(assignment)
    return out


def _match_path(steps: list[A.Step], context: list[Node], doc: Document, from_document=False):
    """Assignments for a path of steps starting from any node of ``context``."""
    if not steps:
        yield {}
        return
    step, rest = steps[0], steps[1:]
    seen = set()
    for start in context:
        for node in _axis(step, start, doc, from_document):
            if id(node) in seen and from_document:
                continue
            seen.add(id(node))
            for own in _match_predicates(step, node, doc):
                for tail in _match_path(rest, [node], doc):
                    yield {**own, **tail}


def _match_predicates(step: A.Step, node: Node, doc: Document):
    bindings = [{step.var: node} if step.var else {}]
    for predicate in step.predicates:
        options = list(_match_path(predicate, [node], doc))
        if not options:
            return
        bindings = [{**b, **o} for b in bindings for o in options]
    yield from bindings


def _axis(step: A.Step, node: Node, doc: Document, from_document: bool) -> list[Node]:
    kind = ATTRIBUTE if step.axis == A.ATTRIBUTE else ELEMENT
    if from_document:  # the document node: its child is the root, its descendants all
        pool = [doc.root] if step.axis == A.CHILD else [n for n in doc.nodes if n.kind == ELEMENT]
    elif step.axis == A.CHILD:
        pool = node.children
    elif step.axis == A.ATTRIBUTE:
        pool = node.attrs
    else:
        pool = [n for n in doc.nodes if node.id < n.id <= node.end and n.kind == ELEMENT]
    return [n for n in pool if n.kind == kind and (step.name == "*" or n.name == step.name)]
