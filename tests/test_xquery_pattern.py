"""The pattern clause: the seed's Tables 1 and 2, the MASTER use case, NFA vs brute force."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep import xquery
from xcep.xquery import ast as A
from xcep.xquery.evaluate import Evaluator
from xcep.xquery.parser import parse
from xcep.xquery.pattern import compile_pattern, find_instances, reference_instances

POLICIES = [
    (sliding, selection)
    for sliding in (False, True)
    for selection in ("maximal", "incremental", "allmatch")
]

# -- Table 2: (A*B*) or (B*A*) over a1 a2 b1 b2 a3 b3 ------------------------------

TABLE2_INPUT = "<s><a i='1'/><a i='2'/><b i='1'/><b i='2'/><a i='3'/><b i='3'/></s>"
TABLE2 = {
    ("tumbling", "maximal"): "{a1,a2,b1,b2} {a3,b3}",
    ("tumbling", "incremental"): "{a1} {a1,a2} {a1,a2,b1} {a1,a2,b1,b2} {a3} {a3,b3}",
    ("sliding", "maximal"): "{a1,a2,b1,b2} {b1,b2,a3} {a3,b3}",
    ("sliding", "incremental"): "{a1} {a1,a2} {a1,a2,b1} {a1,a2,b1,b2} {b1,b2,a3} {a3,b3}",
    # AllMatch, as docs/xquery.md defines it (the seed's cells are cut by the extraction:
    # its tumbling cell is the head of this sliding list, its sliding cell the tail)
    ("sliding", "allmatch"): "{a1} {a1,a2} {a1,a2,b1} {a1,a2,b1,b2} {a2} {a2,b1} {a2,b1,b2} "
    "{b1} {b1,b2} {b1,b2,a3} {b2} {b2,a3} {a3} {a3,b3} {b3}",
    ("tumbling", "allmatch"): "{a1} {a1,a2} {a1,a2,b1} {a1,a2,b1,b2} {a3} {a3,b3}",
}


@pytest.mark.parametrize(("restart", "selection"), sorted(TABLE2))
def test_table_2(restart, selection):
    query = xquery.compile(
        f"""pattern $p {restart} {selection} in /s/* ($a $b) or ($b $a) using
              $a as element(a)* when true()
              $b as element(b)* when true()
            return string-join(for $x in $p return name($x) || $x/@i, ",")"""
    )
    got = " ".join("{" + row + "}" for row in query.run(TABLE2_INPUT))
    assert got == TABLE2[(restart, selection)]


def test_table_2_agrees_with_the_seed_cells_that_survived_extraction():
    """The seed's AllMatch cells, read in order, are one list: ours."""
    tumbling_cell = "{a1} {a1,a2} {a1,a2,b1} {a1,a2,b1,b2} {a2} {a2,b1} {a2,b1,b2}"
    sliding_cell = "{b1} {b1,b2} {b1,b2,a3} {b2} {b2,a3} {a3} {a3,b3} {b3}"
    assert f"{tumbling_cell} {sliding_cell}" == TABLE2[("sliding", "allmatch")]


# -- Table 1: A+ over increasing values ------------------------------------------


class RecordingEvaluator(Evaluator):
    """Records the pattern variables' bindings each time a ``when`` is evaluated."""

    def __init__(self, text, when) -> None:
        super().__init__(text)
        self.when = when
        self.rows = []

    def condition(self, expr):
        run = super().condition(expr)
        if expr is not self.when:
            return run

        def recorded(env):
            result = run(env)
            row = tuple(_plain(env[name]) for name in ("a", "b", "c", "u", "d"))
            self.rows.append((*row, result == [True]))
            return result

        return recorded


def _plain(value):
    return tuple(value) if isinstance(value, list) else value


def test_table_1_bindings_and_result():
    text = """pattern $m tumbling maximal in (10, 15, 20, 25, 30, 5) $p using
                $p as xs:integer+ before $a, pprev $b, pcur $c, all $u, after $d when $b lt $c
              return $p"""
    tree = parse(text)
    clause = tree.clauses[0]
    evaluator = RecordingEvaluator(text, clause.variables[0].when)
    result = evaluator.eval(tree, {})
    assert result == [15, 20, 25, 30]  # "the result includes 15 to 30"
    assert evaluator.rows[:6] == [
        ((), (), 10, (10,), 15, False),
        (10, 10, 15, (15,), 20, True),
        (10, 15, 20, (15, 20), 25, True),
        (10, 20, 25, (15, 20, 25), 30, True),
        (10, 25, 30, (15, 20, 25, 30), 5, True),
        (10, 30, 5, (15, 20, 25, 30, 5), (), False),
    ]


def test_the_seed_a_plus_b_plus_c_example():
    """Section 4.1: A+B+C tumbling maximal over S = (B, A, B, C, A, B, B, B, B, C)."""
    seq = "<s>" + "".join(f"<{x}/>" for x in "BABCABBBBC") + "</s>"
    query = xquery.compile(
        """pattern $p tumbling maximal in /s/* $a $b $c using
             $a as item()+ pcur $q1 when name($q1) eq 'A'
             $b as item()+ pcur $q2 when name($q2) eq 'B'
             $c as item()+ pcur $q3 when name($q3) eq 'C'
           return string-join(($p ! name(.), '/', $b ! name(.)), '')"""
    )
    assert list(query.run(seq)) == ["ABC/B", "ABBBBC/BBBB"]


# -- MASTER: SearchNoBuy per user --------------------------------------------------

SEARCH_NO_BUY = """
for $e in /log/event
group by $uid := $e/@uid
pattern $p tumbling maximal in $e $login $search $logout using
  $login as element(event) pcur $x when $x/@operation eq 'Login'
  $search as element(event)+ pcur $y when $y/@operation eq 'Search'
  $logout as element(event) pcur $z when $z/@operation eq 'Logout'
return <SearchNoBuy uid="{$uid}" searches="{count($search)}" at="{$login/@time}"/>
"""

OPERATIONS = {"L": "Login", "S": "Search", "B": "Buy", "O": "Logout"}


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from("LSBO")), max_size=40))
def test_master_search_no_buy(events):
    xml = (
        "<log>"
        + "".join(
            f'<event operation="{OPERATIONS[op]}" uid="{uid}" time="{t}"/>'
            for t, (uid, op) in enumerate(events)
        )
        + "</log>"
    )
    expected = []
    for uid in dict.fromkeys(uid for uid, _ in events):  # groups in order of appearance
        mine = [(t, op) for t, (u, op) in enumerate(events) if u == uid]
        ops = "".join(op for _, op in mine)
        for m in re.finditer("LS+O", ops):
            at = mine[m.start()][0]
            expected.append(
                f'<SearchNoBuy uid="{uid}" searches="{m.end() - m.start() - 2}" at="{at}"/>'
            )
    assert list(xquery.compile(SEARCH_NO_BUY).run(xml)) == expected


# -- the NFA against the brute-force enumerator --------------------------------------

VAR_NAMES = ["a", "b", "c"]


@st.composite
def regexes(draw, available=None, depth=0):
    available = list(VAR_NAMES) if available is None else available
    kind = draw(
        st.sampled_from(["var", "seq", "alt"] if depth < 2 and len(available) > 1 else ["var"])
    )
    if kind == "var":
        return A.RVar(draw(st.sampled_from(available)))
    if kind == "alt":
        return A.RAlt([draw(regexes(available, depth + 1)) for _ in range(draw(st.integers(2, 3)))])
    order = draw(st.permutations(available))
    cut = draw(st.integers(1, len(order) - 1))
    return A.RSeq([draw(regexes(order[:cut], depth + 1)), draw(regexes(order[cut:], depth + 1))])


# item tests over integer items: (uses its run's start?, function(items, run_start, pos))
CONDITIONS = [
    (False, lambda xs, s, p: xs[p] > 0),
    (False, lambda xs, s, p: xs[p] < 2),
    (False, lambda xs, s, p: xs[p] % 2 == 0),
    (False, lambda xs, s, p: p == 0 or xs[p - 1] <= xs[p]),  # pprev
    (False, lambda xs, s, p: p + 1 == len(xs) or xs[p + 1] != xs[p]),  # after
    (True, lambda xs, s, p: s > 0 and xs[s - 1] <= xs[p]),  # before
    (True, lambda xs, s, p: p - s < 2),  # all: at most two items
    (False, lambda xs, s, p: True),
]


@st.composite
def pattern_cases(draw):
    regex = draw(regexes())
    used = sorted({v.name for v in A.regex_vars(regex)})
    variables, tests, keyed = [], [], set()
    for i, name in enumerate(used):
        occurrence = draw(st.sampled_from(["", "?", "*", "+"]))
        nested = draw(st.integers(0, 5)) == 0
        var = A.PatternVar(name, A.ItemType("item"), occurrence, when=None)
        if nested:  # a unit: the run of equal values starting here
            var.nested = "n"
            tests.append(lambda xs, s, p: _equal_run(xs, p) if xs[p] != 1 else 0)
            keyed.add(i)
        else:
            uses_start, cond = draw(st.sampled_from(CONDITIONS))
            tests.append(cond)
            if uses_start:
                keyed.add(i)
        variables.append(var)
    pattern = A.Pattern("p", True, "allmatch", None, regex, variables)
    items = draw(st.lists(st.integers(0, 3), max_size=9))
    return pattern, tests, keyed, items


def _equal_run(xs, p):
    k = p
    while k < len(xs) and xs[k] == xs[p]:
        k += 1
    return k - p


@settings(max_examples=400)
@given(pattern_cases())
def test_nfa_agrees_with_brute_force(case):
    pattern, tests, keyed, items = case
    calls = {"nfa": 0}

    def test(var, run_start, pos):
        calls["nfa"] += 1
        return int(tests[var](items, run_start, pos))

    nfa = compile_pattern(pattern)
    # tests that look at the item alone also run on the lazy DFA (a tiny cache budget
    # makes it flush between starts now and then)
    masks = None
    if not keyed:
        masks = [sum(1 << v for v in range(len(tests)) if test(v, p, p)) for p in range(len(items))]
    nfa.dfa().budget = 3
    for sliding, selection in POLICIES:
        fast = list(find_instances(nfa, len(items), test, sliding, selection, keyed))
        slow = reference_instances(pattern, len(items), test, sliding, selection)
        assert fast == slow, (A.regex_text(pattern.regex), sliding, selection)
        if masks is not None:
            dfa = list(find_instances(nfa, len(items), test, sliding, selection, keyed, masks))
            assert dfa == slow, ("dfa", A.regex_text(pattern.regex), sliding, selection)


# -- the same through XQuery text: the variables before/pprev/pcur/all/after ------------

XQ_CONDITIONS = [
    ("$c/@v > 1", lambda xs, s, p: xs[p] > 1),
    ("$c/@v <= 1", lambda xs, s, p: xs[p] <= 1),
    ("$c/@v mod 2 = 0", lambda xs, s, p: xs[p] % 2 == 0),
    ("empty($b) or $b/@v < $c/@v", lambda xs, s, p: p == 0 or xs[p - 1] < xs[p]),
    ("exists($a) and $a/@v <= $c/@v", lambda xs, s, p: s > 0 and xs[s - 1] <= xs[p]),
    ("count($u) le 2", lambda xs, s, p: p - s < 2),
    ("empty($d) or $d/@v != $c/@v", lambda xs, s, p: p + 1 == len(xs) or xs[p + 1] != xs[p]),
]


@settings(max_examples=60)
@given(
    regexes(),
    st.lists(st.sampled_from(range(len(XQ_CONDITIONS))), min_size=3, max_size=3),
    st.lists(st.sampled_from(["", "?", "*", "+"]), min_size=3, max_size=3),
    st.sampled_from(POLICIES),
    st.lists(st.integers(0, 3), max_size=8),
)
def test_pattern_clause_end_to_end(regex, conditions, occurrences, policy, values):
    sliding, selection = policy
    used = sorted({v.name for v in A.regex_vars(regex)})
    clauses = []
    for i, name in enumerate(used):
        when = XQ_CONDITIONS[conditions[i]][0]
        clauses.append(
            f"${name} as element(e){occurrences[i]} before $a pprev $b pcur $c all $u after $d "
            f"when {when}"
        )
    outputs = ", ".join(f"string-join(${name}/@i, ',')" for name in used)
    text = (
        f"pattern $p {'sliding' if sliding else 'tumbling'} {selection} in /s/e "
        f"{A.regex_text(regex)} using {' '.join(clauses)} "
        f"return string-join((string-join($p/@i, ','), {outputs}), '|')"
    )
    xml = "<s>" + "".join(f'<e i="{i}" v="{v}"/>' for i, v in enumerate(values)) + "</s>"
    got = list(xquery.compile(text).run(xml))

    variables = [
        A.PatternVar(n, A.ItemType("item"), occurrences[i], None) for i, n in enumerate(used)
    ]
    pattern = A.Pattern("p", sliding, selection, None, regex, variables)
    funcs = [XQ_CONDITIONS[conditions[i]][1] for i in range(len(used))]
    expected = []
    for start, end, runs in reference_instances(
        pattern, len(values), lambda v, s, p: int(funcs[v](values, s, p)), sliding, selection
    ):
        parts = [",".join(map(str, range(start, end + 1)))]
        parts += [",".join(map(str, range(r[0], r[1] + 1))) if r else "" for r in runs]
        expected.append("|".join(parts))
    assert got == expected, text


# -- nested: repeated groups (A+B+)* through a nested pattern ------------------------


def test_nested_pattern_for_a_repeated_group():
    """Section 4.5: $v consumes units; each unit is the first match of (A+ B+) on the rest."""
    query = xquery.compile(
        """pattern $p tumbling maximal in /s/* $v $c using
             $v as element()+ nested $n when
               (pattern $pn tumbling maximal in $n $a $b using
                  $a as element(a)+ when true()
                  $b as element(b)+ when true()
                return $pn)
             $c as element(c) when true()
           return string-join($p ! name(.), '')"""
    )
    seq = "<s>" + "".join(f"<{x}/>" for x in "aabababbcaabcbac") + "</s>"
    # units must start right where $v continues: 'aab' 'ab' 'abb' then c; then 'aab' c
    assert list(query.run(seq)) == ["aabababbc", "aabc"]


# -- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("pattern $p in (1,2) $a $b using $a as item() when true()", "$b has no 'using'"),
        ("pattern $p in (1,2) $a $a using $a as item() when true() return 1", "bound twice"),
        (
            "pattern $p in (1,2) $a using $a as item() when true() $b as item() when 1 return 1",
            "declared but not used",
        ),
        ("pattern $p in (1,2) $a using $a as xs:nonsense when true() return 1", "unknown type"),
        ("for $x in (1,2) retrun $x", "retrun"),
        ("for $x in (1,2) where $x", "expected a FLWOR clause or 'return'"),
        ("for sliding window $w in (1,2) start when true() return $w", "needs an end clause"),
        ("<a>{1}</b>", "end tag does not match"),
    ],
)
def test_static_errors_name_the_position(text, fragment):
    with pytest.raises(xquery.XQueryError) as info:
        xquery.compile(text)
    message = str(info.value)
    assert fragment in message
    assert re.match(r"query line \d+, column \d+: X[PQ]ST\d{4} ", message), message


def test_syntax_error_inside_an_xpath_part_points_into_the_query():
    with pytest.raises(xquery.XQueryError) as info:
        xquery.compile("for $x in (1, 2)\nwhere $x > > 1\nreturn $x")
    assert info.value.code == "XPST0003"
    assert info.value.line == 2


def test_dynamic_errors_carry_the_w3c_code():
    with pytest.raises(xquery.XQueryError) as info:
        xquery.compile("for $x in (1, 0) return 1 idiv $x").evaluate()
    assert info.value.code == "FOAR0001"
    with pytest.raises(xquery.XQueryError) as info:
        xquery.compile("for $x as xs:string in (1, 2) return $x").evaluate()
    assert info.value.code == "XPTY0004"


def test_random_regex_texts_parse_back():
    rng = random.Random(7)
    for _ in range(50):
        names = rng.sample(VAR_NAMES, rng.randint(1, 3))
        regex = A.RSeq([A.RVar(n) for n in names]) if len(names) > 1 else A.RVar(names[0])
        if rng.random() < 0.5:
            regex = A.RAlt([regex, A.RVar(names[0])])
        using = " ".join(f"${n} as item()* when true()" for n in names)
        tree = parse(f"pattern $p in (1, 2) {A.regex_text(regex)} using {using} return 1")
        assert A.regex_text(tree.clauses[0].regex) == A.regex_text(regex)
