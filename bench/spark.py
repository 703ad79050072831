"""The engines on Spark local[1], local[2] and a 2-worker standalone cluster on loopback
against in-process, on the same input (issues 8 and 25).

``python -m bench spark``:

- **XPush**: XMark f1 (f0.1 with --quick) cut into messages (people, items,
  open auctions), written as files of 2,000 documents each; 1,000 generated
  filters (the seed's §7 generator). In-process: one ``XPushMachine`` over all
  the files. Spark: ``filter_units`` over the directory.
- **XSeq**: a generated stock stream (20 MB; 5 MB with --quick) in 8 files,
  ``partition by /stocks/transaction@company`` (10 companies), runs of falling
  prices counted per company. In-process: one engine over the files. Spark:
  records keyed and the partitions run in parallel.
- **Records**: cutting the stock files into ``/stocks/transaction`` records:
  our splitter (``read_units(record_path=…)``) against Spark's built-in
  ``xml`` source (``rowTag``), both counted.

``python -m bench spark-1gb``: the XSeq case alone on a 1 GB stock stream (64
files of 16 MB), a lighter pattern (``RISES``: price rises per company, a
two-transaction sequence), one round: each contender takes minutes.

Spark times are those of the job (the session is started before, and warmed by
one run); each master has its own session, so the rounds are not interleaved
across masters. Every contender must give the same answer.
"""

from __future__ import annotations

import gzip
import random
import tempfile
from pathlib import Path

from bench.generators import stock_stream
from bench.harness import Case, bar_plot, measure, summarise, write_results
from xcep.events import EventStream

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
FALLING = (
    "return count($Z) from /stocks /$Z (\\ $X)* "
    "where $X/price/text() < prev($X)/price/text() and first($X)/price/text() < $Z/price/text() "
    "partition by /stocks/transaction@company"
)
RISES = (
    "return count($Y) from /stocks /$X \\ $Y where $Y/price/text() > $X/price/text() "
    "partition by /stocks/transaction@company"
)
MASTERS = ["local[1]", "local[2]", "standalone"]  # standalone: 2 workers on loopback
BIG_CONF = {"spark.sql.shuffle.partitions": 8, "spark.driver.memory": "6g"}


def prepare(workdir: Path, quick: bool) -> dict:
    from bench.xpush_workload import FilterGenerator, as_stream, split_documents

    xmark = DATA / "xmark" / ("xmark-f0.1.xml.gz" if quick else "xmark-f1.xml.gz")
    plain = workdir / "xmark.xml"
    plain.write_bytes(gzip.decompress(xmark.read_bytes()))
    messages = split_documents(plain)
    plain.unlink()
    docs_dir = workdir / "messages"
    docs_dir.mkdir()
    for n in range(0, len(messages), 2000):
        (docs_dir / f"{n // 2000:04}.xml").write_bytes(as_stream(messages[n : n + 2000]))
    sample = random.Random(1).sample(messages, 300)
    filters = dict(enumerate(FilterGenerator(sample, seed=1).workload(1000, predicates=1)))
    stocks_dir = workdir / "stocks"
    stocks_dir.mkdir()
    megabytes = 5 if quick else 20
    for f in range(8):
        stock_stream(stocks_dir / f"{f}.xml", megabytes / 8, seed=f)
    size = lambda d: sum(p.stat().st_size for p in d.iterdir())  # noqa: E731
    return {
        "messages": (docs_dir, size(docs_dir), len(messages)),
        "stocks": (stocks_dir, size(stocks_dir)),
        "filters": filters,
    }


def in_process_cases(inputs: dict) -> list[Case]:
    from xcep.xpush import XPushMachine
    from xcep.xseq import XSeqEngine

    docs_dir, docs_size, _ = inputs["messages"]
    stocks_dir, stocks_size = inputs["stocks"]
    files = sorted(docs_dir.iterdir())
    stock_files = sorted(stocks_dir.iterdir())
    machine = XPushMachine(inputs["filters"])
    machine.train()

    def xpush() -> int:
        stream = EventStream(files, keep_whitespace=True)
        return sum(len(ids) for _, ids in machine.run(stream.batches()))

    def xseq() -> int:
        engine = XSeqEngine(FALLING)
        return sum(row[0] for row in engine.run(EventStream(stock_files).batches()))

    return [
        Case("in-process", "XPush", xpush, docs_size),
        Case("in-process", "XSeq", xseq, stocks_size),
    ]


def spark_cases(spark, master: str, inputs: dict) -> list[Case]:
    from pyspark.sql import functions as F

    from xcep.spark.filter import filter_units
    from xcep.spark.sources import read_units
    from xcep.spark.xseq import xseq_units

    docs_dir, docs_size, _ = inputs["messages"]
    stocks_dir, stocks_size = inputs["stocks"]

    def xpush() -> int:
        matches = filter_units(read_units(spark, str(docs_dir)), inputs["filters"])
        return matches.select(F.sum(F.size("matches"))).first()[0]

    def xseq() -> int:
        rows = xseq_units(read_units(spark, str(stocks_dir)), FALLING).collect()
        return sum(int(r.row.toJson().strip("[]")) for r in rows)

    def our_records() -> int:
        return read_units(spark, str(stocks_dir), "/stocks/transaction").count()

    def spark_xml() -> int:
        return (
            spark.read.format("xml").option("rowTag", "transaction").load(str(stocks_dir)).count()
        )

    return [
        Case(f"Spark {master}", "XPush", xpush, docs_size),
        Case(f"Spark {master}", "XSeq", xseq, stocks_size),
        Case(f"splitter {master}", "records", our_records, stocks_size),
        Case(f"Spark xml rowTag {master}", "records", spark_xml, stocks_size),
    ]


def _master(name: str):
    """The master URL for ``name``: a local one as it is, ``standalone`` a cluster of two
    workers (1 core, 1 GB each) started on loopback for the run."""
    import contextlib

    from xcep.spark.cluster import standalone

    if name == "standalone":
        return standalone(workers=2)
    return contextlib.nullcontext(name)


def run(repeat: int = 3, quick: bool = False) -> list[dict]:
    from xcep.spark.session import session

    with tempfile.TemporaryDirectory() as tmp:
        inputs = prepare(Path(tmp), quick)
        print(f"{inputs['messages'][2]:,} messages, {len(inputs['filters'])} filters")
        cases = in_process_cases(inputs)
        measure(cases, repeat)
        for master in MASTERS:
            with _master(master) as url:
                spark = session(url, "xcep-bench", conf={"spark.sql.shuffle.partitions": 8})
                these = spark_cases(spark, master, inputs)
                for case in these:
                    case.run()  # warm-up: Python workers started, machines built
                measure(these, repeat)
                cases += these
                spark.stop()
    rows = [summarise(c) for c in cases]
    for row in rows:
        peers = [r for r in rows if r["input"] == row["input"]]
        assert len({r["count"] for r in peers}) == 1, f"answers differ on {row['input']}: {peers}"
        base = next(r for r in peers if r is peers[0])
        row["speedup_vs_first"] = base["median_s"] / row["median_s"]
        print(
            f"{row['input']:<8} {row['contender']:<26} {row['median_s']:8.2f} s "
            f"{row['mb_per_s']:7.2f} MB/s  ×{row['speedup_vs_first']:.2f}"
        )
    write_results("spark", rows, {"quick": quick, "repeat": repeat})
    bar_plot("spark", rows, "mb_per_s", "MB/s (median; whiskers min..max)")
    return rows


def run_big(repeat: int = 1, quick: bool = False) -> list[dict]:
    """RISES over a 1 GB stock stream (64 MB with --quick): in-process, local[1], local[2]."""
    from xcep.spark.session import session
    from xcep.spark.sources import read_units
    from xcep.spark.xseq import xseq_units
    from xcep.xseq import XSeqEngine

    files, megabytes = (8, 8) if quick else (64, 16)
    with tempfile.TemporaryDirectory() as tmp:
        stocks = Path(tmp) / "stocks"
        stocks.mkdir()
        for f in range(files):
            stock_stream(stocks / f"{f:03}.xml", megabytes, seed=f)
        paths = sorted(stocks.iterdir())
        size = sum(p.stat().st_size for p in paths)
        label = f"XSeq {size / 1e9:.2f} GB"

        def in_process() -> int:
            engine = XSeqEngine(RISES)
            return sum(row[0] for row in engine.run(EventStream(paths).batches()))

        cases = [Case("in-process", label, in_process, size)]
        measure(cases, repeat)
        for master in MASTERS:
            spark = session(master, "xcep-bench", conf=BIG_CONF)

            def on_spark(spark=spark) -> int:
                rows = xseq_units(read_units(spark, str(stocks)), RISES).collect()
                return sum(int(r.row.toJson().strip("[]")) for r in rows)

            these = [Case(f"Spark {master}", label, on_spark, size)]
            measure(these, repeat)
            cases += these
            spark.stop()
    rows = [summarise(c) for c in cases]
    assert len({r["count"] for r in rows}) == 1, rows
    for row in rows:
        row["speedup_vs_first"] = rows[0]["median_s"] / row["median_s"]
        print(
            f"{row['contender']:<16} {row['median_s']:8.1f} s {row['mb_per_s']:6.2f} MB/s "
            f"×{row['speedup_vs_first']:.2f}"
        )
    write_results("spark-1gb", rows, {"quick": quick, "repeat": repeat})
    return rows
