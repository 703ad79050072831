"""MMQJP: many XSCL queries over streams of documents, joined per template in DuckDB.

``XsclEngine`` registers queries (``add``/``remove``, also while a stream
runs) and processes documents in micro-batches (``run``):

1. Stage 1 (``witness.py``) turns each document into witness rows, inserted
   into ``r_doc(docid, node, strval)``, ``r_bin(docid, var1, var2, node1,
   node2)`` and ``r_docts(docid, ts)``. A document's rows are its ``W``
   relations while it is being joined and become join state afterwards
   (Algorithm 2): one set of tables, the batch selected by document id.
2. Stage 2: every template's conjunctive query (``templates.py``) joins the
   batch's documents with every earlier document in its queries' windows
   (Algorithm 3's time test is part of the SQL), one SQL statement per
   template and batch, whatever the number of queries.
3. Results become output documents (``SELECT *``: a new root holding the two
   blocks' subtrees) in stream order; ``PUBLISH name`` feeds them back as
   documents of stream ``name``.
4. State older than the largest window is evicted after each batch.

A query sees the documents that arrive after it was added (both of a pair),
so that what it finds never depends on which other queries were registered.

Results are the same for any batch size: a batch's documents are joined with
all earlier ones, earlier documents of the same batch included.

One module of about 900 lines, on purpose: ``XsclEngine`` is one object whose state
(queries, templates, the rows of both joins, the documents held, the saved state's
change log) every method reads and changes; its results are in ``results.py``, Stage 1
in ``witness.py``, the in-memory join in ``hashjoin.py``, the templates in
``templates.py``.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from operator import getitem, itemgetter

import duckdb
import numpy as np

from xcep.errors import XcepError
from xcep.xscl import ast as A
from xcep.xscl.documents import Document
from xcep.xscl.hashjoin import HashJoin
from xcep.xscl.parser import XsclSyntaxError, parse_query
from xcep.xscl.results import GroupedResult, Match, Result, parse_document, ready_batches
from xcep.xscl.templates import (
    VIEWS,
    Template,
    VarTree,
    first_right_edge,
    minor,
    template_of,
    template_sql,
)
from xcep.xscl.witness import Pattern, WitnessEvaluator, canonical_block, compile_block

SCHEMA = """
CREATE TABLE r_doc (docid BIGINT, node INTEGER, strval VARCHAR);
CREATE TABLE r_bin (docid BIGINT, var1 VARCHAR, var2 VARCHAR, node1 INTEGER, node2 INTEGER,
                    strval VARCHAR);  -- strval: node2's string value (R_L, R_R of §5)
CREATE TABLE r_docts (docid BIGINT, ts DOUBLE);
CREATE TABLE r_l (docid BIGINT, var1 VARCHAR, var2 VARCHAR, node1 INTEGER, node2 INTEGER,
                  strval VARCHAR);  -- the view cache: slices of R_L by string value (§5)
CREATE TABLE vc_keys (strval VARCHAR);  -- the string values one statement works on
"""


JOINS = ("memory", "sql")


STATE_BUDGET = 1_000_000  # documents in the join state, by default


PLAN_BUDGET = 1_000_000  # rows in cached plans (_plan) before the cache is cleared


class StateBudgetError(XcepError):
    """The join state would hold more documents than its budget. ``results``: those
    the batch found before it (``process``)."""

    code = "XCEP0007"
    results: list = []  # noqa: RUF012 (set per error, never changed in place)


@dataclass
class _Registered:
    query: A.Query
    order: int
    blocks: list[tuple[Pattern, dict[str, str]]]  # per block: its pattern and local -> global
    text: str  # as added
    rows: list[tuple[Template, int]] = field(default_factory=list)


@dataclass
class _Row:
    """A directed query: a row of its template's ``r_t`` relation."""

    registered: _Registered
    swapped: bool  # the query's right block is on the earlier document
    outputs: list[tuple[int, int]]  # per output term: (side 0 = earlier / 1, template node)

    def __post_init__(self) -> None:
        self.signature = (self.swapped, tuple(self.outputs))  # how it reads a joined row
        self.sides = tuple(side for side, _ in self.outputs)
        positions = [i for _, i in self.outputs]
        # a row's output nodes as a tuple (itemgetter of one position gives the item)
        pick = operator.itemgetter(*positions)
        self.pick = pick if len(positions) > 1 else lambda nodes: (pick(nodes),)


class XsclEngine:
    """Many XSCL queries, one shared Stage 1, one SQL statement per template."""

    def __init__(
        self,
        batch_size: int = 1,
        view: str = "full",
        view_budget: int = 1_000_000,
        join: str = "memory",
        state_budget: int = STATE_BUDGET,
    ) -> None:
        """``join``: how Stage 2 runs:

        - ``"memory"`` (the default): ``hashjoin.py``, each document joined with the
          state as it arrives, work proportional to the values it shares;
        - ``"sql"``: one DuckDB statement per template and batch (the SQL that
          Spark runs), worth it for large batches.

        ``state_budget``: the most documents the join state may hold (windows of
        ``inf`` keep every document): past it ``run`` raises ``StateBudgetError``.

        ``view`` (``join="sql"``): how the earlier documents' bindings meet their
        string values (§5):

        - ``"full"``: ``r_bin`` keeps each binding's string value, the whole R_L
          materialized with the state (the default: Stage 1 knows the values);
        - ``"cache"``: the view cache of Algorithms 4 and 5, slices of R_L by
          string value, least recently used ones dropped past ``view_budget`` rows;
        - ``"none"``: every query joins ``r_doc`` itself (Algorithm 1).
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
        if view_budget < 0:
            raise ValueError("view_budget must not be negative")
        if join not in JOINS:
            raise ValueError(f"join must be one of {', '.join(JOINS)}, not {join!r}")
        if join != "sql" and view != "full":
            raise ValueError(f"view={view!r} is a way to run the SQL join: it needs join='sql'")
        if state_budget < 1:
            raise ValueError("state_budget must be at least 1")
        self.batch_size = batch_size
        self.state_budget = state_budget
        self.hashjoin = HashJoin() if join == "memory" else None
        self.view = view
        self.view_cache = ViewCache(view_budget)
        self.db = duckdb.connect()
        self.db.execute(SCHEMA)
        # the template queries are written in a good join order (templates.py); DuckDB's
        # join-order search over 20+ relations costs more than running them
        self.db.execute("SET disabled_optimizers = 'join_order'")
        self.witness = WitnessEvaluator()
        self.names: dict[str, str] = {}  # marked canonical block -> global variable
        self.patterns: dict[tuple, list] = {}  # pattern key -> [pattern, users]
        self.templates: dict[tuple, Template] = {}
        self.sql: dict[int, str] = {}
        self.queries: dict[str, _Registered] = {}
        # rid -> the directed queries of one r_t row: identical ones share it
        self.rows: dict[int, list[_Row]] = {}
        self._plans: dict[tuple, list[tuple]] = {}  # rids -> how they read a row (_plan)
        self._plan_rows = 0  # the rids of the cached plans
        self._shared: dict[tuple, int] = {}  # r_t parameters -> rid
        # query text -> [its parse (blocks shared), the registered queries of that text]
        self._parsed: dict[str, list] = {}
        # a block's text with its variables as places -> (pattern key, global names)
        self._forms: dict[tuple, tuple[tuple, list[str]]] = {}
        self._key_of: dict[int, tuple] = {}
        self.next_rid = 0
        self._added = 0  # queries added so far: a query's order (unique, also after removals)
        self._query_of: dict[int, str] = {}  # order -> query id
        self._id_array: np.ndarray | None = None  # the same as an array (_ids_by_order)
        self.next_docid = 0
        self.docs: dict[int, tuple[Document, float, str]] = {}
        self.published: set[str] = set()
        self.filters: dict[str, _Registered] = {}  # the one-block queries
        self._widest: float | None = None  # the widest window (None: to recompute)
        self._latest = -math.inf  # the latest timestamp seen
        self._shapes: dict[tuple, tuple] = {}  # (patterns, kept, joins) -> template_of(...)
        self._pending: dict[int, list[list]] = {}  # template -> r_t rows not yet inserted
        self._types: dict[str, list[tuple[str, str]]] = {}
        # per template: the variable pairs its queries start from in the batch (a row
        # count each), to skip a template the batch's bindings cannot start
        self._starts: dict[int, dict[tuple[str, str], int]] = {}
        self._start_of: dict[int, tuple[str, str]] = {}  # rid -> its pair in _starts
        # what a snapshot replays: the queries in force when the oldest document held
        # arrived, and the changes since, each with the id of the document it came before
        self._base: dict[str, str] = {}
        self._changes: list[tuple[int, str, str, str | None]] = []

    # -- queries ---------------------------------------------------------------

    def add(self, query_id: str, text: str) -> A.Query:
        if query_id in self.queries:
            raise XsclSyntaxError(f"query id {query_id} is already registered", query_id)
        known = self._parsed.get(text)
        if known is None:
            query = parse_query(text, query_id)
            for n, block in enumerate(query.blocks(), 1):
                if block.output.var is None:
                    block.output.var = f"_out{n}"
            known = self._parsed[text] = [query, 0]
        else:  # the same text again (a popular subscription): its parse is shared
            query = replace(known[0], id=query_id)
        known[1] += 1
        registered = _Registered(query, self._added, [], text)
        self._query_of[self._added] = query_id
        self._id_array = None
        self._added += 1
        for block in query.blocks():
            registered.blocks.append(self._register_block(block))
        if query.right is not None:
            directions = [False] if query.op == A.FOLLOWED_BY else [False, True]
            for swapped in directions:
                self._add_row(registered, swapped)
        self.queries[query_id] = registered
        if query.right is None:
            self.filters[query_id] = registered
        self._widest = None
        if query.publish:
            self.published.add(query.publish)
        self._changed("add", query_id, text)
        return query

    def remove(self, query_id: str) -> None:
        registered = self.queries.pop(query_id)
        self._changed("remove", query_id, None)
        del self._query_of[registered.order]
        self._id_array = None
        parsed = self._parsed[registered.text]
        parsed[1] -= 1
        if not parsed[1]:
            del self._parsed[registered.text]
        self.filters.pop(query_id, None)
        self._widest = None
        for template, rid in registered.rows:
            shared = self.rows.get(rid, [])
            shared[:] = [row for row in shared if row.registered is not registered]
            self._forget_plans()
            if shared or rid not in self.rows:
                continue  # other queries use the row (or a direction removed it already)
            del self._shared[self._key_of.pop(rid)]
            pair = self._start_of.pop(rid)
            starts = self._starts[template.index]
            starts[pair] -= 1
            if not starts[pair]:
                del starts[pair]
            pending = self._pending.get(template.index, [])
            kept = [row for row in pending if row[0] != rid]
            if len(kept) < len(pending):
                self._pending[template.index] = kept  # never inserted
            else:
                self.db.execute(f"DELETE FROM r_t_{template.index} WHERE rid = ?", [rid])
            if self.hashjoin is not None:
                self.hashjoin.remove_row(rid)
            del self.rows[rid]
        for pattern, _ in registered.blocks:
            key = next(k for k, e in self.patterns.items() if e[0] is pattern)
            self.patterns[key][1] -= 1
            if self.patterns[key][1] == 0:
                self.witness.remove(pattern)
                del self.patterns[key]

    def _register_block(self, block: A.Block) -> tuple[Pattern, dict[str, str]]:
        form, variables = _block_form(block)
        named = self._forms.get(form)  # the same block up to variable names: same names
        if named is None:
            local: dict[str, str] = {}
            for step in A.walk_steps(block.steps):
                if step.var:
                    key = canonical_block(block, mark=step)
                    name = self.names.setdefault(key, f"v{len(self.names)}")
                    while name in local.values():  # the same place twice in one block
                        key += "'"
                        name = self.names.setdefault(key, f"v{len(self.names)}")
                    local[step.var] = name
            pattern_key = (canonical_block(block), tuple(sorted(local.values())))
            named = self._forms[form] = (pattern_key, [local[v] for v in variables])
        pattern_key, names = named
        local = dict(zip(variables, names, strict=True))
        entry = self.patterns.get(pattern_key)
        if entry is None:
            entry = self.patterns[pattern_key] = [compile_block(block, local), 0]
            entry[0].key = pattern_key
            self.witness.add(entry[0])
        entry[1] += 1
        return entry[0], local

    def _add_row(self, registered: _Registered, swapped: bool) -> None:
        query = registered.query
        (lp, lnames), (rp, rnames) = registered.blocks
        joins = [(lnames[e.left.var], rnames[e.right.var]) for e in query.predicates]
        outputs = self.outputs_of(query, lnames, rnames)
        if swapped:
            (lp, lnames), (rp, rnames) = (rp, rnames), (lp, lnames)
            joins = [(b, a) for a, b in joins]
            outputs = [(1 - side, var) for side, var in outputs]
        kept = [{v for v, _ in joins}, {v for _, v in joins}]
        for side, var in outputs:
            kept[side].add(var)
        shape = (lp.key, rp.key, frozenset(kept[0]), frozenset(kept[1]), tuple(joins))
        found = self._shapes.get(shape)
        if found is None:  # queries of the same shape have the same template and mapping
            left = minor(_var_tree(lp), kept[0])
            right = minor(_var_tree(rp), kept[1])
            found = self._shapes[shape] = template_of(left, right, joins)
        code, variables, edges, value_joins = found
        template = self.templates.get(code)
        if template is None:
            template = Template(
                code, code[0], len(variables), edges, value_joins, len(self.templates)
            )
            self.templates[code] = template
            cols = ", ".join(f"v{i} VARCHAR" for i in range(template.size))
            self.db.execute(
                f"CREATE TABLE r_t_{template.index} "
                f"(rid INTEGER, followed BOOLEAN, wl DOUBLE, since BIGINT, {cols})"
            )
            self.sql[template.index] = template_sql(template, f"r_t_{template.index}", self.view)
        position = {(0, v): i for i, v in enumerate(variables[: template.left_size])}
        position.update(
            {(1, v): template.left_size + i for i, v in enumerate(variables[template.left_size :])}
        )
        followed = query.op == A.FOLLOWED_BY
        params = (followed, query.window, self.next_docid, *variables)
        rid = self._shared.get((template.index, *params))
        if rid is None:  # else an identical query has the row: share it
            rid = self.next_rid
            self.next_rid += 1
            self._shared[(template.index, *params)] = rid
            self._key_of[rid] = (template.index, *params)
            a, b = first_right_edge(template)
            starts = self._starts.setdefault(template.index, {})
            pair = (variables[a], variables[b])
            starts[pair] = starts.get(pair, 0) + 1
            self._start_of[rid] = pair
            self._pending.setdefault(template.index, []).append((rid, *params))
            if self.hashjoin is not None:
                self.hashjoin.add_row(template, variables, rid, *params[:3])
            self.rows[rid] = []
        directed = _Row(registered, swapped, [(s, position[(s, v)]) for s, v in outputs])
        self.rows[rid].append(directed)
        self._forget_plans()
        registered.rows.append((template, rid))

    @staticmethod
    def outputs_of(query: A.Query, lnames: dict, rnames: dict) -> list[tuple[int, str]]:
        if query.select is None:
            return [(0, lnames[query.left.output.var]), (1, rnames[query.right.output.var])]
        return [(0, lnames[v]) if v in lnames else (1, rnames[v]) for v in query.select]

    # -- documents ---------------------------------------------------------------

    def run(
        self,
        documents: Iterable[tuple[str, Document, float]],
        grouped: bool = False,
        adaptive: bool = False,
    ) -> Iterator[Result]:
        """Results for a stream of ``(stream name, document, timestamp)``, as soon as known
        (after each ``batch_size`` documents).

        ``grouped``: one ``GroupedResult`` for the queries that find the same
        documents (in the same order) and output nodes, instead of one ``Result``
        per query — the cheap form when many queries find the same pairs.

        ``adaptive``: batches of the documents that are ready (``ready_batches``),
        at most ``batch_size``: when documents queue up they are joined together,
        and no result waits for a batch to fill."""
        for batch in self.batches(documents, adaptive):
            yield from self.process(batch, grouped)

    def batches(
        self, documents: Iterable[tuple[str, Document, float]], adaptive: bool = False
    ) -> Iterator[list[tuple[str, Document, float]]]:
        """The documents in batches of ``batch_size`` (the last one may be short), or with
        ``adaptive`` of what is ready (``ready_batches``)."""
        if adaptive:
            ready = ready_batches(documents, self.batch_size)
            try:
                yield from ready
            finally:
                ready.close()
            return
        batch: list[tuple[str, Document, float]] = []
        for item in documents:
            batch.append(item)
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def process(
        self, batch: list[tuple[str, Document, float]], grouped: bool = False
    ) -> list[Result]:
        """The results of a batch of documents, joined together (``run`` makes the
        batches), with those of the documents its ``PUBLISH`` results make."""
        out: list[Result] = []
        waiting = list(batch)
        try:
            while waiting:  # in pieces that fit the state budget, evicted between them
                room = max(1, self.state_budget - len(self.docs))
                piece, waiting = waiting[:room], waiting[room:]
                while piece:
                    results = self._batch(piece, grouped)
                    out += results
                    piece = self._published(results) if self.published else []
        except StateBudgetError as error:
            error.results = out
            raise
        return out

    def flush_queries(self) -> None:
        """Insert the template rows of the queries added since the last batch, in bulk."""
        for index, rows in self._pending.items():
            self._insert(f"r_t_{index}", rows)
        self._pending.clear()

    def _batch(self, batch: list[tuple[str, Document, float]], grouped: bool) -> list[Result]:
        if self.hashjoin is not None:
            return self._joined_in_memory(batch, grouped)
        self.flush_queries()
        lo = self.next_docid
        doc_rows, bin_rows, ts_rows, results = [], [], [], []
        for stream, doc, ts in batch:
            docid = self._admit(stream, doc, ts)
            binw, docw = self.witness.evaluate(doc, stream)
            doc_rows += [(docid, node, value) for node, value in docw.items()]
            bin_rows += [(docid, *row, docw[row[3]]) for row in binw]
            ts_rows.append((docid, ts))
            results += self._filters(docid, stream, binw, grouped)
        hi = self.next_docid - 1
        self._insert("r_doc", doc_rows)
        self._insert("r_bin", bin_rows)
        self._insert("r_docts", ts_rows)
        left, shared = self._candidates(lo, hi)
        if left is not None and self.view == "cache":
            self._maintain_view_cache(lo, hi, shared, {value for _, _, value in doc_rows})
        if left is not None:
            pairs = {(row[1], row[2]) for row in bin_rows}
            rows = []
            for template in self.templates.values():
                if pairs.isdisjoint(self._starts.get(template.index, ())):
                    continue  # no query of this template can start from this batch
                sql = self.sql[template.index].format(lo=lo, hi=hi, left=left)
                rows += [
                    ((rid,), ldoc, rdoc, nodes)
                    for rid, ldoc, rdoc, *nodes in self.db.execute(sql).fetchall()
                ]
            results += self._results(rows, grouped)  # grouped over every template
        self._evict()
        return self._in_order(results)

    def _joined_in_memory(
        self, batch: list[tuple[str, Document, float]], grouped: bool
    ) -> list[Result]:
        """Each document joined with the state as it arrives (``hashjoin.py``)."""
        results = []
        for stream, doc, ts in batch:
            docid = self._admit(stream, doc, ts)
            shape = self.witness.shape(doc, stream)
            results += self._filters(docid, stream, shape.binw, grouped)
            strings = {n: doc.nodes[n].string_value for n in shape.bound}
            rows = self.hashjoin.process(docid, ts, shape, strings, self._window())
            results += self._results(rows, grouped)
        self._evict()  # after the batch: its results may name any of its documents
        return self._in_order(results)

    def _admit(self, stream: str, doc: Document, ts: float) -> int:
        """A new document's id; it joins the state (within the state budget)."""
        if len(self.docs) >= self.state_budget:
            raise StateBudgetError(
                f"document {self.next_docid}: the join state holds {len(self.docs):,} "
                f"documents, its budget (--state-budget); windows of 'inf' keep every "
                "document: use a finite window or a larger budget"
            )
        docid = self.next_docid
        self.next_docid += 1
        self.docs[docid] = (doc, ts, stream)
        self._latest = max(self._latest, ts)
        return docid

    @staticmethod
    def _in_order(results: list[tuple[tuple, Result]]) -> list[Result]:
        """Results (with their sort keys) in stream order: by the later document, then
        query, then the earlier document and the nodes; each (query, documents,
        nodes) once."""
        results.sort(key=first)
        out = []
        last = None
        for key, result in results:
            if key != last:  # equal keys are neighbours: the same query, docs and nodes
                out.append(result)
                last = key
        return out

    def _candidates(self, lo: int, hi: int, listed: int = 2000) -> tuple[str | None, set]:
        """A ``docid`` condition for the earlier documents that share a string value with
        the batch (a semi-join, so each template scans only those), or ``None``: none;
        and the shared string values (STR of Algorithm 4)."""
        pairs = self.db.execute(
            "SELECT DISTINCT d.docid, d.strval FROM r_doc w JOIN r_doc d ON d.strval = w.strval "
            f"WHERE w.docid BETWEEN {lo} AND {hi} AND d.docid < w.docid"
        ).fetchall()
        if not pairs:
            return None, set()
        docs = sorted({docid for docid, _ in pairs})
        shared = {value for _, value in pairs}
        if len(docs) > listed:
            return f"<= {hi}", shared
        return f"IN ({', '.join(str(d) for d in docs)})", shared

    def _maintain_view_cache(self, lo: int, hi: int, shared: set, values: set) -> None:
        """Algorithms 4 and 5 for one batch: the slices R_L,s of every shared value ``s``
        hold every binding of a document up to ``hi`` whose node has the value ``s``.
        A cached slice gains the batch's bindings (R_R,s); a missing one is computed
        from ``r_doc`` and ``r_bin``. Then least recently used slices go, past the
        budget (never one this batch uses)."""
        cache = self.view_cache
        grown = [v for v in values if v in cache.sizes]  # cached before this batch
        missing = [v for v in shared if v not in cache.sizes]
        cache.hits += len(shared) - len(missing)
        cache.misses += len(missing)
        select = (
            "INSERT INTO r_l SELECT b.docid, b.var1, b.var2, b.node1, b.node2, d.strval "
            "FROM r_bin b JOIN r_doc d ON d.docid = b.docid AND d.node = b.node2 "
            "JOIN vc_keys k ON k.strval = d.strval WHERE b.docid "
        )
        for keys, docs in ((grown, f"BETWEEN {lo} AND {hi}"), (missing, f"<= {hi}")):
            if keys:
                self._set_keys(keys)
                self.db.execute(select + docs)
        touched = grown + missing
        if touched:
            self._set_keys(touched)
            counts = self.db.execute(
                "SELECT l.strval, count(*) FROM r_l l JOIN vc_keys k ON k.strval = l.strval "
                "GROUP BY l.strval"
            ).fetchall()
            cache.sizes.update({value: 0 for value in missing})
            cache.sizes.update(dict(counts))
        cache.use(shared)
        dropped = cache.over_budget(keep=shared)
        if dropped:
            self._set_keys(dropped)
            self.db.execute("DELETE FROM r_l WHERE strval IN (SELECT strval FROM vc_keys)")

    def _set_keys(self, values: list) -> None:
        self.db.execute("DELETE FROM vc_keys")
        self._insert("vc_keys", [(v,) for v in values])

    def _insert(self, table: str, rows: list[tuple]) -> None:
        """Bulk insert through NumPy columns (DuckDB scans them without a copy per row)."""
        if not rows:
            return
        types = self._column_types(table)
        columns = {  # noqa: F841 - read by DuckDB's replacement scan below
            name: np.array([row[i] for row in rows], dtype=object if kind == "VARCHAR" else None)
            for i, (name, kind) in enumerate(types)
        }
        names = ", ".join(name for name, _ in types)
        self.db.execute(f"INSERT INTO {table} SELECT {names} FROM columns")

    def _column_types(self, table: str) -> list[tuple[str, str]]:
        found = self._types.get(table)
        if found is None:
            found = self._types[table] = [
                (name, kind)
                for name, kind in self.db.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = ? ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
        return found

    def _filters(
        self, docid: int, stream: str, binw: Iterable[tuple], grouped: bool = False
    ) -> list[tuple]:
        """Queries of one block: every node bound to the selected variable."""
        if not self.filters:
            return []
        bound: dict[str, list[int]] = {}
        for v1, v2, n1, _ in binw:
            if v1 == v2:
                bound.setdefault(v1, []).append(n1)
        out = []
        nodes = self.docs[docid][0].nodes
        by_node: dict[int, list[tuple[int, str]]] = {}
        for registered in self.filters.values():
            query = registered.query
            if query.left.stream != stream:
                continue
            var = registered.blocks[0][1][(query.select or [query.left.output.var])[0]]
            for node in sorted(bound.get(var, ())):
                if grouped:
                    by_node.setdefault(node, []).append((registered.order, query.id))
                    continue
                result = Result(query.id, Match([docid], [node], (nodes[node],)))
                out.append(((docid, registered.order, docid, (node,), False), result))
        for node, queries in by_node.items():
            match = Match([docid], [node], (nodes[node],))
            result = GroupedResult([q for _, q in queries], match)
            out.append(((docid, queries[0][0], docid, (node,), False), result))
        return out

    def _results(self, rows: list[tuple], grouped: bool = False) -> list[tuple]:
        """``(sort key, Result)`` for each directed query of each joined row ``(rids,
        earlier docid, docid, nodes)``; with ``grouped``, one ``GroupedResult`` per
        documents and output nodes."""
        out = []
        append = out.append
        docs_of = self.docs
        # per (documents, output nodes): the Match its results share, and (grouped) the
        # plan entries that found it
        buckets: dict[tuple, list] = {}
        plans = self._plans
        for rids, ldoc, rdoc, nodes in rows:
            pair = (docs_of[ldoc][0].nodes, docs_of[rdoc][0].nodes)
            plan = plans.get(rids)
            if plan is None:
                plan = self._plan(rids)
            for entry in plan:
                swapped, pick, sides, queries = entry[:4]
                picked = pick(nodes)
                docs = (rdoc, ldoc) if swapped else (ldoc, rdoc)
                bucket = buckets.get((docs, picked))
                if bucket is None:
                    parts = tuple(map(getitem, map(pair.__getitem__, sides), picked))
                    match = Match(list(docs), list(picked), parts)
                    bucket = buckets[(docs, picked)] = [(rdoc, ldoc, swapped), match, []]
                if grouped:
                    bucket[2].append(entry)
                    continue
                match = bucket[1]
                for order, query_id in queries:
                    key = (rdoc, order, ldoc, picked, swapped)
                    append((key, Result(query_id, match)))
        if not grouped:
            return out
        for (_, picked), ((rdoc, ldoc, swapped), match, entries) in buckets.items():
            if len(entries) == 1:  # the usual case: the plan's list, shared
                ids, first = entries[0][4], entries[0][3][0][0]
            elif sum(len(entry[3]) for entry in entries) < 256:  # a query twice counts once
                orders = sorted({order for entry in entries for order, _ in entry[3]})
                ids, first = [self._query_of[o] for o in orders], orders[0]
            else:  # the same with arrays
                orders = np.unique(np.concatenate([entry[5] for entry in entries]))
                ids, first = self._ids_by_order()[orders].tolist(), int(orders[0])
            key = (rdoc, first, ldoc, picked, swapped)
            append((key, GroupedResult(ids, match)))
        return out

    def _forget_plans(self) -> None:
        """The queries changed, or the plans hold ``PLAN_BUDGET`` rows: they go."""
        self._plans, self._plan_rows = {}, 0

    def _ids_by_order(self) -> np.ndarray:
        """The query ids as an array indexed by order (None where a query went)."""
        if self._id_array is None:
            ids = np.full(self._added + 1, None, dtype=object)
            for order, query_id in self._query_of.items():
                ids[order] = query_id
            self._id_array = ids
        return self._id_array

    def _plan(self, rids: tuple[int, ...]) -> list[tuple]:
        """How the rows of a joined row's ``r_t`` rows (the same tuple each time a
        window admits the same rows) read it: per output signature ``(swapped, pick,
        sides, [(order, query id), ...] by order, [query id, ...] without repeats, the
        orders as an array)``."""
        merged: dict[tuple, tuple] = {}
        for rid in rids:
            for row in self.rows.get(rid, ()):
                entry = merged.get(row.signature)
                if entry is None:
                    entry = merged[row.signature] = (row.swapped, row.pick, row.sides, [], [])
                entry[3].append((row.registered.order, row.registered.query.id))
        plan = []
        for swapped, pick, sides, queries, ids in merged.values():
            queries.sort(key=itemgetter(0))
            ids += dict.fromkeys(query_id for _, query_id in queries)
            orders = np.fromiter((order for order, _ in queries), np.int64, len(queries))
            plan.append((swapped, pick, sides, queries, ids, orders))
        if self._plan_rows + len(rids) > PLAN_BUDGET:
            self._forget_plans()
        self._plan_rows += len(rids)
        self._plans[rids] = plan
        return plan

    def directed_rows(self) -> Iterator[tuple[int, _Row]]:
        """Every directed query with the id of its ``r_t`` row."""
        for rid, shared in self.rows.items():
            for row in shared:
                yield rid, row

    def _published(self, results: list[Result]) -> list[tuple[str, Document, float]]:
        out = []
        for result in results:
            for query_id in result.queries:
                query = self.queries[query_id].query
                if query.publish:
                    ts = max(self.docs[d][1] for d in result.docs)
                    out.append((query.publish, parse_document(result.output), ts))
        return out

    def _window(self) -> float:
        """The widest window of the queries."""
        if self._widest is None:
            self._widest = max(
                (r.registered.query.window for _, r in self.directed_rows()), default=0.0
            )
        return self._widest

    def _evict(self) -> None:
        """Drop state no window can reach (timestamps are taken as non-decreasing)."""
        widest = self._window()
        if math.isinf(widest) or not self.docs:
            return
        cut = self._latest - widest
        old = []
        for docid, (_, ts, _) in self.docs.items():  # in arrival order
            if ts >= cut:
                break
            old.append(docid)
        if not old:
            return
        for docid in old:
            del self.docs[docid]
        if self.hashjoin is not None:
            self.hashjoin.evict(old)
            return
        if self.view_cache.sizes:
            gone = self.db.execute(
                "SELECT strval, count(*) FROM r_l "
                "WHERE docid IN (SELECT docid FROM r_docts WHERE ts < ?) GROUP BY strval",
                [cut],
            ).fetchall()
            self.view_cache.shrink(dict(gone))
        for table in ("r_doc", "r_bin", "r_l"):
            self.db.execute(
                f"DELETE FROM {table} WHERE docid IN (SELECT docid FROM r_docts WHERE ts < ?)",
                [cut],
            )
        self.db.execute("DELETE FROM r_docts WHERE ts < ?", [cut])

    # -- saving and restoring the join state --------------------------------------

    def _changed(self, op: str, query_id: str, text: str | None) -> None:
        self._changes.append((self.next_docid, op, query_id, text))
        if len(self._changes) > 256:
            self._fold_changes()

    def _fold_changes(self) -> None:
        """Fold the changes made before the oldest document held into ``_base``."""
        oldest = next(iter(self.docs), self.next_docid)
        kept = 0
        for at, op, query_id, text in self._changes:
            if at > oldest:
                break
            kept += 1
            if op == "add":
                self._base[query_id] = text
            else:
                self._base.pop(query_id, None)
        del self._changes[:kept]

    def snapshot(self) -> dict:
        """The join state as plain data (``restore`` makes an engine of it): the
        documents it holds with their ids, and the queries each of them met."""
        self._fold_changes()
        return {
            "queries": dict(self._base),
            "changes": list(self._changes),
            "docs": [(docid, *entry) for docid, entry in self.docs.items()],
            "next_docid": self.next_docid,
            "latest": self._latest,
        }

    @classmethod
    def restore(cls, state: dict, **options) -> XsclEngine:
        """An engine with the state ``snapshot`` saved (``options`` as the saved one's):
        the documents held join it again in their order, with their ids, under the
        queries then in force; what they find was given before and is not again."""
        engine = cls(**options)
        changes = deque(state["changes"])

        def changes_before(docid: int) -> None:
            while changes and changes[0][0] <= docid:
                _, op, query_id, text = changes.popleft()
                engine.add(query_id, text) if op == "add" else engine.remove(query_id)

        engine.next_docid = state["docs"][0][0] if state["docs"] else state["next_docid"]
        for query_id, text in state["queries"].items():
            engine.add(query_id, text)
        for docid, doc, ts, stream in state["docs"]:
            engine.next_docid = docid
            changes_before(docid)
            engine._batch([(stream, doc, ts)], False)  # its results were given
        engine.next_docid = state["next_docid"]
        changes_before(engine.next_docid)
        engine._latest = max(engine._latest, state["latest"])
        return engine

    def state_size(self) -> dict:
        """Rows of join state and of the view cache (for memory reports); with the
        in-memory join, its documents, values, bindings and query groups."""
        if self.hashjoin is not None:
            return self.hashjoin.state_size()
        return {
            table: self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("r_doc", "r_bin", "r_docts", "r_l")
        }


class ViewCache:
    """The bookkeeping of the view cache (§5): rows per cached string value, in least
    recently used order, with a budget in rows; the slices live in ``r_l``."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.sizes: OrderedDict[str, int] = OrderedDict()
        self.hits = self.misses = self.evicted = 0

    def use(self, values) -> None:
        for value in values:
            self.sizes.move_to_end(value)

    def over_budget(self, keep: set) -> list[str]:
        """The least recently used values to drop to get back under the budget."""
        total = sum(self.sizes.values())
        dropped = []
        for value in list(self.sizes):
            if total <= self.budget:
                break
            if value not in keep:
                total -= self.sizes.pop(value)
                dropped.append(value)
        self.evicted += len(dropped)
        return dropped

    def shrink(self, gone: dict) -> None:
        """Rows of expired documents leave their slices."""
        for value, count in gone.items():
            if value in self.sizes:
                self.sizes[value] -= count

    def stats(self) -> dict:
        lookups = self.hits + self.misses
        return {
            "slices": len(self.sizes),
            "rows": sum(self.sizes.values()),
            "budget": self.budget,
            "hits": self.hits,
            "misses": self.misses,
            "hit_ratio": self.hits / lookups if lookups else None,
            "evicted": self.evicted,
        }


first = itemgetter(0)


def _block_form(block: A.Block) -> tuple[tuple, list[str]]:
    """The block's text with each variable written as a place, and its variables in
    that order: blocks equal up to variable names have one form."""
    parts: list[str] = [block.stream]
    variables: list[str] = []

    def add(steps: list[A.Step]) -> None:
        for step in steps:
            parts.append(f"{step.axis}{step.name}")
            if step.var:
                parts.append("->$")
                variables.append(step.var)
            for predicate in step.predicates:
                parts.append("[")
                add(predicate)
                parts.append("]")

    add(block.steps)
    return tuple(parts), variables


def _var_tree(pattern: Pattern) -> VarTree:
    parent = {}
    for var, path in pattern.paths.items():
        up = None
        for pnode in reversed(path[:-1]):
            if pnode.var:
                up = pnode.var
                break
        parent[var] = up
    return VarTree(parent)
