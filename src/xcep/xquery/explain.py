"""``xcep xquery --explain``: the parsed query as an indented outline."""

from __future__ import annotations

from xcep.xquery import ast as A
from xcep.xquery.pattern import compile_pattern


def explain(expr, indent: int = 0) -> str:
    return "\n".join(_lines(expr, indent))


def _lines(expr, depth: int):
    pad = "  " * depth
    if isinstance(expr, A.XPath):
        yield f"{pad}xpath {expr.text}"
        for name, sub in expr.placeholders:
            yield f"{pad}  ${name} :="
            yield from _lines(sub, depth + 2)
    elif isinstance(expr, A.Sequence):
        yield f"{pad}sequence"
        for item in expr.items:
            yield from _lines(item, depth + 1)
    elif isinstance(expr, A.Element):
        yield f"{pad}element <{expr.name}> ({len(expr.attributes)} attributes)"
        for part in expr.content:
            if isinstance(part, str):
                yield f"{pad}  text {part!r}"
            else:
                yield from _lines(part, depth + 1)
    elif isinstance(expr, A.FLWOR):
        yield f"{pad}flwor"
        for clause in expr.clauses:
            yield from _clause(clause, depth + 1)
        yield f"{pad}  return"
        yield from _lines(expr.result, depth + 2)


def _clause(clause, depth: int):
    pad = "  " * depth
    name = type(clause).__name__.lower()
    if isinstance(clause, (A.For, A.Let)):
        at = f" at ${clause.position}" if isinstance(clause, A.For) and clause.position else ""
        empty = " allowing empty" if isinstance(clause, A.For) and clause.allowing_empty else ""
        yield f"{pad}{name} ${clause.var}{empty}{at}"
        yield from _lines(clause.expr, depth + 1)
    elif isinstance(clause, A.Where):
        yield f"{pad}where"
        yield from _lines(clause.expr, depth + 1)
    elif isinstance(clause, A.Count):
        yield f"{pad}count ${clause.var}"
    elif isinstance(clause, A.GroupBy):
        for spec in clause.specs:
            yield f"{pad}group by {'$' + spec.var if spec.var else '(anonymous key)'}"
            if spec.expr is not None:
                yield from _lines(spec.expr, depth + 1)
    elif isinstance(clause, A.OrderBy):
        for spec in clause.specs:
            order = "descending" if spec.descending else "ascending"
            empty = "greatest" if spec.empty_greatest else "least"
            yield f"{pad}order by ({order}, empty {empty})"
            yield from _lines(spec.expr, depth + 1)
    elif isinstance(clause, A.Window):
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
    elif isinstance(clause, A.Pattern):
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
