"""Parse XPush filters: tokenizer and recursive descent into ``xcep.xpush.ast``.

Grammar (the seed's Fig. 1, plus ``..``, ``starts-with``, ``contains``,
``true()``, ``false()`` and parentheses)::

    filter  := expr                   (paths at its top level may be absolute)
    steps   := step (('/' | '//') step)*
    step    := (NAME | '*' | '@' NAME | '@*' | 'text()' | '.' | '..') ('[' expr ']')*
    expr    := and ('or' and)*
    and     := unary ('and' unary)*
    unary   := 'not' '(' expr ')' | '(' expr ')' | 'true()' | 'false()'
             | ('starts-with' | 'contains') '(' rel ',' STRING ')'
             | rel (OP constant)?
    rel     := ('.' | '..' | step-start) ... (a relative path)
             | ('/' | '//') steps           (outside predicates only)

A filter is a boolean over the document: a path (``/a[b]``: is there such a node?)
or any expression of them (``//c/text() = 3``, ``//a and not(//b)``). The machine
reads an expression as a condition on the document node, ``/self::node()[...]``,
where an absolute path is relative to it (``//b`` is ``.//b``) and so is a
relative one (``a`` is ``/a``). Functions beyond the fragment (``count()``, ...)
are refused.
    OP      := '=' | '!=' | '<' | '<=' | '>' | '>='
    constant:= NUMBER | STRING
"""

from __future__ import annotations

import re

from xcep.errors import QueryError
from xcep.lexing import Token, TokenReader, expression, scan
from xcep.xpush.ast import (
    ATTRIBUTE,
    CHILD,
    DESCENDANT,
    ELEMENT,
    PARENT,
    SELF,
    TEXT,
    WILDCARD,
    And,
    Compare,
    Const,
    Exists,
    Expr,
    Not,
    Or,
    Path,
    Step,
)


class FilterSyntaxError(QueryError):
    """A filter that cannot be parsed; ``position`` is the 1-based column in the filter."""

    language = "filter"

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(message, column=position + 1)
        self.text = text
        self.position = position + 1

    def __str__(self) -> str:
        return f"column {self.position}: {self.message}"


TOKEN_PATTERN = r"""\s*(?:
      (?P<number>-?(?:\d+(?:\.\d*)?|\.\d+))
    | (?P<string>"[^"]*"|'[^']*')
    | (?P<op>::|//|/|\[|\]|\(|\)|@|\*|\.\.|\.|,|!=|<=|>=|=|<|>)
    | (?P<name>{name}(?::{name})?)
    | (?P<bad>\S)
    )""".format(name=r"[A-Za-z_\u00c0-\uffff][\w.\-\u00b7\u00c0-\uffff]*")
# (compiled when first asked for, 14 ms: the compiled core's ``filter_tokens`` reads them)


COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")

try:
    from xcep.xpush._states import filter_tokens
except ImportError:  # the compiled core is not built: the regular expression alone
    filter_tokens = None


def tokenize(text: str) -> list[Token]:
    """The filter's tokens (``xcep.lexing``), then an ``end`` token: read in C where the
    compiled core is built (``filter_tokens``, tested to give the same tokens), by the
    regular expression where a character starts no token (it says which) or it is not."""
    tokens = None if filter_tokens is None else filter_tokens(text, Token)
    if tokens is None:
        tokens = scan(
            text,
            expression(TOKEN_PATTERN, re.VERBOSE),
            lambda message, at: FilterSyntaxError(message, text, at),
        )
    return tokens


class _Parser(TokenReader):
    def __init__(self, text: str) -> None:
        super().__init__(text, tokenize(text))
        # per token the text of an op or name (what ``at`` compares), else None
        self.words = [t.value if t.kind in ("op", "name") else None for t in self.tokens]
        self.depth = 0  # predicates open: absolute paths only outside them

    def syntax_error(self, message: str, position: int) -> FilterSyntaxError:
        return FilterSyntaxError(message, self.text, position)

    def at(self, value, kind: str | None = None, token: Token | None = None) -> bool:
        if kind is None and token is None:  # an op or a name (the common question)
            return self.words[self.i] == value
        return super().at(value, kind, token)

    # grammar
    def filter(self) -> Path:
        if self.peek()[0] == "end":
            self.fail("expected a path or an expression")
        expr = self.expr()
        if self.peek()[0] != "end":
            self.fail("unexpected text after the filter")
        if isinstance(expr, Exists) and expr.path.absolute:
            return expr.path  # the plain case: a path
        return Path((Step(CHILD, SELF, None, (_from_document(expr),)),), True)

    def steps(self, absolute: bool) -> Path:
        steps = []
        axis = CHILD
        if absolute:
            axis = DESCENDANT if self.next()[1] == "//" else CHILD
        words = self.words
        while True:
            steps.append(self.step(axis))
            word = words[self.i]
            if word == "/" or word == "//":
                self.i += 1
                axis = DESCENDANT if word == "//" else CHILD
                continue
            return Path(tuple(steps), absolute)

    def step(self, axis: str) -> Step:
        kind, text, pos, _ = self.tokens[self.i]
        if kind == "name" and self.words[self.i + 1] not in ("::", "("):  # the usual: a name
            self.i += 1
            test, name = ELEMENT, text
        elif kind == "name" and text in ("self", "parent") and self.peek(1)[1] == "::":
            self.next()
            self.next()
            if not (self.at("node") and self.peek(1)[1] == "("):
                self.fail(f"only {text}::node() is supported")
            self.next()
            self.expect("(")
            self.expect(")")
            test, name = (SELF if text == "self" else PARENT), None
        elif self.at("."):
            self.next()
            test, name = SELF, None
        elif self.at(".."):
            self.next()
            test, name = PARENT, None
        elif self.at("@"):
            self.next()
            kind, text, _, _ = self.next()
            if kind == "name" or (kind == "op" and text == "*"):
                test, name = ATTRIBUTE, text
            else:
                self.fail(
                    "expected an attribute name or * after @", Token(kind, text, pos + 1, pos + 1)
                )
        elif self.at("*"):
            self.next()
            test, name = ELEMENT, WILDCARD
        elif kind == "name" and text == "text" and self.peek(1)[1] == "(":
            self.next()
            self.expect("(")
            self.expect(")")
            test, name = TEXT, None
        elif kind == "name" and self.peek(1)[1] != "(":
            self.next()
            test, name = ELEMENT, text
        else:
            self.fail("expected a step (a name, *, @name, @*, text(), . or ..)")
        if self.words[self.i] != "[":
            return Step(axis, test, name, ())
        predicates = []
        while self.at("["):
            self.next()
            self.depth += 1
            predicates.append(self.expr())
            self.depth -= 1
            self.expect("]")
        return Step(axis, test, name, tuple(predicates))

    def expr(self) -> Expr:
        items = [self.conjunction()]
        while self.at("or"):
            self.next()
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def conjunction(self) -> Expr:
        items = [self.unary()]
        while self.at("and"):
            self.next()
            items.append(self.unary())
        return items[0] if len(items) == 1 else And(tuple(items))

    def unary(self) -> Expr:
        kind, text, start, _ = self.peek()
        if kind == "name" and self.peek(1)[1] == "(":
            self.next()
            self.expect("(")
            if text == "not":
                item = self.expr()
                self.expect(")")
                return Not(item)
            if text in ("true", "false"):
                self.expect(")")
                return Const(text == "true")
            if text in ("starts-with", "contains"):
                path = self.relative()
                self.expect(",")
                kind2, value, pos, _ = self.next()
                if kind2 != "string":
                    self.fail(f"{text}() takes a string constant", Token(kind2, value, pos, pos))
                self.expect(")")
                return Compare(path, text, value[1:-1])
            if text == "text":
                self.i -= 2  # text() starts a path
            else:
                raise FilterSyntaxError(
                    f"{text}() is not in the filter language (paths, and, or, not(), "
                    "comparisons with constants, starts-with(), contains(), true(), false())",
                    self.text,
                    start,
                )
        if self.at("("):
            self.next()
            item = self.expr()
            self.expect(")")
            return item
        path = self.relative()
        kind, text, pos, _ = self.peek()
        if kind == "op" and text in COMPARISONS:
            self.next()
            kind, value, pos, _ = self.next()
            if kind == "number":
                return Compare(path, text, float(value))
            if kind == "string":
                return Compare(path, text, value[1:-1])
            self.fail("expected a number or a string constant", Token(kind, value, pos, pos))
        return Exists(path)

    def relative(self) -> Path:
        if self.at("/") or self.at("//"):
            if self.depth:
                self.fail("paths inside predicates are relative (start with a name, @, ., .. or *)")
            return self.steps(absolute=True)  # at the filter's top level
        return self.steps(absolute=False)


def _from_document(expr: Expr) -> Expr:
    """A top-level expression as a predicate of the document node: its absolute paths
    become relative to it (``/a`` is ``a``, ``//b`` is ``.//b``)."""
    if isinstance(expr, And | Or):
        return type(expr)(tuple(map(_from_document, expr.items)))
    if isinstance(expr, Not):
        return Not(_from_document(expr.item))
    if isinstance(expr, Exists | Compare) and expr.path.absolute:
        steps = expr.path.steps
        if steps[0].axis == DESCENDANT:
            steps = (Step(CHILD, SELF), *steps)
        path = Path(steps, False)
        return Exists(path) if isinstance(expr, Exists) else Compare(path, expr.op, expr.value)
    return expr


def parse_filter(text: str) -> Path:
    """Parse one filter; raises ``FilterSyntaxError`` with the column of the problem."""
    return _Parser(text).filter()
