"""Static checks and the facts both evaluators need about a parsed XSeq query.

``analyze(query)`` checks variables, Kleene-* bodies, step kinds and the
partition-by prefix rule, splits the where clause into conjuncts (per
iteration of one Kleene-* group, or per match), and returns an ``Analysis``.
Errors are ``QuerySyntaxError`` with the position of the construct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xcep.xseq import ast as A
from xcep.xseq.parser import QuerySyntaxError, parse_query


class NotFast(Exception):
    """A query no fast path takes (xcep.xseq.paths, xcep.xseq.sequence); the message names
    the construct that keeps it on the automaton."""


@dataclass(frozen=True)
class Conjunct:
    cond: object
    group: int | None  # the Kleene-* group it is checked for at each iteration, or None
    variables: frozenset  # the variables it refers to


@dataclass
class Analysis:
    query: A.Query
    variables: tuple  # variable names, in order of appearance
    kleene: dict  # variable -> its innermost Kleene-* group
    group_of_star: dict = field(default_factory=dict)
    iteration: dict = field(default_factory=dict)  # group -> [Conjunct]
    per_match: list = field(default_factory=list)  # [Conjunct]
    mode: str = "nodes"  # nodes | rows | aggregate | grouped
    path: object = None  # the path to run (the remainder under the partition root)
    partition: tuple | None = None  # (element path, attribute name)

    def __post_init__(self) -> None:
        self.index = {name: i for i, name in enumerate(self.variables)}  # variable -> slot


def analyze(query: A.Query | str) -> Analysis:
    if isinstance(query, str):
        query = parse_query(query)
    text = query.text

    def error(message: str, pos: int = 0):
        raise QuerySyntaxError(message, text, pos)

    kleene: dict[str, int] = {}
    seen: dict[str, int] = {}

    def visit(node, group, last: bool):
        if isinstance(node, A.Step):
            if node.var:
                seen[node.var] = node.pos
                if group is not None:
                    kleene[node.var] = group
            if (node.axis == A.ATTRIBUTE or node.kind == A.TEXT) and not last:
                error("an attribute or text() step must be the last step of a path", node.pos)
            for pred in node.preds:
                check_predicate(pred)
        elif isinstance(node, A.Seq):
            bound: set = set()
            for i, item in enumerate(node.items):
                visit(item, group, last and i == len(node.items) - 1)
                again = bound & bound_variables(item)
                if again:
                    error(f"${sorted(again)[0]} is bound twice in the from clause", _pos(item))
                bound |= bound_variables(item)
        elif isinstance(node, A.Union | A.Intersect):
            for item in node.items:
                visit(item, group, last)
            if isinstance(node, A.Intersect) and any(
                isinstance(n, A.Step) and n.var for n in A.walk(node)
            ):
                error("the operands of intersect cannot bind variables", node.pos)
        elif isinstance(node, A.Star):
            if nullable(node.body):
                error("the body of a Kleene-* must move to another node", node.pos)
            back = next((s for s in path_steps(node.body) if s.axis in A.BACKWARD_AXES), None)
            if back is not None:
                error(
                    f"a Kleene-* body cannot use the {back.axis} axis: it could come back to "
                    "where it started and repeat without end",
                    back.pos,
                )
            visit(node.body, node.group, False)

    def check_predicate(pred):
        for node in A.walk(pred):
            if isinstance(node, A.VarRef | A.Tag | A.VarTest):
                error(
                    "variables cannot be used in step predicates; relate them in the where clause",
                    node.pos,
                )
            if isinstance(node, A.Const) and isinstance(node.value, float) and pred is node:
                error("positional predicates ([n]) are not supported", 0)

    visit(query.path, None, True)
    analysis = Analysis(query, query.variables, kleene)

    def refs(expr) -> list[A.VarRef]:
        found = [n for n in A.walk(expr) if isinstance(n, A.VarRef)]
        for ref in found:
            if ref.var not in seen:
                error(f"${ref.var} is not bound in the from clause", ref.pos)
            if ref.func and ref.var not in kleene:
                error(f"{ref.func}() needs a variable under a Kleene-*; ${ref.var} is not", ref.pos)
            if ref.path is not None:
                visit(ref.path, None, True)
        return found

    for clause in (query.where, *(t.expr for t in query.returns or ())):
        for node in _outside_predicates(clause):
            if isinstance(node, A.RelPath):  # nothing for it to start from
                error(
                    f"{A.to_text(node)!r} has no node to start from: start it from a "
                    "variable ($X/…, $X@name)",
                    node.pos,
                )

    for conjunct in A.conjuncts(query.where) if query.where is not None else []:
        found = refs(conjunct)
        groups = {kleene[r.var] for r in found if r.var in kleene and r.func in (None, "prev")}
        if len(groups) > 1:
            names = sorted({f"${r.var}" for r in found if r.var in kleene})
            error(
                "a condition cannot relate iterations of different Kleene-* groups "
                f"({', '.join(names)}); compare first() or last() instead",
                found[0].pos,
            )
        group = groups.pop() if groups else None
        item = Conjunct(conjunct, group, frozenset(r.var for r in found))
        if group is None:
            analysis.per_match.append(item)
        else:
            analysis.iteration.setdefault(group, []).append(item)

    if query.returns is None:
        analysis.mode = "nodes"
    else:
        for term in query.returns:
            for ref in refs(term.expr):
                if ref.func == "prev":
                    error("prev() can only be used in the where clause", ref.pos)
        aggregates = [t.aggregate is not None for t in query.returns]
        analysis.mode = (
            "rows" if not any(aggregates) else "aggregate" if all(aggregates) else "grouped"
        )
    analysis.path = query.path
    if query.partition is not None:
        analysis.path, analysis.partition = _split_partition(query, error)
    return analysis


def bound_variables(path) -> set:
    """The variables a path can bind."""
    return {n.var for n in A.walk(path) if isinstance(n, A.Step) and n.var}


def check_streamable(pred, text: str) -> None:
    """Predicates may look into the node's subtree and at its ancestors, not at its siblings."""
    for node in A.walk(pred):
        if isinstance(node, A.RelPath):
            _check_streamable_path(node.path, text, "a predicate")
    check_no_ancestor_values(pred, text)


def check_streamable_clauses(query: A.Query) -> None:
    """The where clause and outputs read from their variables' nodes as predicates read
    from theirs (``check_streamable``): an ancestor's tag, attributes, whether it is
    there, how many there are, not its content (``$X/..`` as a value or output)."""
    conditions = A.conjuncts(query.where) if query.where is not None else []
    for expr in (*conditions, *(t.expr for t in query.returns or ())):
        for node in A.walk(expr):
            if isinstance(node, A.VarRef) and node.path is not None:
                _check_streamable_path(node.path, query.text, "a where condition or output")
            if isinstance(node, A.VarTest):
                check_streamable(node.cond, query.text)
    for conjunct in conditions:
        check_no_ancestor_values(conjunct, query.text)
    for term in query.returns or ():
        if isinstance(term.expr, A.Tag) or term.aggregate == "count":
            continue  # (its tag, how many: known as it opens)
        for ref in A.walk(term.expr):
            steps = _upward_steps(ref.path if isinstance(ref, A.VarRef) else None)
            if steps and steps[-1].axis != A.ATTRIBUTE:
                raise QuerySyntaxError(
                    "an output cannot be an ancestor's value in a stream: its content came "
                    "before the match was known; output its attributes (../@name) or tag()",
                    query.text,
                    steps[-1].pos,
                )


def _upward_steps(path) -> list:
    """The steps of a path (a variable's or a predicate's) that steps up, or none."""
    if path is None:
        return []
    steps = [s for s in A.walk(path) if isinstance(s, A.Step)]
    return steps if any(s.axis in A.BACKWARD_AXES for s in steps) else []


def check_no_ancestor_values(cond, text: str) -> None:
    """A condition may test that an ancestor is there and compare its attributes, not its
    value: its content is still to come in a stream."""
    for node in A.walk(cond):
        for operand in (node.left, node.right) if isinstance(node, A.Compare | A.Arith) else ():
            path = operand.path if isinstance(operand, A.RelPath | A.VarRef) else None
            steps = _upward_steps(path)
            if steps and steps[-1].axis != A.ATTRIBUTE:
                raise QuerySyntaxError(
                    "a condition cannot compare the value of an ancestor in a stream: its "
                    "content is still to come; compare its attributes (../@name)",
                    text,
                    steps[-1].pos,
                )


def _check_streamable_path(path, text: str, what: str) -> None:
    """A path from a node (a predicate's, or a variable's in the where clause) may go down
    into its subtree, or up to its ancestors (and their attributes), not to siblings."""
    steps = [n for n in A.walk(path) if isinstance(n, A.Step)]
    backward = any(step.axis in A.BACKWARD_AXES for step in steps)
    for step in steps:
        if step.axis in (A.FOLLOWING_SIBLING, A.NEXT_SIBLING, A.PRECEDING_SIBLING) or (
            backward and step.axis not in (*A.BACKWARD_AXES, A.SELF, A.ATTRIBUTE)
        ):
            raise QuerySyntaxError(
                f"{what} cannot use the {step.axis} axis here in a stream: it looks "
                "outside the node's subtree and its ancestors",
                text,
                step.pos,
            )


def _pos(path) -> int:
    return next((n.pos for n in A.walk(path) if hasattr(n, "pos")), 0)


def _outside_predicates(node):
    """The nodes of a where condition or return term, but not those of ``$X[…]`` tests
    and step predicates (whose relative paths start from the tested node)."""
    if node is None:
        return
    yield node
    if isinstance(node, A.VarTest):
        yield node.ref
        return
    if isinstance(node, A.Step | A.VarRef):
        return
    for name in getattr(node, "__slots__", ()):
        value = getattr(node, name)
        if hasattr(value, "__slots__"):
            yield from _outside_predicates(value)


_DOWNWARD = (A.CHILD, A.DESCENDANT, A.DESCENDANT_OR_SELF, A.FIRST_CHILD)


def nested_bindings(path, var: str) -> bool:
    """Whether one node bound to the Kleene-* variable ``var`` can be below another: a
    Kleene-* group that binds it steps down (``(/$X)*``; siblings, ``(\\$X)*``, do not
    nest). Then what a path reads below its nodes, node after node, is not in document
    order."""
    return any(
        isinstance(node, A.Star)
        and any(step.var == var for step in path_steps(node.body))
        and any(step.axis in _DOWNWARD for step in path_steps(node.body))
        for node in A.walk(path)
    )


def path_steps(path):
    """The steps of a path, not those inside its predicates."""
    if isinstance(path, A.Step):
        yield path
    elif isinstance(path, A.Star):
        yield from path_steps(path.body)
    else:
        for item in path.items:
            yield from path_steps(item)


def nullable(path) -> bool:
    """Whether ``path`` can match without moving (only self steps, or a Kleene-*)."""
    if isinstance(path, A.Step):
        return path.axis == A.SELF
    if isinstance(path, A.Seq | A.Intersect):
        return all(nullable(item) for item in path.items)
    if isinstance(path, A.Union):
        return any(nullable(item) for item in path.items)
    return True  # Star


def _items(path) -> tuple:
    return path.items if isinstance(path, A.Seq) else (path,)


def _split_partition(query: A.Query, error):
    """Check the prefix rule and return (the path under the partition root, partition facts).

    ``partition by C/t@k`` needs the from path to start with C followed by a
    step on the same axis as t: that step selects the partitioned elements
    (those t with attribute k); it becomes a child step of the partition root.
    """
    ppath, attribute, pos = query.partition
    psteps = _items(ppath)
    for step in psteps:
        if not (
            isinstance(step, A.Step)
            and step.axis in (A.CHILD, A.DESCENDANT)
            and step.kind == A.ELEMENT
            and not step.preds
            and not step.var
        ):
            error("a partition by path has only / and // steps with names or *", pos)
    fsteps = _items(query.path)
    prefix = psteps[:-1]
    explain = "its path (without @attribute) must be a prefix of the from path"
    if len(fsteps) < len(psteps):
        error(f"partition by: {explain}", pos)
    for want, have in zip(prefix, fsteps, strict=False):
        if not (
            isinstance(have, A.Step)
            and (have.axis, have.kind, have.name) == (want.axis, want.kind, want.name)
            and not have.preds
            and not have.var
        ):
            error(f"partition by: {explain}", pos)
    head = fsteps[len(prefix)]
    last = psteps[-1]
    if not (isinstance(head, A.Step) and head.axis == last.axis and head.kind == A.ELEMENT):
        error(f"partition by: {explain}; the next step must use the same axis", pos)
    if last.name != "*" and head.name not in ("*", last.name):
        error(f"partition by: the from path selects {head.name}, not {last.name}", pos)
    rest = fsteps[len(psteps) :]
    head = A.Step(A.CHILD, head.kind, head.name, head.preds, head.var, head.pos)
    path = A.Seq((head, *rest)) if rest else head
    return path, (A.Seq(psteps) if len(psteps) > 1 else psteps[0], attribute)
