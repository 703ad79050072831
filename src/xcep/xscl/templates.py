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
the same text runs in DuckDB and in Spark SQL.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

MAX_PERMUTED_JOINS = 6  # beyond, templates are not canonicalized (still correct, less shared)


@dataclass
class VarTree:
    """A block's variables as a tree: parent = the nearest variable above."""

    parent: dict[str, str | None]

    def children(self, var: str) -> list[str]:
        return [v for v, p in self.parent.items() if p == var]

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

    def children(self, var: str) -> list[str]:
        return [v for v, p in self.parent.items() if p == var]


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


def template_of(
    left: Minor, right: Minor, joins: list[tuple[str, str]]
) -> tuple[tuple, list[str], list[tuple[int, int]], list[tuple[int, int]]]:
    """(code, variables in meta-variable order, structural edges, value joins)."""
    orders = (
        itertools.permutations(range(len(joins)))
        if len(joins) <= MAX_PERMUTED_JOINS
        else [tuple(range(len(joins)))]
    )
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


def _encode(tree: Minor, var: str, side: int, labels: dict) -> tuple[tuple, list]:
    """A canonical code of the subtree at ``var`` and its nodes in code order."""
    kids = sorted(
        (_encode(tree, c, side, labels) for c in tree.children(var)), key=lambda pair: pair[0]
    )
    code = (tuple(sorted(labels.get((side, var), ()))), tuple(k[0] for k in kids))
    nodes = [(side, var)] + [n for k in kids for n in k[1]]
    return code, nodes


def template_sql(template: Template, table: str) -> str:
    """The conjunctive query of a template, for the documents with ids in [lo, hi] as the
    right side, joined with every earlier document within the window."""
    n = template.size
    left = range(template.left_size)
    select = ", ".join(f"n{i}" for i in range(n))
    parts = [f"{table} t", "r_docts lt", "r_docts rt"]
    where = ["rt.docid BETWEEN $lo AND $hi", "lt.docid < rt.docid", "lt.docid >= t.since"]
    where.append(
        "((t.followed AND rt.ts > lt.ts AND rt.ts - lt.ts <= t.wl) OR "
        "(NOT t.followed AND abs(rt.ts - lt.ts) <= t.wl))"
    )
    node_col: dict[int, str] = {}
    edges = list(template.edges)
    covered = {i for edge in edges for i in edge}
    edges += [(i, i) for i in range(n) if i not in covered]  # a lone node: its own binding
    for k, (a, b) in enumerate(edges):
        alias = f"b{k}"
        doc = "lt" if a in left else "rt"
        parts.append(f"r_bin {alias}")
        where += [
            f"{alias}.docid = {doc}.docid",
            f"{alias}.var1 = t.v{a}",
            f"{alias}.var2 = t.v{b}",
        ]
        for i, col in ((a, "node1"), (b, "node2")):
            if i in node_col:
                where.append(f"{alias}.{col} = {node_col[i]}")
            else:
                node_col[i] = f"{alias}.{col}"
    for k, (a, b) in enumerate(template.joins):
        parts += [f"r_doc dl{k}", f"r_doc dr{k}"]
        where += [
            f"dl{k}.docid = lt.docid",
            f"dl{k}.node = {node_col[a]}",
            f"dr{k}.docid = rt.docid",
            f"dr{k}.node = {node_col[b]}",
            f"dl{k}.strval = dr{k}.strval",
        ]
    columns = ", ".join(f"{node_col[i]} AS n{i}" for i in range(n))
    return (
        f"SELECT DISTINCT t.rid, lt.docid AS ldoc, rt.docid AS rdoc, {columns}\n"
        f"FROM {', '.join(parts)}\n"
        f"WHERE {' AND '.join(where)}\n"
        f"ORDER BY rdoc, t.rid, ldoc, {select}"
    )
