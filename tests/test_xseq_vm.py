"""The compiled automaton (xcep/xseq/vm.py, _vm.c) equals the Python automaton and the
reference evaluator on random queries it takes and random documents, at every batch size,
when its runs are saved and resumed at random points, and on documents cut short."""

from __future__ import annotations

import io
from array import array
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.test_xseq_runs import _cut_and_resumed
from tests.xseq_queries import _query, documents, path
from tests.xseq_queries import step as random_step

from xcep.errors import InputError
from xcep.events import EventStream, parse
from xcep.testing.xseq_reference import evaluate
from xcep.xseq import QuerySyntaxError, XSeqEngine, routing
from xcep.xseq.vm import CompiledPlan, Conditions, Vm

pytestmark = pytest.mark.skipif(Vm is None, reason="the compiled automaton is not built")


AGGREGATES = ("max", "min", "sum", "avg", "count")
READS = ("@x", "/b/text()", "/a/@x")


@st.composite
def compiled_queries(draw) -> str:
    """A random path with variables, a return clause of what the compiled automaton reads
    (attributes, tags and paths below bound nodes; aggregates of them) and conditions."""
    variables: list = []
    body = draw(path(variables, False, True))
    if not variables:  # a variable at the end
        axis = draw(st.sampled_from(("/", "//", "\\")))
        body += f" {axis}$W"
        variables.append(("$W", False))
    terms = []
    for name, kleene in variables[:3]:
        options = [f"{name}@x", f"{name}@k", f"tag({name})"]
        options += [f"first({name})@x", f"last({name})@k"] if kleene else []
        # values below the node: paths of child steps to text() or an attribute
        options += [f"{name}/b/text()", f"{name}/text()", f"{name}/a/@x", f"{name}/c/b/text()"]
        options += [name, f"{name}/b", f"{name}/c/a"]  # elements: XML, or string values
        options += [f"{name}/../@x", f"{name}/ancestor::*/@k"]  # above: its ancestors'
        options += [f"tag({name}/..)", f"{name}/../@x + 1"]
        options += [f"first({name})/b/text()", f"last({name})/a/@k"] if kleene else []
        terms.append(draw(st.sampled_from(options)))
    if draw(st.integers(0, 2)) == 0:  # aggregates (and a plain term of one value beside)
        name = variables[0][0]
        terms = [
            draw(
                st.sampled_from([f"{a}({name}{r})" for a in AGGREGATES for r in (*READS, "/../@x")])
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
        terms.append(f"count({draw(st.sampled_from([n for n, _ in variables]))})")
        if draw(st.booleans()):
            terms.append(f"count({name}/ancestor::*)")
        if draw(st.booleans()) and not variables[0][1]:
            terms.append(f"{name}@k")
    query = f"return {', '.join(terms)} from {body}"
    conditions = []
    for name, kleene in variables:  # on the open tags: tags (node tests), attributes
        options = [f"tag({name}) = '{draw(st.sampled_from('abc'))}'", f"{name}@x > 1"]
        options += [f"not({name}@k = 'p')", f"{name}@x + 1 < 4 or tag({name}) = 'b'"]
        options += [f"{name}@k = {other}@k" for other, _ in variables if other != name]
        # arithmetic, strings against numbers, missing attributes, existence, tags, values
        options += [f"{name}@x * 2 div {name}@x = 2", f"{name}@k < 'q'", f"{name}@x != 'a'"]
        options += [f"{name}@x - 1 >= 1.5", f"not({name}@x)", f"{name}@k", f"{name} = 't'"]
        options += [f"tag({name}) = tag({other})" for other, _ in variables if other != name]
        # below the node: pending checks, decided once the nodes close
        options += [f"{name}/b/@x > 1", f"{name}/a = 't'", f"{name}[b]", f"not({name}/c)"]
        # $X[…] tests: of its attributes (on its record), reading below or above it
        options += [f"{name}[@x = 2 or @k = 'q']", f"not({name}[@x > 1 and @k])"]
        options += [f"{name}[b/@x = ../@x]", f"{name}[@x = ancestor::*/@x]"]
        # above the node: its ancestors' tags and attributes (records keep made nodes)
        options += [
            f"{name}/../@x >= 1",
            f"{name}/ancestor::b/@k = 'q'",
            f"{name}@x = {name}/../@x",
        ]
        options += [f"last({name})@x >= first({name})@x"] if kleene else []
        # at every iteration of its group: the latest node, the one before it (prev())
        options += [f"{name}@x < prev({name})@x", f"prev({name})@k = {name}@k"] if kleene else []
        if draw(st.booleans()):
            conditions.append(draw(st.sampled_from(options)))
    return query + (" where " + " and ".join(conditions) if conditions else "")


ITERATION_BODIES = (
    "//a (\\ $Y)*",
    "//$X (\\ $Y)*",
    "/r/a $X (\\ b $Y)*",
    "//b (/$Y)*",
    "//$X (//$Y)*",
    "/r ($Y[@x > 1] \\ $Z)*",
    "//a (\\ $Y | /$Y)* \\ $Z",
)
ITERATION_CONDITIONS = (
    "$Y@x < prev($Y)@x",
    "$Y@x >= prev($Y)@x",
    "prev($Y)@k = $Y@k",
    "not(prev($Y)@x > 2)",
    "$Y@x > 1",
    "$Y@x + prev($Y)@x < 6",
    "prev($Y)@x div $Y@x > 1",
    "not(prev($Y)@k)",
    "tag(prev($Y)) = tag($Y)",
    "$Y/b/@x >= prev($Y)/b/@x",
    "prev($Y) = $Y",
)


@st.composite
def iteration_queries(draw) -> str:
    """A path with a Kleene-* group and conditions at each of its iterations (the latest
    node, the one before it: ``prev()``), with per-match conditions and aggregates beside."""
    body = draw(st.sampled_from(ITERATION_BODIES))
    names = [n for n in ("$X", "$Y", "$Z") if n in body]
    terms = draw(st.lists(st.sampled_from(["first($Y)@x", "last($Y)@k", "$Y@x"]), min_size=1))
    terms += [f"{n}@x" for n in names if n != "$Y" and draw(st.booleans())]
    if draw(st.booleans()):  # aggregates
        terms = ["count($Y)", draw(st.sampled_from(["max($Y@x)", "sum($Y@x)", "count($Y@k)"]))]
    conditions = draw(st.lists(st.sampled_from(ITERATION_CONDITIONS), min_size=1, max_size=2))
    if "$X" in names and draw(st.booleans()):
        conditions.append("last($Y)@x > $X@x")
    return f"return {', '.join(terms)} from {body} where {' and '.join(conditions)}"


PARTITIONS = (  # (partition by, the from path's start: a step on the same axis as its last)
    ("/r/a@k", "/r/a"),
    ("/r/a@k", "/r/$X"),
    ("//a@k", "//a"),
    ("//a@x", "//$X"),
    ("/r/*@k", "/r/$X"),
    ("//*@x", "//$X"),
    ("//b@k", "//b"),
)
PARTITION_STEPS = (" \\ {v}", " (\\ {v})*", " /{v}", " //b {v}", " (\\ a {v})*", " {v}", " (/{v})*")


@st.composite
def partition_queries(draw) -> str:
    """A query with ``partition by``: each partition a virtual document of the partitioned
    elements (nested ones taken out of the outer ones' subtrees), with sibling steps that
    go from one of its elements to the next, across documents."""
    partition, start = draw(st.sampled_from(PARTITIONS))
    steps = draw(st.lists(st.sampled_from(PARTITION_STEPS), min_size=1, max_size=2))
    names = ["$X"] if "$X" in start else []
    body = start
    for step, name in zip(steps, ("$Y", "$Z"), strict=False):
        body += step.format(v=name)
        names.append(name)
    kleene = [n for n in names if f"{n})*" in body]
    if draw(st.booleans()):  # aggregates, one row per partition
        function = draw(st.sampled_from(["max", "min", "sum"]))
        terms = [f"count({names[-1]})", f"{function}({names[0]}@x)"]
        if names[0] not in kleene and draw(st.booleans()):
            terms.append(f"{names[0]}@k")  # a plain term: the partition's first match's
    else:
        terms = []
        for n in names:
            read = draw(st.sampled_from(["@x", "@k", "/b/text()"]))
            terms.append(f"last({n}){read}" if n in kleene else f"{n}{read}")
    conditions = [
        condition.replace("$Y", n)
        for n in kleene
        for condition in draw(st.lists(st.sampled_from(ITERATION_CONDITIONS), max_size=1))
    ]
    if len(names) > 1 and not kleene and draw(st.booleans()):
        conditions.append(f"{names[0]}@k = {names[1]}@k")
    where = f" where {' and '.join(conditions)}" if conditions else ""
    return f"return {', '.join(terms)} from {body}{where} partition by {partition}"


def _batches(text: str, size: int) -> list:
    return list(EventStream([io.BytesIO(text.encode())], batch_size=size).batches())


def _engines(query: str, opt: str = "all", values_only: bool = False, selection: str = "all"):
    """(the engine on the compiled automaton, the one on the Python automaton), or None
    when the language refuses the query or the compiled automaton does not take it (also
    where a fast path would run it). ``opt="none"``: the conditions stay the where
    clause's (not node tests, predicates); ``values_only``: elements as string values."""
    options = {"opt": opt, "values_only": values_only, "selection": selection}
    try:
        compiled = XSeqEngine(query, runtime="compiled", **options)
    except QuerySyntaxError:
        return None
    if not isinstance(compiled.fast_path, CompiledPlan):
        return None
    return compiled, XSeqEngine(query, runtime="automaton", **options)


def _compared(
    query: str, text: str, size: int, opt: str = "all", values: bool = False, selection="all"
):
    """The rows of the query on the Python automaton, checked equal on the compiled one
    and the reference evaluator; None where the compiled automaton does not take it."""
    engines = _engines(query, opt, values, selection)
    if engines is None:
        return None
    compiled, python = engines
    expected = list(python.run(iter(_batches(text, size))))
    assert list(compiled.run(iter(_batches(text, size)))) == expected, query
    reference = evaluate(query, parse(text), selection=selection, values_only=values)
    assert expected == reference, query
    return expected


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=compiled_queries(),
    text=documents(),
    size=st.integers(1, 30),
    opt=st.sampled_from(("all", "none")),
    values=st.booleans(),
)
def test_the_compiled_automaton_equals_the_python_one(query, text, size, opt, values) -> None:
    _compared(query, text, size, opt, values)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=path(None),
    text=documents(),
    size=st.integers(1, 30),
    values=st.booleans(),
    cuts=st.sets(st.integers(0, 40), max_size=4),
)
def test_node_selections_equal_the_python_automaton(query, text, size, values, cuts) -> None:
    """Paths without variables: the selected elements, each once, in document order, as
    XML (or string values), each once it closed."""
    expected = _compared(query, text, size, values=values)
    if expected is None:
        return
    options = {"runtime": "compiled", "values_only": values}
    assert _cut_and_resumed(query, _batches(text, size), cuts, **options) == expected


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=st.one_of(compiled_queries(), partition_queries(), iteration_queries(), path(None)),
    text=documents(),
    size=st.integers(1, 30),
    selection=st.sampled_from(("maximal", "skip-past-last")),
    cuts=st.sets(st.integers(0, 40), max_size=4),
    cut=st.integers(1, 200),
)
@example(  # a row of the broken document found before the break: at a close in a subtree
    # nobody waits in, which the Python automaton reads as a quiet stretch unless told not to
    query="return first($Y)@x from /r/a $X (\\ b $Y)* where $Y@x < prev($Y)@x",
    text='<r><a k="p"><a k="p"></a>t</a><a x="1" k="p"><a k="p"></a></a>'
    '<c k="p"><a x="1" k="p"></a>t</c></r>',
    size=1,
    selection="maximal",
    cuts=set(),
    cut=90,
)
def test_selection_policies_equal_the_python_automaton(query, text, size, selection, cuts, cut):
    """Under maximal and skip-past-last: the same rows as the Python automaton and the
    reference, also when the run is saved and resumed, and on a document cut short (the
    Python automaton reading every event itself, as in the test of documents cut short
    below: rows found in a quiet stretch wait for a close after it)."""
    expected = _compared(query, text, size, selection=selection)
    if expected is None:
        return
    options = {"runtime": "compiled", "selection": selection}
    assert _cut_and_resumed(query, _batches(text, size), cuts, **options) == expected, query
    broken = text + text[: cut % max(len(text), 1)]  # and a document cut short, then more
    sources = [io.BytesIO(broken.encode()), io.BytesIO(text.encode())]
    batches = list(EventStream(sources, batch_size=size, errors="skip").batches())
    compiled, python = _engines(query, selection=selection)
    with patch.object(routing, "stretch", None):
        expected = list(python.run(iter(batches)))
    assert list(compiled.run(iter(batches))) == expected, query


@st.composite
def intersect_queries(draw) -> str:
    """Paths with an intersect of two random paths (which bind no variables) between
    steps that may, with a random return clause and conditions where they do."""
    variables: list = []
    head = draw(random_step(variables, False, True))
    left, right = draw(path(None, False, False, 1)), draw(path(None, False, False, 1))
    tail = draw(st.lists(random_step(variables, False, False), max_size=2))
    body = " ".join((head, f"({left} intersect {right})", *tail))
    return _selection_or_rows(draw, body, variables)


def _selection_or_rows(draw, body: str, variables: list) -> str:
    """The path as a node selection, or where it binds variables maybe with a random return
    clause and conditions."""
    if not variables or draw(st.booleans()):
        return body
    return _query(draw, body, variables, draw(st.integers(1, 4)), None)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=intersect_queries(),
    text=documents(),
    size=st.integers(1, 30),
    selection=st.sampled_from(("all", "maximal")),
)
@example(  # the operands of two context nodes reach one node: not a join
    query="//* (/a/b intersect /b)", text="<r><a><b/></a></r>", size=5, selection="all"
)
def test_intersects_equal_the_python_automaton(query, text, size, selection) -> None:
    """An intersect's operands run from one context node and join where all reach the
    same node (with every combination of their pending checks)."""
    expected = _compared(query, text, size, selection=selection)
    if expected is None:
        return
    cut = _cut_and_resumed(
        query, _batches(text, size), {1, 4}, runtime="compiled", selection=selection
    )
    assert cut == expected, query


DEEPER = ("{v}//b", "{v}//b/text()", "{v}/*", "{v}//@x", "{v}/b[@x]/@x", "tag(last({v}))")


@st.composite
def python_terms(draw) -> str:
    """Return clauses with terms the C run does not read itself (made in Python on the
    captured nodes), beside terms it reads and aggregates."""
    variables: list = []
    body = draw(path(variables, False, True))
    if not variables:
        variables.append(("$E", False))
        body += " //$E"
    terms = []
    for name, _ in variables[:2]:
        term = draw(st.sampled_from(DEEPER)).format(v=name)
        aggregate = draw(st.sampled_from(("", "", "count", "sum", "max")))
        terms.append(f"{aggregate}({term})" if aggregate else term)
        terms.append(draw(st.sampled_from((f"{name}@x", f"tag({name})", f"count({name})"))))
    return f"return {', '.join(terms)} from {body}"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=python_terms(), text=documents(), size=st.integers(1, 30), values=st.booleans())
@example(  # nested nodes of a Kleene-* variable: the b below both is one node, found once
    query="return $V0//b, $V0@x, $V1//b, $V1@x from /$V0 ((/$V1)* /$V2[@x])*",
    text='<r><a><a><b x="1"></b></a></a></r>',
    size=1,
    values=False,
)
def test_terms_made_in_python_equal_the_python_automaton(query, text, size, values) -> None:
    expected = _compared(query, text, size, values=values)
    if expected is None:
        return
    cut = _cut_and_resumed(query, _batches(text, size), {1, 3}, runtime="compiled")
    assert cut == list(_engines(query)[0].run(iter(_batches(text, size)))), query


ABOVE = ("parent::a", "ancestor::b[@k = 'q']", "../@x = 1", "@x = ../@x", "ancestor::*[@x > 1]")
# (and below it too: the conjuncts apart, one decided as it opens, one pending)
ABOVE += ("parent::a and b", ".//b[@x = 1] and ../@x = 1 and not(c)")
# (one conjunct reading both: its subtree under the node made with its ancestors)
ABOVE += ("b/@x = ../@x", "not(a/@x = ancestor::*/@x)", ".//b[../@x = 2]", "c or . = ../@k")


@st.composite
def above_queries(draw) -> str:
    """Paths with a step whose predicate reads above its node (its ancestors' tags and
    attributes), between random steps that may bind variables."""
    variables: list = []
    head = draw(path(variables, False, True))
    name = draw(st.sampled_from(("a", "b", "*", "$U")))
    if name == "$U":
        variables.append(("$U", False))
    axis = draw(st.sampled_from(("/", "//", "\\ ")))
    pred = draw(st.sampled_from(ABOVE))
    tail = draw(st.lists(random_step(variables, False, False), max_size=1))
    return _selection_or_rows(draw, " ".join((head, f"{axis}{name}[{pred}]", *tail)), variables)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=above_queries(), text=documents(), size=st.integers(1, 30))
@example(query="//a[ancestor::b[@k = 'q']]", text="<r><b k='q'><a/></b><a/></r>", size=3)
@example(query="return $U@x from //$U[@x = ../@x]", text="<r x='1'><a x='1'/><a/></r>", size=4)
def test_predicates_that_read_above_equal_the_python_automaton(query, text, size) -> None:
    """Decided as the node opens, on it with its ancestors (their attributes kept in the
    frames, also across a saved and resumed run)."""
    expected = _compared(query, text, size)
    if expected is None:
        return
    cut = _cut_and_resumed(query, _batches(text, size), {0, 2, 5}, runtime="compiled")
    assert cut == expected, query


LEAF_STEPS = ("/@x", "/@k", "//@x", "/@*", "/text()", "//text()", "/text()[. = 'u']")
LEAF_STEPS += ("//text()[. != 't']", "/text()[../@x > 1]", "//text()[ancestor::b[@k = 'q']]")


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=path(None),
    last=st.sampled_from(LEAF_STEPS),
    text=documents(),
    size=st.integers(1, 30),
    selection=st.sampled_from(("all", "maximal", "skip-past-last")),
    cuts=st.sets(st.integers(0, 40), max_size=3),
)
def test_attribute_and_text_selections_equal_the_python_automaton(
    query, last, text, size, selection, cuts
):
    """A node selection whose last step goes to an attribute (its value, each element's
    once; of any name: on the Python automaton) or to texts (each text's value, ready at
    once; a text() step's predicates decided on the text node as it comes), also when the
    run is saved and resumed."""
    expected = _compared(query + last, text, size, selection=selection)
    if expected is None:
        return
    options = {"runtime": "compiled", "selection": selection}
    assert _cut_and_resumed(query + last, _batches(text, size), cuts, **options) == expected


@st.composite
def upward_paths(draw) -> str:
    """Node selections with parent and ancestor steps, which the rewrite makes self steps
    (the node a run stands on tested again, with predicates on what lies below it)."""
    steps = draw(st.lists(st.sampled_from(["/a", "/b", "/*", "//a", "//c", "/c"]), max_size=3))
    up = draw(st.sampled_from(["/parent::a", "/parent::*", "/..", "/ancestor::b", "/ancestor::*"]))
    tail = draw(st.sampled_from(["", "/b", "/*", "\\ *", "[@x]"]))
    return "/r" + "".join(steps) + "/" + draw(st.sampled_from("abc")) + up + tail


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=upward_paths(), text=documents(), size=st.integers(1, 30))
def test_self_steps_equal_the_python_automaton(query, text, size) -> None:
    _compared(query, text, size)  # (a query the language refuses: not compared)


@st.composite
def binding_self_steps(draw) -> str:
    """Paths with a self step that binds a variable (once, or in a Kleene-* group)."""
    variables: list = []
    head = draw(path(variables, False, True))
    bound = draw(st.sampled_from(["/self::$S", "/self::$S[@x > 1]", "(/a/self::$S)*"]))
    bound += draw(st.sampled_from(["", " /b", "\\ $T", "//c/self::$T[b]"]))
    variables += [("$S", "*" in bound)] + ([("$T", False)] if "$T" in bound else [])
    return _selection_or_rows(draw, f"{head} {bound}", variables)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=binding_self_steps(), text=documents(), size=st.integers(1, 30))
@example(query="return $S from /r/a/self::$S", text="<r><a x='1'><b/></a><b/></r>", size=2)
def test_self_steps_that_bind_equal_the_python_automaton(query, text, size) -> None:
    expected = _compared(query, text, size)
    if expected is None:
        return
    cut = _cut_and_resumed(query, _batches(text, size), {0, 3}, runtime="compiled")
    assert cut == expected, query


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=path(None),
    pred=st.sampled_from(("b", ".//b[@x = 1]", "not(c)", "a/@x >= 2", ". = 't'", "text() = 'u'")),
    last=st.sampled_from(("", "/@x", "/b", "//text()")),
    text=documents(),
    size=st.integers(1, 30),
)
def test_self_node_steps_reading_below_equal_the_python_automaton(query, pred, last, text, size):
    """A ``self::node()`` step with a predicate on the subtree: a pending check on the node
    the run stands on (the document node's too, where the step stands on it)."""
    _compared(f"{query}/self::node()[{pred}]{last}", text, size)  # (None: refused, as above)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(query=iteration_queries(), text=documents(), size=st.integers(1, 30))
def test_conditions_at_every_iteration_equal_the_python_automaton(query, text, size) -> None:
    expected = _compared(query, text, size)
    assert expected is not None, query  # the compiled automaton takes every one of them
    cut = _cut_and_resumed(query, _batches(text, size), {1, 4, 9}, runtime="compiled")
    assert cut == expected, query


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(query=partition_queries(), text=documents(), size=st.integers(1, 30))
def test_partitions_equal_the_python_automaton(query, text, size) -> None:
    expected = _compared(query, text, size)
    if expected is None:
        return
    cut = _cut_and_resumed(query, _batches(text, size), {1, 3, 7, 12}, runtime="compiled")
    assert cut == expected, query


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=compiled_queries(),
    text=documents(),
    size=st.integers(1, 12),
    cuts=st.sets(st.integers(0, 40), max_size=6),
)
def test_compiled_runs_resume_where_they_stopped(query, text, size, cuts) -> None:
    engines = _engines(query)
    if engines is None:
        return
    batches = _batches(text, size)
    expected = list(engines[0].run(iter(batches)))
    assert _cut_and_resumed(query, batches, cuts, runtime="compiled") == expected, query


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    query=st.one_of(
        compiled_queries(),
        partition_queries(),
        path(None),
        path(None).map("{}//text()".format),
        path(None).map("{}/@x".format),
    ),
    text=documents(),
    cut=st.integers(1, 200),
)
@example(  # a condition on the parent's attribute: decided as the node opens, on both
    query="return $V0@x from //$V0 where $V0/../@x >= 1", text='<r><a x="1"><a></a></a></r>', cut=19
)
def test_a_document_cut_short_loses_the_rows_it_loses_on_the_python_automaton(query, text, cut):
    """The events of a document that breaks off are dropped, the documents around it kept;
    a row found before the break goes out at the next close, as on the Python automaton
    reading every event itself (its quiet stretches, read in C, do not hand rows out: a
    row whose nodes closed inside one waits for a close after it, which a broken
    document may not have)."""
    engines = _engines(query)
    if engines is None:
        return
    broken = text + text[: cut % max(len(text), 1)]  # and a document cut short

    def rows(engine) -> list:
        stream = EventStream([io.BytesIO(broken.encode())], batch_size=5, errors="skip")
        return list(engine.run(stream.batches()))

    with patch.object(routing, "stretch", None):
        expected = rows(engines[1])
    assert rows(engines[0]) == expected, query


def test_a_row_waits_for_its_nodes_to_close() -> None:
    """A match's row is handed out once the nodes it binds have closed: an ancestor that
    never closes (the document breaks off) takes its rows with it, as on the Python
    automaton; the next document is read."""
    query = "return $A@x, $B@x from //$A /$B"
    text = "<r><a x='1'><b x='2'/></a></r><r><a x='3'><b x='4'/></a>"  # no </r>
    for engine in (XSeqEngine(query), XSeqEngine(query, fast=False)):
        run = engine.start()
        stream = EventStream([io.BytesIO(text.encode())], batch_size=4, errors="skip")
        rows = run.feed(stream.batches())
        # (r, a) of the second document waits for its r, which never closes, and (a, b)
        # behind it (rows in order of their ends)
        assert rows + run.finish() == [[None, "1"], ["1", "2"]]
    assert isinstance(XSeqEngine(query).fast_path, CompiledPlan)


@pytest.mark.parametrize(
    ("query", "text"),
    [  # a predicate on a step entered after a choice (not at the open tag): the closure's
        ("return $V1@x from //b (\\$V0[@x] | \\$V1)", "<r><b/><a/></r>"),
        # a Kleene-* variable's values beside an aggregate (its first match's: a list)
        ("return $V0/b/text(), count($V0) from //c (/$V0)*", '<r><c x="1"></c></r>'),
        # a match its condition drops does not hold back those after it
        (
            "return count($V1) from /* ((/$V0)* | /a[@x]) (/$V1)* "
            "where last($V1)@x >= first($V1)@x",
            '<r><a x="1"></a></r><r><a x="1">',
        ),
        # a from clause that begins with an intersect (the flat-sequence runtime's check
        # of the leading steps read it as a step)
        ("return $X@k from (//a intersect //*[@k]) $X", '<r><a k="1"/><a/><b k="2"/></r>'),
        # a row waiting for a node of a suspended stack (a partition's element inside one
        # of its own) still waits once that stack is resumed: it went out unwritten
        (
            "return $P, $V1@x from //$P \\$V1 partition by //a@k",
            '<r><a><a k="q"><a><a k="q"></a></a></a></a></r>',
        ),
        # the text children of a Kleene-* variable's nodes, nested (each a child of the
        # one before): in document order ('tt' before 't'), not node after node
        ("return $V0@x, $V1/text(), last($V1)@x from /$V0 (/$V1)*", "<r><a><a>tt</a>t</a></r>"),
        ("return $V1/text() from /$V0 (//$V1)*", "<r><a>x<b>y<c>z</c>w</b>v</a></r>"),
    ],
)
def test_regressions(query: str, text: str) -> None:
    def rows(engine) -> list:
        stream = EventStream([io.BytesIO(text.encode())], batch_size=3, errors="skip")
        return list(engine.run(stream.batches()))

    assert rows(XSeqEngine(query)) == rows(XSeqEngine(query, fast=False))
    try:
        events = parse(text)
    except InputError:  # (a document cut short: the reference reads whole documents)
        return
    assert rows(XSeqEngine(query)) == evaluate(query, events)


def test_the_generator_reaches_the_compiled_automaton() -> None:
    taken = []

    @settings(max_examples=300, database=None, derandomize=True)
    @given(query=compiled_queries())
    def sample(query: str) -> None:
        taken.append(_engines(query) is not None)

    sample()
    assert sum(taken) > len(taken) // 8, sum(taken)  # (the others run elsewhere: cheap)


@pytest.mark.parametrize(
    ("query", "runtime"),
    [
        ("return $B@id from //parlist (/$A)* /$B where tag($A) = 'listitem'", "compiled automaton"),
        ("return $Y@id, tag($X) from //person[@id = 'p1'] /\\ $X \\ $Y", "compiled automaton"),
        ("return $X/name/text(), $X/a/@k from //person $X", "compiled automaton"),  # below
        ("return $X/name from //person $X", "compiled automaton"),  # an element's value
        ("return $X//name from //person $X", "compiled automaton"),  # a term made in Python
        ("//a\\b/text()", "compiled automaton"),  # a text() step
        ("//a/self::node()[b]", "compiled automaton"),  # a self::node() step reading below
        ("//a/text()[. = 'u']", "compiled automaton"),  # a text() step with a predicate
        ("return count($X), max($X@x) from //a (/$X)*", "compiled automaton"),  # aggregates
        ("return sum($X/b) from //a (/$X)*", "compiled automaton"),  # an element below
        ("//a[b/@x = 1]", "compiled automaton"),  # (the path runtime by name: below)
        ("return $X@k from //a $X[.//b]", "compiled automaton"),  # a pending check
        ("return $X@k from //a $X[parent::r]", "compiled automaton"),  # reads above
        ("return $X@k from (//a intersect //*[@k]) $X", "compiled automaton"),  # intersect
        ("return $X@id from //a $X[@k = 'p'] \\ $Y", "compiled automaton"),  # attributes
        ("return $X@id from //a $X \\ $Y where $X@k = $Y@k", "compiled automaton"),  # values
        ("return $X@id from //a ($X)* where $X@k > prev($X)@k", "compiled automaton"),  # iterations
        ("return $X@id from //a ($X)* where $X/b > prev($X)/b", "compiled automaton"),  # below
        ("/c/parent::b", "compiled automaton"),  # a self step (a parent step rewritten)
    ],
)
def test_explain_names_the_runtime(query: str, runtime: str) -> None:
    assert f"evaluated on the {runtime}" in XSeqEngine(query).explain()


def test_the_path_runtime_runs_a_node_selection_asked_for_by_name() -> None:
    explained = XSeqEngine("//a[b/@x = 1]", runtime="path").explain()
    assert "evaluated on the path runtime" in explained
    explained = XSeqEngine("return $X@k from //a $X[.//b]", runtime="path").explain()
    assert "evaluated on the compiled automaton" in explained  # (not a node selection)


def test_a_malformed_plan_is_refused() -> None:
    tables = XSeqEngine("return $X@id from //a $X").fast_path.tables
    with pytest.raises(ValueError, match="next"):
        Vm(**{**tables, "next": array("i", [99] * len(tables["next"]))})
    with pytest.raises(ValueError, match="terms"):
        Vm(**{**tables, "terms": ((0, 5, 0),)})
    with pytest.raises(ValueError, match="columns"):
        Vm(**tables).feed(b"", b"\x00", b"", [], b"", [])
    vm = Vm(**tables)
    with pytest.raises(ValueError, match="not a state of this plan"):
        frame = (-1, None, None, [(999, ())], [], [], [], 0, None, [], [])  # a state it lacks
        vm.restore((0, 1, [(None, 0, [frame], [], [], None)], [], None, [], [], [], 1))
    with pytest.raises(ValueError, match="route"):
        Vm(**{**tables, "route": ((), "k")})
    guard = Conditions(((10, 0, 0, 0, -1, 0, 0, 0, "x"),), 0, 0, 0, str)  # @x is there
    with pytest.raises(ValueError, match="no open tag"):  # (a guard: decided at open tags)
        guard(())
    with pytest.raises(ValueError, match="own"):  # a selection policy's slots
        Vm(**{**tables, "own": b"\x01" * (tables["width"] + 1)})
    partitioned = XSeqEngine("return $X@id from //a $X partition by //a@k").fast_path.tables
    vm = Vm(**partitioned)
    with pytest.raises(ValueError, match="not a state of this plan"):  # a run without a key
        vm.restore((0, 1, [(None, 0, [], [], [], None)], [], None, [], [1], [], 1))
    with pytest.raises(ValueError, match="not a state of this plan"):  # a run it lacks
        vm.restore((0, 1, [], [(-1, 3, 0, (), None, 0, 0)], None, [], [1], [], 1))


NUMBER_TEXTS = ("1e3", " 7 ", "-2.5E1", "inf", "nan", "Infinity", "1_0", "e", "E5", "0x10")
NUMBER_TEXTS += ("\u0661\u0662", "12abc", "+3.", ".5", "trade 7", "", "1e", "7\u00a0")


@pytest.mark.parametrize("pred", ["b = 1000", "b > 5", "b != 7", "b < 'f'", "b = 'inf'"])
def test_texts_read_as_numbers_as_the_python_automaton_reads_them(pred: str) -> None:
    """Texts that read as numbers or not (a fast refusal skips float() for the plain
    ones): the compiled automaton compares them as the Python automaton does."""
    text = "<r>" + "".join(f"<a><b>{t}</b></a>" for t in NUMBER_TEXTS) + "</r>"
    expected = _compared(f"return $A/b from /r/$A[{pred}]", text, 5)
    assert expected is not None and expected != []
