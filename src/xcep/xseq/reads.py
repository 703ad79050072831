"""What a condition or predicate reads of its node — its attributes, its subtree, its
ancestors (and their attributes) — as the compiled automaton's plan (``vm.py``) and its
template runs (``vm_multi.py``) sort them: decided at the open tag, on a record, on a
node made with its ancestors, or on captured events."""

from __future__ import annotations

from xcep.xseq import ast as A
from xcep.xseq.machine import needs_subtree

_DOWNWARD = (A.CHILD, A.DESCENDANT, A.DESCENDANT_OR_SELF, A.SELF, A.ATTRIBUTE)


def above_only(path) -> bool:
    """Whether a reference's path reads nothing but above its node (``$X/../@k``,
    ``$X/ancestor::b/@id``): its ancestors' tags and attributes, no predicate."""
    steps = path.items if isinstance(path, A.Seq) else (path,)
    upward = (A.PARENT, A.ANCESTOR, A.SELF, A.ATTRIBUTE)
    return all(isinstance(s, A.Step) and s.axis in upward and not s.preds for s in steps) and any(
        s.axis in (A.PARENT, A.ANCESTOR) for s in steps
    )


def up_to_attributes(expr) -> bool:
    """Whether the relative paths of a condition that step up (``..``, ``ancestor::``) read
    nothing but their ancestors' attributes (``[b = ../@k]``): what a node made with its
    ancestors holds, beside its captured subtree."""
    tested = _tested(expr)
    for node in A.walk(expr):
        if isinstance(node, A.VarRef) and node.path is not None and above_only(node.path):
            continue  # ($X/ancestor::b: on the node made with its ancestors)
        path = node.path if isinstance(node, A.RelPath | A.VarRef) else None
        steps = path.items if isinstance(path, A.Seq) else (path,)
        up = any(isinstance(s, A.Step) and s.axis in A.BACKWARD_AXES for s in steps)
        if up and not _read_above(node, tested):
            return False
    return True


def _read_above(rel, tested: set) -> bool:
    """Whether a relative path that steps up reads its ancestors' attributes, or tests that
    an ancestor is there (``..``, ``ancestor::b`` as a condition): no more than what a node
    made with its ancestors holds (not their content)."""
    steps = rel.path.items if isinstance(rel.path, A.Seq) else (rel.path,)
    return above_only(rel.path) and (steps[-1].axis == A.ATTRIBUTE or id(rel) in tested)


def _tested(expr) -> set:
    """The ids of the relative paths a condition (and the predicates in it) tests for a
    node, not compares or reads the value of."""
    found = _as_condition(expr)
    for node in A.walk(expr):
        for pred in node.preds if isinstance(node, A.Step) else ():
            found |= _as_condition(pred)
        if isinstance(node, A.VarTest):
            found |= _as_condition(node.cond)
    return found


def _as_condition(cond) -> set:
    if isinstance(cond, A.RelPath):
        return {id(cond)}
    if isinstance(cond, A.And | A.Or):
        return _as_condition(cond.left) | _as_condition(cond.right)
    if isinstance(cond, A.Not):
        return _as_condition(cond.arg)
    return set()


def outside_tests(cond):
    """The nodes of a condition, but not those inside ``$X[…]`` tests (whose relative paths
    start from the tested node)."""
    yield cond
    if isinstance(cond, A.VarTest):
        yield cond.ref
        return
    for name in getattr(cond, "__slots__", ()):
        value = getattr(cond, name)
        if hasattr(value, "__slots__"):
            yield from outside_tests(value)


def tested_attributes(test: A.VarTest) -> tuple | None:
    """(the attributes of its node ``$X[…]`` reads, whether it reads its ancestors'
    attributes too) where it reads nothing else — decided on the node's record —, else None."""
    if test.ref.path is not None:
        return None
    names, above, tested = [], False, _tested(test.cond)
    for node in A.walk(test.cond):
        if not isinstance(node, A.RelPath):
            continue
        steps = node.path.items if isinstance(node.path, A.Seq) else (node.path,)
        last = steps[-1]
        if len(steps) > 1 or last.axis in A.BACKWARD_AXES:  # (above it: ``../@k``, ``..``)
            if not _read_above(node, tested):
                return None
            above = True
        elif last.axis != A.ATTRIBUTE or last.name == A.WILDCARD or last.preds:
            return None
        else:
            names.append(last.name)
    return names, above


def apart(preds: tuple) -> list:
    """A step's predicates, those that read above their node and below it cut into their
    conjuncts (``[../@k = 'p' and b]``: one decided as the node opens, one pending)."""
    out = []
    for pred, reads_below, fast in preds:
        if fast is None and reads_below and not reads_downward(pred):
            out += [(c, needs_subtree(c), None) for c in A.conjuncts(pred)]
        else:
            out.append((pred, reads_below, fast))
    return out


def child_names(preds: list) -> frozenset | None:
    """The names of the children that predicates on a node read (the first steps of their
    relative paths: its text children and attributes are kept anyway), or None where one
    reads more (a ``//``, self, wildcard or backward step)."""
    names: set = set()
    for pred in preds:
        for node in A.walk(pred):
            if isinstance(node, A.Step) and node.axis in A.BACKWARD_AXES:
                return None
            if not isinstance(node, A.RelPath):
                continue
            first = node.path.items[0] if isinstance(node.path, A.Seq) else node.path
            if not isinstance(first, A.Step):
                return None
            if first.axis == A.ATTRIBUTE or (first.axis, first.kind) == (A.CHILD, A.TEXT):
                continue
            if (first.axis, first.kind) != (A.CHILD, A.ELEMENT) or first.name == A.WILDCARD:
                return None
            names.add(first.name)
    return frozenset(names)


def reads_downward(pred) -> bool:
    """Whether a predicate reads nothing but its node's subtree (and attributes)."""
    return all(s.axis in _DOWNWARD for s in A.walk(pred) if isinstance(s, A.Step))


def ref_attribute(ref: A.VarRef) -> str | None:
    """The attribute a reference reads (``$X@a``), or None when it reads otherwise."""
    path = ref.path
    if type(path) is A.Step and path.axis == A.ATTRIBUTE and path.name != A.WILDCARD:
        return path.name
    return None
