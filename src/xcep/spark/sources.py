"""Spark sources: files and records as a DataFrame of units (see ``units``).

- Directories (recursively) and files: one unit per data file (``.xml``,
  ``.json``, ``.jsonl``, ``.ndjson``, each optionally ``.gz``; hidden files and
  ones starting with ``_`` are skipped: Spark lists only those, by a
  ``pathGlobFilter``), read with Spark's ``binaryFile`` source, so one file
  must fit in a task's memory (2 GB at most).
- ``record_path="/stocks/transaction"``: each file is one large XML document
  cut into records, one unit per record, keeping its position.
- ``stream=True``: Structured Streaming over a directory (new files as they
  arrive), ``max_files_per_trigger`` files per micro-batch; or over a NATS
  JetStream subject, ``nats://HOST:PORT/SUBJECT`` (``nats_source``): one unit per
  message, its id ``nats://HOST:PORT/SUBJECT#SEQ``, ``max_files_per_trigger``
  messages per micro-batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xcep.events.records import parse_record_path
from xcep.spark.records import split_records
from xcep.spark.units import UNIT_SCHEMA, data_glob, is_data_file

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def read_units(
    spark: SparkSession,
    paths: str | list[str],
    record_path: str | None = None,
    stream: bool = False,
    max_files_per_trigger: int | None = None,
) -> DataFrame:
    """The units of the inputs: DataFrame ``path, record, content, error``."""
    from pyspark.sql import functions as F

    if record_path is not None:
        parse_record_path(record_path)  # a bad path fails here, on the driver
    paths = [paths] if isinstance(paths, str) else list(paths)
    if stream and len(paths) == 1 and paths[0].startswith("nats://"):
        return _units_of_messages(spark, paths[0], record_path, max_files_per_trigger)
    if stream:
        if len(paths) != 1:
            raise ValueError("a streaming source is one directory")
        schema = "path string, modificationTime timestamp, length long, content binary"
        reader = spark.readStream.format("binaryFile").schema(schema)
        reader = reader.option("pathGlobFilter", data_glob())  # only data files are read
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
        files = reader.load(paths[0])
    else:
        reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
        files = reader.option("pathGlobFilter", data_glob()).load(paths)  # only data files
    files = files.select("path", "content", F.col("modificationTime").alias("time"))
    return files.mapInArrow(_units_of_files(record_path), UNIT_SCHEMA)


def _units_of_messages(spark, url: str, record_path, per_trigger) -> DataFrame:
    """A NATS JetStream subject as a stream of units, one per message (a document)."""
    from pyspark.sql import functions as F

    from xcep.spark.nats_source import parse_url, register

    if record_path is not None:
        raise ValueError("--record-path cuts files: a message is one document")
    server, subject = parse_url(url)
    register(spark)
    reader = spark.readStream.format("xcep-nats").option("url", server)
    reader = reader.option("subject", subject)
    if per_trigger:
        reader = reader.option("maxMessagesPerTrigger", per_trigger)
    messages = reader.load()
    return messages.select(
        "path",
        F.lit(None).cast("long").alias("record"),
        "content",
        F.lit(None).cast("string").alias("error"),
        F.col("time").cast("timestamp").alias("time"),
    )


def _units_of_files(record_path: str | None):
    def units(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from xcep.errors import InputError

        for batch in batches:
            out: dict[str, list] = {name: [] for name in _arrow_schema().names}

            def add(path, record, content, time, error=None, out=out) -> None:
                out["path"].append(path)
                out["record"].append(record)
                out["content"].append(content)
                out["error"].append(error)
                out["time"].append(time)

            for path, content, time in zip(
                *(batch.column(name).to_pylist() for name in ("path", "content", "time")),
                strict=True,
            ):
                if not is_data_file(path):
                    continue
                if record_path is None:
                    add(path, None, content, time)
                    continue
                try:
                    for record in split_records(gunzip(content), record_path, path):
                        add(path, record.position, record.content, time)
                except InputError as error:  # the records before the error are kept
                    add(path, None, None, time, str(error))
            yield pa.RecordBatch.from_pydict(out, schema=_arrow_schema())

    return units


def gunzip(content: bytes) -> bytes:
    if content[:2] == b"\x1f\x8b":
        import gzip

        return gzip.decompress(content)
    return content


def _arrow_schema():
    import pyarrow as pa

    columns = [("path", pa.string()), ("record", pa.int64())]
    columns += [("content", pa.binary()), ("error", pa.string())]
    return pa.schema([*columns, ("time", pa.timestamp("us", tz="UTC"))])
