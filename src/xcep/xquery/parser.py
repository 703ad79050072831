"""Parse XQuery: FLWOR clauses (window and pattern included) and direct constructors.

The parser reads clauses and constructors itself and cuts every other
expression out of the text as an XPath 3.1 span for elementpath.  A span
ends, at bracket depth 0, at a ``,``, a closing bracket, a clause keyword in
operator position (``where``, ``return``, ``start``, ``when``, ...), or, where
a pattern clause needs it, at an operand that directly follows another one
(``in $events $a $b using``).  The grammar is in docs/xquery.md.

One module of about 950 lines, on purpose: one recursive-descent parser of one
grammar (prolog, FLWOR clauses, constructors), whose methods call each other; the
syntax tree is in ``ast.py``, what elementpath parses is in ``elementpath``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import NamedTuple

from elementpath.collations import UNICODE_CODEPOINT_COLLATION
from elementpath.datatypes import UntypedAtomic, builtin_atomic_types, builtin_list_types
from elementpath.exceptions import ElementPathError, MissingContextError
from elementpath.xpath31 import XPath31Parser
from elementpath.xpath_nodes import XPathNode

from xcep.lexing import END, Token
from xcep.xquery import ast as A
from xcep.xquery.errors import XQueryError, static_error
from xcep.xquery.pattern import check_single_binding
from xcep.xquery.values import XML_NAMESPACE, XML_SCOPE, double_text, expanded_name

_SPACE = re.compile(r"(?:\s+|\(:)")
_NAME = re.compile(r"[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?")
_NCNAME = re.compile(r"[A-Za-z_][\w.\-]*")
_VAR = re.compile(r"\$\s*((?:Q\{[^{}]*\})?[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STRING = re.compile(r"\"(?:[^\"]|\"\")*\"|'(?:[^']|'')*'")
_SYMBOLS = (":=", "::", "//", "..", "!=", "<=", ">=", "<<", ">>", "||", "=>", "(", ")", "[", "]")
_SYMBOLS += ("{", "}", ",", "/", "@", "<", ">", "=", "|", "!", "+", "-", "*", "?", ".", "#", ":")
_SYMBOLS += (";",)
_OPENERS = {"(": ")", "[": "]", "{": "}"}

# names that end an XPath span when they stand where an operator would
CLAUSE_WORDS = {"where", "return", "start", "end", "only", "when", "using", "ascending"}
CLAUSE_WORDS |= {"descending", "collation", "then", "else", "satisfies"}
FLWOR_STARTS = {"for", "let", "pattern"}
CLAUSE_ENDS = CLAUSE_WORDS | FLWOR_STARTS | {"count", "group", "order", "stable"}
SELECTIONS = ("maximal", "incremental", "allmatch")
TYPE_OPERATORS = {"instance": "of", "treat": "as", "cast": "as", "castable": "as"}
PATTERN_VARS = ("before", "after", "all", "pprev", "pcur", "nested")
KIND_TESTS = {"item", "node", "element", "attribute", "text", "document-node", "comment"}


def lex(text: str, pos: int) -> Token:
    """The token at ``pos`` (after spaces and ``(: comments :)``): an ``xcep.lexing``
    token (kinds name, var, string, number, symbol, and the end), read one at a time
    (a direct constructor's content is not tokens)."""
    n = len(text)
    while pos < n:
        m = _SPACE.match(text, pos)
        if not m:
            break
        pos = _skip_comment(text, pos) if m.group() == "(:" else m.end()
    if pos >= n:
        return Token(END, "", n, n)
    c = text[pos]
    if c == "$":
        m = _VAR.match(text, pos)
        if not m:
            raise static_error(text, pos, "expected a variable name after '$'")
        return Token("var", m.group(1), pos, m.end())
    if c in "\"'":
        m = _STRING.match(text, pos)
        if not m:
            raise static_error(text, pos, "unterminated string literal")
        return Token("string", m.group(), pos, m.end())
    m = _NUMBER.match(text, pos)
    if m and (c.isdigit() or (c == "." and m.end() > pos + 1)):
        after = text[m.end() : m.end() + 1]
        if after.isalpha() or after == "_":  # XQuery 3.1 A.2.1: `3return` is no token
            raise static_error(text, m.end(), f"a number followed by {after!r}: add a space")
        return Token("number", m.group(), pos, m.end())
    m = _NAME.match(text, pos)
    if m:
        name = m.group()
        if ":" in name and text.startswith("::", m.start() + name.index(":")):
            name = name[: name.index(":")]  # axis::
        return Token("name", name, pos, pos + len(name))
    for sym in _SYMBOLS:
        if text.startswith(sym, pos):
            return Token("symbol", sym, pos, pos + len(sym))
    raise static_error(text, pos, f"unexpected character {c!r}")


def _skip_comment(text: str, pos: int) -> int:
    depth, i = 0, pos
    while i < len(text):
        if text.startswith("(:", i):
            depth, i = depth + 1, i + 2
        elif text.startswith(":)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise static_error(text, pos, "unterminated comment")


XMLNS_NAMESPACE = "http://www.w3.org/2000/xmlns/"
_PI_TEST = re.compile(r"processing-instruction\s*\(\s*\Z")  # ("name"): the name an NCName
_RENAMED = "_xcep"  # added to a reserved local name of a declared function
# a leading '/' (at the start, after '(', '[', ',' or '{') followed by '<'
_LONE_SLASH = re.compile(r"(?:^|[\[(,{])\s*(/)\s*<")


class XPathParser(XPath31Parser):
    """elementpath's XPath 3.1, with what it gets wrong put right (docs/xquery.md): a
    general comparison of two untyped values compares them as strings (XPath 3.1
    §3.7.2), where elementpath 5.1 casts both to ``xs:double``; an ``xs:double``'s string
    is ``1.0E-7``, ``1.0E20``, ``1.2345678E7`` (§19.1.2.2), where elementpath writes
    ``1E-07``, ``1E20``, ``12345678``. A subclass, so elementpath's own parser is left as
    it is."""


def _untyped_as_strings(compare_pairs):
    def iter_comparison_data(self, context):
        for left, right in compare_pairs(self, context):
            if isinstance(left, UntypedAtomic) and isinstance(right, UntypedAtomic):
                yield left.value, right.value
            else:
                yield left, right

    return iter_comparison_data


def _doubles_as_xpath(string_value):
    def fixed(self, obj) -> str:
        if type(obj) is float:  # xs:double (xs:float is a class of its own)
            return double_text(obj)
        return string_value(self, obj)

    return fixed


def _nodes_or_atoms(select):
    """A path whose last step gives both nodes and atomic values is XPTY0018 (XPath 3.1
    §3.3.1.1); elementpath 5.1 gives the mix."""

    def checked(self, context=None):
        if len(self) != 2:  # '/' alone, '//x': a node path
            yield from select(self, context)
            return
        first = None  # whether the first item is a node; the others must be alike
        for item in select(self, context):  # (as lazily as before)
            node = isinstance(item, XPathNode)
            if first is None:
                first = node
            elif node != first:
                raise self.error("XPTY0018", "a path's last step gives nodes and atomic values")
            yield item

    return checked


for _symbol, _token in list(XPathParser.symbol_table.items()):
    _fixes = {"string_value": _doubles_as_xpath(_token.string_value)}
    if _symbol in ("=", "!=", "<", "<=", ">", ">="):
        _fixes["iter_comparison_data"] = _untyped_as_strings(_token.iter_comparison_data)
    if _symbol in ("/", "//"):
        _fixes["select"] = _nodes_or_atoms(_token.select)
    XPathParser.symbol_table[_symbol] = type(_token.__name__, (_token,), _fixes)


LOCAL_FUNCTIONS = "http://www.w3.org/2005/xquery-local-functions"


def _call(runtime: dict, function: dict, args: tuple):
    """A declared function called from XPath: its body run by the query's evaluator on
    its arguments (each a sequence), their and its result's types checked."""
    from xcep.xquery.values import as_value, check_type

    env = dict(runtime.get("globals", {}))  # the prolog's variables, then the parameters
    for (name, declared), value in zip(function["params"], args, strict=True):
        items = value if isinstance(value, list) else ([] if value is None else [value])
        check_type(items, declared, f"${name} of {function['name']}()")
        env[name] = as_value(items)
    evaluator = runtime.get("evaluator")
    if evaluator is None:  # elementpath's static check as it parses: the call runs later
        raise MissingContextError("a declared function runs when the query runs")
    # a function body has no focus (XQuery 3.1 §5.18.4), wherever it is called from
    saved = evaluator.item, evaluator.inner
    evaluator.item, evaluator.inner = None, False
    try:
        result = evaluator.eval(function["body"], env)
    finally:
        evaluator.item, evaluator.inner = saved
    check_type(result, function["returns"], f"the result of {function['name']}()")
    return result


def parse(text: str) -> A.Expr:
    """The syntax tree of an XQuery main module body (no prolog)."""
    return Parser(text).parse_module()


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        # XQuery's default collation is Unicode codepoints; elementpath would take it
        # from the process locale (LC_COLLATE), making answers depend on the machine
        self.xpath = XPathParser(default_collation=UNICODE_CODEPOINT_COLLATION)
        self.xpath.namespaces.setdefault("local", LOCAL_FUNCTIONS)  # predeclared (XQuery 3.1)
        self.placeholders = 0
        self.switches = 0  # typeswitch cases being read: 'case' and 'default' end them
        self.plain_ifs: set[int] = set()  # where an 'if' was read and found plain XPath
        # declared functions whose local name is a reserved one (local:if): elementpath
        # refuses those names, so they are registered and called under another
        self.renamed: dict[str, str] = {}
        self.declared: dict[str, str] = {}  # the prolog's namespaces: prefix ('' default) → URI

    # -- tokens --------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        tok = lex(self.text, self.pos)
        for _ in range(ahead):
            tok = lex(self.text, tok.end)
        return tok

    def next(self) -> Token:
        tok = lex(self.text, self.pos)
        self.pos = tok.end
        return tok

    def error(self, message: str, at: int | None = None, code: str = "XPST0003") -> XQueryError:
        return static_error(self.text, self.pos if at is None else at, message, code)

    def expect(self, value: str, kind: str | None = None) -> Token:
        tok = self.next()
        if tok.value != value or (kind and tok.kind != kind) or tok.kind in ("string", "var"):
            raise self.error(f"expected '{value}', found {_describe(tok)}", tok.start)
        return tok

    def accept(self, value: str) -> bool:
        tok = self.peek()
        if tok.value == value and tok.kind in ("name", "symbol"):
            self.pos = tok.end
            return True
        return False

    def var(self) -> str:
        tok = self.next()
        if tok.kind != "var":
            raise self.error(f"expected a variable ($name), found {_describe(tok)}", tok.start)
        if tok.value.startswith("Q{"):  # $Q{uri}local: named by a prefix the prolog binds
            uri, _, local = tok.value[2:].partition("}")
            if not uri:
                return local
            prefix = next((p for p, u in self.declared.items() if u == uri and p), None)
            if prefix is None:
                raise self.error(f"declare a prefix for {uri!r} to name ${tok.value}", tok.start)
            return f"{prefix}:{local}"
        return tok.value

    # -- expressions ---------------------------------------------------------

    def parse_module(self) -> A.Expr:
        """A main module: a prolog of declarations, then the body. Each declared variable
        is a ``let`` around the body (in order)."""
        self.runtime: dict = {}  # what declared functions run with (A.Prolog)
        variables = self.parse_prolog()
        expr = self.parse_expr()
        tok = self.peek()
        if tok.kind != END:
            raise self.error(f"unexpected {_describe(tok)}", tok.start)
        if not variables and "functions" not in self.runtime and not self.declared:
            return expr
        return A.Prolog(self.runtime, [(n, v, t) for n, v, t, _ in variables], expr)

    def parse_prolog(self) -> list:
        """``declare variable $v (as T)? (:= E | external (:= E)?);`` — the variables as
        (name, value expression, declared type, position), bound in order around the
        body (``A.Prolog``), which function bodies see too. ``declare namespace`` and
        ``declare default element namespace`` bind the query's names (``self.declared``)."""
        variables = []
        while self.peek().value == "declare" and self.peek(1).kind == "name":
            start = self.next().start
            what = self.next()
            if what.value == "function":
                self.parse_function()
            elif what.value == "variable":
                name = self.var()
                declared = self.declared_type()
                if self.accept("external"):
                    default = self.parse_single() if self.accept(":=") else None
                    value = A.External(name, default, start)
                else:
                    self.expect(":=")
                    value = self.parse_single()
                variables.append((name, value, declared, start))
            elif what.value == "namespace":
                self.declare_namespace()
            elif what.value == "default" and self.peek().value == "element":
                self.next()
                self.expect("namespace")
                if "" in self.declared:
                    raise self.error("a second default element namespace", start, "XQST0066")
                self.declared[""] = self.xpath.default_namespace = self.uri_literal()
            else:
                raise self.error(
                    f"'declare {what.value}' is not supported (declare variable, function, "
                    "namespace and default element namespace are)",
                    what.start,
                    "XPST0003",
                )
            self.expect(";")
        if self.declared:
            self.runtime["namespaces"] = self.declared
            self.runtime["prefixes"] = self.prefixes = {u: p for p, u in self.declared.items()}
            self.scopes = [{**XML_SCOPE, **self.declared}]
        return variables

    def declare_namespace(self) -> None:
        """``declare namespace p = "uri";``: the prefix names the namespace in the query's
        name tests; documents are then read with their namespaces (``XQuery.namespaces``)."""
        tok = self.next()
        if tok.kind != "name" or ":" in tok.value:
            raise self.error(f"expected a prefix, found {_describe(tok)}", tok.start)
        self.expect("=")
        uri = self.uri_literal()
        if tok.value in ("xml", "xmlns") or uri in (XML_NAMESPACE, XMLNS_NAMESPACE):
            raise self.error(f"{tok.value} cannot be bound to {uri!r}", tok.start, "XQST0070")
        if tok.value in self.declared:
            raise self.error(f"the prefix {tok.value} is declared twice", tok.start, "XQST0033")
        if not uri:  # (XQuery 3.1 §4.12: a prefix cannot be undeclared in the prolog)
            raise self.error(
                f"the prefix {tok.value} is bound to no namespace", tok.start, "XQST0085"
            )
        self.declared[tok.value] = self.xpath.namespaces[tok.value] = uri

    def uri_literal(self) -> str:
        tok = self.next()
        if tok.kind != "string":
            raise self.error(f"expected a URI literal, found {_describe(tok)}", tok.start)
        return _literal(tok.value).strip()

    def parse_function(self) -> None:
        """``declare function prefix:name($p as T, ...) as R { body };``: registered with
        elementpath (before its body is read: it may call itself), run by our evaluator."""
        tok = self.next()
        if tok.kind != "name" or ":" not in tok.value:
            raise self.error("a declared function needs a prefixed name (local:f)", tok.start)
        prefix, name = tok.value.split(":", 1)
        self.expect("(")
        params: list[tuple[str, A.SequenceType | None]] = []
        while self.peek().value != ")":
            params.append((self.var(), self.declared_type()))
            if not self.accept(","):
                break
        self.expect(")")
        returns = self.declared_type()
        function = {"params": params, "returns": returns, "body": None, "name": tok.value}
        if prefix not in self.xpath.namespaces:
            raise self.error(f"no namespace for the prefix {prefix!r}", tok.start, "XPST0081")
        if name in XPathParser.RESERVED_FUNCTION_NAMES:  # local:function is allowed
            self.renamed[tok.value] = f"{prefix}:{name}{_RENAMED}"
            name += _RENAMED
        arity = len(params)
        names = ", ".join(f"a{i}" for i in range(arity))
        namespace: dict = {}
        exec(f"def call({names}): return run(({names}{',' if arity == 1 else ''}))", namespace)
        namespace["run"] = lambda args: _call(self.runtime, function, args)
        try:
            self.xpath.external_function(
                namespace["call"],
                name=name,
                prefix=prefix,
                sequence_types=("item()*",) * (arity + 1),
            )
        except ElementPathError as exc:
            raise self.error(str(exc), tok.start, "XQST0034") from None
        self.runtime.setdefault("functions", []).append(function)
        self.expect("{")
        if self.accept("}"):
            function["body"] = A.Sequence([])
            return
        function["body"] = self.parse_expr()
        self.expect("}")

    def parse_expr(self) -> A.Expr:
        items = [self.parse_single()]
        while self.peek().value == ",":
            self.next()
            items.append(self.parse_single())
        return items[0] if len(items) == 1 else A.Sequence(items)

    def parse_single(self, juxtaposed: bool = False, paren_stops: bool = False) -> A.Expr:
        """One ExprSingle: a FLWOR, or an XPath span (with nested parts substituted)."""
        tok = self.peek()
        if self._flwor_start(tok):
            return self.parse_flwor()
        return self.parse_span(juxtaposed, paren_stops)

    def _flwor_start(self, tok: Token) -> bool:
        if tok.kind != "name" or tok.value not in FLWOR_STARTS:
            return False
        after = lex(self.text, tok.end)
        if after.kind == "var":
            return True
        return tok.value == "for" and after.value in ("tumbling", "sliding")

    def parse_span(self, juxtaposed: bool, paren_stops: bool) -> A.Expr:
        start = self.pos
        out: list[str] = []
        placeholders: list[tuple[str, A.Expr]] = []
        depth = 0
        operand_end = False  # the previous token ended an operand
        pending = {"then": 0, "else": 0, "satisfies": 0}
        first = None
        last = start
        while True:
            tok = self.peek()
            if tok.kind == END:
                break
            v = tok.value
            if depth == 0 and self._span_ends(tok, operand_end, juxtaposed, paren_stops, pending):
                break
            if first is None:
                first = tok.start
            parse = None if operand_end else self._nested(tok)
            if parse is not None:  # a FLWOR, a constructor, ...: an expression of our own
                self.pos = tok.start
                expr = parse(tok)
                if expr is not None:
                    out.append(self.text[last : tok.start])
                    out.append(self._placeholder(placeholders, expr))
                    last, operand_end = self.pos, True
                    continue
                self.pos = tok.start  # (an 'if' of plain XPath: read as XPath)
            self.pos = tok.end
            if tok.kind == "string" and _PI_TEST.search(
                self.text, max(0, tok.start - 80), tok.start
            ):
                target = " ".join(_literal(v).split())
                if not _NCNAME.fullmatch(target):
                    raise self.error(
                        f"processing-instruction({v}): not an NCName", tok.start, "XPTY0004"
                    )
            if tok.kind == "string" and "&" in v:
                out.append(self.text[last : tok.start])
                out.append(_xpath_string(_literal(v)))
                last = tok.end
            if tok.kind == "symbol" and v in _OPENERS:
                depth += 1
                operand_end = False
            elif tok.kind == "symbol" and v in (")", "]", "}"):
                depth -= 1
                operand_end = True
            elif tok.kind in ("var", "string", "number"):
                operand_end = True
            elif tok.kind == "name":
                if operand_end:  # an operator word: and, div, eq, instance of, ...
                    operand_end = False
                    after = self.peek()
                    if v in TYPE_OPERATORS and after.value == TYPE_OPERATORS[v]:
                        self.pos = self._skip_type(after.end)  # instance of xs:integer+
                        operand_end = True
                        continue
                    if depth == 0 and v in ("then", "else", "satisfies"):
                        pending[v] -= 1
                        if v == "then":
                            pending["else"] += 1
                else:
                    after = self.peek()
                    if depth == 0 and v == "if" and after.value == "(":
                        pending["then"] += 1
                    if depth == 0 and v in ("some", "every") and after.kind == "var":
                        pending["satisfies"] += 1
                        self.pos = after.end  # the bound variable
                        operand_end = False
                        continue
                    operand_end = after.value not in ("(", "::")
                    if paren_stops and depth == 0 and after.value == "(" and after.start > tok.end:
                        operand_end = True  # 'in /s/e ($a $b)': the pattern starts at '('

            elif v in ("*", "?", ".", ".."):
                operand_end = v in (".", "..") or not operand_end
            else:
                operand_end = False
        out.append(self.text[last : self.pos])
        if first is None:
            tok = self.peek()
            raise self.error(f"expected an expression, found {_describe(tok)}", tok.start)
        body = "".join(out).strip()
        alone = len(placeholders) == 1 and re.fullmatch(
            rf"\(*\s*\${placeholders[0][0]}\s*\)*", body
        )
        if alone and body.count("(") == body.count(")"):
            return placeholders[0][1]  # a FLWOR or constructor, maybe in parentheses
        return self._compile(body, first, placeholders)

    def _skip_type(self, pos: int) -> int:
        """The end of the sequence type at ``pos`` (``xs:integer?``, ``element(a)*``)."""
        tok = lex(self.text, pos)
        end = tok.end
        after = lex(self.text, end)
        if after.value == "(":
            depth, end = 0, after.start
            while True:
                t = lex(self.text, end)
                if t.kind == END:
                    raise self.error("unterminated sequence type", after.start)
                depth += {"(": 1, ")": -1}.get(t.value, 0) if t.kind == "symbol" else 0
                end = t.end
                if depth == 0:
                    break
        occurrence = lex(self.text, end)
        if occurrence.kind == "symbol" and occurrence.value in "?*+" and occurrence.start == end:
            end = occurrence.end
        return end

    def _span_ends(self, tok, operand_end, juxtaposed, paren_stops, pending) -> bool:
        v = tok.value
        if tok.kind == "symbol":
            if v in (",", ")", "]", "}", ";"):
                return True
            return paren_stops and operand_end and v == "("
        if tok.kind in ("var", "string", "number"):
            return juxtaposed and operand_end
        if tok.kind != "name" or not operand_end:
            return False
        if v in ("then", "else", "satisfies"):
            return pending[v] == 0
        if v in CLAUSE_WORDS or (self.switches and v in ("case", "default")):
            return True
        after = lex(self.text, tok.end)
        if v in ("for", "let", "count", "pattern"):
            return after.kind == "var" or (v == "for" and after.value in ("tumbling", "sliding"))
        if v in ("group", "order"):
            return after.value == "by"
        if v == "stable":
            return after.value == "order"
        return v == "empty" and after.value in ("greatest", "least")

    def _placeholder(self, placeholders: list, expr: A.Expr) -> str:
        self.placeholders += 1
        name = f"_xq{self.placeholders}"
        placeholders.append((name, expr))
        return f"${name}"

    def _compile(self, body: str, offset: int, placeholders: list) -> A.XPath:
        for name, renamed in self.renamed.items():  # calls of local:if(...) and the like
            body = re.sub(rf"(?<![\w:.\-]){re.escape(name)}(?=\s*[(#])", renamed, body)
        lone = _LONE_SLASH.search(body)
        if lone:  # XQuery 3.1 A.2.1.3: '/' then '<' would start a constructor
            raise static_error(
                self.text,
                offset + lone.start(1),
                "a '/' alone before '<' must be written '(/)'",
                "XPST0003",
            )
        try:
            token = self.xpath.parse(body)
            _check_kind_tests(token)
        except ElementPathError as exc:
            code = getattr(exc, "code", None) or "XPST0003"
            code = code.split(":")[-1]
            message = getattr(exc, "message", str(exc))
            at = offset
            span = getattr(getattr(exc, "token", None), "span", None)
            if span is not None and not placeholders:  # the failing token's place in the
                at += min(span[0], len(body))  # XPath part, which starts at offset
            raise static_error(self.text, min(at, len(self.text)), message, code) from None
        return A.XPath(body, offset, placeholders, token)

    # -- FLWOR ---------------------------------------------------------------

    def parse_flwor(self) -> A.FLWOR:
        start = self.pos
        clauses: list = []
        while True:
            tok = self.peek()
            v = tok.value if tok.kind == "name" else None
            if v == "return":
                self.next()
                if not clauses:
                    raise self.error("a FLWOR needs a for, let, window or pattern clause", start)
                return A.FLWOR(clauses, self.parse_single(), start)
            syntax = FLWOR_CLAUSES.get(v)
            if syntax is None or (syntax.follows and not clauses) or not syntax.here(self):
                raise self.error(f"expected a FLWOR clause or 'return', found {_describe(tok)}")
            self.next()
            at = self.pos
            clauses += syntax.parse(self, v)
            if v == "group":
                self._check_grouping(clauses, at)

    def _check_grouping(self, clauses: list, at: int) -> None:
        """``group by $k`` groups by a variable this FLWOR binds (XQuery 3.1 §3.12.7)."""
        bound: set = set()
        for clause in clauses[:-1]:
            bound.update(_bound_variables(clause))
        for spec in clauses[-1].specs:
            if spec.var is not None and spec.expr is None and spec.var not in bound:
                raise static_error(
                    self.text, at, f"${spec.var} is not bound by this FLWOR's clauses", "XQST0094"
                )
            if spec.var is not None:
                bound.add(spec.var)

    # each parses the clauses its keyword (read already) begins (FLWOR_CLAUSES)

    def for_clauses(self, keyword: str) -> list:
        if self.peek().value in ("tumbling", "sliding"):
            return [self.parse_window()]
        return self.parse_for()

    def let_clauses(self, keyword: str) -> list:
        return self.parse_let()

    def pattern_clauses(self, keyword: str) -> list:
        return [self.parse_pattern()]

    def where_clauses(self, keyword: str) -> list:
        return [A.Where(self.parse_single())]

    def count_clauses(self, keyword: str) -> list:
        return [A.Count(self.var())]

    def group_clauses(self, keyword: str) -> list:
        self.expect("by")
        return [self.parse_group_by()]

    def order_clauses(self, keyword: str) -> list:
        if keyword == "stable":
            self.expect("order")
        self.expect("by")
        return [self.parse_order_by(keyword == "stable")]

    def parse_for(self) -> list[A.For]:
        out = []
        while True:
            var = self.var()
            declared = self.declared_type()
            allowing_empty = self.peek().value == "allowing"
            if allowing_empty:
                self.next()
                self.expect("empty")
            position = None
            if self.accept("at"):
                at = self.pos
                position = self.var()
                if position == var:  # XQuery 3.1 §3.12.2
                    raise static_error(
                        self.text, at, f"${var} is both the variable and its position", "XQST0089"
                    )
            self.expect("in")
            out.append(A.For(var, position, self.parse_single(), declared, allowing_empty))
            if not self.accept(","):
                return out

    def parse_let(self) -> list[A.Let]:
        out = []
        while True:
            var = self.var()
            declared = self.declared_type()
            self.expect(":=")
            out.append(A.Let(var, self.parse_single(), declared))
            if not self.accept(","):
                return out

    def parse_group_by(self) -> A.GroupBy:
        specs = []
        while True:
            tok = self.peek()
            if tok.kind == "var" and self._ends_group_key(self.peek(1)):
                var = self.var()
                declared = self.declared_type()
                if declared is not None and self.peek().value != ":=":
                    raise self.error("a typed grouping variable needs ':= expression'")
                expr = self.parse_single() if self.accept(":=") else None
                specs.append(A.GroupSpec(var, expr, declared))
            else:
                specs.append(A.GroupSpec(None, self.parse_single()))
            self.collation()
            if not self.accept(","):
                return A.GroupBy(specs)

    def collation(self) -> None:
        """An optional ``collation "URI"``: only the Unicode codepoint collation."""
        if self.accept("collation"):
            tok = self.next()
            if tok.kind != "string" or "codepoint" not in tok.value:
                raise static_error(
                    self.text, tok.start, "only the codepoint collation is supported", "XQST0076"
                )

    @staticmethod
    def _ends_group_key(tok: Token) -> bool:
        """Whether ``tok`` follows a grouping variable (``group by $k, ...``)."""
        if tok.kind == END or tok.value in (":=", ",", ")", "}", "]", "collation", "as"):
            return True
        return tok.kind == "name" and tok.value in CLAUSE_ENDS

    def parse_order_by(self, stable: bool) -> A.OrderBy:
        specs = []
        while True:
            spec = A.OrderSpec(self.parse_single())
            if self.accept("descending"):
                spec.descending = True
            else:
                self.accept("ascending")
            if self.accept("empty"):
                tok = self.next()
                if tok.value not in ("greatest", "least"):
                    raise self.error("expected 'greatest' or 'least'", tok.start)
                spec.empty_greatest = tok.value == "greatest"
            if self.accept("collation"):
                tok = self.next()
                if tok.kind != "string" or "codepoint" not in tok.value:
                    raise static_error(
                        self.text,
                        tok.start,
                        "only the codepoint collation is supported",
                        "XQST0076",
                    )
            specs.append(spec)
            if not self.accept(","):
                return A.OrderBy(specs, stable)

    def parse_window(self) -> A.Window:
        kind = self.next().value
        self.expect("window")
        var = self.var()
        declared = self.declared_type()
        self.expect("in")
        expr = self.parse_single()
        self.expect("start")
        start = self.parse_window_condition()
        end, only = None, False
        if self.accept("only"):
            only = True
            self.expect("end")
            end = self.parse_window_condition()
        elif self.accept("end"):
            end = self.parse_window_condition()
        if kind == "sliding" and end is None:
            raise self.error("a sliding window needs an end clause")
        names = [var, *start.names(), *(end.names() if end else [])]
        if len(set(names)) != len(names):
            raise self.error("the variables of a window clause must differ", code="XQST0103")
        return A.Window(kind == "sliding", var, expr, start, end, only, declared)

    def _nested(self, tok: Token):
        """How an expression this parser reads itself (not elementpath) starts at ``tok``,
        where an operand may start: its parse method, given ``tok`` (None: none starts)."""
        v = tok.value
        if self._flwor_start(tok):
            return lambda tok: self.parse_flwor()
        after = lex(self.text, tok.end).value if tok.kind == "name" else None
        if v == "if" and after == "(" and tok.start not in self.plain_ifs:
            return self._lazy_if
        if v == "typeswitch" and after == "(":
            return lambda tok: self.parse_typeswitch()
        if tok.kind == "name" and self._computed_start(tok):
            return lambda tok: self.parse_computed()
        if v == "<" and tok.kind == "symbol" and _NCNAME.match(self.text, tok.end):
            return lambda tok: self.parse_constructor()
        return None

    def _lazy_if(self, tok: Token) -> A.If | None:
        """An ``if`` whose branches hold a FLWOR or a constructor, read as an expression of
        its own: those are evaluated ahead of the XPath around them, so the branch not
        taken would be too (and its errors raised). None (and nothing read) otherwise."""
        self.pos = tok.start
        self.next()
        self.expect("(")
        condition = self.parse_expr()
        self.expect(")")
        self.expect("then")
        then = self.parse_single()
        self.expect("else")
        otherwise = self.parse_single()
        if _plain_xpath(then) and _plain_xpath(otherwise):
            self.plain_ifs.add(tok.start)  # read again as XPath: not again as this
            return None
        return A.If(condition, then, otherwise, tok.start)

    def parse_typeswitch(self) -> A.Typeswitch:
        """``typeswitch (E) case $v as T | U return R … default $d return D``."""
        start = self.next().start
        self.expect("(")
        operand = self.parse_expr()
        self.expect(")")
        cases: list = []
        self.switches += 1
        try:
            while self.accept("case"):
                var = None
                if self.peek().kind == "var":
                    var = self.var()
                    self.expect("as")
                types = [self.sequence_type()]
                while self.accept("|"):
                    types.append(self.sequence_type())
                self.expect("return")
                cases.append((var, types, self.parse_single()))
            if not cases:
                raise self.error("a typeswitch needs a case")
            self.expect("default")
            default_var = self.var() if self.peek().kind == "var" else None
            self.expect("return")
        finally:
            self.switches -= 1
        return A.Typeswitch(operand, cases, default_var, self.parse_single(), start)

    def declared_type(self) -> A.SequenceType | None:
        """``as SequenceType`` after a for, let or window variable."""
        if not self.accept("as"):
            return None
        return self.sequence_type()

    def sequence_type(self) -> A.SequenceType:
        tok = self.peek()
        if tok.value == "empty-sequence" and self.peek(1).value == "(":
            self.next()
            self.next()
            self.expect(")")
            return A.SequenceType(None)
        item, occurrence = self.parse_sequence_type()
        return A.SequenceType(item, occurrence)

    def parse_window_condition(self) -> A.WindowCondition:
        cond = A.WindowCondition()
        if self.peek().kind == "var":
            cond.current = self.var()
        if self.accept("at"):
            cond.position = self.var()
        if self.accept("previous"):
            cond.previous = self.var()
        if self.accept("next"):
            cond.next = self.var()
        self.expect("when")
        cond.when = self.parse_single()
        return cond

    # -- the pattern clause ---------------------------------------------------

    def parse_pattern(self) -> A.Pattern:
        start = self.pos
        var = self.var()
        sliding = True
        tok = self.peek()
        if tok.value in ("tumbling", "sliding"):
            sliding = self.next().value == "sliding"
        selection = "allmatch"
        if self.peek().value in SELECTIONS:
            selection = self.next().value
        self.expect("in")
        expr = self.parse_single(juxtaposed=True, paren_stops=True)
        regex = self.parse_regex()
        self.expect("using")
        variables = [self.parse_pattern_var()]
        while self.peek().kind == "var":
            variables.append(self.parse_pattern_var())
        pattern = A.Pattern(var, sliding, selection, expr, regex, variables, start)
        self._check_pattern(pattern)
        return pattern

    def parse_regex(self):
        options = [self.parse_regex_seq()]
        while self.accept("or"):
            options.append(self.parse_regex_seq())
        return options[0] if len(options) == 1 else A.RAlt(options)

    def parse_regex_seq(self):
        items = []
        while True:
            tok = self.peek()
            if tok.kind == "var":
                self.next()
                items.append(A.RVar(tok.value, tok.start))
            elif tok.value == "(" and tok.kind == "symbol":
                self.next()
                items.append(self.parse_regex())
                self.expect(")")
            else:
                break
        if not items:
            tok = self.peek()
            raise self.error(f"expected a pattern variable or '(', found {_describe(tok)}")
        return items[0] if len(items) == 1 else A.RSeq(items)

    def parse_pattern_var(self) -> A.PatternVar:
        tok = self.peek()
        name = self.var()
        self.accept("as")
        item_type, occurrence = self.parse_sequence_type()
        pvar = A.PatternVar(name, item_type, occurrence, None, pos=tok.start)
        while self.peek().value in PATTERN_VARS and self.peek(1).kind == "var":
            role = self.next().value
            if getattr(pvar, role):
                raise self.error(f"'{role}' given twice for ${name}")
            setattr(pvar, role, self.var())
            self.accept(",")
        self.expect("when")
        pvar.when = self.parse_single(juxtaposed=True)
        return pvar

    def parse_sequence_type(self) -> tuple[A.ItemType, str]:
        tok = self.next()
        if tok.kind != "name":
            raise self.error(f"expected a sequence type, found {_describe(tok)}", tok.start)
        if tok.value in KIND_TESTS and self.peek().value == "(":
            self.next()
            name = None
            inner = self.peek()
            if inner.value != ")":
                inner = self.next()
                if inner.kind not in ("name", "symbol") or inner.value in ("(", ","):
                    raise self.error("expected a name or '*'", inner.start)
                name = inner.value
                if tok.value in ("element", "attribute") and self.accept(","):
                    self._untyped_annotation(tok.value)
            self.expect(")")
            item = A.ItemType(tok.value, None if name == "*" else name)
        elif tok.value == "empty-sequence":
            raise self.error("empty-sequence() cannot be a pattern variable's type", tok.start)
        else:
            local = tok.value.split(":")[-1]
            if local not in ATOMIC_TYPES and f"xs:{local}" not in builtin_atomic_types:
                raise static_error(
                    self.text, tok.start, f"unknown type {tok.value}", code="XPST0051"
                )
            item = A.ItemType("atomic", local)
        occurrence = ""
        after = self.peek()
        if after.kind == "symbol" and after.value in ("?", "*", "+") and after.start == self.pos:
            occurrence = self.next().value
        return item, occurrence

    def _untyped_annotation(self, kind: str) -> None:
        """The type of ``element(N, T)`` / ``attribute(N, T)``: documents here are untyped,
        so T is one every element (attribute) has, or the test would need a schema."""
        tok = self.next()
        untyped = {"element": ("xs:untyped", "xs:anyType")}.get(
            kind, ("xs:untypedAtomic", "xs:anySimpleType", "xs:anyAtomicType")
        )
        if tok.value not in KNOWN_TYPES:
            raise static_error(self.text, tok.start, f"unknown type {tok.value}", "XPST0008")
        if tok.value not in untyped:
            raise static_error(
                self.text, tok.start, f"{kind}(…, {tok.value}) needs a schema", "XPST0051"
            )
        self.accept("?")

    def _check_pattern(self, pattern: A.Pattern) -> None:
        declared = {}
        for pvar in pattern.variables:
            if pvar.name in declared:
                raise self.error(f"${pvar.name} is declared twice", pvar.pos)
            declared[pvar.name] = pvar
            if pvar.nested and (set(pvar.bound_names()) - {pvar.nested, pvar.before}):
                raise self.error(f"${pvar.name}: 'nested' combines only with 'before'", pvar.pos)
        seen = set()
        for ref in A.regex_vars(pattern.regex):
            if ref.name not in declared:
                raise static_error(
                    self.text, ref.pos, f"${ref.name} has no 'using' clause", "XPST0008"
                )
            seen.add(ref.name)
        twice = check_single_binding(pattern.regex)
        if twice:
            raise self.error(f"${twice} would be bound twice by one match", pattern.pos)
        for name, pvar in declared.items():
            if name not in seen:
                raise self.error(f"${name} is declared but not used in the pattern", pvar.pos)

    # -- direct constructors ----------------------------------------------------

    def parse_constructor(self) -> A.Element:
        text = self.text
        start = self.pos
        assert text[self.pos] == "<"
        m = _NAME.match(text, self.pos + 1)
        if m is None:
            raise self.error("expected an element name after '<'")
        name = m.group()
        self.pos = m.end()
        attributes = []
        while True:
            self._skip_space()
            if text.startswith("/>", self.pos):
                self.pos += 2
                return self._element(name, attributes, start, False)
            if text.startswith(">", self.pos):
                self.pos += 1
                break
            m = _NAME.match(text, self.pos)
            if not m:
                raise self.error(f"expected an attribute or '>' in <{name}>")
            if attributes and not text[self.pos - 1].isspace():  # <a x="1"y="2">
                raise self.error("attributes must be separated by white space")
            self.pos = m.end()
            self._skip_space()
            if not text.startswith("=", self.pos):
                raise self.error("expected '=' after the attribute name")
            self.pos += 1
            self._skip_space()
            at = self.pos
            attributes.append((m.group(), self.parse_attribute_value()))
            self._check_attribute(attributes, at)
        return self._element(name, attributes, start, True)

    def _element(self, name: str, attributes: list, start: int, content: bool) -> A.Element:
        """The element, its content read (``content``). In a query whose prolog declares
        namespaces its names are resolved (``{uri}local``) with those and the namespace
        declarations of the constructor and the ones around it, which are then no
        attributes. (Those of a constructor bind its names, not the name tests inside
        it: elementpath looks prefixes up when it runs, in one table per query.)"""
        self._check_expanded_names(attributes, start)
        if not self.declared:  # names as spelled, but xml:, bound everywhere
            attributes = [(expanded_name(k, XML_SCOPE, False), v) for k, v in attributes]
            return A.Element(name, attributes, self.parse_content(name) if content else [], start)
        scope = dict(self.scopes[-1])
        kept = []
        for key, value in attributes:
            if key == "xmlns" or key.startswith("xmlns:"):
                uri = "".join(part for part in value if isinstance(part, str))
                scope[key[6:]] = uri
                if uri:
                    self.prefixes.setdefault(uri, key[6:])
            else:
                kept.append((expanded_name(key, scope, False), value))
        self.scopes.append(scope)
        try:
            parts = self.parse_content(name) if content else []
        finally:
            self.scopes.pop()
        return A.Element(expanded_name(name, scope, True), kept, parts, start)

    def _check_expanded_names(self, attributes: list, at: int) -> None:
        """Two prefixed attributes of one constructor with one expanded name (``p:a`` and
        ``q:a``, p and q bound to one URI): XQST0040."""
        prefixed = [key for key, _ in attributes if ":" in key and not key.startswith("xmlns:")]
        if len(prefixed) < 2:
            return
        scope = {**XML_SCOPE, **(self.scopes[-1] if self.declared else {})}
        for key, value in attributes:
            if key == "xmlns" or key.startswith("xmlns:"):
                scope[key[6:]] = "".join(part for part in value if isinstance(part, str))
        seen: set[str] = set()
        for key in prefixed:
            expanded = expanded_name(key, scope, False)
            if expanded in seen:
                raise static_error(self.text, at, f"the attribute {key} is given twice", "XQST0040")
            seen.add(expanded)

    def _check_attribute(self, attributes: list, at: int) -> None:
        """The static rules of XQuery 3.1 §3.9.1.1 and §3.9.1.2 on the attribute just
        read: no name twice (XQST0040; XQST0071 for namespace declarations), and a
        namespace declaration binds neither ``xmlns`` nor the XML namespace otherwise
        than as ``xml`` (XQST0070)."""
        name, value = attributes[-1]
        declaration = name == "xmlns" or name.startswith("xmlns:")
        if any(other == name for other, _ in attributes[:-1]):
            code = "XQST0071" if declaration else "XQST0040"
            raise static_error(self.text, at, f"the attribute {name} is given twice", code)

        if not declaration:
            return
        uri = "".join(part for part in value if isinstance(part, str))
        prefix = name[6:] if name != "xmlns" else ""
        if (
            prefix == "xmlns"
            or uri == XMLNS_NAMESPACE
            or (prefix == "xml") != (uri == XML_NAMESPACE)
        ):
            raise static_error(
                self.text, at, f"{name} cannot bind {uri or 'no namespace'}", "XQST0070"
            )

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def parse_attribute_value(self) -> list:
        text = self.text
        quote = text[self.pos] if self.pos < len(text) else ""
        if quote not in ("'", '"'):
            raise self.error("expected a quoted attribute value")
        self.pos += 1
        parts: list = []
        buf: list[str] = []
        while True:
            if self.pos >= len(text):
                raise self.error("unterminated attribute value")
            c = text[self.pos]
            if c == quote:
                if text.startswith(quote * 2, self.pos):
                    buf.append(quote)
                    self.pos += 2
                    continue
                self.pos += 1
                break
            if c == "{" and not text.startswith("{{", self.pos):
                _flush(parts, buf)
                parts.append(self.parse_enclosed())
            elif text.startswith(("{{", "}}"), self.pos):
                buf.append(c)
                self.pos += 2
            elif c == "}":
                raise self.error("'}' in an attribute value must be written '}}'")
            elif c == "&":
                buf.append(self.parse_reference())
            elif c == "<":
                raise self.error("'<' is not allowed in an attribute value")
            else:
                buf.append(" " if c in "\t\n\r" else c)
                self.pos += 1
        _flush(parts, buf)
        return parts

    def _computed_start(self, tok: Token) -> bool:
        """``element {``, ``element NAME {``, ``text {`` …: a computed constructor."""
        if tok.value not in COMPUTED:
            return False
        after = lex(self.text, tok.end)
        if after.kind == "symbol" and after.value == "{":
            return True
        if tok.value in ("element", "attribute") and after.kind == "name":
            return lex(self.text, after.end).value == "{"
        return False

    def parse_computed(self) -> A.Computed:
        start = self.pos
        kind = self.next().value
        name = None
        if kind in ("element", "attribute"):
            if self.peek().value == "{":
                self.next()
                name = self.parse_expr()
                self.expect("}")
            else:
                name = self.next().value
        self.expect("{")
        if self.accept("}"):
            return A.Computed(kind, name, None, start)
        content = self.parse_expr()
        self.expect("}")
        return A.Computed(kind, name, content, start)

    def parse_enclosed(self) -> A.Expr:
        self.pos += 1  # {
        if self.peek().value == "}":
            self.next()
            return A.Sequence([])
        expr = self.parse_expr()
        self.expect("}")
        return expr

    def parse_reference(self) -> str:
        m = re.compile(r"&(#x[0-9a-fA-F]+|#\d+|lt|gt|amp|quot|apos);").match(self.text, self.pos)
        if not m:
            raise self.error("bad character or entity reference", code="XPST0003")
        self.pos = m.end()
        return html.unescape(m.group())

    def parse_content(self, name: str) -> list:
        text = self.text
        parts: list = []
        buf: list[str] = []
        literal = False  # the text chunk has a reference or CDATA: never boundary space
        while True:
            if self.pos >= len(text):
                raise self.error(f"<{name}> is not closed")
            c = text[self.pos]
            if text.startswith("</", self.pos):
                _flush(parts, buf, literal)
                self.pos += 2
                m = _NAME.match(text, self.pos)
                if not m or m.group() != name:
                    raise static_error(
                        text, self.pos, f"end tag does not match <{name}>", "XQST0118"
                    )
                self.pos = m.end()
                self._skip_space()
                if not text.startswith(">", self.pos):
                    raise self.error("expected '>'")
                self.pos += 1
                return parts
            if text.startswith("<!--", self.pos):
                end = text.find("-->", self.pos)
                if end < 0:
                    raise self.error("unterminated comment")
                self.pos = end + 3
            elif text.startswith("<?", self.pos):  # a processing instruction: dropped too
                end = text.find("?>", self.pos)
                if end < 0 or not _NAME.match(text, self.pos + 2):
                    raise self.error("expected a processing instruction <?target …?>")
                self.pos = end + 2
            elif text.startswith("<![CDATA[", self.pos):
                end = text.find("]]>", self.pos)
                if end < 0:
                    raise self.error("unterminated CDATA section")
                buf.append(text[self.pos + 9 : end])
                literal = True
                self.pos = end + 3
            elif c == "<":
                _flush(parts, buf, literal)
                literal = False
                parts.append(self.parse_constructor())
            elif c == "{" and not text.startswith("{{", self.pos):
                _flush(parts, buf, literal)
                literal = False
                parts.append(self.parse_enclosed())
            elif text.startswith(("{{", "}}"), self.pos):
                buf.append(c)
                self.pos += 2
            elif c == "}":
                raise self.error("'}' in element content must be written '}}'")
            elif c == "&":
                buf.append(self.parse_reference())
                literal = True
            else:
                buf.append(c)
                self.pos += 1


COMPUTED = ("element", "attribute", "text", "comment", "document")

# the type names an element or attribute test may name, schemas aside
KNOWN_TYPES = frozenset(
    [*builtin_atomic_types, *builtin_list_types, "xs:anyType", "xs:untyped", "xs:anySimpleType"]
)


def _check_kind_tests(token) -> None:
    """``element(N, T)`` and ``attribute(N, T)`` name a type that exists (XPST0008:
    elementpath 5.1 accepts any name there)."""
    todo = [token]
    while todo:
        token = todo.pop()
        kind_test = token.symbol in ("element", "attribute") and token.label == "kind test"
        if kind_test and len(token) == 2:
            named = token[1][0] if token[1].symbol == "?" else token[1]
            name = _qname(named)
            if name not in KNOWN_TYPES:
                raise ElementPathError(f"unknown type {name}", code="XPST0008", token=named)
        todo.extend(token)


def _qname(token) -> str:
    if token.symbol == ":" and len(token) == 2:
        return f"{token[0].value}:{token[1].value}"
    return str(token.value)


def _plain_xpath(expr) -> bool:
    return isinstance(expr, A.XPath) and not expr.placeholders


def _bound_variables(clause) -> list:
    """The variables a FLWOR clause binds (for its group by's check)."""
    if isinstance(clause, A.For):
        return [clause.var, clause.position]
    if isinstance(clause, A.Let | A.Count):
        return [clause.var]
    if isinstance(clause, A.Window):
        return [clause.var, *clause.start.names(), *(clause.end.names() if clause.end else [])]
    if isinstance(clause, A.Pattern):
        return [clause.var, *(v.name for v in clause.variables)]
    if isinstance(clause, A.GroupBy):
        return [spec.var for spec in clause.specs]
    return []


class ClauseSyntax(NamedTuple):
    """How a FLWOR clause's keyword is read: ``follows`` (only after another clause),
    ``parse`` (the parser's method, given the keyword), ``here`` (whether the keyword
    begins the clause at this point)."""

    follows: bool
    parse: Callable
    here: Callable = lambda parser: True


# the FLWOR clauses by their first keyword (a new clause: its node in ast.py, its syntax
# here, its evaluation in evaluate.CLAUSES, its outline in explain.CLAUSES)
FLWOR_CLAUSES = {
    "for": ClauseSyntax(False, Parser.for_clauses),
    "let": ClauseSyntax(False, Parser.let_clauses),
    "pattern": ClauseSyntax(False, Parser.pattern_clauses, lambda p: p.peek(1).kind == "var"),
    "where": ClauseSyntax(True, Parser.where_clauses),
    "count": ClauseSyntax(True, Parser.count_clauses),
    "group": ClauseSyntax(True, Parser.group_clauses),
    "order": ClauseSyntax(True, Parser.order_clauses),
    "stable": ClauseSyntax(True, Parser.order_clauses),
}


def _flush(parts: list, buf: list[str], literal: bool = True) -> None:
    """Move the buffered text into ``parts``; boundary whitespace is dropped."""
    chunk = "".join(buf)
    buf.clear()
    if chunk and (literal or not chunk.isspace()):
        parts.append(chunk)


def _literal(token: str) -> str:
    """A string literal's value: quotes off, doubled quotes single, references decoded."""
    return _decode(token[1:-1].replace(token[0] * 2, token[0]))


def _decode(body: str) -> str:
    return re.sub(
        r"&(#x[0-9a-fA-F]+|#\d+|lt|gt|amp|quot|apos);", lambda m: html.unescape(m[0]), body
    )


def _xpath_string(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _describe(tok: Token) -> str:
    return "the end of the query" if tok.kind == END else f"'{tok.value}'"


# xs: types a pattern variable may select (``xs:integer+``)
ATOMIC_TYPES = {
    "anyAtomicType",
    "untypedAtomic",
    "string",
    "boolean",
    "decimal",
    "integer",
    "double",
    "float",
    "numeric",
    "date",
    "dateTime",
    "time",
    "duration",
    "dayTimeDuration",
    "yearMonthDuration",
}
