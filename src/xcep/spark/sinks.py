"""Sinks: JSON Lines or Parquet directories, or the console; batch and streaming.

A streaming query writes through Spark's file sink, whose log in the output
directory (``_spark_metadata``) and the checkpoint make the output
exactly-once: after a crash and a restart from the same checkpoint, no result
is lost and none is written twice, as long as the output is read back through
that log (``spark.read.json(output)`` does; ``read_output`` here does too).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("json", "parquet", "console")


def write(
    df: DataFrame,
    output: str | None = None,
    format: str = "json",
    checkpoint: str | None = None,
    trigger: str = "available-now",
    overwrite: bool = False,
    out: TextIO | None = None,
) -> int | None:
    """Write the result: to ``output`` as ``format`` (JSON Lines or Parquet files) or,
    with ``format="console"``, as JSON Lines on ``out`` (standard output). A streaming
    DataFrame runs until its input is used up (``trigger="available-now"``) or, with
    ``trigger="10 seconds"``, in micro-batches until stopped. Returns the number of rows
    written to the console (None otherwise)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format != "console" and not output:
        raise ValueError(f"format {format} needs an output directory")
    if df.isStreaming:
        return _write_stream(df, output, format, checkpoint, trigger, out)
    if format == "console":
        return print_rows(df.toLocalIterator(), out)
    df.write.mode("overwrite" if overwrite else "errorifexists").format(format).save(output)
    return None


def _write_stream(df, output, format, checkpoint, trigger, out) -> int | None:
    if not checkpoint:
        raise ValueError("a streaming job needs a checkpoint directory (--checkpoint DIR)")
    printed = [0]
    if format == "console":
        writer = df.writeStream.foreachBatch(
            lambda batch, _id: printed.__setitem__(0, printed[0] + print_rows(batch.collect(), out))
        )
    else:
        writer = df.writeStream.format(format).option("path", output)
    writer = writer.option("checkpointLocation", checkpoint).outputMode("append")
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        raise
    return printed[0] if format == "console" else None


def print_rows(rows, out: TextIO | None) -> int:
    out = out or sys.stdout
    count = 0
    for row in rows:
        record = {k: _plain(v) for k, v in row.asDict(recursive=True).items() if v is not None}
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    out.flush()
    return count


def read_output(
    spark: SparkSession, output: str, format: str = "json", schema: str | None = None
) -> DataFrame:
    """A job's output directory as a DataFrame (through the file sink's log, if any);
    JSON Lines of XSeq rows read back with ``schema=xseq.RESULT_SCHEMA`` keep ``row`` whole."""
    reader = spark.read.format(format)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load(output)


def _plain(value):
    """A column value as JSON-ready Python (a VARIANT becomes what it holds)."""
    return value.toPython() if hasattr(value, "toPython") else value
