"""XPush experiments after the seed's §7 (Fig. 5, 6, 8, 9), with peers in the same run.

Data: XMark scale 0.1 split into person/item/open_auction documents, and a
generated flat Protein-like stream. Workloads from ``bench/xpush_workload.py``.
Each configuration runs in a fresh interpreter, so that its peak memory is
its own. Peers: lxml evaluating every filter on its own (timed on a sample of
filters and documents, then scaled: labelled *estimated*), and a YFilter-style
shared path NFA without predicate sharing (``bench/yfilter.py``).
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.harness import RESULTS, write_results
from bench.xpush_workload import (
    PROTEIN_DTD,
    FilterGenerator,
    as_stream,
    protein_documents,
    split_documents,
)

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"

CONFIGS = {
    "basic": dict(top_down=False),
    "TD": dict(top_down=True),
    "TD-order": dict(top_down=True, order=True),
    "TD-order-train": dict(top_down=True, order=True, train=True),
    "TD-order-early-train": dict(top_down=True, order=True, early=True, train=True),
}


def _run_config(job: dict) -> dict:
    """In a fresh process: build the machine, (train), filter the stream once, cold."""
    import io

    from xcep.events import EventStream
    from xcep.schema import parse_dtd
    from xcep.xpush import MachineOptions, XPushMachine

    filters = json.loads(Path(job["filters"]).read_text())
    data = Path(job["data"]).read_bytes()
    dtd = parse_dtd(Path(job["dtd"]).read_text())
    options = dict(CONFIGS[job["config"]])
    train = options.pop("train", False)
    compiled = job.get("compiled", True)  # the compiled kernels (tokenizer, table walk)
    start = time.perf_counter()
    machine = XPushMachine(
        dict(enumerate(filters)),
        MachineOptions(**options, max_entries=job["max_entries"], compiled=compiled),
        order_facts=dtd,
    )
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    if train:
        machine.train(dtd)
    train_s = time.perf_counter() - start
    hits: list[tuple[float, float]] = []
    consumed = [0]
    step = max(1, len(data) // 20)

    def progress(n: int) -> None:
        consumed[0] += n

    stream = EventStream(
        [io.BytesIO(data)], keep_whitespace=True, chunk_size=step, compiled=compiled
    )
    answers_digest = 0
    matches = 0
    start = time.perf_counter()
    last_mark = 0
    for doc, ids in machine.run(stream.batches()):
        matches += len(ids)
        answers_digest = (answers_digest * 1_000_003 + hash(tuple(ids)) + doc) % (1 << 61)
        mb = stream.stats.bytes / 1e6
        if mb - last_mark >= 0.5:
            last_mark = mb
            hits.append((mb, machine.stats.hit_ratio))
    run_s = time.perf_counter() - start
    stats = machine.stats_dict()
    # warm: the same data again, the machine keeping what it built (the seed's
    # "completed machine" measurement)
    stream = EventStream([io.BytesIO(data)], keep_whitespace=True, compiled=compiled)
    start = time.perf_counter()
    for _ in machine.run(stream.batches()):
        pass
    warm_s = time.perf_counter() - start
    return {
        **{k: v for k, v in job.items() if k not in ("filters", "data", "dtd")},
        "compile_s": compile_s,
        "train_s": train_s,
        "filter_s": run_s,
        "mb": len(data) / 1e6,
        "mb_per_s": len(data) / 1e6 / run_s,
        "warm_s": warm_s,
        "warm_mb_per_s": len(data) / 1e6 / warm_s,
        "matches": matches,
        "answers_digest": answers_digest,
        "states": stats["states"],
        "average_state_size": stats["average_state_size"],
        "hit_ratio": stats["hit_ratio"],
        "entries": stats["entries"],
        "flushes": stats["flushes"],
        "afa_states": stats["afa_states"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "hit_curve": hits,
    }


def _job(dataset, experiment, preds, size, config, filters_path: Path, data_path: Path) -> dict:
    """One configuration's run (``_run_config``); the DTD lies beside the data."""
    return {
        "dataset": dataset,
        "experiment": experiment,
        "predicates_per_filter": preds,
        "filters_count": size,
        "config": config,
        "filters": str(filters_path),
        "data": str(data_path),
        "dtd": str(data_path.with_suffix(".dtd")),
        "max_entries": 50_000_000,
    }


def _isolated(job: dict) -> dict:
    """``_run_config`` in a fresh interpreter (a worker that dies raises BrokenProcessPool
    instead of leaving the run waiting)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(_run_config, job).result()


def _measure(job: dict, peers: dict, rows: list, digests: set, name: str, meta: dict) -> dict:
    """Run one configuration in a fresh process, add the peers' figures, keep the row
    (saved after every run) and its answers' digest (the runs must agree)."""
    row = _isolated(job)
    row.update(peers)
    digests.add(row["answers_digest"])
    rows.append(row)
    write_results(name, rows, meta)
    return row


def _peers(
    filters: list[str], data: bytes, docs: list[bytes], sample_docs: int, sample_filters: int
):
    """lxml per filter (sampled, scaled) and the YFilter-style baseline (sampled, scaled).

    The sample is drawn across the whole workload and stream (filters at random with a
    fixed seed, documents evenly spaced, so every kind of message is in it), and lxml is
    timed five times on it: the median is scaled up."""
    import random

    from lxml import etree

    from bench.yfilter import SharedPathNFA
    from xcep.xpush.ast import to_text
    from xcep.xpush.workload import compile_filter

    some_filters = random.Random(0).sample(filters, min(sample_filters, len(filters)))
    some_docs = docs[:: max(1, len(docs) // sample_docs)][:sample_docs]
    compiled = [
        etree.XPath(f"boolean({to_text(compile_filter(f), existential=True)})")
        for f in some_filters
    ]
    trees = [etree.ElementTree(etree.fromstring(d)) for d in some_docs]
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        lxml_answers = [[i for i, x in enumerate(compiled) if x(t)] for t in trees]
        timings.append(time.perf_counter() - start)
    per_pair = sorted(timings)[2] / (len(trees) * len(compiled))
    lxml_estimate = per_pair * len(filters) * len(docs)

    nfa = SharedPathNFA(dict(enumerate(some_filters)))
    sample = as_stream(some_docs)
    start = time.perf_counter()
    yfilter_answers = nfa.run(sample)
    yfilter_s = time.perf_counter() - start
    if yfilter_answers != lxml_answers:
        raise AssertionError("the YFilter baseline and lxml disagree")
    import io

    from xcep.events import EventStream
    from xcep.xpush import XPushMachine

    machine = XPushMachine(dict(enumerate(some_filters)))
    stream = EventStream([io.BytesIO(sample)], keep_whitespace=True)
    if [ids for _, ids in machine.run(stream.batches())] != lxml_answers:
        raise AssertionError("XPush and lxml disagree on the sample")
    scale = (len(filters) / len(some_filters)) * (len(data) / len(sample))
    return {
        "lxml_estimated_s": lxml_estimate,
        "lxml_per_filter_doc_us": per_pair * 1e6,
        "yfilter_estimated_s": yfilter_s * scale,
        "sample": {"filters": len(some_filters), "documents": len(some_docs)},
        "lxml_sample_answers": lxml_answers,
    }


def prepare(workdir: Path, quick: bool) -> dict[str, dict]:
    datasets = {}
    xmark = DATA / "xmark" / "xmark-f0.1.xml.gz"
    if xmark.exists():
        plain = workdir / "xmark.xml"
        with gzip.open(xmark) as src, open(plain, "wb") as dst:
            shutil.copyfileobj(src, dst)
        docs = split_documents(plain)
        if quick:
            docs = docs[:800]
        datasets["XMark f0.1 split"] = {
            "docs": docs,
            "dtd": (DATA / "xmark" / "auction.dtd").read_text(),
        }
    n = 2000 if quick else 8000
    datasets["Protein-like"] = {"docs": protein_documents(n), "dtd": PROTEIN_DTD}
    return datasets


def run(repeat: int = 1, quick: bool = False, plan: dict | None = None) -> list[dict]:
    plan = plan or (
        {
            "sizes": [1000, 5000],
            "all_configs_at": 5000,
            "ten_pred_sizes": [1000],
            "fixed_total": 5000,
            "per_query": [1, 5],
            "sample": (50, 200),
        }
        if quick
        else {
            "sizes": [10_000, 25_000, 50_000, 100_000, 200_000],
            "all_configs_at": 25_000,
            "best_only_from": 200_000,
            "ten_pred_sizes": [5_000, 10_000],
            "fixed_total": 50_000,
            "per_query": [1, 2, 5, 10],
            "sample": (100, 500),
            "max_size": {"Protein-like": 50_000},
        }
    )
    rows = []
    only = os.environ.get("XCEP_BENCH_DATASETS")  # e.g. "Protein-like": rerun some data sets
    if only and (RESULTS / "xpush.json").exists():
        kept = json.loads((RESULTS / "xpush.json").read_text())["results"]
        rows = [r for r in kept if r["dataset"] not in only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        datasets = prepare(workdir, quick)
        if only:
            datasets = {k: v for k, v in datasets.items() if k in only.split(",")}
        for dataset, info in datasets.items():
            docs = info["docs"]
            data = as_stream(docs)
            data_path = workdir / f"{dataset}.xml"
            data_path.write_bytes(data)
            dtd_path = workdir / f"{dataset}.dtd"
            dtd_path.write_text(info["dtd"])
            generator = FilterGenerator(docs, seed=7)
            jobs = []
            limit = plan.get("max_size", {}).get(dataset)
            for preds, sizes in ((1.15, plan["sizes"]), (10.45, plan["ten_pred_sizes"])):
                sizes = [n for n in sizes if limit is None or n <= limit]
                for size in sizes:
                    configs = ["basic", "TD-order-early-train"]
                    if size == plan["all_configs_at"] or (preds > 2 and size == sizes[-1]):
                        configs = list(CONFIGS)
                    if size >= plan.get("best_only_from", size + 1):
                        configs = ["TD-order-early-train"]
                    jobs.append(("filters", preds, size, configs))
            for k in plan["per_query"]:
                jobs.append(
                    ("fixed-total", float(k), plan["fixed_total"] // k, ["TD-order-early-train"])
                )
            for experiment, preds, size, configs in jobs:
                filters = generator.workload(size, predicates=preds)
                filters_path = workdir / f"filters-{dataset}-{preds}-{size}.json"
                filters_path.write_text(json.dumps(filters))
                peers = (
                    _peers(filters, data, docs, *plan["sample"]) if experiment == "filters" else {}
                )
                peers.pop("lxml_sample_answers", None)
                digests = set()
                for config in configs:
                    job = _job(dataset, experiment, preds, size, config, filters_path, data_path)
                    meta = {"plan": plan, "complete": False}
                    row = _measure(job, peers, rows, digests, "xpush", meta)
                    print(
                        f"{dataset:18} {experiment:11} {preds:5} {size:7} {config:22} "
                        f"{row['filter_s']:7.2f}s {row['mb_per_s']:6.2f} MB/s "
                        f"warm {row['warm_mb_per_s']:6.2f} MB/s "
                        f"states {row['states']:7} size {row['average_state_size']:6} "
                        f"hit {row['hit_ratio']:.3f} rss {row['peak_rss_mb']:.0f} MB",
                        flush=True,
                    )
                if len(digests) != 1:
                    raise AssertionError(f"configurations disagree on {dataset} {size}")
    write_results("xpush", rows, {"plan": plan, "complete": True})
    plot(rows)
    return rows


def run_kernels(repeat: int = 1, quick: bool = False) -> list[dict]:
    """The compiled kernels (XML tokenizer, table walk) against the pure-Python machine:
    XMark messages, 1.15 predicates per filter, both in the same run, cold and warm."""
    sizes = [1_000, 5_000] if quick else [10_000, 100_000]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        info = prepare(workdir, quick)["XMark f0.1 split"]
        docs = info["docs"]
        data = as_stream(docs)
        data_path = workdir / "data.xml"
        data_path.write_bytes(data)
        dtd_path = workdir / "data.dtd"
        dtd_path.write_text(info["dtd"])
        generator = FilterGenerator(docs, seed=7)
        for size in sizes:
            filters = generator.workload(size, predicates=1.15)
            filters_path = workdir / f"filters-{size}.json"
            filters_path.write_text(json.dumps(filters))
            peers = _peers(filters, data, docs, 400, 2000)  # ~1.5 s a timing: steadier
            peers.pop("lxml_sample_answers", None)
            digests = set()
            for config in ("basic", "TD-order-early-train"):
                for compiled in (False, True):
                    job = _job(
                        "XMark f0.1 split", "kernels", 1.15, size, config, filters_path, data_path
                    )
                    job = {**job, "compiled": compiled}
                    row = _measure(job, peers, rows, digests, "xpush-kernels", {"sizes": sizes})
                    print(
                        f"{size:7} {config:22} compiled={compiled!s:5} "
                        f"cold {row['filter_s']:6.2f}s warm {row['warm_s']:6.3f}s "
                        f"× lxml cold {row['lxml_estimated_s'] / row['filter_s']:,.0f} "
                        f"warm {row['lxml_estimated_s'] / row['warm_s']:,.0f}",
                        flush=True,
                    )
            if len(digests) != 1:
                raise AssertionError(f"the runs disagree at {size} filters")
    print(kernels_markdown(rows))
    return rows


def kernels_markdown(rows: list[dict]) -> str:
    lines = [
        "| filters | config | kernels | cold s | cold MB/s | warm s | warm MB/s | lxml s (est.) "
        "| × lxml cold | × lxml warm |",
        "|" + "---|" * 10,
    ]
    for r in rows:
        lxml = r["lxml_estimated_s"]
        kernels = "compiled" if r["compiled"] else "Python"
        lines.append(
            f"| {r['filters_count']:,} | {r['config']} | {kernels}"
            f" | {r['filter_s']:.2f} | {r['mb_per_s']:.2f} | {r['warm_s']:.3f} "
            f"| {r['warm_mb_per_s']:.1f} | {lxml:,.0f} | {lxml / r['filter_s']:,.0f} "
            f"| {lxml / r['warm_s']:,.0f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict]) -> None:
    """Fig. 5a/6a (time and states by filter count), Fig. 8 (hit ratio), Fig. 9 (fixed
    total of predicates), one row of panels per data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(len(datasets), 4, figsize=(20, 4.2 * len(datasets)), squeeze=False)
    for row_axes, dataset in zip(axes, datasets, strict=True):
        mine = [r for r in rows if r["dataset"] == dataset and r["experiment"] == "filters"]
        small = [r for r in mine if r["predicates_per_filter"] < 2]
        configs = list(dict.fromkeys(r["config"] for r in small))

        def lines(ax, key, rows_=small, configs=configs):
            for config in configs:
                points = sorted(
                    (r["filters_count"], r[key]) for r in rows_ if r["config"] == config
                )
                if len(points) > 1:
                    ax.plot(*zip(*points, strict=True), marker="o", label=config)

        ax = row_axes[0]
        lines(ax, "filter_s")
        for peer, key in (
            ("lxml per filter (est.)", "lxml_estimated_s"),
            ("YFilter-style (est.)", "yfilter_estimated_s"),
        ):
            points = sorted({(r["filters_count"], r[key]) for r in small if key in r})
            if points:
                ax.plot(*zip(*points, strict=True), marker="x", linestyle="--", label=peer)
        ax.set_yscale("log")
        ax.set_xlabel("filters (1.15 predicates each)")
        ax.set_ylabel("filtering time, s (log)")
        ax.set_title(f"{dataset}: filtering time, cold (Fig. 5a)")
        ax.legend(fontsize=7)
        ax = row_axes[1]
        lines(ax, "states")
        ax.set_xlabel("filters")
        ax.set_ylabel("XPush states")
        ax.set_title(f"{dataset}: states (Fig. 6a)")
        ax.legend(fontsize=7)
        ax = row_axes[2]
        for r in small:
            if r["config"] == "TD-order-early-train" and r["hit_curve"]:
                ax.plot(*zip(*r["hit_curve"], strict=True), label=f"{r['filters_count']} filters")
        ax.set_xlabel("MB processed")
        ax.set_ylabel("hit ratio")
        ax.set_title(f"{dataset}: hit ratio (Fig. 8)")
        ax.legend(fontsize=7)
        ax = row_axes[3]
        fixed = sorted(
            (r["predicates_per_filter"], r["filter_s"], r["states"])
            for r in rows
            if r["dataset"] == dataset and r["experiment"] == "fixed-total"
        )
        if fixed:
            ks, seconds, states = zip(*fixed, strict=True)
            ax.plot(ks, seconds, marker="o", label="filtering time, s")
            twin = ax.twinx()
            twin.plot(ks, states, marker="s", color="gray", label="states")
            twin.set_ylabel("XPush states")
            ax.set_xlabel("predicates per filter (total fixed)")
            ax.set_ylabel("filtering time, s")
            ax.set_title(f"{dataset}: fixed total of predicates (Fig. 9)")
            ax.legend(fontsize=7, loc="upper left")
            twin.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(RESULTS / "xpush.png", dpi=90)
    plt.close(fig)


def replot() -> None:
    """Draw bench/results/xpush.png again from bench/results/xpush.json."""
    plot(json.loads((RESULTS / "xpush.json").read_text())["results"])


def markdown(rows: list[dict]) -> str:
    """The results table of bench/README.md."""
    head = (
        "| data | experiment | preds/filter | filters | config | cold s | cold MB/s | warm MB/s "
        "| states | avg state | hit ratio | peak RSS MB | lxml s (est.) | × lxml "
        "| YFilter-style s (est.) | × YFilter |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        lxml = r.get("lxml_estimated_s")
        yfilter = r.get("yfilter_estimated_s")
        cells = [
            r["dataset"],
            r["experiment"],
            f"{r['predicates_per_filter']:g}",
            f"{r['filters_count']:,}",
            r["config"],
            f"{r['filter_s']:.1f}",
            f"{r['mb_per_s']:.2f}",
            f"{r['warm_mb_per_s']:.2f}",
            f"{r['states']:,}",
            f"{r['average_state_size']:.0f}",
            f"{r['hit_ratio']:.3f}",
            f"{r['peak_rss_mb']:.0f}",
            f"{lxml:,.0f}" if lxml else "",
            f"{lxml / r['filter_s']:,.0f}" if lxml else "",
            f"{yfilter:,.0f}" if yfilter else "",
            f"{yfilter / r['filter_s']:,.1f}" if yfilter else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
