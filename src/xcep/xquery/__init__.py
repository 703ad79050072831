"""XQuery with FLWOR, the XQuery 3.1 window clause and the seed's pattern clause.

>>> from xcep import xquery
>>> q = xquery.compile("for $e in //event where $e/@uid = '5' return string($e/@operation)")
>>> q.evaluate("<log><event uid='5' operation='Login'/></log>")
['Login']

``compile`` parses once; ``evaluate`` takes an XML string, an ElementTree
document, or an ``EventStream`` / list of inputs, and returns the result
sequence (elementpath nodes and Python atomic values); ``run`` yields it
serialized, one line per item.  Errors are ``XQueryError`` with the W3C
error code and the query line and column.
"""

from __future__ import annotations

import io
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from functools import cached_property

from elementpath.tree_builders import get_node_tree

from xcep.collector import collector_paused
from xcep.events import EventStream, Input
from xcep.xquery import ast, streaming
from xcep.xquery import ast as A
from xcep.xquery.documents import documents_from_batches
from xcep.xquery.errors import XQueryError
from xcep.xquery.evaluate import Evaluator
from xcep.xquery.parser import parse
from xcep.xquery.streaming import StreamPlan, StreamState
from xcep.xquery.values import as_value, serialize

__all__ = ["XQuery", "XQueryError", "ast", "compile", "parse"]


class XQuery:
    """A compiled query: the syntax tree of its text, ready to run on any input."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.tree = deep(parse, text)
        except RecursionError:
            raise _too_deep("the query") from None

    def evaluate(self, source=None, variables: dict | None = None) -> list:
        """The result sequence over ``source``.

        ``source``: XML text, an ``ElementTree``, an ``EventStream``, a list of
        paths/inputs, or ``None`` (no context item).  One document is the
        context item and ``$input``; several are ``$input`` in stream order and
        there is no context item.
        """
        with collector_paused():  # building trees: nothing to collect, every object new
            docs = _documents(source, self.namespaces)
            context = docs[0] if len(docs) == 1 else None
            evaluator = Evaluator(self.text, context)
            if context is not None:
                nodes = [evaluator.ctx.root]
            else:
                nodes = [get_node_tree(d) for d in docs]
        env = {"input": as_value(nodes)}
        env.update(variables or {})
        try:
            return deep(evaluator.eval, self.tree, env)
        except RecursionError:
            raise _too_deep("evaluating the query") from None

    def explain(self) -> str:
        """How the query runs (over a stream, or on whole documents and why), then the
        parsed query: clauses, the XPath handed to elementpath, each pattern's NFA."""
        from xcep.xquery.explain import explain

        plan, why = self.stream_plan
        how = plan.describe() if plan else f"whole documents: {why}"
        return how + "\n" + explain(self.tree)

    @cached_property
    def namespaces(self) -> dict | None:
        """Namespace URI → prefix when the prolog declares namespaces (then documents are
        read with theirs, and a result's names are written with these prefixes, then
        the documents'), else None: names as spelled, as everywhere in xcep."""
        tree = self.tree
        return tree.runtime.get("prefixes") if isinstance(tree, A.Prolog) else None

    @cached_property
    def stream_plan(self) -> tuple[StreamPlan | None, str]:
        """(how it runs over a stream, "") or (None, why it needs whole documents)."""
        return streaming.plan(self.tree)

    def run(self, source=None, variables: dict | None = None) -> Iterator[str]:
        """The result sequence serialized, one item per line: as windows close when the
        query can run over a stream (``stream_plan``) and ``source`` is one (an
        ``EventStream`` or a list of inputs), else after reading whole documents."""
        plan = self.stream_plan[0]
        if plan is not None and isinstance(source, EventStream | list) and not _trees(source):
            stream = source if isinstance(source, EventStream) else EventStream(source)
            items = self.stream(plan, stream, variables)
        else:
            items = self.evaluate(source, variables)
        for item in items:
            yield serialize(item, self.namespaces)

    def stream(
        self, plan: StreamPlan, stream, variables: dict | None, state: StreamState | None = None
    ) -> Iterator:
        """The result items of a streamable query over ``stream`` (an ``EventStream`` or
        its batches), window by window; ``state``: where it stands (a saved run's, or a
        fresh one the caller keeps to save it between two batches)."""
        evaluator = Evaluator(self.text, None)
        env = dict(variables or {})
        if plan.prolog is not None:
            env = evaluator.prolog(plan.prolog, env)
        flwor = plan.flwor
        state = state or StreamState(plan)
        first = flwor.clauses[0]
        opening = evaluator.window if isinstance(first, A.Window) else evaluator.pattern
        windows = opening(first, env, state.start(_batches(stream)))
        result = flwor.result
        try:
            for t in windows:
                for u in evaluator.tuples(flwor.clauses[1:], t):
                    if isinstance(result, A.Element):  # written as it is built: no node
                        yield evaluator.build(result, u)
                    else:
                        yield from evaluator.eval(result, u)
        except RecursionError:
            raise _too_deep("evaluating the query") from None


DEEP_STACK = 1 << 30  # bytes of stack (reserved, not used) for parsing and evaluating
DEEP_RECURSION = 250_000  # Python frames allowed there


def deep(function, *args):
    """``function(*args)`` in a thread with a large stack and a high recursion limit:
    elementpath parses and evaluates by recursion, so a long sequence literal or a chain
    of 100,000s of operators that the specification allows runs instead of failing."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append((False, exc))

    size, limit = threading.stack_size(), sys.getrecursionlimit()
    threading.stack_size(DEEP_STACK)
    sys.setrecursionlimit(max(limit, DEEP_RECURSION))
    try:
        worker = threading.Thread(target=run, name="xquery", daemon=True)  # Ctrl-C ends it
        worker.start()
        worker.join()
    finally:
        threading.stack_size(size)
        sys.setrecursionlimit(limit)
    done, value = outcome[0]
    if not done:
        raise value
    return value


def _too_deep(what: str) -> XQueryError:
    """Python's recursion limit, reached by a deeply nested query (``1 + 1 + ...`` of
    100,000s of terms): an implementation limit (XPath 3.1's XPDY0130), in one line."""
    return XQueryError(f"{what} nests too deep for this implementation", "XPDY0130")


def compile(text: str) -> XQuery:
    """Parse ``text`` (an XQuery main module body) into an ``XQuery``."""
    return XQuery(text)


def _batches(stream):
    return stream.batches() if isinstance(stream, EventStream) else stream


def _trees(source) -> bool:
    """Is ``source`` a list of ElementTree documents (already built)?"""
    return isinstance(source, list) and bool(source) and isinstance(source[0], ET.ElementTree)


def _documents(source, prefixes: dict | None = None) -> list[ET.ElementTree]:
    """The documents of ``source``, with their namespaces given ``prefixes``
    (``XQuery.namespaces``: then an ``EventStream`` given must report them)."""
    if source is None:
        return []
    if isinstance(source, ET.ElementTree):
        return [source]
    if isinstance(source, list) and all(isinstance(d, ET.ElementTree) for d in source):
        return source
    if isinstance(source, (str, bytes)):
        data = source.encode() if isinstance(source, str) else source
        source = [Input("<string>", file=io.BytesIO(data), format="auto")]
    if isinstance(source, EventStream) and prefixes is not None and not source.options.namespaces:
        raise ValueError(
            "a query that declares namespaces reads an EventStream made with namespaces=True"
        )
    if not isinstance(source, EventStream):
        source = EventStream(source, namespaces=prefixes is not None)
    return list(documents_from_batches(source.batches(), prefixes))
