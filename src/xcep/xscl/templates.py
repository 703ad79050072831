"""Stage 2 structure (the seed's §4.1-4.4): join graphs, their minors, query templates, SQL.

A *directed query* is one way a query can match: its left block on an
earlier document, its right block on the current one (a FOLLOWED BY gives
one, a JOIN two: each block may come first). Its **join graph** is the
variable tree of each block plus the value-join edges. The **minor** (§4.2)
keeps the variables in value joins and the ones the output needs, their
least common ancestor per side, and the branching variables between; paths
through one-child variables are contracted (Stage 1 emits every
ancestor/descendant pair, so a contracted edge is still a relation lookup).
The **template** is the minor up to renaming: a canonical code (the least
over orderings of the value joins of the trees' encodings) and an order of
its nodes, the meta-variables ``var1 ... varN`` (here ``v0 ...``).

``template_sql`` writes the template's conjunctive query (Fig. 7, §4.4) once,
as SQL over ``r_doc``, ``r_bin``, ``r_docts`` and the template's ``r_t_K``;
the same text runs in DuckDB and in Spark SQL (``{lo}`` and ``{hi}`` are
filled in with ``str.format``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

EXACT_JOINS = 4  # up to here every order of the value joins is tried (exact canonical form)


@dataclass
class VarTree:
    """A block's variables as a tree: parent = the nearest variable above."""

    parent: dict[str, str | None]

    def ancestors(self, var: str) -> list[str]:
        out = []
        up = self.parent[var]
        while up is not None:
            out.append(up)
            up = self.parent[up]
        return out


@dataclass
class Minor:
    """One side of a reduced join graph: its root and parent links (contracted)."""

    root: str
    parent: dict[str, str | None]
    _children: dict[str, list[str]] | None = None

    def children(self, var: str) -> list[str]:
        if self._children is None:
            self._children = {}
            for v, p in self.parent.items():
                self._children.setdefault(p, []).append(v)
        return self._children.get(var, [])


def minor(tree: VarTree, kept: set[str]) -> Minor:
    """The seed's three reduction rules on one side of a join graph."""
    chains = {v: [v, *tree.ancestors(v)] for v in kept}
    common = set.intersection(*(set(c) for c in chains.values()))
    lca = next(v for v in chains[next(iter(kept))] if v in common)
    nodes = set()
    for chain in chains.values():
        for v in chain:
            nodes.add(v)
            if v == lca:
                break
    child_count = {v: 0 for v in nodes}
    for v in nodes:
        p = tree.parent[v]
        if v != lca and p in child_count:
            child_count[p] += 1
    keep = {v for v in nodes if v in kept or v == lca or child_count[v] >= 2}
    parent = {}
    for v in keep:
        up = tree.parent[v] if v != lca else None
        while up is not None and up not in keep:
            up = tree.parent[up]
        parent[v] = up
    return Minor(lca, parent)


@dataclass
class Template:
    code: tuple
    left_size: int  # nodes v0 .. v(left_size-1) are on the left
    size: int
    edges: list[tuple[int, int]]  # (ancestor, descendant) structural edges, node indexes
    joins: list[tuple[int, int]]  # (left node, right node) value joins
    index: int = 0
    rows: list = field(default_factory=list)


TEMPLATE_CACHE = 65_536  # join graphs by spelling (template_of) before the cache is cleared
_by_spelling: dict[tuple, tuple] = {}


def template_of(
    left: Minor, right: Minor, joins: list[tuple[str, str]]
) -> tuple[tuple, list[str], list[tuple[int, int]], list[tuple[int, int]]]:
    """(code, variables in meta-variable order, structural edges, value joins).

    The canonical code is searched once per *spelling* (the join graph with its
    variables numbered in the order they are written): queries written alike
    reuse it, with their own variables (the search depends on structure only)."""
    key, names = _spelling(left, right, joins)
    found = _by_spelling.get(key)
    if found is None:
        numbered = (
            _renamed(left, names, 0),
            _renamed(right, names, 1),
            [(names[(0, lv)], names[(1, rv)]) for lv, rv in joins],
        )
        found = _canonical(*numbered)
        if len(_by_spelling) >= TEMPLATE_CACHE:
            _by_spelling.clear()
        _by_spelling[key] = found
    code, positions, edges, value_joins = found
    variables = [var for (_, var) in names]  # names in numbering order
    return code, [variables[p] for p in positions], edges, value_joins


def _spelling(left: Minor, right: Minor, joins: list[tuple[str, str]]) -> tuple[tuple, dict]:
    """The join graph with variables numbered in preorder as written, and the numbers."""
    names: dict[tuple[int, str], int] = {}
    shapes = []
    for side, tree in ((0, left), (1, right)):
        shape = []
        stack = [tree.root]
        while stack:
            var = stack.pop()
            names[(side, var)] = len(names)
            up = tree.parent[var]
            shape.append(-1 if up is None else names[(side, up)])
            stack.extend(reversed(tree.children(var)))
        shapes.append(tuple(shape))
    return (*shapes, tuple((names[(0, lv)], names[(1, rv)]) for lv, rv in joins)), names


def _renamed(tree: Minor, names: dict, side: int) -> Minor:
    return Minor(
        names[(side, tree.root)],
        {names[(side, v)]: None if p is None else names[(side, p)] for v, p in tree.parent.items()},
    )


def _canonical(
    left: Minor, right: Minor, joins: list[tuple]
) -> tuple[tuple, list, list[tuple[int, int]], list[tuple[int, int]]]:
    """template_of by search over the join orders (``EXACT_JOINS``) or refinement."""
    if len(joins) <= EXACT_JOINS:
        orders = itertools.permutations(range(len(joins)))
    else:
        orders = [_refined_order(left, right, joins)]
    best = None
    for order in orders:
        labels: dict[tuple[int, str], list[int]] = {}
        for rank, j in enumerate(order):
            lv, rv = joins[j]
            labels.setdefault((0, lv), []).append(rank)
            labels.setdefault((1, rv), []).append(rank)
        code_l, nodes_l = _encode(left, left.root, 0, labels)
        code_r, nodes_r = _encode(right, right.root, 1, labels)
        code = (code_l, code_r)
        if best is None or code < best[0]:
            best = (code, nodes_l, nodes_r)
    code, nodes_l, nodes_r = best
    variables = [v for _, v in nodes_l] + [v for _, v in nodes_r]
    index = {(0, v): i for i, (_, v) in enumerate(nodes_l)}
    index.update({(1, v): len(nodes_l) + i for i, (_, v) in enumerate(nodes_r)})
    edges = []
    for side, tree in ((0, left), (1, right)):
        for v, p in tree.parent.items():
            if p is not None:
                edges.append((index[(side, p)], index[(side, v)]))
    value_joins = [(index[(0, lv)], index[(1, rv)]) for lv, rv in joins]
    return (len(nodes_l), code), variables, sorted(edges), sorted(value_joins)


def _refined_order(left: Minor, right: Minor, joins: list[tuple[str, str]]) -> tuple[int, ...]:
    """An order of the value joins from colour refinement (isomorphism-invariant).

    Nodes start coloured by their subtree shape and are refined by their join
    partners' colours; joins are sorted by their ends' colours. Ties left are
    between joins refinement cannot tell apart — in trees joined pairwise these
    are symmetric, so the code does not depend on the order among them; were it
    not so, two isomorphic queries would only get two templates (correct, less
    shared).
    """
    colour: dict[tuple[int, str], object] = {}
    for side, tree in ((0, left), (1, right)):
        _shape_colours(tree, tree.root, side, colour)
    partners: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for lv, rv in joins:
        partners.setdefault((0, lv), []).append((1, rv))
        partners.setdefault((1, rv), []).append((0, lv))
    for _ in range(3):
        colour = {
            node: (c, tuple(sorted(repr(colour[p]) for p in partners.get(node, ()))))
            for node, c in colour.items()
        }
    keys = [repr((colour[(0, lv)], colour[(1, rv)])) for lv, rv in joins]
    return tuple(sorted(range(len(joins)), key=keys.__getitem__))


def _shape_colours(tree: Minor, var: str, side: int, colour: dict) -> str:
    inner = sorted(_shape_colours(tree, c, side, colour) for c in tree.children(var))
    colour[(side, var)] = "(" + "".join(inner) + ")"
    return colour[(side, var)]


def _encode(tree: Minor, var: str, side: int, labels: dict) -> tuple[tuple, list]:
    """A canonical code of the subtree at ``var`` and its nodes in code order."""
    kids = sorted(
        (_encode(tree, c, side, labels) for c in tree.children(var)), key=lambda pair: pair[0]
    )
    code = (tuple(sorted(labels.get((side, var), ()))), tuple(k[0] for k in kids))
    nodes = [(side, var)] + [n for k in kids for n in k[1]]
    return code, nodes


VIEWS = ("full", "cache", "none")


def template_sql(template: Template, table: str, view: str = "full") -> str:
    """The conjunctive query of a template, for the documents with ids in [{lo}, {hi}] as
    the right side, joined with the earlier documents ``{left}`` (a condition on
    ``docid``: those that share a string value with the batch) within the window;
    ``{lo}``, ``{hi}`` and ``{left}`` are ``str.format`` fields.

    ``r_bin`` carries the string value of ``node2`` (the seed's R_L and R_R of §5,
    kept with the state), so a value join is a join of two ``r_bin`` rows and
    the query has one relation per structural edge (``view="full"``). With
    ``view="cache"`` the earlier documents' edges that end at a join end are
    read from ``r_l``, the view cache's slices of R_L for the batch's shared
    string values (Algorithm 4). With ``view="none"`` the string values come
    from ``r_doc``, a copy per join end: the conjunctive query of Fig. 7 as it
    stands (Algorithm 1, no view). The joins are written in
    the order that keeps the hash tables small — each new relation is the build
    side of its join, filtered to the batch or to the candidate documents —
    starting from the template relation, which is only probed; they run in
    that order (the engine turns DuckDB's join-order search off: with many
    relations it costs more than the query).
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}")
    materialized = view != "none"
    n = template.size
    left = set(range(template.left_size))
    edges = query_edges(template)
    right_edges = sorted(e for e in edges if e[0] not in left)
    left_edges = sorted(e for e in edges if e[0] in left)
    first_left = template.joins[0][0]
    left_edges.sort(key=lambda e: e[1] != first_left)  # the edge reached by the first join
    node_col: dict[int, str] = {}
    string_of: dict[int, str] = {}  # node -> the r_bin alias whose node2 it is
    batch = "BETWEEN {lo} AND {hi}"
    joins = [f"{table} t"]

    def edge_join(k: int, a: int, b: int, docs: str, extra: list[str], rel: str = "r_bin") -> str:
        alias = f"b{k}"
        on = [f"{alias}.var1 = t.v{a}", f"{alias}.var2 = t.v{b}", f"{alias}.docid {docs}"]
        on += extra
        for i, col in ((a, "node1"), (b, "node2")):
            if i in node_col:
                on.append(f"{alias}.{col} = {node_col[i]}")
            else:
                node_col[i] = f"{alias}.{col}"
        if materialized:
            string_of.setdefault(b, alias)
        return f"JOIN {rel} {alias} ON {' AND '.join(on)}"

    k = 0
    for a, b in right_edges:
        joins.append(edge_join(k, a, b, batch, [f"b{k}.docid = rt.docid"] if k else []))
        if k == 0:
            joins.append(f"JOIN r_docts rt ON rt.docid = b0.docid AND rt.docid {batch}")
        k += 1
    partner = {a: b for a, b in template.joins}
    if not materialized:  # string values from r_doc: one copy per join end
        for b in dict.fromkeys(b for _, b in template.joins):
            joins.append(
                f"JOIN r_doc dr{b} ON dr{b}.docid = rt.docid AND dr{b}.node = {node_col[b]}"
                f" AND dr{b}.docid {batch}"
            )
            string_of[b] = f"dr{b}"
        joins.append(
            f"JOIN r_doc dl{first_left} ON dl{first_left}.strval = "
            f"{string_of[partner[first_left]]}.strval AND dl{first_left}.docid {{left}}"
        )
        string_of[first_left] = f"dl{first_left}"
    for idx, (a, b) in enumerate(left_edges):
        extra = [f"b{k}.docid = lt.docid"] if idx else []
        if not materialized and idx == 0:
            extra += [f"b{k}.docid = dl{first_left}.docid", f"b{k}.node2 = dl{first_left}.node"]
        elif b in partner and b not in string_of:
            extra.append(f"b{k}.strval = {string_of[partner[b]]}.strval")
        cached = view == "cache" and b in partner  # a slice of R_L: the value is shared
        joins.append(edge_join(k, a, b, "{left}", extra, "r_l" if cached else "r_bin"))
        if not materialized:
            for end in (a, b):
                if end in partner and end not in string_of:
                    joins.append(
                        f"JOIN r_doc dl{end} ON dl{end}.docid = b{k}.docid"
                        f" AND dl{end}.node = {node_col[end]} AND dl{end}.docid {{left}}"
                    )
                    string_of[end] = f"dl{end}"
        if idx == 0:
            joins.append(
                f"JOIN r_docts lt ON lt.docid = b{k}.docid AND lt.docid < rt.docid"
                " AND lt.docid >= t.since AND lt.docid {left}"
                " AND ((t.followed AND rt.ts > lt.ts AND rt.ts - lt.ts <= t.wl)"
                " OR (NOT t.followed AND abs(rt.ts - lt.ts) <= t.wl))"
            )
        k += 1
    where = [
        f"{string_of[a]}.strval = {string_of[b]}.strval"
        for a, b in template.joins
        if f"{string_of[a]}.strval = {string_of[b]}.strval" not in " ".join(joins)
    ]
    columns = ", ".join(f"{node_col[i]} AS n{i}" for i in range(n))
    order = ", ".join(f"n{i}" for i in range(n))
    return (
        f"SELECT DISTINCT t.rid, lt.docid AS ldoc, rt.docid AS rdoc, {columns}\n"
        f"FROM {chr(10).join(joins)}\n"
        + (f"WHERE {' AND '.join(where)}\n" if where else "")
        + f"ORDER BY rdoc, t.rid, ldoc, {order}"
    )


def query_edges(template: Template) -> list[tuple[int, int]]:
    """The ``r_bin`` lookups of a template's query: its structural edges, plus a node's
    own binding ``(i, i)`` where a join end (or a lone node) is no edge's lower end."""
    edges = list(template.edges)
    ends = {node for pair in template.joins for node in pair}
    lower = {b for _, b in edges}
    touched = {i for edge in edges for i in edge}
    edges += [
        (i, i) for i in range(template.size) if i not in lower and (i in ends or i not in touched)
    ]
    return edges


def first_right_edge(template: Template) -> tuple[int, int]:
    """The first lookup of the template's query: the batch's bindings it starts from."""
    return min(e for e in query_edges(template) if e[0] >= template.left_size)
