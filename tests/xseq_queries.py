"""Hypothesis strategies for XSeq: random documents and grammar-driven random queries."""

from __future__ import annotations

from hypothesis import strategies as st

TAGS = ("a", "b", "c")
AXES = ("/", "//", "\\", "/\\", " ")  # child, descendant, next sibling, first child, sibling


@st.composite
def element(draw, depth: int = 0) -> str:
    tag = draw(st.sampled_from(TAGS))
    attrs = ""
    if draw(st.booleans()):
        attrs += f' x="{draw(st.integers(1, 4))}"'
    if draw(st.booleans()):
        attrs += f' k="{draw(st.sampled_from("pq"))}"'
    children = []
    if depth < 4:
        for _ in range(draw(st.integers(0, 3 if depth < 3 else 1))):
            if draw(st.integers(0, 5)) == 0:
                children.append(draw(st.sampled_from(("t", "u", "7"))))
            else:
                children.append(draw(element(depth + 1)))
    return f"<{tag}{attrs}>{''.join(children)}</{tag}>"


@st.composite
def documents(draw) -> str:
    """One to three small documents with tags a, b, c, attributes x (1-4) and k (p, q)."""
    return "".join(
        f"<r>{''.join(draw(st.lists(element(1), min_size=1, max_size=4)))}</r>"
        for _ in range(draw(st.integers(1, 3)))
    )


PREDICATES = (
    "@x",
    "@x = 2",
    "@x > 1",
    "@x <= 3",
    "@k = 'p'",
    "not(@k = 'q')",
    "@x = 1 or @k = 'p'",
    "b",
    "a/@x >= 2",
    ". = 't'",
    "text() = 'u'",
    "not(c)",
    ".//b[@x = 1]",
    "parent::a",
    "ancestor::b[@k = 'q']",
    "b/@x = ../@x",
    "not(ancestor::*[@x = 2]) and c",
)


@st.composite
def step(draw, variables: list | None, kleene: bool, first: bool) -> str:
    axis = draw(st.sampled_from(AXES[:2] if first else AXES))
    if variables is not None and draw(st.integers(0, 2)) == 0:
        name = f"$V{len(variables)}"
        variables.append((name, kleene))
    else:
        name = draw(st.sampled_from((*TAGS, "*")))
    pred = f"[{draw(st.sampled_from(PREDICATES))}]" if draw(st.integers(0, 3)) == 0 else ""
    return f"{axis}{name}{pred}".strip()


@st.composite
def path(draw, variables: list | None, kleene: bool = False, first: bool = True, depth: int = 0):
    items = []
    for i in range(draw(st.integers(1, 3))):
        here_first = first and i == 0
        choice = draw(st.integers(0, 6))
        if choice == 0 and depth < 2 and not here_first:
            body = draw(path(variables, True, False, depth + 1))
            items.append(f"({body})*")
        elif choice == 1 and depth < 1 and not here_first:
            left = draw(path(variables, kleene, False, depth + 1))
            right = draw(path(variables, kleene, False, depth + 1))
            items.append(f"({left} | {right})")
        elif choice == 2 and depth < 1 and not here_first:  # intersect: no variables
            left = draw(path(None, kleene, False, depth + 1))
            right = draw(path(None, kleene, False, depth + 1))
            items.append(f"({left} intersect {right})")
        elif choice == 3 and items and not here_first and not items[-1].startswith("$"):
            axis = draw(st.sampled_from(("parent::", "ancestor::", "..")))
            test = "" if axis == ".." else draw(st.sampled_from((*TAGS, "*")))
            items[-1] += f"/{axis}{test}"
        else:
            items.append(draw(step(variables, kleene, here_first)))
    return " ".join(items)


def _conditions(draw, variables: list) -> list[str]:
    out = []
    for name, kleene in variables:
        if draw(st.booleans()):
            continue
        options = [f"tag({name}) = '{draw(st.sampled_from(TAGS))}'", f"{name}@x >= 2"]
        options += [f"{name}/b", f"{name}/a/@x = 2", f"{name}/c/b/text() = 't'"]
        # above the node (its ancestors' attributes), and with its subtree
        options += [f"{name}/../@x >= 2", f"{name}[a/@x = ../@x]", f"{name}[@k = 'p']"]
        if kleene:
            options += [
                f"{name}@x > prev({name})@x",
                f"{name}@x != prev({name})@x",
                f"last({name})@x >= first({name})@x",
                f"{name}/text() = prev({name})/text()",
            ]
        else:
            others = [n for n, k in variables if not k and n != name]
            if others:
                options.append(f"{name}@k = {others[0]}@k")
        out.append(draw(st.sampled_from(options)))
    return out


@st.composite
def queries(draw) -> str:
    """A random query: a plain path, or return/from/where with variables, maybe partitioned."""
    return draw(families(1))[0]


@st.composite
def families(draw, size: int) -> list[str]:
    """``size`` random queries over one random path (a template family): the first as
    ``queries()`` draws it, the others with return terms and conditions of their own."""
    variables: list = []
    form = draw(st.integers(0, 5))
    if form == 5:  # partitioned: the elements a by @k, then sibling patterns among them
        head = draw(st.sampled_from(("//a", "/r/a", "//$P")))
        if head == "//$P":
            variables.append(("$P", False))
        rest = draw(path(variables, False, False, 1))
        body = f"{head} {rest}"
        by = "/r/a@k" if head.startswith("/r") else "//a@k"
    else:
        body = draw(path(variables, False, True))
        by = None
    if form == 0 or not variables:
        return [body] * size
    return [_query(draw, body, variables, form, by) for _ in range(size)]


def _query(draw, body: str, variables: list, form: int, by: str | None) -> str:
    terms = []
    for name, kleene in variables[:3]:
        reads = [f"{name}@x", f"{name}", f"tag({name})"]  # and values below it: the child
        reads += [f"{name}/b/text()", f"{name}/a/@x", f"{name}/c/b", f"{name}/text()"]  # paths
        reads += [f"{name}/../@x"]  # above it
        terms.append(draw(st.sampled_from(reads)))
        if kleene:
            terms.append(draw(st.sampled_from([f"last({name})@x", f"count({name})"])))
    if form == 4:
        name = variables[0][0]
        terms = [f"{draw(st.sampled_from(['max', 'min', 'count', 'sum', 'avg']))}({name}@x)"]
    query = f"return {', '.join(terms)} from {body}"
    conditions = _conditions(draw, variables)
    if conditions:
        query += " where " + " and ".join(conditions)
    if by:
        query += f" partition by {by}"
    return query


def to_xpath(query: str) -> str | None:
    """The XPath 1.0 form of a Kleene-free, variable-free XSeq path (None if it has no form)."""
    plain = query.replace("not(", "").replace("text()", "")
    if "$" in query or "(" in plain or "|" in query:
        return None
    out = []
    for axis, test, preds in _steps(query):
        if test == "..":  # XSeq's parent is an element: the document node is nobody's
            test = "parent::*"  # (docs/xseq.md, "Backward axes"); XPath's .. would be it
        if axis == "/\\":
            out.append(f"/*[1][self::{test}]{preds}")
        elif axis == "\\":
            out.append(f"/following-sibling::*[1][self::{test}]{preds}")
        elif axis == "":
            out.append(f"/following-sibling::{test}{preds}")
        else:
            out.append(f"{axis}{test}{preds}")
    return "".join(out)


def _steps(query: str) -> list[tuple[str, str, str]]:
    """Split a path into (axis, test, predicates) at the top level."""
    steps = []
    i, n = 0, len(query)
    while i < n:
        while query[i] == " ":
            i += 1
        axis = ""
        for symbol in ("//", "/\\", "/", "\\"):
            if query.startswith(symbol, i):
                axis = symbol
                i += len(symbol)
                break
        while query[i] == " ":
            i += 1
        start = i
        while i < n and query[i] not in " /\\[":
            i += 1
        test = query[start:i]
        start = depth = 0
        start = i
        while i < n and (depth or query[i] == "["):
            depth += {"[": 1, "]": -1}.get(query[i], 0)
            i += 1
        steps.append((axis, test, query[start:i]))
    return steps
