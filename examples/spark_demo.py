"""xcep's main job on Spark, on bundled data (``make demo``).

1. Publish/subscribe: XMark people, one message per person (records cut out of
   xmark-f0.01.xml), through a set of XPath subscriptions (XPush).
2. CEP: a generated stock stream, per company (``partition by``), runs of
   falling prices (XSeq), the partitions evaluated in parallel.

Usage: python examples/spark_demo.py DATA_DIR OUT_DIR [--master URL]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from xcep.spark.filter import filter_units
from xcep.spark.session import session
from xcep.spark.sinks import read_output, write
from xcep.spark.sources import read_units
from xcep.spark.xseq import RESULT_SCHEMA, xseq_units
from xcep.xpush import Workload

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository's bench/ package

from bench.generators import stock_stream  # noqa: E402

FALLING = (
    "return $Z/symbol/text(), $Z/price/text(), $Y/price/text() "
    "from /stocks /$Z (\\ $Y)* where $Y/price/text() < prev($Y)/price/text() "
    "and first($Y)/price/text() < $Z/price/text() "
    "partition by /stocks/transaction@company"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spark = session(args.master, "xcep-demo", conf={"spark.sql.shuffle.partitions": 4})

    started = time.perf_counter()
    workload, _ = Workload.from_file(HERE / "person-subscriptions.txt")
    people = read_units(spark, str(args.data / "xmark" / "xmark-f0.01.xml"), "/site/people/person")
    matches = filter_units(people, dict(workload.texts))
    write(matches, str(args.out / "subscriptions"), "json", overwrite=True)
    rows = read_output(spark, str(args.out / "subscriptions")).collect()
    per_filter = Counter(fid for row in rows for fid in (row.matches or []))
    print(
        f"XPush on Spark: {len(rows)} people, {len(workload)} subscriptions "
        f"({time.perf_counter() - started:.1f} s), written to {args.out / 'subscriptions'}"
    )
    for fid in workload.texts:
        print(f"  {fid:<12} {per_filter[fid]:>4} people  {workload.texts[fid]}")

    started = time.perf_counter()
    stocks = args.out / "stocks"
    stocks.mkdir(exist_ok=True)
    stock_stream(stocks / "stocks.xml", megabytes=0.3)  # the benchmark's generator
    falls = xseq_units(read_units(spark, str(stocks)), FALLING, "skip-past-last")
    write(falls, str(args.out / "falling-prices"), "json", overwrite=True)
    rows = read_output(spark, str(args.out / "falling-prices"), schema=RESULT_SCHEMA).collect()
    runs = [json.loads(r.row.toJson()) for r in rows if r.row is not None]
    longest = max(runs, key=lambda r: len(r[2]))
    print(
        f"XSeq on Spark: {len(runs)} runs of falling prices (non-overlapping) in "
        f"{len({r.key for r in rows})} partitions ({time.perf_counter() - started:.1f} s), "
        f"written to {args.out / 'falling-prices'}"
    )
    print(
        f"  longest: {longest[0]} fell {len(longest[2])} times in a row, "
        f"{longest[1]} -> {longest[2][-1]}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
