"""Parse XSeq queries: a tokenizer and a recursive-descent parser into ``xcep.xseq.ast``.

The grammar is written down in docs/xseq.md. Errors are ``QuerySyntaxError``
with the 1-based column of the offending token and what was expected.
"""

from __future__ import annotations

import re

from xcep.errors import QueryError
from xcep.lexing import END, Token, TokenReader
from xcep.xseq import ast as A


class QuerySyntaxError(QueryError):
    """An XSeq query that cannot be parsed or compiled; ``column`` is 1-based."""

    language = "xseq"

    def __init__(self, message: str, text: str = "", position: int = 0) -> None:
        super().__init__(message, column=position + 1)
        self.text = text


_SYMBOLS = ("//", "/\\", "::", "!=", "<=", ">=", "..", "/", "\\", "@", "(", ")", "[", "]")
_SYMBOLS += ("*", ",", "=", "<", ">", "+", "-", ".", "|")
AXES = ("@", "/", "//", "/\\")  # what a field reference's path starts with
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
_NAME_PART = re.compile(r"[A-Za-z_][\w.]*")
_VAR = re.compile(r"\$([A-Za-z_]\w*)")
# a '-' inside a name belongs to the name unless what follows starts an operand
_MINUS_OPERAND = re.compile(r"-(?:prev|first|last|tag)\s*\(")

AXIS_NAMES = {
    "self": A.SELF,
    "child": A.CHILD,
    "descendant": A.DESCENDANT,
    "descendant-or-self": A.DESCENDANT_OR_SELF,
    "descendant_or_self": A.DESCENDANT_OR_SELF,
    "parent": A.PARENT,
    "ancestor": A.ANCESTOR,
    "following-sibling": A.FOLLOWING_SIBLING,
    "following_sibling": A.FOLLOWING_SIBLING,
    "preceding-sibling": A.PRECEDING_SIBLING,
    "preceding_sibling": A.PRECEDING_SIBLING,
    "attribute": A.ATTRIBUTE,
}
IMMEDIATE_AXES = {A.CHILD: A.FIRST_CHILD, A.FOLLOWING_SIBLING: A.NEXT_SIBLING}
KEYWORDS = {"return", "from", "where", "partition", "union", "intersect", "and", "or", "div"}
FUNCTIONS = {"not", "tag", *A.SEQUENCE_FUNCTIONS, *A.AGGREGATES}  # names called with '('


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while True:
        space = _SPACE.match(text, i)
        if space:
            i = space.end()
        if i >= n:
            tokens.append(Token(END, None, n, n))
            return tokens
        ch = text[i]
        if match := _STRING.match(text, i):
            tokens.append(Token("string", match.group()[1:-1], i, match.end()))
        elif (match := _NUMBER.match(text, i)) and not (ch == "." and text[i : i + 2] == ".."):
            tokens.append(Token("number", float(match.group()), i, match.end()))
        elif match := _VAR.match(text, i):
            tokens.append(Token("var", match.group(1), i, match.end()))
        elif match := _NAME_PART.match(text, i):
            end = match.end()
            while end < n and text[end] == "-" and not _MINUS_OPERAND.match(text, end):
                more = _NAME_PART.match(text, end + 1)
                if not more:
                    break
                end = more.end()
            if text.startswith(":", end) and not text.startswith("::", end):
                more = _NAME_PART.match(text, end + 1)  # a prefixed name a:b
                if more:
                    end = more.end()
            tokens.append(Token("name", text[i:end], i, end))
            i = end
            continue
        else:
            for symbol in _SYMBOLS:
                if text.startswith(symbol, i):
                    tokens.append(Token("sym", symbol, i, i + len(symbol)))
                    break
            else:
                raise QuerySyntaxError(f"unexpected character {ch!r}", text, i)
        i = match.end() if match else i + len(tokens[-1].value)


class Parser(TokenReader):
    the_end = "end of query"

    def __init__(self, text: str) -> None:
        super().__init__(text, tokenize(text))
        self.groups = 0

    def syntax_error(self, message: str, position: int) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.text, position)

    # token helpers (``xcep.lexing``)
    def spaced(self, token: Token) -> bool:
        """Whether space comes before ``token`` (``(…)*`` is a group, ``(…) *`` is not)."""
        return token.start == 0 or self.text[token.start - 1].isspace()

    def at_kind(self, kind: str, value=None, token: Token | None = None) -> bool:
        token = token or self.tok
        return token.kind == kind and (value is None or token.value == value)

    def at_sym(self, *values: str) -> bool:
        return self.tok.kind == "sym" and self.tok.value in values

    def at_axis_name(self) -> bool:
        """Whether the name here starts an explicit axis: ``name::`` or ``name\\::``."""
        return self.at_kind("sym", "::", self.peek(1)) or (
            self.at_kind("sym", "\\", self.peek(1)) and self.at_kind("sym", "::", self.peek(2))
        )

    def at_word(self, *values: str) -> bool:
        return self.tok.kind == "name" and self.tok.value in values

    def expect_sym(self, value: str, what: str | None = None) -> Token:
        if not self.at_sym(value):
            self.fail(f"expected {what or repr(value)}")
        return self.next()

    # query
    def query(self) -> A.Query:
        returns = None
        if self.at_word("return"):
            self.next()
            returns = [self.out_term()]
            while self.at_sym(","):
                self.next()
                returns.append(self.out_term())
            if not self.at_word("from"):
                self.fail("expected ',' or 'from' after the return terms")
            self.next()
            returns = tuple(returns)
        path = self.path(first=True)
        partition = where = None
        while not self.at_kind(END):
            if self.at_word("where") and where is None:
                self.next()
                where = self.condition()
            elif self.at_word("partition") and partition is None:
                token = self.next()
                if not self.at_word("by"):
                    self.fail("expected 'by' after 'partition'")
                self.next()
                partition = self.partition_path(token)
            else:
                self.fail("expected a step, 'where', 'partition by' or the end of the query")
        variables: list[str] = []
        for node in A.walk(path):
            if isinstance(node, A.Step) and node.var and node.var not in variables:
                variables.append(node.var)
        return A.Query(path, returns, partition, where, self.text, self.groups, tuple(variables))

    def partition_path(self, keyword: Token):
        start = self.tok
        path = self.path(first=True)
        items = path.items if isinstance(path, A.Seq) else (path,)
        last = items[-1]
        if not (isinstance(last, A.Step) and last.axis == A.ATTRIBUTE and last.name != "*"):
            self.fail("'partition by' needs a path ending in @attribute", start)
        rest = items[:-1]
        if not rest:
            self.fail("'partition by' needs a path to the partitioned elements before @", start)
        return (A.Seq(rest) if len(rest) > 1 else rest[0], last.name, keyword.pos)

    def out_term(self) -> A.OutTerm:
        start = self.tok
        aggregate = None
        if self.at_word(*A.AGGREGATES) and self.at_kind("sym", "(", self.peek(1)):
            aggregate = self.next().value
            self.next()
            expr = self.value()
            self.expect_sym(")", f"')' closing {aggregate}(")
        else:
            expr = self.value()
        end = self.tok.pos
        return A.OutTerm(expr, aggregate, self.text[start.pos : end].strip(), start.pos)

    # paths
    def path(self, first: bool = False):
        items = [self.intersection(first)]
        pos = self.tok.pos
        while self.at_word("union") or self.at_sym("|"):
            self.next()
            items.append(self.intersection(first))
        return items[0] if len(items) == 1 else A.Union(tuple(items), pos)

    def intersection(self, first: bool):
        items = [self.sequence(first)]
        pos = self.tok.pos
        while self.at_word("intersect"):
            self.next()
            items.append(self.sequence(first))
        if len(items) == 1:
            return items[0]
        return A.Intersect(tuple(items), pos, self._new_group())

    def starts_item(self) -> bool:
        tok = self.tok
        if tok.kind == "var":
            return True
        if tok.kind == "sym":
            return tok.value in ("/", "//", "/\\", "\\", "@", "(", ".", "..", "*")
        if tok.kind == "name":
            if tok.value in KEYWORDS or tok.value == "by":
                return False
            # a function call is not a step; any other name before '(' is (a juxtaposed group)
            return tok.value not in FUNCTIONS or not self.at_kind("sym", "(", self.peek(1))
        return False

    def sequence(self, first: bool, value: bool = False):
        """Juxtaposed items. ``value``: the path of a field reference in a condition
        (``$A@price * 2``), where an item starts with an axis and ``*`` after a step
        multiplies (it is neither a wildcard step nor a Kleene star there)."""
        if not self.starts_item():
            self.fail("expected a path step")
        items = []
        while self.starts_item() and not (value and items and not self.at_sym(*AXES)):
            items.append(self.item(first and not items, value))
        return items[0] if len(items) == 1 else A.Seq(tuple(items))

    def item(self, first: bool, value: bool = False):
        if self.at_sym("("):
            open_token = self.next()
            body = self.path(first)
            self.expect_sym(")", "')' closing the group")
            node = body
            if self.at_sym("*") and not self.spaced(self.tok):
                self.next()
                node = A.Star(body, self._new_group(), open_token.pos)
            preds = self.predicates()
            if preds:  # (path)[p] filters the nodes the group ends at
                node = A.Seq((node, A.Step(A.SELF, A.NODE, "*", preds, None, open_token.pos)))
            return node
        step = self.step(first)
        if self.at_sym("*") and not self.spaced(self.tok) and not value:
            self.next()
            return A.Star(step, self._new_group(), step.pos)
        return step

    def _new_group(self) -> int:
        self.groups += 1
        return self.groups - 1

    def step(self, first: bool) -> A.Step:
        tok = self.tok
        pos = tok.pos
        axis = None
        if self.at_sym("//"):
            self.next()
            axis = A.DESCENDANT
        elif self.at_sym("/\\"):
            self.next()
            axis = A.FIRST_CHILD
        elif self.at_sym("/"):
            self.next()
            axis = A.CHILD
            if self.at_sym(".", "..") or (self.at_kind("name") and self.at_axis_name()):
                # '/' then '.', '..' or an explicit axis: the '/' only separates the steps
                return self.step(first=False)
        elif self.at_sym("\\"):
            self.next()
            axis = A.NEXT_SIBLING
        elif self.at_sym("."):
            self.next()
            return A.Step(A.SELF, A.NODE, "*", self.predicates(), None, pos)
        elif self.at_sym(".."):
            self.next()
            return A.Step(A.PARENT, A.NODE, "*", self.predicates(), None, pos)
        if axis is None and self.tok.kind == "name" and self.at_axis_name():
            tok = self.tok
            name = self.next().value
            if name not in AXIS_NAMES:
                self.fail(f"unknown axis {name!r}", tok)
            axis = AXIS_NAMES[name]
            if self.at_sym("\\"):
                self.next()
                if axis not in IMMEDIATE_AXES:
                    self.fail("only child\\ and following_sibling\\ exist", tok)
                axis = IMMEDIATE_AXES[axis]
            self.next()  # '::'
        if self.at_sym("@"):
            if axis not in (None, A.CHILD, A.ATTRIBUTE):
                self.fail("'@' cannot follow this axis")
            self.next()
            axis = A.ATTRIBUTE
        if axis is None:
            axis = A.CHILD if first else A.FOLLOWING_SIBLING
        return self.node_test(axis, pos)

    def node_test(self, axis: str, pos: int) -> A.Step:
        tok = self.tok
        var = None
        if axis == A.ATTRIBUTE:
            if tok.kind == "name" or self.at_sym("*"):
                self.next()
                return A.Step(axis, A.ELEMENT, tok.value, (), None, pos)
            self.fail("expected an attribute name or * after '@'")
        if tok.kind == "var":
            self.next()
            kind, name, var = A.ELEMENT, "*", tok.value
        elif self.at_sym("*"):
            self.next()
            kind, name = A.ELEMENT, "*"
        elif (
            tok.kind == "name"
            and tok.value in ("text", "node")
            and self.at_kind("sym", "(", self.peek(1))
        ):
            self.next()
            self.next()
            self.expect_sym(")", f"')' after {tok.value}(")
            kind, name = (A.TEXT if tok.value == "text" else A.NODE), "*"
        elif tok.kind == "name" and tok.value not in KEYWORDS:
            self.next()
            kind, name = A.ELEMENT, tok.value
        else:
            self.fail("expected a name, *, $variable or text() as node test")
        return A.Step(axis, kind, name, self.predicates(), var, pos)

    def predicates(self) -> tuple:
        preds = []
        while self.at_sym("["):
            self.next()
            preds.append(self.condition())
            self.expect_sym("]", "']' closing the predicate")
        return tuple(preds)

    # conditions and values
    def condition(self):
        left = self.conjunction()
        while self.at_word("or"):
            self.next()
            left = A.Or(left, self.conjunction())
        return left

    def conjunction(self):
        left = self.negation()
        while self.at_word("and"):
            self.next()
            left = A.And(left, self.negation())
        return left

    def negation(self):
        if self.at_word("not") and self.at_kind("sym", "(", self.peek(1)):
            tok = self.next()
            self.next()
            arg = self.condition()
            self.expect_sym(")", "')' closing not(")
            return A.Not(arg, tok.pos)
        left = self.value()
        if self.at_sym("=", "!=", "<", "<=", ">", ">="):
            op = self.next()
            return A.Compare(op.value, left, self.value(), op.pos)
        return left

    def value(self):
        left = self.term()
        while self.at_sym("+", "-"):
            op = self.next()
            left = A.Arith(op.value, left, self.term(), op.pos)
        return left

    def term(self):
        left = self.operand()
        while self.at_sym("*") or self.at_word("div"):
            op = self.next()
            left = A.Arith("*" if op.value == "*" else "div", left, self.operand(), op.pos)
        return left

    def operand(self):
        tok = self.tok
        if tok.kind in ("number", "string"):
            self.next()
            return A.Const(tok.value)
        if self.at_sym("-") and self.at_kind("number", None, self.peek(1)):
            self.next()
            return A.Const(-self.next().value)
        if self.at_sym("("):
            self.next()
            inner = self.condition()
            self.expect_sym(")", "')'")
            return inner
        if tok.kind == "name" and self.at_kind("sym", "(", self.peek(1)):
            if tok.value == "tag":
                self.next()
                self.next()
                ref = self.var_ref()
                self.expect_sym(")", "')' closing tag(")
                return A.Tag(ref, tok.pos)
            if tok.value in A.SEQUENCE_FUNCTIONS:
                return self.var_test(self.var_ref())
            if tok.value not in ("text", "node"):
                self.fail(f"unknown function {tok.value}()")
        if tok.kind == "var":
            return self.var_test(self.var_ref())
        if self.starts_item():
            return A.RelPath(self.path(first=True), tok.pos)
        self.fail("expected a value: a number, a string, $variable, a path or a function")

    def var_ref(self) -> A.VarRef:
        tok = self.tok
        func = None
        if tok.kind == "name" and tok.value in A.SEQUENCE_FUNCTIONS:
            func = self.next().value
            self.expect_sym("(", f"'(' after {func}")
            if not self.at_kind("var"):
                self.fail(f"{func}() takes a $variable")
            var = self.next().value
            self.expect_sym(")", f"')' closing {func}(")
        elif tok.kind == "var":
            var = self.next().value
        else:
            self.fail("expected a $variable")
        path = self.sequence(first=False, value=True) if self.at_sym(*AXES) else None
        return A.VarRef(var, func, path, tok.pos)

    def var_test(self, ref: A.VarRef):
        if self.at_sym("[") and ref.path is None:
            pos = self.tok.pos
            preds = self.predicates()
            cond = preds[0]
            for more in preds[1:]:
                cond = A.And(cond, more)
            return A.VarTest(ref, cond, pos)
        return ref


def parse_query(text: str) -> A.Query:
    """Parse an XSeq query; raises ``QuerySyntaxError`` with the column on bad input."""
    parser = Parser(text)
    return parser.query()
