"""MMQJP against Sequential (seed 002, §6): Figures 8 and 11 (queries), 16 (an RSS stream).

``python -m bench xscl``:

- **technical**: the seed's §6.1 set-up. Two documents of the two-level schema
  (a root and N = 6 leaves) or the three-level one (root, 4 middles, 16
  leaves); leaf i of d1 has the same string value as leaf i of d2, all others
  differ. Each query binds k (Zipf 0.8 over 1..N, or 1..K = 4) random leaves
  on each side and joins them pairwise. The time to process d2 (d1 is already
  in the join state), for 10 ... 100,000 queries, MMQJP and Sequential.
- **rss**: a stream of generated feed items (item_url, channel_url, title,
  timestamp, description, from a vocabulary with repeated titles), queries
  joining items on random field subsets; items per second.
"""

from __future__ import annotations

import random
import resource
import time
from functools import partial

from bench.harness import write_results
from xcep.testing.xscl_sequential import SequentialEngine
from xcep.xscl import XsclEngine, parse_document

QUERY_COUNTS = [10, 100, 1_000, 10_000, 100_000]
QUICK_COUNTS = [10, 100, 1_000]
SEQUENTIAL_LIMIT = 100_000  # Sequential is linear in the number of queries
RSS_ITEMS = 200_000
RSS_COUNTS = [10, 100, 1_000, 10_000, 100_000]
RSS_QUICK_COUNTS = [10, 100]


def zipf(rng: random.Random, top: int, skew: float) -> int:
    weights = [1 / (k**skew) for k in range(1, top + 1)]
    return rng.choices(range(1, top + 1), weights)[0]


ENGINES = {
    # the SQL join (DuckDB): string values kept in r_bin, R_L/R_R materialized (§5)
    "MMQJP": lambda: XsclEngine(join="sql"),
    "MMQJP view cache": lambda: XsclEngine(join="sql", view="cache"),  # Algorithms 4 and 5
    "MMQJP no view": lambda: XsclEngine(join="sql", view="none"),  # Algorithm 1: r_doc joins
    "MMQJP in memory": XsclEngine,  # the in-memory join (hashjoin.py), the default
    "Sequential": SequentialEngine,
}


def two_level_documents(n: int = 6) -> tuple[str, str]:
    d1 = "<item>" + "".join(f"<f{i}>value {i}</f{i}>" for i in range(n)) + "</item>"
    return d1, d1.replace("<item>", "<item>", 1)


def two_level_query(rng: random.Random, n: int = 6, skew: float = 0.8) -> str:
    k = zipf(rng, n, skew)
    left = rng.sample(range(n), k)
    right = rng.sample(range(n), k)
    lpath = "".join(f"[/f{j}->a{i}]" for i, j in enumerate(left))
    rpath = "".join(f"[/f{j}->b{i}]" for i, j in enumerate(right))
    joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
    return f"S/item->a{lpath} FOLLOWED BY{{{joins}, inf}} S/item->b{rpath}"


def three_level_documents() -> tuple[str, str]:
    mids = "".join(
        f"<m{m}>" + "".join(f"<l{x}>value {m}.{x}</l{x}>" for x in range(4)) + f"</m{m}>"
        for m in range(4)
    )
    doc = f"<r>{mids}</r>"
    return doc, doc


def three_level_query(rng: random.Random, top_k: int = 4, skew: float = 0.8) -> str:
    leaves = [(m, x) for m in range(4) for x in range(4)]
    k = zipf(rng, top_k, skew)

    left, right = rng.sample(leaves, k), rng.sample(leaves, k)
    joins = " AND ".join(f"p{a}_{b}=q{c}_{d}" for (a, b), (c, d) in zip(left, right, strict=True))
    lblock, rblock = three_level_block("p", left), three_level_block("q", right)
    return f"S{lblock} FOLLOWED BY{{{joins}, inf}} S{rblock}"


def three_level_block(prefix: str, picked: list[tuple[int, int]], extra: str = "") -> str:
    """A block over three-level documents binding the ``picked`` (middle, leaf) pairs,
    its middles and root (``{prefix}r``); ``extra``: predicates of the root."""
    by_mid: dict[int, list[int]] = {}
    for m, x in picked:
        by_mid.setdefault(m, []).append(x)
    parts = "".join(
        f"[/m{m}->{prefix}m{m}" + "".join(f"[/l{x}->{prefix}{m}_{x}]" for x in xs) + "]"
        for m, xs in by_mid.items()
    )
    return f"/r->{prefix}r{extra}{parts}"


def _time_second_document(engine, d1: str, d2: str) -> tuple[float, int]:
    docs = [("S", parse_document(d1), 1.0)]
    list(engine.run(docs))
    second = [("S", parse_document(d2), 2.0)]
    start = time.perf_counter()
    found = sum(1 for _ in engine.run(second))
    return time.perf_counter() - start, found


def technical(quick: bool) -> list[dict]:
    rows = []
    for schema, make_docs, make_query in (
        ("two-level", two_level_documents, two_level_query),
        ("three-level", three_level_documents, three_level_query),
    ):
        d1, d2 = make_docs()
        for count in QUICK_COUNTS if quick else QUERY_COUNTS:
            rng = random.Random(count)
            queries = [(f"q{i}", make_query(rng)) for i in range(count)]
            for name, make in ENGINES.items():
                if name == "Sequential" and count > SEQUENTIAL_LIMIT:
                    continue
                engine = make()
                start = time.perf_counter()
                for qid, text in queries:
                    engine.add(qid, text)
                added = time.perf_counter() - start
                seconds, found = _time_second_document(engine, d1, d2)
                templates = len(getattr(engine, "templates", ())) or None
                rows.append(
                    {
                        "schema": schema,
                        "queries": count,
                        "engine": name,
                        "seconds": seconds,
                        "results": found,
                        "add_seconds": added,
                        "templates": templates,
                    }
                )
                print(
                    f"{schema:<11} {count:>7} queries {name:<10} {seconds:8.3f}s "
                    f"results={found} templates={templates} (add {added:.1f}s)"
                )
    return rows


# -- an RSS-like stream ----------------------------------------------------------

WORDS = [
    "market",
    "rates",
    "bank",
    "energy",
    "climate",
    "vote",
    "court",
    "health",
    "school",
    "rail",
    "storm",
    "league",
    "film",
    "music",
    "space",
    "chip",
    "data",
    "cloud",
    "city",
    "budget",
    "trade",
    "fund",
    "police",
    "water",
    "fire",
    "drug",
    "food",
]
FIELDS = ["item_url", "channel_url", "title", "timestamp", "description"]


def rss_items(count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    channels = [f"http://news{c}.example.org/rss" for c in range(400)]
    titles = [" ".join(rng.sample(WORDS, 4)).title() for _ in range(max(count // 5, 50))]
    out = []
    for i in range(count):
        title = rng.choice(titles)  # titles repeat: cross-postings, follow-ups
        channel = rng.choice(channels)
        description = " ".join(rng.choices(WORDS, k=8))
        out.append(
            f"<item><item_url>{channel}/{i}</item_url><channel_url>{channel}</channel_url>"
            f"<title>{title}</title><timestamp>{i}</timestamp>"
            f"<description>{description}</description></item>"
        )
    return out


def rss_query(rng: random.Random) -> str:
    """Items with the same title (a cross-posting or follow-up), maybe also the same
    channel or description, within a window of 10 or 100 items."""
    k = zipf(rng, 3, 0.8)
    fields = ["title", *rng.sample(["channel_url", "description"], k - 1)]
    lpath = "".join(f"[/{f}->a{i}]" for i, f in enumerate(fields))
    rpath = "".join(f"[/{f}->b{i}]" for i, f in enumerate(fields))
    joins = " AND ".join(f"a{i}=b{i}" for i in range(k))
    window = rng.choice(["10", "100"])
    return f"S/item->a{lpath} FOLLOWED BY{{{joins}, {window}}} S/item->b{rpath}"


def rss(quick: bool) -> list[dict]:
    """MMQJP over the whole stream for each number of queries; Sequential per item in
    steady state (its window full) at 100 and 1,000 queries."""
    items = rss_items(2_000 if quick else RSS_ITEMS)
    start = time.perf_counter()
    parsed = [("S", parse_document(x), float(i)) for i, x in enumerate(items)]
    print(f"parsed {len(items):,} items in {time.perf_counter() - start:.1f}s")
    rows = []
    for count in RSS_QUICK_COUNTS if quick else RSS_COUNTS:
        engine = XsclEngine(batch_size=500, join="sql")
        added = _add_queries(engine, count)
        start = time.perf_counter()
        found = sum(1 for _ in engine.run(parsed))  # outputs are serialized when read
        seconds = time.perf_counter() - start
        memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append(
            {
                "engine": "MMQJP",
                "queries": count,
                "distinct_rows": len(engine.rows),
                "items": len(items),
                "seconds": seconds,
                "items_per_s": len(items) / seconds,
                "results": found,
                "templates": len(engine.templates),
                "add_seconds": added,
                "state_rows": sum(engine.state_size().values()),
                "max_rss_mb": memory,
            }
        )
        print(rows[-1])
    warm, timed = (100, 200) if not quick else (100, 100)
    for count in [10, 100] if quick else [100, 1_000]:
        engine = SequentialEngine()
        _add_queries(engine, count)
        list(engine.run(parsed[:warm]))
        start = time.perf_counter()
        found = sum(1 for _ in engine.run(parsed[warm : warm + timed]))
        seconds = time.perf_counter() - start
        rows.append(
            {
                "engine": "Sequential",
                "queries": count,
                "items": timed,
                "seconds": seconds,
                "items_per_s": timed / seconds,
                "results": found,
                "seconds_per_item_per_query": seconds / timed / count,
            }
        )
        print(rows[-1])
    return rows


def _add_queries(engine, count: int) -> float:
    rng = random.Random(count)
    start = time.perf_counter()
    for i in range(count):
        engine.add(f"q{i}", rss_query(rng))
    return time.perf_counter() - start


def sweeps(quick: bool, count: int = 1_000) -> list[dict]:
    """Figures 9, 10, 12 and 13: the leaves N, the Zipf parameter and K at the seed's
    default of 1,000 queries (Table 5), every engine on the same queries."""
    zipfs = (0.0, 0.4, 0.8, 1.2, 1.6)
    settings = []
    for n in (4, 6, 8, 10, 12):
        settings.append(
            ("two-level", "N", n, partial(two_level_documents, n), partial(two_level_query, n=n))
        )
    for z in zipfs:
        settings.append(
            ("two-level", "zipf", z, two_level_documents, partial(two_level_query, skew=z))
        )
    for k in (2, 3, 4, 5):
        settings.append(
            ("three-level", "K", k, three_level_documents, partial(three_level_query, top_k=k))
        )
    for z in zipfs:
        settings.append(
            ("three-level", "zipf", z, three_level_documents, partial(three_level_query, skew=z))
        )
    if quick:
        settings = settings[::4]
    rows = []
    for schema, parameter, value, make_docs, make_query in settings:
        d1, d2 = make_docs()
        rng = random.Random(count)
        queries = [(f"q{i}", make_query(rng)) for i in range(count)]
        for name, make in ENGINES.items():
            engine = make()
            for qid, text in queries:
                engine.add(qid, text)
            seconds, found = _time_second_document(engine, d1, d2)
            rows.append(
                {
                    "schema": schema,
                    "parameter": parameter,
                    "value": value,
                    "queries": count,
                    "engine": name,
                    "seconds": seconds,
                    "results": found,
                    "templates": len(getattr(engine, "templates", ())) or None,
                }
            )
            print(rows[-1])
    return rows


def run(repeat: int = 1, quick: bool = False, parts: str = "technical,sweeps,rss") -> None:
    rows = technical(quick) if "technical" in parts else []
    varied = sweeps(quick) if "sweeps" in parts else []
    stream = rss(quick) if "rss" in parts else []
    write_results("xscl", rows, {"sweeps": varied, "rss": stream})


def readme_tables(results: dict) -> str:
    """Markdown tables of ``results/xscl.json`` for bench/README.md."""
    out = []
    technical_rows = results["results"]
    names = list(ENGINES)
    for schema in ("two-level", "three-level"):
        rows = [r for r in technical_rows if r["schema"] == schema]
        if not rows:
            continue
        out += [f"*{schema}*", ""]
        out.append(
            "| queries | templates | "
            + " | ".join(f"{n} s" for n in names)
            + " | Sequential ÷ MMQJP | results |"
        )
        out.append("|---" * (len(names) + 4) + "|")
        for count in sorted({r["queries"] for r in rows}):
            cell = {r["engine"]: r for r in rows if r["queries"] == count}
            mmqjp, seq = cell.get("MMQJP"), cell.get("Sequential")
            ratio = f"{seq['seconds'] / mmqjp['seconds']:.2f}" if mmqjp and seq else "–"
            times = " | ".join(f"{cell[n]['seconds']:.3f}" if n in cell else "–" for n in names)
            out.append(
                f"| {count:,} | {mmqjp['templates']} | {times} | {ratio} | {mmqjp['results']:,} |"
            )
        out.append("")
    sweep_rows = results["meta"].get("sweeps", [])
    varied = [
        ("two-level", "N"),
        ("two-level", "zipf"),
        ("three-level", "K"),
        ("three-level", "zipf"),
    ]
    for schema, parameter in varied:
        rows = [r for r in sweep_rows if r["schema"] == schema and r["parameter"] == parameter]
        if not rows:
            continue
        out += [f"*{schema}, varying {parameter} (1,000 queries)*", ""]
        out.append(
            f"| {parameter} | templates | "
            + " | ".join(f"{n} s" for n in names)
            + " | Sequential ÷ MMQJP |"
        )
        out.append("|---" * (len(names) + 3) + "|")
        for value in sorted({r["value"] for r in rows}):
            cell = {r["engine"]: r for r in rows if r["value"] == value}
            times = " | ".join(f"{cell[n]['seconds']:.3f}" if n in cell else "–" for n in names)
            ratio = cell["Sequential"]["seconds"] / cell["MMQJP"]["seconds"]
            out.append(f"| {value} | {cell['MMQJP']['templates']} | {times} | {ratio:.2f} |")
        out.append("")
    return "\n".join(out)
