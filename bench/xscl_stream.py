"""XSCL at streaming latency: workload families, one document at a time (issue 22).

``python -m bench xscl-stream`` runs every family at 1,000 / 10,000 / 100,000
queries (``--quick``: 1,000 and 10,000 on fewer items), each configuration
in a fresh process (peak RSS is its own):

- xcep's in-memory join (``XsclEngine(join="memory")``) at batch 1: items/s,
  p50/p99 latency per document (from handing it in to its last result),
  results, peak RSS; and the same with ``run(grouped=True)`` (one result per
  documents and output nodes, carrying its query ids);
- the SQL join (``join="sql"``) at batch 1, at batch 100, and adaptive
  (``run(adaptive=True)``, at most 500 a batch; the items are all ready, so
  its batches are full: its latency figure is that of the whole run) at
  1,000 queries;
- a **per-query hash join** (``PerQueryHashJoin``): each query keeps its own
  hash index of its earlier block's matches by join values and probes it with
  the later block's matches; block matches are computed once per distinct
  block and document (shared, which only makes it faster);
- Sequential (``SequentialEngine``) on the first 200 items at 1,000 queries.

All contenders must find the same (query, documents) pairs: the run checks.

Families (generators with knobs, below):

- **items**: the issue's stream, ``<item ts><l1>v17</l1>...<l6>v203</l6></item>``,
  values from a 500-word vocabulary (``skew`` 0: uniform, repeats by chance);
  queries join 1-6 leaves (Zipf 0.8), the same or other leaves on the right,
  windows 5-40;
- **items-skewed**: the same with Zipf(0.8) values: popular words make ~7x
  the results (fan-out by data);
- **seed**: the seed's §6.1 shapes as a stream, two-level (6 leaves) and
  three-level (root, 4 middles, 16 leaves) items alternating, k joins
  (Zipf 0.8, K = 4), window 10;
- **diverse**: template-diverse sets: joins over any subsets of the leaves of
  three-level items, constant steps in the paths (``[/m2]``, ``//l3`` under a
  named middle), JOIN and FOLLOWED BY, windows 2-50;
- **fan-out**: many queries returning the same pairs: 20 distinct query
  texts (windows 10-40), each registered under many ids.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import random
import resource
import statistics
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor

from bench.harness import write_results
from bench.xscl import three_level_block, zipf
from xcep.testing.xscl_sequential import SequentialEngine, matches
from xcep.xscl import XsclEngine, parse_document
from xcep.xscl import ast as A
from xcep.xscl.parser import parse_query
from xcep.xscl.witness import shape_key

COUNTS = [1_000, 10_000, 100_000]
QUICK_COUNTS = [1_000, 10_000]
ITEMS = 2_000
QUICK_ITEMS = 600
SEQUENTIAL_ITEMS = 200
PER_QUERY_ITEMS = 300  # items the per-query hash join gets at 100,000 queries


class Items:
    """Two-level items of ``leaves`` leaves, values from ``vocabulary`` words."""

    def __init__(self, leaves: int = 6, vocabulary: int = 500, skew: float = 0.0) -> None:
        self.leaves = leaves
        self.words = [f"v{i}" for i in range(vocabulary)]
        self.weights = [1 / (i + 1) ** skew for i in range(vocabulary)]

    def document(self, rng: random.Random, i: int) -> str:
        values = rng.choices(self.words, self.weights, k=self.leaves)
        body = "".join(f"<l{j}>{v}</l{j}>" for j, v in enumerate(values, 1))
        return f'<item ts="{i}">{body}</item>'

    def query(self, rng: random.Random) -> str:
        k = zipf(rng, self.leaves, 0.8)
        left = rng.sample(range(1, self.leaves + 1), k)
        right = left if rng.random() < 0.5 else rng.sample(range(1, self.leaves + 1), k)
        lpath = "".join(f"[//l{j}->a{i}]" for i, j in enumerate(left))
        rpath = "".join(f"[//l{j}->b{i}]" for i, j in enumerate(right))
        joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
        window = rng.randint(5, 40)
        return f"S//item->x{lpath} FOLLOWED BY{{{joins}, {window}}} S//item->y{rpath}"


class Seed:
    """The seed's §6.1 schemas as one stream: two-level and three-level items."""

    def __init__(self, vocabulary: int = 300) -> None:
        self.words = [f"w{i}" for i in range(vocabulary)]

    def document(self, rng: random.Random, i: int) -> str:
        if i % 2:
            leaves = "".join(f"<f{j}>{rng.choice(self.words)}</f{j}>" for j in range(6))
            return f"<item>{leaves}</item>"
        mids = "".join(
            f"<m{m}>"
            + "".join(f"<l{x}>{rng.choice(self.words)}</l{x}>" for x in range(4))
            + f"</m{m}>"
            for m in range(4)
        )
        return f"<r>{mids}</r>"

    def query(self, rng: random.Random) -> str:
        if rng.random() < 0.5:
            k = zipf(rng, 6, 0.8)
            left, right = rng.sample(range(6), k), rng.sample(range(6), k)
            lpath = "".join(f"[/f{j}->a{i}]" for i, j in enumerate(left))
            rpath = "".join(f"[/f{j}->b{i}]" for i, j in enumerate(right))
            joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
            return f"S/item->a{lpath} FOLLOWED BY{{{joins}, 10}} S/item->b{rpath}"
        leaves = [(m, x) for m in range(4) for x in range(4)]
        k = zipf(rng, 4, 0.8)
        left, right = rng.sample(leaves, k), rng.sample(leaves, k)
        joins = " AND ".join(
            f"p{a}_{b}=q{c}_{d}" for (a, b), (c, d) in zip(left, right, strict=True)
        )
        lblock, rblock = three_level_block("p", left), three_level_block("q", right)
        return f"S{lblock} FOLLOWED BY{{{joins}, 10}} S{rblock}"


class Diverse:
    """Three-level items; joins over any leaves, constant steps, JOIN and FOLLOWED BY."""

    def __init__(self, vocabulary: int = 200) -> None:
        self.words = [f"w{i}" for i in range(vocabulary)]

    def document(self, rng: random.Random, i: int) -> str:
        mids = "".join(
            f"<m{m}>"
            + "".join(f"<l{x}>{rng.choice(self.words)}</l{x}>" for x in range(4))
            + f"</m{m}>"
            for m in range(4)
            if rng.random() < 0.9
        )
        return f"<r>{mids}</r>"

    def query(self, rng: random.Random) -> str:
        leaves = [(m, x) for m in range(4) for x in range(4)]
        k = zipf(rng, 4, 0.5)
        left, right = rng.sample(leaves, k), rng.sample(leaves, k)
        extra = [
            rng.choice(["", f"[/m{rng.randrange(4)}]", f"[//l{rng.randrange(4)}]"]) for _ in "lr"
        ]
        joins = " AND ".join(
            f"p{a}_{b}=q{c}_{d}" for (a, b), (c, d) in zip(left, right, strict=True)
        )
        op = rng.choice(["FOLLOWED BY", "JOIN"])
        window = rng.choice([2, 5, 10, 20, 50])
        lblock = three_level_block("p", left, extra[0])
        rblock = three_level_block("q", right, extra[1])
        return f"S{lblock} {op}{{{joins}, {window}}} S{rblock}"


class FanOut(Items):
    """Few distinct queries, each under many ids: every pair found is many results."""

    def __init__(self, distinct: int = 20) -> None:
        super().__init__(skew=0.0)
        rng = random.Random(99)
        self.texts = []
        while len(self.texts) < distinct:
            k = rng.choice([1, 1, 2])
            picked = rng.sample(range(1, 7), k)
            lpath = "".join(f"[//l{j}->a{i}]" for i, j in enumerate(picked))
            rpath = "".join(f"[//l{j}->b{i}]" for i, j in enumerate(picked))
            joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
            window = rng.choice([10, 20, 40])
            self.texts.append(
                f"S//item->x{lpath} FOLLOWED BY{{{joins}, {window}}} S//item->y{rpath}"
            )

    def query(self, rng: random.Random) -> str:
        return rng.choice(self.texts)


FAMILIES = {
    "items": Items,
    "items-skewed": lambda: Items(skew=0.8),
    "seed": Seed,
    "diverse": Diverse,
    "fan-out": FanOut,
}


def workload(family: str, queries: int, items: int) -> tuple[list[tuple[str, str]], list[str]]:
    """``(query id, text)`` pairs and the documents of a family (deterministic)."""
    maker = FAMILIES[family]()
    rng = random.Random(f"{family}-{queries}")
    texts = [(f"q{i}", maker.query(rng)) for i in range(queries)]
    docs_rng = random.Random(f"{family}-docs")
    return texts, [maker.document(docs_rng, i) for i in range(items)]


# -- the per-query baseline ----------------------------------------------------------


class PerQueryHashJoin:
    """Each query on its own, with a hash index per query: its earlier block's matches
    by their join values (evicted by the query's window), probed by the later
    block's matches. Results are ``(query id, docs)`` pairs, in no particular order."""

    def __init__(self) -> None:
        self.queries: list[tuple] = []
        self.next_docid = 0
        self._matches: dict[tuple, list[dict]] = {}  # (block, document structure) -> matches

    def add(self, query_id: str, text: str) -> None:
        query = parse_query(text, query_id)
        directions = [(query.left, query.right, False)]
        if query.op == A.JOIN:
            directions.append((query.right, query.left, True))
        for earlier, later, swapped in directions:
            ends = [
                (e.right.var, e.left.var) if swapped else (e.left.var, e.right.var)
                for e in query.predicates
            ]
            earlier, later = (earlier, earlier.text()), (later, later.text())
            self.queries.append(
                (query.id, query.op, query.window, earlier, later, ends, swapped, {}, deque())
            )

    def remove(self, query_id: str) -> None:
        self.queries = [q for q in self.queries if q[0] != query_id]

    def run(self, documents) -> list[tuple[str, tuple[int, ...]]]:
        """The results of ``(stream, document, timestamp)`` items; document ids count
        on from the last call."""
        out = []
        for _, doc, ts in documents:
            docid = self.next_docid
            self.next_docid += 1
            shape = shape_key(doc)
            found: dict[str, list[dict]] = {}  # block -> its matches here (var -> string)

            def of(block, doc=doc, shape=shape, found=found):
                """The block's matches; per structure, as xcep's Stage 1, then per document."""
                block, text = block
                here = found.get(text)
                if here is None:
                    ids = self._matches.get((text, shape))
                    if ids is None:
                        ids = self._matches[(text, shape)] = [
                            {var: node.id for var, node in m.items()} for m in matches(block, doc)
                        ]
                    nodes = doc.nodes
                    here = found[text] = [
                        {var: nodes[n].string_value for var, n in m.items()} for m in ids
                    ]
                return here

            for qid, op, window, earlier, later, ends, swapped, index, order in self.queries:
                while order and order[0][1] < ts - window:  # out of the window
                    old_key, _, old_doc = order.popleft()
                    bucket = index.get(old_key)
                    if bucket is not None:
                        bucket.pop(old_doc, None)
                        if not bucket:
                            del index[old_key]
                for match in of(later):
                    key = tuple(match[w] for _, w in ends)
                    for e, e_ts in index.get(key, {}).items():
                        dt = ts - e_ts
                        if (0 < dt <= window) if op == A.FOLLOWED_BY else abs(dt) <= window:
                            out.append((qid, (docid, e) if swapped else (e, docid)))
                for match in of(earlier):
                    key = tuple(match[v] for v, _ in ends)
                    index.setdefault(key, {})[docid] = ts
                    order.append((key, ts, docid))
        return out


def pairs_of(results) -> set:
    return {(r.query, tuple(r.docs)) for r in results}


# -- one configuration in a fresh process -------------------------------------------


def _run(job: dict) -> dict:
    import gc

    texts, documents = workload(job["family"], job["queries"], job["items"])
    documents = documents[: job.get("limit", len(documents))]
    parsed = [("S", parse_document(x), float(i)) for i, x in enumerate(documents)]
    contender = job["contender"]
    start = time.perf_counter()
    if contender == "per-query hash join":
        engine = PerQueryHashJoin()
    elif contender == "Sequential":
        engine = SequentialEngine()
    else:
        engine = XsclEngine(join=job["join"], batch_size=job.get("batch", 1))
    for qid, text in texts:
        engine.add(qid, text)
    add_seconds = time.perf_counter() - start
    gc.freeze()  # as the CLI does after loading queries
    latencies = []  # per call of the engine: the work, not this loop's bookkeeping
    digest = hashlib.sha1()  # of the (query, documents) pairs found, call by call
    count = 0

    def found(pairs: set[str]) -> None:
        digest.update("\n".join(sorted(pairs)).encode() + b"\n")

    if contender == "per-query hash join":
        for item in parsed:
            began = time.perf_counter()
            pairs = engine.run([item])
            latencies.append(time.perf_counter() - began)
            pairs = {f"{query} {docs}" for query, docs in pairs}
            count += len(pairs)
            found(pairs)
    else:
        batch = job.get("batch", 1)
        options = {"grouped": True} if job.get("grouped") else {}
        if job["contender"].endswith("adaptive"):  # batches of what is ready: all of it
            batch = len(parsed)
            options["adaptive"] = True
        for lo in range(0, len(parsed), batch):
            began = time.perf_counter()
            results = list(engine.run(parsed[lo : lo + batch], **options))
            latencies.append(time.perf_counter() - began)
            count += len(results)
            by_doc: dict[int, set[str]] = {}  # per later document, as the others report
            for result in results:
                docs = tuple(result.docs)
                by_doc.setdefault(max(docs), set()).update(f"{q} {docs}" for q in result.queries)
            for doc in range(lo, min(lo + batch, len(parsed))):
                found(by_doc.get(doc, set()))
    seconds = sum(latencies)
    row = {
        **job,
        "add_seconds": add_seconds,
        "seconds": seconds,
        "items_per_s": len(parsed) / seconds,
        "results": count,
        "pairs_digest": digest.hexdigest()[:12],
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if latencies:
        ordered = sorted(latencies)
        row["p50_ms"] = statistics.median(ordered) * 1e3
        row["p99_ms"] = ordered[int(0.99 * (len(ordered) - 1))] * 1e3
    if isinstance(engine, XsclEngine):
        row["templates"] = len(engine.templates)
        if engine.hashjoin is not None:
            row["groups"] = len(engine.hashjoin.groups)
    return row


def _cli(job: dict) -> dict:
    """``xcep xscl`` as a user runs it: a fresh process reads the query file and the
    items, joins, writes JSON Lines to a file; wall time and the child's peak RSS."""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    texts, documents = workload(job["family"], job["queries"], job["items"])
    with tempfile.TemporaryDirectory() as tmp:
        queries, items, out = Path(tmp, "q.txt"), Path(tmp, "items.xml"), Path(tmp, "out.jsonl")
        queries.write_text("".join(f"{qid}\t{text}\n" for qid, text in texts))
        items.write_text("\n".join(documents) + "\n")
        command = [sys.executable, "-m", "xcep", "xscl", "--queries", str(queries), str(items)]
        command += job.get("options", [])
        start = time.perf_counter()
        with out.open("w") as sink:
            subprocess.run(command, stdout=sink, check=True)
        seconds = time.perf_counter() - start
        lines = sum(1 for _ in out.open())
    return {
        **job,
        "seconds": seconds,
        "items_per_s": len(documents) / seconds,
        "results": lines,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _isolated(job: dict) -> dict:
    run = _cli if job["contender"].startswith("xcep CLI") else _run
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(run, job).result()


def run(repeat: int = 1, quick: bool = False) -> None:
    rows = []
    items = QUICK_ITEMS if quick else ITEMS
    for family in FAMILIES:
        for count in QUICK_COUNTS if quick else COUNTS:
            jobs = [
                {"contender": "xcep memory", "join": "memory"},
                {"contender": "xcep memory grouped", "join": "memory", "grouped": True},
                {"contender": "per-query hash join"},
            ]
            if count >= 100_000:  # per document it loops over every query: a sample
                jobs[2]["limit"] = PER_QUERY_ITEMS
            if count == 10_000:  # end to end, as a user runs it
                jobs += [
                    {"contender": "xcep CLI"},
                    {"contender": "xcep CLI --group", "options": ["--group"]},
                ]
            if count == 1_000:
                jobs += [
                    {"contender": "xcep sql", "join": "sql", "limit": 200},
                    {"contender": "xcep sql", "join": "sql", "batch": 100},
                    {"contender": "xcep sql adaptive", "join": "sql", "batch": 500},
                    {"contender": "Sequential", "limit": SEQUENTIAL_ITEMS},
                ]
            digests = {}
            for job in jobs:
                job = {"family": family, "queries": count, "items": items, **job}
                row = _isolated(job)
                rows.append(row)
                write_results("xscl-stream", rows, {"items": items})
                if "pairs_digest" in row:
                    scope = row.get("limit", items)
                    digests.setdefault(scope, set()).add(row["pairs_digest"])
                print(
                    f"{family:<13} {count:>7} {row['contender']:<20} batch {row.get('batch', 1):>3}"
                    f" {row['items_per_s']:9.1f} items/s results {row['results']:>9,}"
                    f" p99 {row.get('p99_ms', 0):7.2f} ms RSS {row['max_rss_mb']:.0f} MB",
                    flush=True,
                )
            if any(len(d) > 1 for d in digests.values()):
                raise AssertionError(f"{family} {count}: the contenders disagree")


def readme_table(results: dict) -> str:
    """Markdown: per family and query count, xcep's engine against the per-query hash
    join and the SQL join; then ``xcep xscl`` end to end."""
    rows = results["results"]

    def find(cell, name, batch=1):
        found = [r for r in cell if r["contender"] == name and r.get("batch", 1) == batch]
        return found[0] if found else None

    def rate(row):
        return f"{row['items_per_s']:,.0f}" if row else "–"

    out = [
        "| family | queries | groups | xcep items/s | p50 / p99 ms | results | grouped items/s "
        "| grouped results | peak RSS MB | per-query hash join items/s | × per-query "
        "| SQL batch 1 | SQL batch 100 | SQL adaptive | Sequential |",
        "|---" * 15 + "|",
    ]
    cli = [
        "| family | queries | `xcep xscl` s | items/s | lines | peak RSS MB "
        "| `--group` s | items/s | lines | peak RSS MB |",
        "|---" * 10 + "|",
    ]
    for family in FAMILIES:
        for count in sorted({r["queries"] for r in rows if r["family"] == family}):
            cell = [r for r in rows if r["family"] == family and r["queries"] == count]
            mine, grouped = find(cell, "xcep memory"), find(cell, "xcep memory grouped")
            per = find(cell, "per-query hash join")
            if mine is None:
                continue
            ratio = f"{mine['items_per_s'] / per['items_per_s']:,.0f}" if per else "–"
            out.append(
                f"| {family} | {count:,} | {mine.get('groups', 0):,} | {rate(mine)} "
                f"| {mine['p50_ms']:.2f} / {mine['p99_ms']:.2f} | {mine['results']:,} "
                f"| {rate(grouped)} | {grouped['results'] if grouped else 0:,} "
                f"| {mine['max_rss_mb']:.0f} | {rate(per)} | {ratio} "
                f"| {rate(find(cell, 'xcep sql'))} | {rate(find(cell, 'xcep sql', 100))} "
                f"| {rate(find(cell, 'xcep sql adaptive', 500))} "
                f"| {rate(find(cell, 'Sequential'))} |"
            )
            plain, group = find(cell, "xcep CLI"), find(cell, "xcep CLI --group")
            if plain and group:
                cli.append(
                    f"| {family} | {count:,} | {plain['seconds']:.2f} | {rate(plain)} "
                    f"| {plain['results']:,} | {plain['max_rss_mb']:.0f} | {group['seconds']:.2f} "
                    f"| {rate(group)} | {group['results']:,} | {group['max_rss_mb']:.0f} |"
                )
    return "\n".join(out) + "\n\n" + "\n".join(cli)
