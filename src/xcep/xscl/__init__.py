"""XSCL / MMQJP: inter-document join queries with time windows, shared by query templates.

Seed: Hong, Koch, Demers, Gehrke, Riedewald, White, *Massively multi-query
join processing in publish/subscribe systems*, SIGMOD 2007.

>>> from xcep.xscl import XsclEngine, parse_document
>>> engine = XsclEngine()
>>> text = "S//book->x1[//title->x3] FOLLOWED BY{x3=x6, 1h} S//blog->x4[//title->x6]"
>>> query = engine.add("Q1", text)
>>> book, blog = "<book><title>RSS</title></book>", "<blog><title>RSS</title></blog>"
>>> items = [("S", parse_document(book), 0.0), ("S", parse_document(blog), 60.0)]
>>> [(result.query, result.docs) for result in engine.run(items)]
[('Q1', [0, 1])]
"""

from xcep.xscl.engine import GroupedResult, Match, Result, XsclEngine, parse_document
from xcep.xscl.parser import XsclSyntaxError, parse_query
from xcep.xscl.queries import TimestampError, read_queries, timestamp_reader

__all__ = [
    "GroupedResult",
    "Match",
    "Result",
    "TimestampError",
    "XsclEngine",
    "XsclSyntaxError",
    "parse_document",
    "parse_query",
    "read_queries",
    "timestamp_reader",
]
