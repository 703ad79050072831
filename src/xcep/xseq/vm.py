"""The compiled automaton: the queries whose runs the C run (``xcep/xseq/_vm.c``) holds,
their plans, and their runs.

A plan is the machine's states as tables — per state its kind, its wait mode and frame,
the name a wait tests, the variable a match binds, its successors — with the predicates
an open tag's attributes decide (the machine's guards) and the row's terms. The run
keeps the stack of frames, the threads waiting in them and the queue of rows in C, and
follows the ε-closure there; bindings and rows are Python tuples and lists.

It takes most queries (docs/xseq.md, "The compiled automaton"): steps of the child,
descendant, sibling and self axes with predicates on attributes and (pending checks) on
subtrees, unions and Kleene-*, where conditions (a ``Conditions`` tree decided in C, or
``ConditionsInPython`` in Python), ``partition by``, rows, elements and aggregates as output,
every selection policy (``Selection``). ``compiled_plan`` says why it takes no other;
the Python automaton (``automaton.py``) runs those, and is the reference the tests
compare it with.
"""

from __future__ import annotations

from array import array
from xml.sax.saxutils import escape, quoteattr

from xcep.xseq import ast as A
from xcep.xseq.evaluate import attribute_name
from xcep.xseq.lifting import HIDDEN
from xcep.xseq.matches import Aggregator
from xcep.xseq.program import ALL, TEXT
from xcep.xseq.reads import (
    above_only,
    apart,
    child_names,
    outside_tests,
    reads_downward,
    ref_attribute,
    tested_attributes,
    up_to_attributes,
)
from xcep.xseq.semantics import Analysis, nested_bindings
from xcep.xseq.values import as_string, to_number
from xcep.xseq.vm_calls import (
    HEAD,
    Above,
    ConditionsInPython,
    Handout,
    PendingCheck,
    PyTerms,
    RecordNodes,
    Selection,
    ancestor,
)

try:
    from xcep.xseq._vm import Conditions, Vm
except ImportError:  # built without a C compiler: the Python automaton runs every query
    Conditions = Vm = None

_KINDS = {"wait": 0, "match": 1, "split": 2, "begin": 3, "accept": 4, "enter": 5, "iter": 6}
_KINDS.update(ienter=7, join=8)  # intersect: its context node kept, an operand's end
_KINDS.update(attr=9)  # a last step to an attribute: the element has it
_MODES = {"any": 0, "next": 1, "desc": 2, "text": 3, "dtext": 4}  # (text(): child, below)
T_ATTR, T_FIRST, T_LAST, T_ALL, T_TAG, T_NODES, T_PATH, T_PATH_FIRST, T_PATH_LAST = range(9)
T_PY = 9  # a term made in Python on the match's nodes (``PyTerms``)
# what a path read below a node ends on: text children, an attribute, the element itself
# (written out: its XML, or its string value with ``--values``)
P_TEXT, P_ATTR, P_XML, P_EVENTS = 0, 1, 2, 3  # (P_EVENTS: its events, for pending checks)
P_STRING = 4  # (its string value, for pending checks decided in C)
# the nodes of a Conditions tree (``_Program``), which of a variable's nodes a node reads
C_CONST, C_FIELD, C_TAG, C_ARITH, C_CMP, C_AND, C_OR, C_NOT, C_EXISTS = range(9)
C_OPEN, C_HAS = 9, 10  # a guard's: the open tag's attribute (its value; whether it is there)
C_PATH = 11  # a pending check's: the values a record's path collected
R_ONE, R_FIRST, R_LAST, R_ALL, R_PREV = range(5)
_COMPARE = {"<": 0, "<=": 1, "=": 2, "!=": 3, ">": 4, ">=": 5}  # as Python's Py_LT … Py_GE
_ARITH = {"+": 0, "-": 1, "*": 2, "div": 3}


class NotCompiled(Exception):
    """Why the compiled automaton does not take a query."""


class CompiledPlan:
    """The tables of one query's automaton for the compiled run (they never change); with
    aggregates (``found``) the run gives each match's values, which an ``Aggregator``
    folds."""

    def __init__(self, tables: dict, analysis: Analysis, selection: str = "all") -> None:
        self.tables = tables
        self.analysis = analysis
        self.selection = selection  # (a policy other than all: ``Selection`` applies it)

    def vm(self):
        return Vm(**self.tables)


class CompiledRun:
    """A run on the compiled automaton, fed batch by batch (``XSeqRun``); its state is
    the C run's, as plain objects (the frames' threads, the queued rows)."""

    def __init__(self, plan: CompiledPlan, values_only: bool = False) -> None:
        self.plan = plan
        self.vm = plan.vm()
        self.partitioned = plan.tables["route"] is not None  # rows come with their key
        self.aggregator = None
        if plan.tables["found"]:
            self.aggregator = Aggregator(plan.analysis, values_only)
        self.selection = None
        if plan.tables["own"] is not None:
            self.selection = Selection(plan.selection)

    def feed(self, batch) -> list:
        out = self.vm.feed(
            batch.docs, batch.kinds, batch.names, batch.values, batch.nodes, batch.symbols.names
        )
        if self.selection is not None:
            out = self.selection.take(out, self.vm.floors())
        return self._rows(out)

    def end(self, final: bool) -> list:
        out = self.vm.finish(final)
        if self.selection is not None:  # (at the end, every start is decided)
            out = self.selection.take(out, None if final else self.vm.floors())
        rows = self._rows(out)
        if self.aggregator is None or not final:
            return rows
        return self.aggregator.rows(self.vm.partitions() if self.partitioned else None)

    def _rows(self, out: list) -> list:
        """The rows of the matches handed out (with aggregates: their values folded)."""
        if self.aggregator is not None:
            add = self.aggregator.add_values
            for found in out:
                if self.partitioned:
                    add(*found)
                else:
                    add(None, found)
            return []
        return [row for _, row in out] if self.partitioned else out

    def state(self):
        groups = self.aggregator.groups if self.aggregator else None
        return self.vm.state(), groups, self.selection.state() if self.selection else None

    def restore(self, state) -> None:
        self.vm.restore(state[0])
        if self.aggregator is not None:
            self.aggregator.groups = state[1]
        if self.selection is not None:
            self.selection.restore(state[2])


def compiled_plan(
    analysis: Analysis,
    program,
    machine,
    selection: str,
    values_only: bool = False,
    handout: Handout | None = None,
) -> CompiledPlan | str:
    """The plan of the query for the compiled automaton, or why it does not take it
    (``values_only``: elements in the output as their string values, not XML).
    ``handout``: each match handed out as nodes (``Handout``), not made a row in C."""
    try:
        tables = _tables(analysis, program, machine, selection, values_only, handout)
        return CompiledPlan({**tables, "as_text": values_only}, analysis, selection)
    except NotCompiled as why:
        return str(why)


def _tables(
    analysis: Analysis, program, machine, selection: str, values_only: bool, handout
) -> dict:
    if Vm is None:
        raise NotCompiled("the compiled automaton is not built")
    # each match's values are folded (by the C run's; a match handed out: by Python's)
    found = analysis.mode in ("aggregate", "grouped") and handout is None
    attributes: list[str] = list(handout.attributes) if handout else []
    paths: list[tuple] = []
    in_python: list = []  # the terms made in Python, by number
    terms = tuple(
        _term(analysis, term, attributes, paths, found, in_python)
        for term in (analysis.query.returns or () if handout is None else ())
    )
    width = len(program.empty.slots)
    end_slot = -1
    # the match's end node, bound at the accept (an attribute's at its step) where it is
    # written out (a node selection) or may be an attribute or a text (which no row waits for)
    leaves = any(
        st.kind == "attr" or (st.kind == "wait" and st.mode in ("text", "dtext"))
        for st in program.vpa.states
    )
    if any(st.kind == "attr" and st.step.preds for st in program.vpa.states):
        raise NotCompiled("a step to attributes with a predicate")
    if analysis.mode == "nodes" or leaves:
        end_slot, width = width, width + 1
    if analysis.mode == "nodes":  # (an element's XML or string value, a leaf's value)
        paths.append(((), P_XML, None))
        terms = ((T_PATH, end_slot, len(paths) - 1),)
    if handout is not None:  # (the match's nodes, after the end node's value if written)
        terms += ((T_PY, 0, 0),)
    conjuncts = analysis.per_match + [c for cs in analysis.iteration.values() for c in cs]
    # whether a binding keeps where each group was entered (prev(); an intersect's context)
    entries = bool(program.join_width)
    below = set()  # the conjuncts that read below nodes: pending checks, decided on captures
    # whether one reads above nodes: records keep their nodes made with their ancestors
    made = handout is not None and handout.above
    made = made or any(not reads_downward(t.expr) for t in analysis.query.returns or ())
    for conjunct in conjuncts:  # what they read (open tags), the records keep
        for ref in outside_tests(conjunct.cond):
            if isinstance(ref, A.RelPath):
                raise NotCompiled(f"the condition {A.to_text(conjunct.cond)}")
            reads = isinstance(ref, A.VarRef) and ref.path is not None
            tested = tested_attributes(ref) if isinstance(ref, A.VarTest) else None
            if reads and ref_attribute(ref) is None and above_only(ref.path):
                made = True  # ($X/../@k: decided in Python on the node with its ancestors)
            elif tested is not None:  # ($X[@k = 'p']: on its record, which keeps them)
                attributes += [name for name in tested[0] if name not in attributes]
                made = made or tested[1]
            elif isinstance(ref, A.VarTest) or (reads and ref_attribute(ref) is None):
                below.add(id(conjunct))
            if reads and ref_attribute(ref) not in (None, *attributes):
                attributes.append(ref_attribute(ref))
            operands = (ref.left, ref.right) if isinstance(ref, A.Compare | A.Arith) else ()
            if any(isinstance(x, A.VarRef) and x.path is None for x in operands):
                below.add(id(conjunct))  # (a node's string value)
            entries = entries or (isinstance(ref, A.VarRef) and ref.func == "prev")
        if id(conjunct) in below and not reads_downward(conjunct.cond):
            if not up_to_attributes(conjunct.cond):
                raise NotCompiled(f"the condition {A.to_text(conjunct.cond)}")
            made = True  # ($X[b = ../@k]: its node's subtree under the node with ancestors)
    own = None  # a selection policy: the slots of the query's own variables (where it starts)
    if selection != "all":
        own = bytes(not v.startswith(HIDDEN) for v in analysis.variables).ljust(width, b"\0")
    empty = program.empty.slots + ((None,) if end_slot >= 0 else ())
    empty += (None,) * analysis.query.groups if entries else ()
    machine.ready()
    # predicates that read a node's subtree, conditions that read below nodes: pending
    # checks (the bindings end with them), decided on the nodes' captured events
    capture: dict = {}
    pending: list = []  # (the predicates of those checks, by number)
    late: list = []  # (the conditions of those checks: (conjuncts, at an iteration))
    deep_preds = any(fast is None for preds in machine.preds.values() for _, _, fast in preds)
    captures = bytearray(len(empty))
    # predicates on subtrees that compare values of child paths: decided in C on the values
    # the node's record collects (``_CheckProgram``); the others on its captured events
    trees: dict = {}  # id(predicate) -> (its Conditions nodes, root), or None
    for preds in machine.preds.values():
        for pred, reads_below, fast in preds:
            if fast is None and reads_below and id(pred) not in trees:
                checker = _CheckProgram(list(paths), HEAD + len(attributes))
                try:
                    trees[id(pred)] = (checker.nodes, checker.condition(pred))
                except NotCompiled:  # (the paths it added stay out: every record collects them)
                    trees[id(pred)] = None
                    continue
                paths[:] = checker.paths
    value_checks: list = []  # per pending predicate (by number), its tree or None
    if deep_preds or below or in_python or handout:
        paths.append(((), P_EVENTS, None))  # the captured nodes' events
        check = PendingCheck(analysis, pending, late, HEAD + len(attributes) + len(paths) - 1)
        capture = {"decide_check": check, "capture_path": len(paths) - 1}
    decide = _Decide(analysis, attributes, width, entries, HEAD + len(attributes) + len(paths))
    if capture:
        check.nodes, check.width, check.kept = decide.nodes, width, entries
    for term in in_python:  # the nodes those read are captured
        for name in _variables(term.expr):
            captures[analysis.index[name]] = 1
    for name in handout.captured if handout else ():
        captures[analysis.index[name]] = 1
    per_match = [c for c in analysis.per_match if id(c) not in below]
    accept = decide(per_match, False) if per_match else None
    iterate: dict = {}  # group -> its conditions, or the number of their pending check
    for group, items in analysis.iteration.items():
        if any(id(c) in below for c in items):
            late.append((items, True))
            iterate[group] = -len(late)
        else:
            iterate[group] = decide(items, True)
    matched = [c for c in analysis.per_match if id(c) in below]
    if matched:
        late.append((matched, False))
    for conjunct in conjuncts:  # the nodes those read are captured
        if id(conjunct) in below:
            for name in conjunct.variables:
                captures[analysis.index[name]] = 1
                group = analysis.kleene.get(name)
                if group is not None and entries and conjunct.group is not None:
                    captures[width + group] = 1  # (prev() of a first iteration)
    states = machine.states
    guards = _guards(machine)
    # the states a thread enters at an open tag, where their guard is tested (through a
    # begin state: its one successor's): a match state with predicates must be one
    opened = {machine.tests[s.id][1] for s in states if s.kind == "wait"}
    opened |= {
        states[s].next[0] for s in opened if states[s].kind == "begin" and len(states[s].next) == 1
    }
    kinds, modes, sides, kleene = bytearray(), bytearray(), bytearray(), bytearray()
    slots, tests, next_at, targets = array("i"), [], array("i", [0]), array("i")
    checks: list = [None] * len(states)  # match states: a guard; iter states: conditions
    # per match state, its predicates that read the node's subtree (pending checks)
    deep: list = [None] * len(states)
    self_tests: list = [None] * len(states)  # self steps: (the name or None, takes the root)
    # per match state binding a plain variable: the per-match conditions on plain variables
    # that read it, decided as soon as all they read is bound (a thread that fails dies)
    early: list = [None] * len(states)
    joins: list = [None] * len(states)  # intersect: per join (its group, operand, operands)
    # per match state, its predicates decided on the node with its ancestors (those that
    # read above it, or compare its attributes otherwise than a test of one): by number
    up: list = [None] * len(states)
    above: list = []
    plain = [c for c in per_match if not c.variables & analysis.kleene.keys()]
    for state in states:
        kind = _KINDS.get(state.kind)
        if kind is None:
            raise NotCompiled(f"a step of the {state.kind} kind")
        if state.kind == "wait" and state.mode not in _MODES:
            raise NotCompiled(f"a wait of the {state.mode} kind")
        if state.kind == "split" and state.id in machine.fanout:
            raise NotCompiled("an indexed split")
        slot, many = -1, 0
        if state.kind == "match":
            step = state.step
            preds = machine.preds.get(state.id, ())
            if state.test_here:  # a self step: the node it stands on tested in the closure
                tested = (A.ELEMENT, A.NODE)
                if step.axis == A.ATTRIBUTE or step.kind not in tested:
                    raise NotCompiled("a self step that is not an element's")
                name = None if step.kind == A.NODE or step.name == A.WILDCARD else step.name
                self_tests[state.id] = (name, step.kind == A.NODE)  # (the root: node() only)
            for pred, reads_below, fast in apart(preds):
                if fast is not None:
                    continue
                # (its ancestors and attributes: decided as it opens; a text's: as it comes)
                if not reads_below or step.kind == A.TEXT:
                    above.append(pred)
                    up[state.id] = (*(up[state.id] or ()), len(above) - 1)
                    continue
                if not reads_downward(pred):  # (its node made with its ancestors)
                    if not up_to_attributes(pred):
                        raise NotCompiled("a predicate that reads above its node and below it")
                    made = True
                pending.append(pred)
                value_checks.append(trees.get(id(pred)))
                deep[state.id] = (*(deep[state.id] or ()), len(pending) - 1)
            if preds and state.id not in opened:  # entered after a choice: tested there
                checks[state.id] = guards[state.id]
            if step.var:
                slot, many = program.index[step.var], int(step.var in program.kleene)
                reading = [c for c in plain if step.var in c.variables]
                early[state.id] = (
                    tuple(
                        (decide([c], False), tuple(sorted(analysis.index[v] for v in c.variables)))
                        for c in reading
                    )
                    or None
                )
        elif (state.kind == "enter" and entries) or state.kind == "ienter":
            slot = width + state.group  # the group's entry (an intersect's: its context)
        elif state.kind == "join":
            joins[state.id] = (state.group, int(state.mode), program.join_width[state.group])
        elif state.kind == "iter":
            at_iteration = iterate.get(state.group)
            if isinstance(at_iteration, int):  # read below nodes: a pending check
                deep[state.id] = (at_iteration,)
            else:
                checks[state.id] = at_iteration
        elif state.kind == "accept" and matched:
            deep[state.id] = (-len(late),)
        kinds.append(kind)
        modes.append(_MODES.get(state.mode, 0) if state.kind != "join" else 0)
        sides.append(1 if state.frame == "sibling" else 0)
        kleene.append(many)
        slots.append(slot)
        tests.append(
            machine.tests[state.id][0]
            if state.kind == "wait" and state.mode not in ("text", "dtext")
            else (None if state.step.name == A.WILDCARD else state.step.name)
            if state.kind == "attr"
            else None
        )
        targets.extend(state.next)
        next_at.append(len(targets))
    if capture:
        empty += ((),)
        # a captured node keeps only the children its pending checks' predicates read,
        # where those are all that is captured for
        on_events = [pred for pred, tree in zip(pending, value_checks, strict=True) if not tree]
        names = _kept_children(on_events, program.captured_vars, captures, analysis, handout)
        capture.update(deep=deep, captures=bytes(captures), capture_names=names)
        capture["checks_on_events"] = bool(on_events)  # (else its record's paths decide)
        capture["value_checks"] = tuple(
            None if tree is None else Conditions(tuple(tree[0]), tree[1], 0, 0, as_string)
            for tree in value_checks
        )
    # the slots whose nodes a term writes out: only their records write them (not every
    # record of the plan: those of pending checks and other variables too)
    itself = [i for i, (names, kind, _) in enumerate(paths) if names == () and kind == P_XML]
    xml_slots = bytearray(len(empty))
    for op, slot, index in terms:
        if op in (T_PATH, T_PATH_FIRST, T_PATH_LAST) and index in itself:
            xml_slots[slot] = 1
    if made:  # (a record's last field: after its attributes' numbers, where it has them)
        numbers = len(attributes) if decide.numbers else 0
        decide.nodes.made_at = HEAD + len(attributes) + len(paths) + numbers
        if capture:
            check.made_at = decide.nodes.made_at
    return {
        **capture,
        "kinds": bytes(kinds),
        "modes": bytes(modes),
        "sides": bytes(sides),
        "kleene": bytes(kleene),
        "next_at": next_at,
        "next": targets,
        "slots": slots,
        "tests": tests,
        "guards": guards,
        "start": array("i", machine.start),
        "attributes": tuple(attributes),
        "terms": terms,
        "empty": empty,
        "width": width,
        "found": found,
        "paths": tuple(paths),
        "accept": accept,
        "checks": checks,
        "route": None if analysis.partition is None else _route(*analysis.partition),
        "numbers": decide.numbers,
        "early": early,
        "end_slot": end_slot,
        "self_tests": self_tests,
        "own": own,
        "joins": joins,
        **({"up": up, "up_check": Above(above)} if above else {}),
        **({"make_node": ancestor} if above or made else {}),
        "made": made,
        "xml_slots": bytes(xml_slots),
        **({"py_term": PyTerms(analysis, in_python, check, values_only)} if in_python else {}),
        **({"py_term": handout.made(check)} if handout else {}),
        "escape": escape,
        "quoteattr": quoteattr,
    }


def _kept_children(on_events: list, reads: dict, captures, analysis, handout) -> frozenset | None:
    """The children a captured node keeps: those its pending checks' predicates (on the
    node's events) and the conditions and outputs that read its variable's subtree
    (``Program.captured_vars``: what of each) begin with; None for all of them."""
    names = child_names(on_events)
    captured = {v for v in analysis.variables if captures[analysis.index[v]]}
    if handout is not None:
        captured |= handout.captured
    for var in captured:
        read = reads.get(var, ALL)
        if names is None or read is ALL:
            return None
        names = names | {name for name in read if name != TEXT}
    return names


def _route(path, key: str) -> tuple:
    """(the steps of a ``partition by`` path — whether ``//``, the name or None for ``*`` —,
    the key attribute), as the compiled run finds the partitioned elements."""
    steps = path.items if isinstance(path, A.Seq) else (path,)
    route = []
    for step in steps:
        plain = isinstance(step, A.Step) and not step.preds and not step.var
        if not plain or step.kind != A.ELEMENT or step.axis not in (A.CHILD, A.DESCENDANT):
            raise NotCompiled(f"the partition by path {A.to_text(path)}")
        route.append((step.axis == A.DESCENDANT, None if step.name == A.WILDCARD else step.name))
    if len(route) > 63:
        raise NotCompiled("a partition by path of more than 63 steps")
    return (tuple(route), key)


def _term(
    analysis: Analysis, term: A.OutTerm, attributes: list, paths: list, found: bool, py: list
):
    """(op, slot, attribute index) of a term that reads bound nodes' open tags (or counts
    the nodes), or of one made in Python (``T_PY``, its number in ``py``)."""
    expr = term.expr
    counts = term.aggregate == "count" and isinstance(expr, A.VarRef) and expr.path is None
    if counts and expr.func is None:  # count($X) counts the nodes
        return (T_NODES, analysis.index[expr.var], 0)
    if not reads_downward(expr):  # ($X/../@k, tag($X/..): on the node made with ancestors)
        py.append(term)
        return (T_PY, 0, len(py) - 1)
    try:
        op = _reading(analysis, expr, attributes, paths)
    except NotCompiled:  # ($X//b, tag(first($X)), ...)
        op = None
    if op is not None and op[0] == T_PATH and nested_bindings(analysis.query.path, expr.var):
        op = None  # values below nodes that nest: in document order, not node by node
    if op is not None:
        kleene = (expr.ref if isinstance(expr, A.Tag) else expr).var in analysis.kleene
        every = op[0] == T_ALL or (op[0] in (T_PATH, T_TAG) and kleene)
        if not (found and term.aggregate is None and every):  # (beside aggregates: one value)
            return op
    if not _variables(expr):
        raise NotCompiled(f"the output {term.text or A.to_text(expr)}")
    py.append(term)
    return (T_PY, 0, len(py) - 1)


def _variables(expr) -> set:
    """The variables an expression reads."""
    found = {ref.var for ref in A.walk(expr) if isinstance(ref, A.VarRef)}
    return found | {t.ref.var for t in A.walk(expr) if isinstance(t, A.Tag)}


def _reading(analysis: Analysis, expr, attributes: list, paths: list) -> tuple:
    if isinstance(expr, A.Tag):
        ref = expr.ref
        if ref.path is not None or ref.func is not None:  # (a Kleene-* variable's: every tag)
            raise NotCompiled("tag() of first(), last() or a path")
        return (T_TAG, analysis.index[ref.var], 0)
    if not isinstance(expr, A.VarRef) or expr.func == "prev":
        raise NotCompiled(f"the output {A.to_text(expr)}")
    if ref_attribute(expr) is None:  # a path below the node
        path = _child_path(expr.path)
        if path is None:
            raise NotCompiled(f"the output {A.to_text(expr)}")
        if path not in paths:
            paths.append(path)
        slot, index = analysis.index[expr.var], paths.index(path)
        if expr.var not in analysis.kleene:
            return (T_PATH, slot, index)
        return ({None: T_PATH, "first": T_PATH_FIRST, "last": T_PATH_LAST}[expr.func], slot, index)
    name = ref_attribute(expr)
    if name not in attributes:
        attributes.append(name)
    index = attributes.index(name)
    slot = analysis.index[expr.var]
    if expr.var not in analysis.kleene:
        return (T_ATTR, slot, index)
    return ({None: T_ALL, "first": T_FIRST, "last": T_LAST}[expr.func], slot, index)


class _Decide:
    """Makes the test of a list of conjuncts on a binding: a ``Conditions`` tree decided in
    C where ``_Program`` compiles them, else ``ConditionsInPython`` in Python."""

    def __init__(
        self, analysis: Analysis, attributes: list, width: int, kept: bool, numbers_at: int
    ):
        self.analysis, self.attributes = analysis, attributes
        self.width, self.kept, self.numbers_at = width, kept, numbers_at
        self.nodes = RecordNodes(attributes)
        self.numbers = False  # whether a Conditions tree reads the records' numbers

    def __call__(self, conjuncts: list, iteration: bool):
        program = _Program(self.analysis, self.attributes, iteration)
        try:
            root = program.conjunction([c.cond for c in conjuncts])
        except NotCompiled:
            nodes, width = self.nodes, self.width
            return ConditionsInPython(self.analysis, conjuncts, iteration, nodes, width, self.kept)
        self.numbers = True
        return Conditions(tuple(program.nodes), root, self.width, self.numbers_at, as_string)


def _guards(machine) -> list:
    """Per state, the machine's guard (the attribute predicates of a step, tested at the
    open tag) as a ``Conditions`` tree on the open tag's attributes where ``_GuardProgram``
    makes one, else as it is (a test called with the attribute list)."""
    trees: dict = {}  # id(guard) -> its tree
    for state in machine.states:
        guard = machine.guards[state.id]
        if state.kind != "match" or guard is None or id(guard) in trees:
            continue
        conds = [fast.cond for _, _, fast in machine.preds[state.id] if fast is not None]
        program = _GuardProgram()
        try:
            root = program.conjunction(conds)
        except NotCompiled:
            trees[id(guard)] = guard
            continue
        trees[id(guard)] = Conditions(tuple(program.nodes), root, 0, 0, as_string)
    return [None if g is None else trees.get(id(g), g) for g in machine.guards]


class _Program:
    """Conditions as the nodes of a ``Conditions`` tree (``_vm.c``): each (kind, operator,
    which of a variable's nodes, its slot, the attribute's index, the Kleene-* group, left,
    right, a constant's (string, number)); NotCompiled for what the tree does not hold."""

    def __init__(self, analysis: Analysis, attributes: list, iteration: bool) -> None:
        self.analysis, self.attributes, self.iteration = analysis, attributes, iteration
        self.nodes: list[tuple] = []

    def add(self, kind, op=0, ref=(0, 0, 0), at=-1, left=0, right=0, obj=None) -> int:
        which, slot, group = ref
        self.nodes.append((kind, op, which, slot, at, group, left, right, obj))
        return len(self.nodes) - 1

    def conjunction(self, conds: list) -> int:
        root = self.condition(conds[0])
        for cond in conds[1:]:
            root = self.add(C_AND, left=root, right=self.condition(cond))
        return root

    def reference(self, ref: A.VarRef) -> tuple:
        """(which of the variable's nodes, its slot, its group)."""
        analysis = self.analysis
        slot, group = analysis.index[ref.var], analysis.kleene.get(ref.var)
        if group is None:
            return (R_ONE, slot, 0)
        bare = R_LAST if self.iteration else R_ALL  # at an iteration: the latest node
        which = {None: bare, "first": R_FIRST, "last": R_LAST, "prev": R_PREV}[ref.func]
        return (which, slot, group)

    def value(self, expr) -> int:
        if isinstance(expr, A.Const):
            number = to_number(expr.value)
            return self.add(C_CONST, obj=(as_string(expr.value), number))
        if isinstance(expr, A.Tag) and expr.ref.path is None:
            return self.add(C_TAG, ref=self.reference(expr.ref))
        if isinstance(expr, A.VarRef) and ref_attribute(expr) is not None:
            at = self.attributes.index(ref_attribute(expr))
            return self.add(C_FIELD, ref=self.reference(expr), at=at)
        if isinstance(expr, A.Arith):
            left, right = self.value(expr.left), self.value(expr.right)
            return self.add(C_ARITH, _ARITH[expr.op], left=left, right=right)
        raise NotCompiled(A.to_text(expr))

    def condition(self, cond) -> int:
        if isinstance(cond, A.Compare):
            left, right = self.value(cond.left), self.value(cond.right)
            return self.add(C_CMP, _COMPARE[cond.op], left=left, right=right)
        if isinstance(cond, A.And | A.Or):
            left, right = self.condition(cond.left), self.condition(cond.right)
            return self.add(C_AND if isinstance(cond, A.And) else C_OR, left=left, right=right)
        if isinstance(cond, A.Not):
            return self.add(C_NOT, left=self.condition(cond.arg))
        if isinstance(cond, A.Tag) and cond.ref.path is None:
            return self.add(C_EXISTS, ref=self.reference(cond.ref))
        if isinstance(cond, A.VarRef) and (cond.path is None or ref_attribute(cond)):
            at = -1 if cond.path is None else self.attributes.index(ref_attribute(cond))
            return self.add(C_EXISTS, ref=self.reference(cond), at=at)
        raise NotCompiled(A.to_text(cond))


class _GuardProgram(_Program):
    """A guard as the nodes of a ``Conditions`` tree on the open tag's attributes: ``@a``
    its value (``C_OPEN``) or, as a condition, whether it is there (``C_HAS``), constants,
    arithmetic, comparisons, and/or/not."""

    def __init__(self) -> None:
        super().__init__(None, [], False)

    def value(self, expr) -> int:
        name = attribute_name(expr)
        if name is not None:
            return self.add(C_OPEN, obj=name)
        if not isinstance(expr, A.Const | A.Arith):
            raise NotCompiled(A.to_text(expr))
        return super().value(expr)

    def condition(self, cond) -> int:
        name = attribute_name(cond)
        if name is not None:
            return self.add(C_HAS, obj=name)
        if not isinstance(cond, A.Compare | A.And | A.Or | A.Not):
            raise NotCompiled(A.to_text(cond))
        return super().condition(cond)


class _CheckProgram(_Program):
    """A predicate on a node's subtree that compares values of child paths (``note/text()
    = 'x'``, ``bidder/increase > 10``, ``not(reserve)``) as the nodes of a ``Conditions``
    tree on the node's record: a path's values (``C_PATH``: the texts, attributes or
    elements' string values the record collects, at ``offset`` + its number in
    ``paths``; as a condition: whether it has one), constants, arithmetic, comparisons,
    and/or/not."""

    def __init__(self, paths: list, offset: int) -> None:
        super().__init__(None, [], False)
        self.paths, self.offset = paths, offset

    def path(self, rel) -> int:
        found = _child_path(rel.path) if isinstance(rel, A.RelPath) else None
        if found is None:
            raise NotCompiled(A.to_text(rel))
        names, end, attribute = found
        found = (names, P_STRING if end == P_XML else end, attribute)
        if found not in self.paths:
            self.paths.append(found)
        return self.add(C_PATH, at=self.offset + self.paths.index(found))

    def value(self, expr) -> int:
        if isinstance(expr, A.RelPath):
            return self.path(expr)
        if not isinstance(expr, A.Const | A.Arith):
            raise NotCompiled(A.to_text(expr))
        return super().value(expr)

    def condition(self, cond) -> int:
        if isinstance(cond, A.RelPath):
            return self.path(cond)
        if not isinstance(cond, A.Compare | A.And | A.Or | A.Not):
            raise NotCompiled(A.to_text(cond))
        return super().condition(cond)


def _child_path(path) -> tuple | None:
    """(names, end, attribute) of a path of child steps of names that ends on ``text()``, an
    attribute or an element (``name/text()``, ``a/b/@k``, ``a/b``; none: the node itself),
    as the compiled run reads it; else None."""
    if path is None:
        return ((), P_XML, None)
    steps = path.items if isinstance(path, A.Seq) else (path,)
    if not steps or not all(isinstance(step, A.Step) and not step.preds for step in steps):
        return None
    *names, last = steps
    plain = (A.CHILD, A.ELEMENT)
    if any((s.axis, s.kind) != plain or s.name == A.WILDCARD or s.var for s in names):
        return None
    names = tuple(step.name for step in names)
    if last.axis == A.CHILD and last.kind == A.TEXT:
        return (names, P_TEXT, None)
    if last.axis == A.ATTRIBUTE and last.name != A.WILDCARD and names:
        return (names, P_ATTR, last.name)
    if (last.axis, last.kind) == plain and last.name != A.WILDCARD and not last.var:
        return (*names, last.name), P_XML, None
    return None
