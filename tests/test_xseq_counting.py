"""The counting index (xcep.xseq.counting) against comparing atom by atom: for random
conjunctions of comparisons with constants of every kind (numbers, numerals,
strings, either way round) and random values (none, one or several per
expression), the positions it passes, with their other conjuncts checked, are
exactly those whose conjunctions hold by XSeq's comparison rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from xcep.xseq import ast as A
from xcep.xseq.counting import CountingIndex, attribute_atom, reference_atom
from xcep.xseq.values import compare

EXPRESSIONS = [A.RelPath(A.Step(A.ATTRIBUTE, A.ELEMENT, name)) for name in ("a", "b")]
EXPRESSIONS.append(A.RelPath(A.Step(A.CHILD, A.TEXT, "*")))  # not an attribute: never indexed
TEXTS = ["1", "01", "1.0", " 2", "-0", "10", "abc", "Abc", "", "1e3", "x y", "inf", "1_0", "2"]
CONSTANTS = st.one_of(st.sampled_from(TEXTS), st.sampled_from([0.0, -0.0, 1.0, 2.5, 10.0, 1e3]))
VALUES = st.one_of(st.sampled_from(TEXTS), st.sampled_from([1.0, 2.5, 4.0]))

ATOM = st.tuples(
    st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    st.sampled_from(range(len(EXPRESSIONS))),
    CONSTANTS,
    st.booleans(),  # the constant on the left
)


def comparison(op: str, expr: int, constant, flipped: bool):
    sides = (EXPRESSIONS[expr], A.Const(constant))
    return A.Compare(op, *(sides[::-1] if flipped else sides))


def value_of(expr, found: dict) -> list:
    return [expr.value] if isinstance(expr, A.Const) else found[expr]


@settings(max_examples=400, deadline=None)
@given(
    keys=st.lists(st.lists(ATOM, max_size=4), max_size=12),
    values=st.lists(st.lists(VALUES, max_size=3), min_size=3, max_size=3),
    atom_of=st.sampled_from([attribute_atom, reference_atom]),
)
def test_passing_keys_are_those_whose_comparisons_hold(keys, values, atom_of) -> None:
    conjunctions = [[comparison(*atom) for atom in key] for key in keys]
    found = dict(zip(EXPRESSIONS, values, strict=True))
    index = CountingIndex(conjunctions, atom_of)

    def holds(cond) -> bool:
        return compare(cond.op, value_of(cond.left, found), value_of(cond.right, found))

    passing = [k for k in index.passing(found.__getitem__) if all(map(holds, index.rest[k]))]
    expected = [k for k, conds in enumerate(conjunctions) if all(map(holds, conds))]
    assert passing == expected
    if atom_of is reference_atom:  # no reference among them: nothing is indexed
        assert index.atoms == 0


def test_attribute_atoms_and_conjuncts() -> None:
    at = EXPRESSIONS[0]
    cond = A.And(A.Compare(">", A.Const(3.0), at), A.Compare("=", at, A.Const("x")))
    first, second = A.conjuncts(cond)
    assert attribute_atom(first) == (at, "<", 3.0)  # 3 > @a  is  @a < 3
    assert attribute_atom(second) == (at, "=", "x")
    assert attribute_atom(A.Compare("!=", at, A.Const("x"))) is None
    assert attribute_atom(A.Compare("=", EXPRESSIONS[2], A.Const("x"))) is None
    assert attribute_atom(A.Compare("=", at, A.Const(float("inf")))) is None
