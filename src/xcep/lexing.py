"""The tokenizer base the four query languages share: a ``Token`` (kind, value, start and
end offsets in the query), ``scan`` (a query's tokens by one regular expression of named
groups), and ``TokenReader`` (the helpers every parser of ours walks its tokens with:
``peek``, ``next``, ``at``, ``accept``, ``expect``, ``fail``). A language gives its token
expression and its error (``syntax_error``): positions always come from tokens.

The XPush filter, XSCL and XSeq parsers read a list of tokens; XQuery's lexer reads one
token at a time (a direct constructor's content is not tokens) into the same ``Token``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import NamedTuple

END = "end"  # the kind of the token after the last one


class Token(NamedTuple):
    kind: str  # the language's: name, number, string, var, symbol/op, ..., and END
    value: object
    start: int  # offsets in the query text
    end: int

    @property
    def pos(self) -> int:
        return self.start


@cache
def expression(pattern: str, flags: int = 0) -> re.Pattern:
    """A regular expression compiled when first asked for: a language's token expressions
    cost milliseconds at every start, and a run that a compiled core tokenizes for never
    needs them."""
    return re.compile(pattern, flags)


def scan(text: str, pattern: re.Pattern, error: Callable[[str, int], Exception]) -> list[Token]:
    """The tokens of ``text``: ``pattern`` matched again and again, each match's named
    group that took part its kind (spaces before a token belong to the match, not the
    token), then an ``END`` token; a character that starts no token (or a group named
    ``bad``) raises ``error(message, position)``."""
    tokens, pos, make = [], 0, tuple.__new__  # (a named tuple made the fast way)
    for match in pattern.finditer(text):
        begin, end = match.span()
        if begin != pos or end == pos:  # text no token takes
            break
        kind = match.lastgroup
        start, stop = match.span(kind)
        if kind == "bad":
            raise error(f"unexpected character {text[start]!r}", start)
        tokens.append(make(Token, (kind, text[start:stop], start, stop)))
        pos = end
    rest = text[pos:]
    if rest.strip():
        at = pos + len(rest) - len(rest.lstrip())
        raise error(f"unexpected character {text[at]!r}", at)
    tokens.append(Token(END, "", len(text), len(text)))
    return tokens


class TokenReader:
    """A parser's walk over its tokens (``tokens`` ends with an ``END`` token). A language
    says how its errors are made (``syntax_error``) and how the end is named (``the_end``)."""

    the_end = "the end"

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    def syntax_error(self, message: str, position: int) -> Exception:
        raise NotImplementedError

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 0) -> Token:
        at, tokens = self.i + ahead, self.tokens
        return tokens[at] if at < len(tokens) else tokens[-1]

    def next(self) -> Token:
        token = self.tokens[self.i]
        if token.kind != END:
            self.i += 1
        return token

    def at(self, value, kind: str | None = None, token: Token | None = None) -> bool:
        token = token or self.tokens[self.i]
        return token.value == value and (kind is None or token.kind == kind)

    def accept(self, value, kind: str | None = None) -> bool:
        if self.at(value, kind):
            self.next()
            return True
        return False

    def expect(self, value, kind: str | None = None, what: str | None = None) -> Token:
        if not self.at(value, kind):
            self.fail(f"expected {what or repr(value)}")
        return self.next()

    def describe(self, token: Token) -> str:
        return self.the_end if token.kind == END else repr(str(token.value))

    def fail(self, message: str, token: Token | None = None):
        """Raise the language's error: ``message, found …`` at ``token`` (the next one)."""
        token = token or self.tokens[self.i]
        raise self.syntax_error(f"{message}, found {self.describe(token)}", token.start)
