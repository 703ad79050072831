"""A YFilter-style baseline: shared path NFA, no predicate sharing.

The structural part of every filter (its main path, predicates removed) goes
into one shared NFA, run over the events with a stack of state sets and a
lazily built DFA cache (as YFilter and the lazy DFA of Green et al. do). A
filter whose path reaches its end in a document is a *candidate*; each
candidate is then checked on its own, with lxml evaluating the whole filter
on that document — predicates are not shared between filters.
"""

from __future__ import annotations

from lxml import etree

from xcep.events import CLOSE, OPEN, EventStream
from xcep.xpush.ast import DESCENDANT, ELEMENT, to_text
from xcep.xpush.workload import compile_filter


class SharedPathNFA:
    def __init__(self, filters: dict) -> None:
        self.children: list[dict[str, int]] = [{}]  # NFA state → label → state
        self.loops: list[bool] = [False]  # state has a //-self-loop on every label
        self.accepting: dict[int, list] = {}
        self.xpaths: dict = {}  # id → filter text for lxml (existential functions)
        for fid, text in filters.items():
            path = compile_filter(text, fid)
            self.xpaths[fid] = etree.XPath(f"boolean({to_text(path, existential=True)})")
            state = 0
            structural = all(s.test == ELEMENT for s in path.steps)
            for step in path.steps if structural else ():
                if step.axis == DESCENDANT:
                    state = self._edge(state, "//")
                state = self._edge(state, step.name)
            # filters whose main path is not elements only are always candidates
            self.accepting.setdefault(state if structural else 0, []).append(fid)
        self.dfa: dict[tuple[frozenset, str], frozenset] = {}

    def _edge(self, state: int, label: str) -> int:
        nxt = self.children[state].get(label)
        if nxt is None:
            nxt = len(self.children)
            self.children.append({})
            self.loops.append(label == "//")
            self.children[state][label] = nxt
        return nxt

    def _closure(self, states) -> frozenset:
        out = set(states)
        for s in list(out):
            loop = self.children[s].get("//")
            if loop is not None:
                out.add(loop)
        return frozenset(out)

    def step(self, states: frozenset, label: str) -> frozenset:
        key = (states, label)
        found = self.dfa.get(key)
        if found is None:
            nxt = set()
            for s in states:
                kids = self.children[s]
                for target in (kids.get(label), kids.get("*")):
                    if target is not None:
                        nxt.add(target)
                if self.loops[s]:
                    nxt.add(s)
            found = self.dfa[key] = self._closure(nxt)
        return found

    def run(self, data: bytes) -> list[list]:
        """Matching filter ids per document (documents as one multi-document stream)."""
        stream = EventStream([_named(data)], keep_whitespace=True)
        documents = _split(data)
        answers: list[list] = []
        start = self._closure({0})
        always = self.accepting.get(0, [])
        for batch in stream.batches():
            names = batch.symbols.names
            for doc, kind, name, depth in zip(
                batch.docs, batch.kinds, batch.names, batch.depths, strict=True
            ):
                if kind == OPEN:
                    if depth == 1:
                        stack = [start]
                        candidates = set(always)
                    states = self.step(stack[-1], names[name])
                    stack.append(states)
                    for s in states:
                        candidates.update(self.accepting.get(s, ()))
                elif kind == CLOSE:
                    stack.pop()
                    if depth == 1:
                        tree = etree.ElementTree(etree.fromstring(documents[doc]))
                        answers.append(sorted(f for f in candidates if self.xpaths[f](tree)))
        return answers


def _named(data: bytes):
    import io

    return io.BytesIO(data)


def _split(data: bytes) -> list[bytes]:
    parts = data.split(b'<?xml version="1.0"?>\n')
    return [p for p in parts if p.strip()]
