"""XPush on workload families (issue 20), end to end as a user runs it.

Families (generators in ``bench/xpush_workload.py``), over XMark f0.1 split into
person, item and open_auction messages (5,925 messages, 9.8 MB):

- **seed**: the seed's §7 generator (``FilterGenerator``, 1.15 predicates);
- **subscriptions**: one filter per user, 1-3 value predicates with constants
  from the data (equality, ranges, ``starts-with``, ``contains``, some ``or``
  and ``not``), half of them on a nearly unique leaf (``SubscriptionGenerator``);
- **structural**: deep paths with ``//``, ``*`` and nested existence
  predicates, few values (``StructuralGenerator``);
- **mixed**: the three together, a third each.

Per family and size: ``xcep filter --filters FILE messages.xml --stats`` in a
fresh process (compile, run, write the answers to a file; the median of three
such runs, one at 1,000,000 filters): its wall time, the
steady MB/s and flushes it reports, its peak RSS; the compile rate (filters
per second: ``Workload`` and ``XPushMachine`` built in a fresh process); lxml
per filter and the YFilter-style baseline, both timed on a sample and scaled
(``bench.xpush._peers``, which also checks that xcep agrees with lxml on the
sample). ``XCEP_BENCH_1M=1`` adds 1,000,000 filters.

- **… (JSON)**: each family over the messages as a JSON feed (``json_messages``:
  one JSON object per message, 9.3 MB of JSON Lines), read as JSON by xcep, its
  filters drawn from what JSON gives (``/json/person[id = …]``); the peers read
  the XML of the events that JSON gives, and xcep on the JSON sample is checked
  against lxml on that XML.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.harness import write_results
from bench.xpush import DATA, _peers
from bench.xpush_workload import (
    FilterGenerator,
    JsonSubscriptionGenerator,
    StructuralGenerator,
    SubscriptionGenerator,
    as_stream,
    json_messages,
    split_documents,
)

COUNTS = [10_000, 100_000]
QUICK_COUNTS = [2_000]
FAMILIES = (
    "seed",
    "subscriptions",
    "structural",
    "mixed",
    "seed (JSON)",
    "subscriptions (JSON)",
    "structural (JSON)",
    "mixed (JSON)",
)


def workload(family: str, documents: list[bytes], n: int) -> list[str]:
    """``n`` filters of a family, drawn from ``documents`` (deterministic). A family "…
    (JSON)" is drawn from the XML of the JSON feed's events (``json_messages``), so its
    paths are what JSON input gives (``/json/person/...``, attributes as members)."""
    base = family.removesuffix(" (JSON)")
    subscriptions = JsonSubscriptionGenerator if family != base else SubscriptionGenerator
    makers = {
        "seed": lambda k: FilterGenerator(documents, seed=7).workload(k),
        "subscriptions": lambda k: subscriptions(documents, seed=7).workload(k),
        "structural": lambda k: StructuralGenerator(documents, seed=7).workload(k),
    }
    if base != "mixed":
        return makers[base](n)
    parts = [
        makers[f](n // 3 + (i < n % 3))
        for i, f in enumerate(("seed", "subscriptions", "structural"))
    ]
    return [f for trio in zip(*parts, strict=False) for f in trio] + [
        f for part in parts for f in part[len(parts[2]) :]
    ]


def _compile(job: dict) -> dict:
    """In a fresh process: the filters file loaded and the machine built, as ``xcep
    filter`` does it (the collector paused, then the compiled filters frozen out of its
    way: a collection would walk all of them)."""
    import gc

    from xcep.collector import collector_paused
    from xcep.xpush import MachineOptions, Workload, XPushMachine

    gc.collect()
    start = time.perf_counter()
    with collector_paused():
        workload_, errors = Workload.from_file(job["filters"])
        XPushMachine(workload_, MachineOptions())
        gc.freeze()
    seconds = time.perf_counter() - start
    return {"compile_s": seconds, "filters_per_s": job["count"] / seconds, "errors": len(errors)}


def _changes(job: dict) -> dict:
    """In a fresh process: the machine over the messages, one filter added or removed after
    every document (alternately; the added ones from the family, not yet in the set):
    what a change costs (the call) and what the documents cost meanwhile, beside the same
    run without changes."""
    import gc
    import random

    from xcep.collector import collector_paused
    from xcep.events import EventStream
    from xcep.idlines import read_filters_file
    from xcep.xpush import Workload, XPushMachine

    lines = read_filters_file(job["filters"])
    spare = [(line.fid, line.text) for line in lines[-job["spare"] :]]
    kept = lines[: -job["spare"]]
    out: dict = {}
    for changing in (False, True):
        with collector_paused():
            machine = XPushMachine(Workload((line.fid, line.text) for line in kept))
            gc.freeze()
        live = [line.fid for line in kept]
        rng = random.Random(1)
        calls: list[float] = []
        docs: list[float] = []
        stream = EventStream([job["data"]], keep_whitespace=True)
        before = time.perf_counter()
        for doc, _ in machine.run(stream.batches(), as_json=True):
            now = time.perf_counter()
            docs.append(now - before)
            if changing:
                if doc % 2 == 0 and spare:
                    fid, text = spare.pop()
                    machine.add_filter(fid, text)
                    live.append(fid)
                else:
                    machine.remove_filter(live.pop(rng.randrange(len(live))))
                calls.append(time.perf_counter() - now)
            before = time.perf_counter()
        docs.sort()
        key = "changing" if changing else "still"
        out[f"{key}_run_s"] = sum(docs)
        out[f"{key}_doc_p50_ms"] = docs[len(docs) // 2] * 1000
        out[f"{key}_doc_p99_ms"] = docs[int(0.99 * (len(docs) - 1))] * 1000
        out[f"{key}_doc_max_ms"] = docs[-1] * 1000
    calls.sort()
    out["changes"] = len(calls)
    out["change_p50_ms"] = calls[len(calls) // 2] * 1000
    out["change_p99_ms"] = calls[int(0.99 * (len(calls) - 1))] * 1000
    return out


def _counting(job: dict) -> dict:
    """In a fresh process: the counting matcher (``bench.counting``) built over the
    filters and run over every tenth message as XML (its parse included), scaled to the
    stream: its compile rate and estimated matching time; and its answers on the
    peers' sample, which must be lxml's."""
    import gc
    import random

    from bench.counting import CountingMatcher
    from xcep.idlines import read_filters_file

    filters = {line.fid: line.text for line in read_filters_file(job["filters"])}
    documents = [d.strip() for d in Path(job["xml"]).read_bytes().split(b'<?xml version="1.0"?>')]
    documents = [d for d in documents if d]
    gc.collect()
    start = time.perf_counter()
    matcher = CountingMatcher(filters)
    compile_s = time.perf_counter() - start
    some = documents[::10]
    start = time.perf_counter()
    for document in some:
        matcher.match(document)
    seconds = (time.perf_counter() - start) * len(documents) / len(some)
    ids = list(filters)
    order = {fid: i for i, fid in enumerate(random.Random(0).sample(ids, min(500, len(ids))))}
    answers = [
        sorted(order[f] for f in matcher.match(d) if f in order)
        for d in documents[:: max(1, len(documents) // 100)][:100]
    ]
    supported = set(matcher.names)
    return {
        "counting_compile_filters_per_s": len(filters) / compile_s,
        "counting_match_estimated_s": seconds,
        "counting_unsupported": matcher.unsupported,
        "counting_sample_answers": answers,
        "counting_sample_supported": sorted(i for f, i in order.items() if f in supported),
    }


def _cli(job: dict) -> dict:
    """``xcep filter`` as a user runs it, answers to a file: wall time, its report."""
    out = Path(job["out"])
    command = [sys.executable, "-m", "xcep", "filter", "--filters", job["filters"], "--stats=json"]
    # the last run's answers (a GB for structural) freed before the clock starts, not as
    # the file is opened for writing: freeing them is the file system's work, not xcep's
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    with out.open("w") as sink:
        done = subprocess.run(
            [*command, job["data"]], stdout=sink, stderr=subprocess.PIPE, text=True, check=True
        )
    seconds = time.perf_counter() - start
    stats = json.loads(done.stderr.strip().splitlines()[-1])
    matches = 0
    with out.open() as answers:
        for line in answers:
            matches += len(json.loads(line)["matches"])
    return {
        "end_to_end_s": seconds,
        "end_to_end_mb_per_s": job["mb"] / seconds,
        "steady_mb_per_s": stats["mb_per_s"],
        "flushes": stats["flushes"],
        "states": stats["states"],
        "average_state_size": stats["average_state_size"],
        "hit_ratio": stats["hit_ratio"],
        "matches": matches,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _isolated(function, job: dict) -> dict:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, job).result()


def run(repeat: int = 1, quick: bool = False) -> list[dict]:
    counts = QUICK_COUNTS if quick else COUNTS
    if os.environ.get("XCEP_BENCH_1M") == "1":
        counts = [*counts, 1_000_000]
    families = FAMILIES
    # some families or sizes only (their results go to xpush-families-some.json):
    # XCEP_BENCH_FAMILIES="seed,subscriptions (JSON)", XCEP_BENCH_COUNTS=1000000
    some = os.environ.get("XCEP_BENCH_FAMILIES") or os.environ.get("XCEP_BENCH_COUNTS")
    if os.environ.get("XCEP_BENCH_FAMILIES"):
        families = tuple(f.strip() for f in os.environ["XCEP_BENCH_FAMILIES"].split(","))
    if os.environ.get("XCEP_BENCH_COUNTS"):
        counts = [int(c) for c in os.environ["XCEP_BENCH_COUNTS"].split(",")]
    name = "xpush-families-some" if some else "xpush-families"
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        plain = workdir / "xmark.xml"
        with gzip.open(DATA / "xmark" / "xmark-f0.1.xml.gz") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        documents = split_documents(plain)
        if quick:
            documents = documents[:600]
        data = as_stream(documents)
        data_path = workdir / "messages.xml"
        data_path.write_bytes(data)
        feed, as_events = json_messages(documents)
        feed_path = workdir / "messages.jsonl"
        feed_path.write_text("\n".join(feed) + "\n")
        inputs = {  # the messages xcep reads, and as XML for the generator and the peers
            "xml": (data_path, documents, data),
            "json": (feed_path, as_events, as_stream(as_events)),
        }
        for family in families:
            source, documents, data = inputs["json" if "JSON" in family else "xml"]
            data_path = source
            mb = source.stat().st_size / 1e6
            for count in counts:
                filters = workload(family, documents, count)
                filters_path = workdir / f"{family}-{count}.txt"
                filters_path.write_text("".join(f"f{i}\t{f}\n" for i, f in enumerate(filters)))
                job = {"filters": str(filters_path), "data": str(data_path), "count": count}
                job["out"] = str(workdir / "answers.jsonl")
                job["mb"] = mb
                row = {"family": family, "filters": count, "messages": len(documents), "mb": mb}
                row.update(_isolated(_compile, job))
                # end to end: the median of three fresh runs (one at a million filters): the
                # shared machine's speed drifts by 10-15 % over minutes
                runs = sorted(
                    (_isolated(_cli, job) for _ in range(1 if count >= 1_000_000 else 3)),
                    key=lambda run: run["end_to_end_s"],
                )
                row.update(runs[len(runs) // 2])
                row["end_to_end_runs_s"] = [run["end_to_end_s"] for run in runs]
                if count >= 100_000:  # filters added and removed while documents flow
                    spare_path = workdir / f"{family}-{count}-changes.txt"
                    more = workload(family, documents, count + 4_000)[count:]
                    spare_path.write_text(
                        filters_path.read_text()
                        + "".join(f"g{i}\t{f}\n" for i, f in enumerate(more))
                    )
                    row.update(
                        _isolated(_changes, {**job, "filters": str(spare_path), "spare": 4_000})
                    )
                sample = 300 if quick else 500
                peers = _peers(filters, data, documents, 100, sample)
                answers = peers.pop("lxml_sample_answers")
                if "JSON" in family:  # the peers read the XML of the JSON's events
                    _agree_on_json(filters, sample, feed, len(documents), answers)
                if family.startswith("subscriptions") and count <= 100_000:  # counting baseline
                    xml_path = workdir / "as-xml.xml"
                    xml_path.write_bytes(data)
                    counting = _isolated(_counting, {**job, "xml": str(xml_path)})
                    supported = set(counting.pop("counting_sample_supported"))
                    if counting.pop("counting_sample_answers") != [
                        [i for i in found if i in supported] for found in answers
                    ]:
                        raise AssertionError("the counting matcher and lxml disagree")
                    counting["counting_estimated_s"] = (
                        counting["counting_compile_filters_per_s"] ** -1 * count
                        + counting["counting_match_estimated_s"]
                    )
                    counting["vs_counting"] = counting["counting_estimated_s"] / row["end_to_end_s"]
                    row.update(counting)
                row.update(peers)
                row["vs_lxml"] = row["lxml_estimated_s"] / row["end_to_end_s"]
                row["vs_yfilter"] = row["yfilter_estimated_s"] / row["end_to_end_s"]
                rows.append(row)
                write_results(name, rows, {"counts": counts})
                print(
                    f"{family:13} {count:>9,} e2e {row['end_to_end_s']:7.2f} s "
                    f"{row['end_to_end_mb_per_s']:6.2f} MB/s steady {row['steady_mb_per_s']:6.2f}"
                    f" MB/s compile {row['filters_per_s']:8.0f}/s flushes {row['flushes']:3}"
                    f" RSS {row['peak_rss_mb']:6.0f} MB x lxml {row['vs_lxml']:8.0f}"
                    f" x YFilter {row['vs_yfilter']:6.1f}"
                    + (f" x counting {row['vs_counting']:6.1f}" if "vs_counting" in row else "")
                    + (
                        f" change p50 {row['change_p50_ms']:.3f} ms, doc p50 "
                        f"{row['changing_doc_p50_ms']:.2f}/{row['still_doc_p50_ms']:.2f} ms"
                        if "changes" in row
                        else ""
                    ),
                    flush=True,
                )
    print(markdown(rows))
    print(changes_markdown(rows))
    return rows


def _agree_on_json(
    filters: list[str], sample: int, feed: list[str], count: int, answers: list
) -> None:
    """xcep reading the JSON messages of ``_peers``' sample gives lxml's answers on their
    XML (the same sample: filters drawn with its seed, documents evenly spaced)."""
    import io
    import random

    from xcep.events import EventStream
    from xcep.xpush import XPushMachine

    some = random.Random(0).sample(filters, min(sample, len(filters)))
    lines = feed[:: max(1, count // 100)][:100]
    stream = EventStream([io.BytesIO(("\n".join(lines) + "\n").encode())], format="jsonl")
    found = [ids for _, ids in XPushMachine(dict(enumerate(some))).run(stream.batches())]
    if found != answers:
        raise AssertionError("XPush on the JSON messages and lxml on their XML disagree")


def markdown(rows: list[dict]) -> str:
    lines = [
        "| family | filters | end to end | MB/s end to end | MB/s steady | compile filters/s "
        "| flushes | states (avg size) | matches per message | peak RSS | × lxml per filter "
        "| × YFilter-style |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['family']} | {r['filters']:,} | {r['end_to_end_s']:.1f} s "
            f"| {r['end_to_end_mb_per_s']:.2f} | {r['steady_mb_per_s']:.2f} "
            f"| {r['filters_per_s']:,.0f} | {r['flushes']} "
            f"| {r['states']:,} ({r['average_state_size']:.0f}) "
            f"| {r['matches'] / r['messages']:,.0f} | {r['peak_rss_mb']:,.0f} MB "
            f"| {r['vs_lxml']:,.0f}× | {r['vs_yfilter']:.1f}× |"
        )
    return "\n".join(lines)


def changes_markdown(rows: list[dict]) -> str:
    lines = [
        "| family | filters | changes | change p50 / p99 | document p50 / p99 / max, changing "
        "| document p50 / p99 / max, still | run changing / still |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "changes" not in r:
            continue
        lines.append(
            f"| {r['family']} | {r['filters']:,} | {r['changes']:,} "
            f"| {r['change_p50_ms']:.3f} / {r['change_p99_ms']:.3f} ms "
            f"| {r['changing_doc_p50_ms']:.2f} / {r['changing_doc_p99_ms']:.2f} / "
            f"{r['changing_doc_max_ms']:,.0f} ms "
            f"| {r['still_doc_p50_ms']:.2f} / {r['still_doc_p99_ms']:.2f} / "
            f"{r['still_doc_max_ms']:,.0f} ms "
            f"| {r['changing_run_s']:.2f} / {r['still_run_s']:.2f} s |"
        )
    return "\n".join(lines)
