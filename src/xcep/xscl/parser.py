"""Parse XSCL queries (the seed's §2) and bring them to value-join normal form.

    [SELECT * | SELECT var, ...] [FROM] block [(JOIN | FOLLOWED BY) {pred, T} block]
    [PUBLISH name]
    block := STREAM path          path := (('/' | '//') (name | '*') | '/@' name) binding? [path]*
    binding := '->' var | AS var   pred := operand '=' operand (AND ...)*
    operand := var path?           T := number [s|m|h|d] | inf

Keywords are case-insensitive. ``normal_form`` moves paths out of join
predicates into the blocks (``x1//author = x5`` becomes a new variable bound
by ``[//author->_1]`` under ``x1``), so that predicates compare variables only.
"""

from __future__ import annotations

import re

from xcep.errors import QueryError
from xcep.lexing import END, Token, TokenReader, scan
from xcep.xscl import ast as A


class XsclSyntaxError(QueryError):
    """An XSCL query that cannot be parsed; names the query id and the column."""

    language = "xscl"

    def __init__(self, message: str, query_id: str = "", position: int = 0) -> None:
        super().__init__(message, column=position + 1, query_id=query_id)


_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[smhd]\b)?)|(?P<name>[A-Za-z_](?:[\w'.]|-(?!>))*)"
    r"|(?P<symbol>->|//|/|@|\[|\]|\{|\}|,|=|\*))"
)
KEYWORDS = {"SELECT", "FROM", "PUBLISH", "JOIN", "FOLLOWED", "BY", "AND", "AS"}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_query(text: str, query_id: str = "") -> A.Query:
    query = _Parser(text, query_id).parse()
    return normal_form(query)


class _Parser(TokenReader):
    the_end = "the end of the query"

    def __init__(self, text: str, query_id: str) -> None:
        self.id = query_id
        super().__init__(text, scan(text, _TOKEN, self.syntax_error))

    def syntax_error(self, message: str, position: int) -> XsclSyntaxError:
        return XsclSyntaxError(message, self.id, position)

    def describe(self, token: Token) -> str:
        return self.the_end if token.kind == END else f"'{token.value}'"

    def error(self, message: str, tok=None) -> XsclSyntaxError:
        tok = tok or self.peek()
        return XsclSyntaxError(message, self.id, tok[2])

    def keyword(self, word: str) -> bool:
        kind, value, _, _ = self.peek()
        if kind == "name" and value.upper() == word:
            self.i += 1
            return True
        return False

    def expect_symbol(self, symbol: str) -> None:
        tok = self.next()
        if tok[0] != "symbol" or tok[1] != symbol:
            raise self.error(f"expected '{symbol}', found {self.describe(tok)}", tok)

    def name(self, what: str) -> tuple[str, int]:
        tok = self.next()
        if tok[0] != "name" or tok[1].upper() in KEYWORDS:
            raise self.error(f"expected {what}, found {self.describe(tok)}", tok)
        return tok[1], tok[2]

    def parse(self) -> A.Query:
        select = None
        if self.keyword("SELECT"):
            if self.peek()[1] == "*":
                self.next()
            else:
                select = [self.name("a variable")[0]]
                while self.peek()[1] == ",":
                    self.next()
                    select.append(self.name("a variable")[0])
            if not self.keyword("FROM"):
                raise self.error("expected FROM")
        else:
            self.keyword("FROM")
        query = A.Query(self.id, self.text, self.block())
        if self.keyword("JOIN"):
            query.op = A.JOIN
        elif self.keyword("FOLLOWED"):
            if not self.keyword("BY"):
                raise self.error("expected BY after FOLLOWED")
            query.op = A.FOLLOWED_BY
        if query.op:
            self.expect_symbol("{")
            query.predicates = self.predicates()
            self.expect_symbol(",")
            query.window = self.window()
            self.expect_symbol("}")
            query.right = self.block()
            if self.peek()[1].upper() in ("JOIN", "FOLLOWED"):
                raise self.error("one JOIN or FOLLOWED BY per query: chain queries with PUBLISH")
        if self.keyword("PUBLISH"):
            query.publish = self.name("a stream name")[0]
        if self.peek().kind != END:
            raise self.error(f"unexpected {self.describe(self.peek())}")
        query.select = select
        return query

    def block(self) -> A.Block:
        stream, pos = self.name("a stream name")
        steps = self.path(relative=False)
        if not steps:
            raise self.error("expected '/' or '//' after the stream name")
        return A.Block(stream, steps, pos)

    def path(self, relative: bool) -> list[A.Step]:
        steps: list[A.Step] = []
        while True:
            kind, value, _pos, _ = self.peek()
            if value in ("/", "//") and kind == "symbol":
                self.next()
                if self.peek()[1] == "@":
                    self.next()
                    axis = A.ATTRIBUTE
                else:
                    axis = value
            elif value == "@" and kind == "symbol" and (relative or steps):
                self.next()
                axis = A.ATTRIBUTE
            elif relative and not steps and kind == "name" and value.upper() not in KEYWORDS:
                axis = A.CHILD  # [author] is [/author]
            else:
                return steps
            tok = self.next()
            if tok[1] == "*" or (tok[0] == "name" and tok[1].upper() not in KEYWORDS):
                step = A.Step(axis, tok[1], pos=tok[2])
            else:
                raise self.error(f"expected a name or '*', found {self.describe(tok)}", tok)
            if self.peek()[1] == "->":
                self.next()
                step.var = self.name("a variable")[0]
            elif self.keyword("AS"):
                step.var = self.name("a variable")[0]
            while self.peek()[1] == "[":
                self.next()
                predicate = self.path(relative=True)
                if not predicate:
                    raise self.error("expected a path in '[...]'")
                step.predicates.append(predicate)
                self.expect_symbol("]")
            steps.append(step)

    def predicates(self) -> list[A.Equality]:
        out = [self.equality()]
        while self.keyword("AND"):
            out.append(self.equality())
        return out

    def equality(self) -> A.Equality:
        left = self.operand()
        self.expect_symbol("=")
        return A.Equality(left, self.operand())

    def operand(self) -> A.Operand:
        var, pos = self.name("a variable")
        return A.Operand(var, self.path(relative=False), pos)

    def window(self) -> float:
        tok = self.next()
        if tok[0] == "name" and tok[1].lower() in ("inf", "infinity"):
            return float("inf")
        if tok[0] != "number":
            raise self.error(
                f"expected a time window (a number, or inf), found {self.describe(tok)}", tok
            )
        value = tok[1]
        unit = UNITS.get(value[-1], 1) if value[-1] in UNITS else 1
        return float(value.rstrip("smhd")) * unit


def normal_form(query: A.Query) -> A.Query:
    """Check the variables and move paths out of the join predicates into the blocks."""
    owners: dict[str, tuple[A.Block, A.Step]] = {}
    for block in query.blocks():
        for step in A.walk_steps(block.steps):
            if step.var:
                if step.var in owners:
                    raise XsclSyntaxError(f"variable {step.var} is bound twice", query.id, step.pos)
                owners[step.var] = (block, step)
    fresh = 0
    for equality in query.predicates:
        sides = []
        for operand in (equality.left, equality.right):
            if operand.var not in owners:
                raise XsclSyntaxError(f"unknown variable {operand.var}", query.id, operand.pos)
            block, step = owners[operand.var]
            if operand.steps:
                fresh += 1
                name = f"_{fresh}"
                operand.steps[-1].var = name
                step.predicates.append(operand.steps)
                owners[name] = (block, operand.steps[-1])
                operand.var, operand.steps = name, []
            sides.append(owners[operand.var][0])
        if sides[0] is sides[1]:
            raise XsclSyntaxError(
                f"{equality.left.var} = {equality.right.var} compares one block with itself: "
                "a join predicate relates the two blocks",
                query.id,
                equality.left.pos,
            )
        if sides[0] is query.right:  # left operand from the left block
            equality.left, equality.right = equality.right, equality.left
    if query.right is None and query.select and len(query.select) > 1:
        raise XsclSyntaxError("a query of one block selects one variable", query.id, 0)
    for var in query.select or []:
        if var not in owners:
            raise XsclSyntaxError(f"SELECT of unknown variable {var}", query.id, 0)
    return query
