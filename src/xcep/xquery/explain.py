"""``xcep xquery --explain``: the parsed query as an indented outline."""

from __future__ import annotations

from xcep.xquery import ast as A
from xcep.xquery.pattern import compile_pattern


def explain(expr, indent: int = 0) -> str:
    return "\n".join(_lines(expr, indent))


def _lines(expr, depth: int):
    yield from EXPRESSIONS.get(type(expr), _nothing)(expr, "  " * depth, depth)


def _nothing(expr, pad: str, depth: int):
    return iter(())


def _xpath(expr: A.XPath, pad: str, depth: int):
    yield f"{pad}xpath {expr.text}"
    for name, sub in expr.placeholders:
        yield f"{pad}  ${name} :="
        yield from _lines(sub, depth + 2)


def _sequence(expr: A.Sequence, pad: str, depth: int):
    yield f"{pad}sequence"
    for item in expr.items:
        yield from _lines(item, depth + 1)


def _element(expr: A.Element, pad: str, depth: int):
    yield f"{pad}element <{expr.name}> ({len(expr.attributes)} attributes)"
    for part in expr.content:
        if isinstance(part, str):
            yield f"{pad}  text {part!r}"
        else:
            yield from _lines(part, depth + 1)


def _prolog(expr: A.Prolog, pad: str, depth: int):
    functions = len(expr.runtime.get("functions") or ())
    yield f"{pad}prolog: {len(expr.variables)} variables, {functions} functions"
    for name, value, _ in expr.variables:
        yield f"{pad}  declare variable ${name} :="
        yield from _lines(value, depth + 2)
    yield from _lines(expr.body, depth)


def _external(expr: A.External, pad: str, depth: int):
    yield f"{pad}external ${expr.name}"
    if expr.default is not None:
        yield from _lines(expr.default, depth + 1)


def _computed(expr: A.Computed, pad: str, depth: int):
    name = f" {expr.name}" if isinstance(expr.name, str) else ""
    yield f"{pad}computed {expr.kind}{name}"
    if expr.name is not None and not isinstance(expr.name, str):
        yield f"{pad}  name"
        yield from _lines(expr.name, depth + 2)
    if expr.content is not None:
        yield from _lines(expr.content, depth + 1)


def _if(expr: A.If, pad: str, depth: int):
    yield f"{pad}if"
    yield from _lines(expr.condition, depth + 1)
    yield f"{pad}  then"
    yield from _lines(expr.then, depth + 2)
    yield f"{pad}  else"
    yield from _lines(expr.otherwise, depth + 2)


def _typeswitch(expr: A.Typeswitch, pad: str, depth: int):
    yield f"{pad}typeswitch"
    yield from _lines(expr.operand, depth + 1)
    for var, types, result in expr.cases:
        bound = f"${var} as " if var else ""
        yield f"{pad}  case {bound}{' | '.join(map(str, types))}"
        yield from _lines(result, depth + 2)
    yield f"{pad}  default" + (f" ${expr.default_var}" if expr.default_var else "")
    yield from _lines(expr.default, depth + 2)


def _flwor(expr: A.FLWOR, pad: str, depth: int):
    yield f"{pad}flwor"
    for clause in expr.clauses:
        yield from CLAUSES[type(clause)](clause, "  " * (depth + 1), depth + 1)
    yield f"{pad}  return"
    yield from _lines(expr.result, depth + 2)


def _for_or_let(clause: A.For | A.Let, pad: str, depth: int):
    name = type(clause).__name__.lower()
    at = f" at ${clause.position}" if isinstance(clause, A.For) and clause.position else ""
    empty = " allowing empty" if isinstance(clause, A.For) and clause.allowing_empty else ""
    yield f"{pad}{name} ${clause.var}{empty}{at}"
    yield from _lines(clause.expr, depth + 1)


def _where(clause: A.Where, pad: str, depth: int):
    yield f"{pad}where"
    yield from _lines(clause.expr, depth + 1)


def _count(clause: A.Count, pad: str, depth: int):
    yield f"{pad}count ${clause.var}"


def _group_by(clause: A.GroupBy, pad: str, depth: int):
    for spec in clause.specs:
        yield f"{pad}group by {'$' + spec.var if spec.var else '(anonymous key)'}"
        if spec.expr is not None:
            yield from _lines(spec.expr, depth + 1)


def _order_by(clause: A.OrderBy, pad: str, depth: int):
    for spec in clause.specs:
        order = "descending" if spec.descending else "ascending"
        empty = "greatest" if spec.empty_greatest else "least"
        yield f"{pad}order by ({order}, empty {empty})"
        yield from _lines(spec.expr, depth + 1)


def _window(clause: A.Window, pad: str, depth: int):
    kind = "sliding" if clause.sliding else "tumbling"
    yield f"{pad}{kind} window ${clause.var}"
    yield from _lines(clause.expr, depth + 1)
    for label, cond in (("start", clause.start), ("end", clause.end)):
        if cond is None:
            continue
        only = "only " if label == "end" and clause.only_end else ""
        names = " ".join(f"${n}" for n in cond.names())
        yield f"{pad}  {only}{label} {names} when"
        yield from _lines(cond.when, depth + 2)


def _pattern(clause: A.Pattern, pad: str, depth: int):
    kind = "sliding" if clause.sliding else "tumbling"
    yield f"{pad}pattern ${clause.var} {kind} {clause.selection}: {A.regex_text(clause.regex)}"
    yield from _lines(clause.expr, depth + 1)
    for var in clause.variables:
        roles = " ".join(
            f"{r} ${getattr(var, r)}"
            for r in ("before", "after", "all", "pprev", "pcur", "nested")
            if getattr(var, r)
        )
        yield f"{pad}  ${var.name} as {var.item_type}{var.occurrence} {roles} when"
        yield from _lines(var.when, depth + 2)
    yield f"{pad}  nfa:"
    for line in compile_pattern(clause).describe().splitlines():
        yield f"{pad}    {line}"


# the outline of each kind of expression and each FLWOR clause (evaluate.py has the same
# tables for evaluation, parser.FLWOR_CLAUSES the clauses' syntax)
EXPRESSIONS = {
    A.XPath: _xpath,
    A.Sequence: _sequence,
    A.Element: _element,
    A.FLWOR: _flwor,
    A.Prolog: _prolog,
    A.External: _external,
    A.Computed: _computed,
    A.Typeswitch: _typeswitch,
    A.If: _if,
}
CLAUSES = {
    A.For: _for_or_let,
    A.Let: _for_or_let,
    A.Where: _where,
    A.Count: _count,
    A.GroupBy: _group_by,
    A.OrderBy: _order_by,
    A.Window: _window,
    A.Pattern: _pattern,
}
