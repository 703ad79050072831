"""XSeq: XPath with Kleene-* and sequence patterns, compiled to visibly pushdown automata.

Seed: Mozafari, Zeng, Zaniolo, SIGMOD 2012. ``XSeqEngine(query).run(batches)``
evaluates a query in one pass over the nested-word event stream of
``xcep.events``; the slow tree-walking reference evaluator is
``xcep.testing.xseq_reference``. The language and its semantics are in docs/xseq.md.
"""

from xcep.xseq.engine import XSeqEngine, XSeqMultiEngine, compile_query
from xcep.xseq.matches import SELECTIONS
from xcep.xseq.parser import QuerySyntaxError, parse_query
from xcep.xseq.semantics import analyze
from xcep.xseq.vpa import compile_to_vpa

__all__ = [
    "SELECTIONS",
    "QuerySyntaxError",
    "XSeqEngine",
    "XSeqMultiEngine",
    "analyze",
    "compile_query",
    "compile_to_vpa",
    "parse_query",
]
