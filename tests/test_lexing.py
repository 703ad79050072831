"""The tokenizer base the four languages share (xcep.lexing): one Token shape, tokens
that are spans of the query, errors at the offending character."""

from __future__ import annotations

import itertools

import pytest

from xcep.lexing import END, Token, TokenReader
from xcep.xpush.parser import FilterSyntaxError
from xcep.xpush.parser import _Parser as FilterParser
from xcep.xpush.parser import tokenize as filter_tokens
from xcep.xquery.parser import lex
from xcep.xscl.parser import XsclSyntaxError
from xcep.xscl.parser import _Parser as XsclParser
from xcep.xseq.parser import Parser as XSeqParser
from xcep.xseq.parser import QuerySyntaxError
from xcep.xseq.parser import tokenize as xseq_tokens

QUERIES = {
    "filter": "/person[profile/@income >= 5000 and contains(name, 'Al')]",
    "xscl": "S//book->x1[//title->x3] FOLLOWED BY{x3=x6, 1h} S//blog->x4[//title->x6]",
    "xseq": "return $Z@price from /stocks /$Z (\\ $Y)* where $Y@price < prev($Y)@price",
}


def test_the_list_parsers_read_shared_tokens_that_are_spans_of_the_query():
    for text, tokens in (
        (QUERIES["filter"], filter_tokens(QUERIES["filter"])),
        (QUERIES["xscl"], XsclParser(QUERIES["xscl"], "q").tokens),
        (QUERIES["xseq"], xseq_tokens(QUERIES["xseq"])),
    ):
        assert all(isinstance(t, Token) for t in tokens)
        assert tokens[-1].kind == END and tokens[-1].start == len(text)
        body = tokens[:-1]
        assert len(body) > 10
        assert all(text[t.start : t.end].strip() == text[t.start : t.end] != "" for t in body)
        assert all(a.end <= b.start for a, b in itertools.pairwise(body))
    for parser in (FilterParser, XsclParser, XSeqParser):
        assert issubclass(parser, TokenReader)


def test_xquery_reads_the_same_tokens_one_at_a_time():
    text = "for $x in (1, 2) return $x + 1"
    pos, tokens = 0, []
    while True:
        token = lex(text, pos)
        tokens.append(token)
        if token.kind == END:
            break
        pos = token.end
    assert all(isinstance(t, Token) for t in tokens)
    assert [t.value for t in tokens[:3]] == ["for", "x", "in"]


@pytest.mark.parametrize(
    "make, error, column",
    [
        (lambda: filter_tokens("/a[b = #]"), FilterSyntaxError, 8),
        (lambda: XsclParser("S/a->x ^ S/b", "q"), XsclSyntaxError, 8),
        (lambda: xseq_tokens("/a/b ~"), QuerySyntaxError, 6),
    ],
)
def test_a_character_that_starts_no_token_is_reported_where_it_is(make, error, column):
    with pytest.raises(error) as caught:
        make()
    assert caught.value.column == column and "unexpected character" in str(caught.value)
