"""What the XSeq automaton runs (``engine.py``): a query's program, its members when
queries share a template, and the pending checks a run waits on (subtree predicates and
conditions over nodes still open)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from xcep.xseq import ast as A
from xcep.xseq.conditions import MemberConditions
from xcep.xseq.machine import Machine, needs_subtree
from xcep.xseq.matches import (
    Binding,
)
from xcep.xseq.reads import above_only
from xcep.xseq.semantics import Analysis
from xcep.xseq.vpa import Vpa, compile_to_vpa

PENDING = None


class Check:
    """A condition waiting for subtrees to close; ``state`` becomes True or False."""

    __slots__ = ("count", "decide", "nodes", "state")

    def __init__(self, decide: Callable[[], bool], nodes: list) -> None:
        self.decide = decide
        self.nodes = nodes  # the open nodes it waits for
        self.count = len(nodes)
        self.state = PENDING

    def node_closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.state = bool(self.decide())
            self.decide = self.nodes = None


def _ref_needs_subtree(ref: A.VarRef, as_value: bool) -> bool:
    if ref.path is None:
        return as_value
    steps = [step for step in A.walk(ref.path) if isinstance(step, A.Step)]
    if steps[-1].axis == A.ATTRIBUTE and above_only(ref.path):
        return False  # (its ancestors' attributes: known as it opens)
    return any(step.axis != A.ATTRIBUTE for step in steps)


def _subtree_refs(expr) -> list:
    """The variable references in ``expr`` whose nodes must be complete to evaluate it."""
    found = []

    def visit(node, as_value: bool) -> None:
        if isinstance(node, A.VarRef):
            if _ref_needs_subtree(node, as_value):
                found.append(node)
        elif isinstance(node, A.Tag):
            return
        elif isinstance(node, A.VarTest):
            if needs_subtree(node.cond) or _ref_needs_subtree(node.ref, False):
                found.append(node.ref)
        elif isinstance(node, A.Compare | A.Arith):
            visit(node.left, True)
            visit(node.right, True)
        elif isinstance(node, A.And | A.Or):
            visit(node.left, as_value)
            visit(node.right, as_value)
        elif isinstance(node, A.Not):
            visit(node.arg, as_value)

    visit(expr, False)
    return found


class Program:
    """A compiled query: its analysis, its automaton and what the runtime needs to know."""

    def __init__(self, analysis: Analysis, router: bool = False) -> None:
        self.analysis = analysis
        self.vpa: Vpa = compile_to_vpa(analysis)
        self.empty = Binding.empty(analysis)
        self.index = analysis.index
        self.kleene = analysis.kleene
        self.set_per_match(analysis.per_match)
        self.iteration = {
            g: (items, [r for c in items for r in _subtree_refs(c.cond)])
            for g, items in analysis.iteration.items()
        }
        self.captured_vars = _captured_vars(analysis)
        self.members: dict | None = None  # a template's queries: slot -> Member
        self.interned: dict = {}  # a template's members' variable references
        self.conditions = MemberConditions()  # its members' per-match conditions
        self.member_refs: dict = {}  # id -> the references those read subtrees through
        self.shared_output = None  # a template's TemplateEmitter key, when it has one
        self.decide_at: int | None = None  # the variable whose binding decides every member
        # prev() of a first iteration is the group's entry node: capture it when read deeply
        self.captured_entries = {
            g for g, (items, refs) in self.iteration.items() if any(r.func == "prev" for r in refs)
        }
        self.capture_end = analysis.mode == "nodes" and not router  # a router prints nothing
        self.join_width = {
            n.group: len(n.items) for n in A.walk(analysis.path) if isinstance(n, A.Intersect)
        }

    def set_per_match(self, conjuncts: list) -> None:
        """The per-match conjuncts this automaton checks, each as early as it can."""
        self.per_match = list(conjuncts)
        self.conjunct_refs = [_subtree_refs(c.cond) for c in self.per_match]
        self.conjunct_vars = [[self.index[v] for v in c.variables] for c in self.per_match]
        self.conjunct_kleene = [any(v in self.kleene for v in c.variables) for c in self.per_match]

    def join(self, slot: int, analysis: Analysis) -> None:
        """Make the query of ``analysis`` a member of this template. The template checks
        (early) the per-match conjuncts all its members have; each member checks the rest
        when a match completes."""
        if not self.members:
            self.set_per_match(analysis.per_match)
        common = [c for c in self.per_match if c in analysis.per_match]
        demoted = [c for c in self.per_match if c not in common]
        if demoted:
            self.set_per_match(common)
            for other, member in self.members.items():
                member.add_conditions(demoted, self.interned)
                self.conditions.set(other, member.per_match)
        member = Member(analysis, [c for c in analysis.per_match if c not in common], self.interned)
        self.members[slot] = member
        self.conditions.set(slot, member.per_match)
        for var, reads in member.captured_vars.items():
            self.captured_vars[var] = merge_reads(self.captured_vars.get(var), reads)
        for reading in self.members.values() if demoted else (member,):
            self.member_refs.update((id(r), r) for r in reading.refs)
        self._plan_decision()

    def leave(self, slot: int) -> None:
        del self.members[slot]
        self.conditions.drop(slot)
        self._plan_decision()

    def _plan_decision(self) -> None:
        """When every member has conditions that read only the attributes of variables
        bound once per match (a lifted path's), they are decided as soon as the last of
        those is bound: a thread that no member wants goes no further."""
        self.decide_at = None
        members = self.members
        if not members or len(self.conditions.members) < len(members) or self.member_refs:
            return
        variables = {v for m in members.values() for c in m.per_match for v in c.variables}
        if variables and not variables & set(self.kleene):
            self.decide_at = max(self.index[v] for v in variables)


# what of a captured node's subtree is read: ``ALL`` of it, or {a child's name (``TEXT``:
# its text children) → what of that child's}; the others are not kept (``merge_reads``)
ALL = True
TEXT = "#text"


def merge_reads(a, b):
    """What two readers of one subtree read together (None: nothing)."""
    if a is None or b is ALL:
        return b
    if b is None or a is ALL:
        return a
    merged = dict(a)
    for name, below in b.items():
        merged[name] = merge_reads(merged.get(name), below)
    return merged


def _path_reads(steps: tuple):
    """What the relative path ``steps`` reads of its context node's subtree: along child
    steps of names, only those children (an attribute last: the element, none of its
    subtree; ``text()`` last: the text children); at the node the path ends on, or at a
    step of any other kind (``//``, ``*``, a predicate), all of it."""
    if not steps:
        return ALL
    step, rest = steps[0], steps[1:]
    if step.axis == A.ATTRIBUTE and not rest:
        return {}
    if step.axis == A.CHILD and not step.preds:
        if step.kind == A.TEXT and not rest:
            return {TEXT: ALL}
        if step.kind == A.ELEMENT and step.name != A.WILDCARD:
            return {step.name: _path_reads(rest)}
    return ALL


def _ref_reads(ref: A.VarRef):
    path = ref.path
    if path is None:
        return ALL
    steps = path.items if isinstance(path, A.Seq) else (path,)
    if not all(isinstance(step, A.Step) for step in steps):
        return ALL
    return _path_reads(tuple(steps))


def _captured_vars(analysis: Analysis) -> dict:
    """The variables whose subtrees conditions or outputs read (their nodes are kept), and
    what of them they read (``merge_reads``)."""
    captured: dict = {}
    refs = [
        r
        for conjunct in analysis.per_match + [c for cs in analysis.iteration.values() for c in cs]
        for r in _subtree_refs(conjunct.cond)
    ]
    if analysis.query.returns:
        for term in analysis.query.returns:
            # count($X) counts the nodes (Aggregator.add): it reads no value of theirs
            as_value = not (term.aggregate == "count" and isinstance(term.expr, A.VarRef))
            if isinstance(term.expr, A.Tag):  # tag($X) reads the open tag alone
                continue
            for ref in A.walk(term.expr):
                if isinstance(ref, A.VarRef) and _ref_needs_subtree(ref, as_value):
                    refs.append(ref)
    for ref in refs:
        captured[ref.var] = merge_reads(captured.get(ref.var), _ref_reads(ref))
    return captured


class Member:
    """A query run by a template's automaton (``Program.members``): queries that differ
    only in their per-match conditions share one automaton, one thread per partial match;
    each member checks its own conditions when a match is complete. Its variable
    references are interned in the template's table, so that the members' conditions
    read each value once per match (``make_env(memo=True)``)."""

    def __init__(self, analysis: Analysis, conjuncts: list, refs: dict) -> None:
        self.analysis = analysis
        self.per_match: list = []
        self.refs: list = []
        self.add_conditions(conjuncts, refs)
        self.captured_vars = _captured_vars(analysis)

    def add_conditions(self, conjuncts: list, refs: dict) -> None:
        for conjunct in conjuncts:
            conjunct = replace(conjunct, cond=_intern_refs(conjunct.cond, refs))
            self.per_match.append(conjunct)
            self.refs += _subtree_refs(conjunct.cond)


def _intern_refs(node, table: dict):
    """``node`` with each variable reference replaced by the equal one of ``table``."""
    return A.map_condition(
        node, lambda n: table.setdefault(n, n) if isinstance(n, A.VarRef) else None
    )


class Verdicts(Check):
    """One pending decision for all members of a template on one match: ``passed`` is the
    set of members whose conditions hold."""

    __slots__ = ("passed",)

    def __init__(self, decide: Callable[[], set], nodes: list) -> None:
        super().__init__(decide, nodes)
        self.passed = None

    def node_closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.passed = self.decide()
            self.state = True
            self.decide = None


class MemberCheck:
    """A member's view of ``Verdicts``: a check like the others."""

    __slots__ = ("slot", "verdicts")

    def __init__(self, verdicts: Verdicts, slot: int) -> None:
        self.verdicts = verdicts
        self.slot = slot

    @property
    def state(self):
        passed = self.verdicts.passed
        return PENDING if passed is None else self.slot in passed

    @property
    def nodes(self) -> list:
        return self.verdicts.nodes


def template_key(analysis: Analysis) -> tuple:
    """Queries with the same key can share a template: all but their per-match conditions
    and outputs are the same."""
    iteration = tuple(
        (g, tuple(c.cond for c in cs)) for g, cs in sorted(analysis.iteration.items())
    )
    return (analysis.path, analysis.variables, iteration, analysis.mode == "nodes")


def single_machine(program: Program) -> Machine:
    """The automaton of one query."""
    machine = Machine()
    machine.add(program)
    return machine
