"""Spark at scale (issue 25): 1 GB and 10 GB of gzipped input, in-process against
``local[2]`` and a 2-worker standalone cluster on loopback.

``python -m bench spark-scale`` (1 GB; ``--quick``: 128 MB) and ``python -m bench
spark-10gb`` (10 GB): the input is generated into a temporary directory, run, and
deleted (disk use stays within this machine's limits: the files are gzipped).

- **Generator** (``generate``): files of ``FILE_MB`` MB before compression, gzipped
  (level 1): *messages* — XMark f1's persons, items and open auctions as documents,
  shuffled per file; *stocks* — the stock feed of ``bench.generators.stock_stream``,
  one ``<stocks>`` document per file.
- **Engines**, each through its plan (``xcep.plans``) in-process and its Spark job:
  XPush (1,000 generated filters, the §7 generator, over the messages); XSeq (a
  one-predicate path, ``/stocks/transaction[symbol='IBM']/price/text()``, over the
  stock feed; per file on Spark, which is the same answer here: one document per
  file); XQuery (a FLWOR over each message: the persons with an income over 50,000);
  XSCL (persons followed within 10 messages by a person of the same city: a join
  across the whole stream, Stage 2 on Spark SQL).
- **How the time splits**: *parse* is the event source alone over the same files
  (``EventStream``, gzip included), *engine* the in-process run less the parse;
  *Spark's cost* is what a Spark run spends beyond the in-process work on the cores
  it had: ``(seconds × cores − in-process seconds)``, per MB.
- **Memory**: the peak of the summed RSS of the benchmark process and every process
  under it (the JVMs, Spark's Python workers), sampled from ``/proc`` every 0.2 s
  while a contender runs.

One round each (minutes per contender at 10 GB); every contender must give the same
count (rows).
"""

from __future__ import annotations

import gzip
import os
import random
import tempfile
import time
from pathlib import Path

from bench.generators import stock_stream
from bench.harness import write_results
from xcep.events import EventStream

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
FILE_MB = 128
XSEQ_QUERY = "/stocks/transaction[symbol='IBM']/price/text()"
XQUERY = "for $p in $input/person where $p/profile/@income > 50000 return string($p/@id)"
XSCL_QUERY = "S//person->x[//address/city->a] FOLLOWED BY{a=b, 10} S//person->y[//address/city->b]"
INPUT_OF = {"XPush": "messages", "XSeq": "stocks", "XQuery": "messages", "XSCL": "messages"}
ENGINES = ("XPush", "XSeq", "XQuery", "XSCL")
MASTERS = ("local[2]", "standalone")
CONF = {"spark.sql.shuffle.partitions": 8, "spark.driver.memory": "4g"}
# a standalone executor holds a file's units (128 MB of XML) several times over: at
# Spark's default 1 GB its JVM ran out of memory at 10 GB (executors lost, exit 52)
WORKER_MEMORY = "3g"
STANDALONE_CONF = {**CONF, "spark.executor.memory": WORKER_MEMORY}


def generate(workdir: Path, megabytes: int) -> dict:
    """Gzipped messages and stock files of ``megabytes`` MB each (before compression)."""
    from bench.xpush_workload import FilterGenerator, as_stream, split_documents

    plain = workdir / "xmark.xml"
    plain.write_bytes(gzip.decompress((DATA / "xmark" / "xmark-f1.xml.gz").read_bytes()))
    messages = split_documents(plain)
    plain.unlink()
    rng = random.Random(1)
    filters = dict(enumerate(FilterGenerator(rng.sample(messages, 300), seed=1).workload(1000)))
    out = {"filters": filters}
    for name in ("messages", "stocks"):
        (workdir / name).mkdir()
    per_file = min(FILE_MB, megabytes)
    files = max(1, megabytes // per_file)
    size = 0
    for f in range(files):
        docs, written = [], 0
        while written < per_file * 1_000_000:
            doc = rng.choice(messages)
            docs.append(doc)
            written += len(doc) + 1
        path = workdir / "messages" / f"{f:04}.xml.gz"
        path.write_bytes(gzip.compress(as_stream(docs), compresslevel=1))
        size += written
    out["messages"] = (workdir / "messages", size)
    size = 0
    for f in range(files):
        raw = workdir / "stocks" / f"{f:04}.xml"
        stock_stream(raw, per_file, seed=f)
        size += raw.stat().st_size
        (workdir / "stocks" / f"{f:04}.xml.gz").write_bytes(
            gzip.compress(raw.read_bytes(), compresslevel=1)
        )
        raw.unlink()
    out["stocks"] = (workdir / "stocks", size)
    return out


class MemorySampler:
    """The peak, over a run, of the summed RSS (MB) of this process and every process
    under it, read from ``/proc`` every ``every`` seconds."""

    def __init__(self, every: float = 0.2) -> None:
        import threading

        self.every, self.peak = every, 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def total() -> float:
        import os

        parents, rss = {}, {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            parents[int(entry)] = int(fields.get("PPid", "0"))
            rss[int(entry)] = int(fields.get("VmRSS", "0 kB").split()[0])
        mine, grew = {os.getpid()}, True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in mine} - mine
            mine |= more
            grew = bool(more)
        return sum(rss.get(pid, 0) for pid in mine) / 1024

    def _sample(self) -> None:
        while not self.done.wait(self.every):
            self.peak = max(self.peak, self.total())

    def __enter__(self) -> MemorySampler:
        self.peak = self.total()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


def _timed(run) -> tuple[float, int, float]:
    """(seconds, count, peak MB) of one run."""
    with MemorySampler() as memory:
        start = time.perf_counter()
        count = run()
        seconds = time.perf_counter() - start
    return seconds, count, memory.peak


def _plan(engine: str, inputs: dict):
    from xcep.plans import compile_plan

    if engine == "XPush":
        return compile_plan("filter", inputs["filters"])
    if engine == "XSeq":
        return compile_plan("xseq", {"q": XSEQ_QUERY})
    if engine == "XQuery":  # each message on its own (as Spark's per-document job)
        return compile_plan("xquery", {"q": XQUERY}, per_document=True)
    return compile_plan("xscl", {"j": XSCL_QUERY})


def _count(engine: str, rows: list) -> int:
    """What both sides count: the filter matches, else the rows."""
    return sum(len(r.value) for r in rows) if engine == "XPush" else len(rows)


def _in_process(inputs: dict, engines: tuple) -> dict:
    results = {}
    for engine in engines:
        directory, _ = inputs[INPUT_OF[engine]]
        files = sorted(directory.iterdir())
        keep = engine == "XPush"  # (filters see whitespace text, as xcep filter)
        plan = _plan(engine, inputs)

        def parse(files=files, keep=keep) -> int:
            return sum(len(b) for b in EventStream(files, keep_whitespace=keep).batches())

        def run(files=files, plan=plan, keep=keep, engine=engine) -> int:
            one = plan.start()  # rows counted as they come (not kept)
            count = 0
            for batch in EventStream(files, keep_whitespace=keep).batches():
                count += _count(engine, one.feed(batch))
            return count + _count(engine, one.finish())

        parse_s, _, _ = _timed(parse)
        seconds, count, peak = _timed(run)
        results[engine] = {
            "parse_s": parse_s,
            "seconds": seconds,
            "count": count,
            "peak_rss_mb": peak,
        }
    return results


def _on_spark(spark, inputs: dict, engines: tuple) -> dict:
    from pyspark.sql import functions as F

    from xcep.spark.filter import filter_units
    from xcep.spark.sources import read_units
    from xcep.spark.xquery import xquery_units
    from xcep.spark.xscl import xscl_units
    from xcep.spark.xseq import xseq_units

    def units(engine: str):
        return read_units(spark, str(inputs[INPUT_OF[engine]][0]))

    jobs = {
        "XPush": lambda: (
            filter_units(units("XPush"), inputs["filters"])
            .select(F.sum(F.size("matches")))
            .first()[0]
        ),
        "XSeq": lambda: xseq_units(units("XSeq"), XSEQ_QUERY).count(),
        "XQuery": lambda: xquery_units(units("XQuery"), XQUERY).where("error IS NULL").count(),
        "XSCL": lambda: (
            xscl_units(spark, [("S", units("XSCL"))], [("j", XSCL_QUERY)])
            .where("error IS NULL")
            .count()
        ),
    }
    return {
        engine: dict(zip(("seconds", "count", "peak_rss_mb"), _timed(jobs[engine]), strict=True))
        for engine in engines
    }


def run(
    repeat: int = 1, quick: bool = False, gigabytes: float = 1, engines: tuple = ENGINES
) -> list[dict]:
    """Each contender's rows are printed and written as soon as it is done (a 10 GB run
    takes hours: what finished is kept). ``XCEP_BENCH_ENGINES=XQuery,XSCL`` picks engines,
    ``XCEP_BENCH_CONTENDERS=standalone`` contenders and ``XCEP_BENCH_SKIP=XQuery@local[2]``
    pairs not to run: the rows not run (the in-process ones are what every contender's
    counts are checked against) come from the last results of the name."""
    import contextlib

    from xcep.spark.cluster import standalone
    from xcep.spark.session import session

    if os.environ.get("XCEP_BENCH_ENGINES"):
        engines = tuple(e.strip() for e in os.environ["XCEP_BENCH_ENGINES"].split(","))
    megabytes = 128 if quick else int(gigabytes * 1000)
    name = "spark-scale" if gigabytes == 1 else f"spark-{gigabytes:g}gb"
    if tuple(engines) != ENGINES:
        name += "-" + "-".join(e.lower() for e in engines)
    meta = {"quick": quick, "gigabytes": gigabytes, "file_mb": FILE_MB}
    contenders = ("in-process", *MASTERS)
    if os.environ.get("XCEP_BENCH_CONTENDERS"):
        contenders = tuple(c.strip() for c in os.environ["XCEP_BENCH_CONTENDERS"].split(","))
    skip = {tuple(p.strip().split("@")) for p in os.environ.get("XCEP_BENCH_SKIP", "").split(",")}
    runs = {(e, c) for e in engines for c in contenders} - skip  # (engine, contender) pairs
    rows: list = []
    if any((e, "in-process") not in runs for e in engines):
        rows = _earlier_rows(name, engines, runs)
    with tempfile.TemporaryDirectory(prefix="xcep-scale-") as tmp:
        started = time.perf_counter()
        inputs = generate(Path(tmp), megabytes)
        print(f"generated {megabytes:,} MB x 2 in {time.perf_counter() - started:.0f} s")
        if "in-process" in contenders:
            own = _in_process(inputs, tuple(e for e in engines if (e, "in-process") in runs))
            for engine, found in own.items():
                size = inputs[INPUT_OF[engine]][1]
                rows.append({"engine": engine, "contender": "in-process", "cores": 1,
                             "bytes": size, **found})  # fmt: skip
            _report(rows, name, meta)
        for master in (c for c in contenders if c in MASTERS):  # in the order given
            place = standalone(workers=2, memory=WORKER_MEMORY) if master == "standalone" else None
            with place or contextlib.nullcontext(master) as url:
                conf = STANDALONE_CONF if master == "standalone" else CONF
                spark = session(url, "xcep-scale", conf=conf)
                found = _on_spark(spark, inputs, tuple(e for e in engines if (e, master) in runs))
                spark.stop()
            for engine, result in found.items():
                size = inputs[INPUT_OF[engine]][1]
                rows.append({"engine": engine, "contender": master, "cores": 2, "bytes": size,
                             **result})  # fmt: skip
            _report(rows, name, meta)
    return rows


def _earlier_rows(name: str, engines: tuple, runs: set) -> list:
    """The rows of the last run of ``name`` that this run keeps: every engine's
    in-process row first (what the others are checked against), and the (engine,
    contender) pairs this run does not repeat."""
    import json

    from bench.harness import RESULTS

    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no earlier run to take the in-process rows from")
    earlier = json.loads(path.read_text())["results"]
    kept = [
        r for r in earlier if r["engine"] in engines and (r["engine"], r["contender"]) not in runs
    ]
    kept.sort(key=lambda r: r["contender"] != "in-process")
    for row in kept:
        _PRINTED.add(id(row))
    return kept


_PRINTED: set = set()  # the rows printed already (each run prints a row once)


def _report(rows: list, name: str, meta: dict) -> None:
    """Rows so far: each against its engine's in-process run, printed and written."""
    for row in rows:
        base = next(r for r in rows if r["engine"] == row["engine"])
        assert row["count"] == base["count"], (row, base)
        megabytes = row["bytes"] / 1e6
        row["mb_per_s"] = megabytes / row["seconds"]
        if row["contender"] != "in-process":
            extra = row["seconds"] * row["cores"] - base["seconds"]
            row["spark_cost_s_per_mb"] = extra / megabytes
        if id(row) not in _PRINTED:
            _PRINTED.add(id(row))
            print(
                f"{row['engine']:<6} {row['contender']:<11} {row['seconds']:8.1f} s "
                f"{row['mb_per_s']:6.2f} MB/s  peak {row['peak_rss_mb']:,.0f} MB",
                flush=True,
            )
    write_results(name, rows, meta)


def run_10gb(repeat: int = 1, quick: bool = False) -> list[dict]:
    return run(repeat, quick, gigabytes=10)
