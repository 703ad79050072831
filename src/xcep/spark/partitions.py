"""Partitions: records keyed by a value, each partition run in position order.

``keyed_records(units, "/log/event", "@uid")`` cuts file units into records
at the record path (units the source already cut are records), and keys each
record by an attribute of its root (``@uid``) or, for any other XPath
expression, by the string value of the first item it selects on the record
(``user/text()``). ``Wrapper(record_path)`` puts a partition's records back
inside the record path's ancestors, so the partition reads like the original
document with only its own records.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from xcep.events.records import parse_record_path

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame

KEYED_SCHEMA = "key string, path string, record long, content binary, error string, time timestamp"
_ATTRIBUTE = re.compile(r"@([^\s/\[\]()@]+)")


def keyed_records(units: DataFrame, record_path: str, key: str) -> DataFrame:
    """Records with their key: ``key, path, record, content, error, time``."""
    parse_record_path(record_path)
    record_key(key)  # a bad key expression fails here, on the driver
    return units.mapInArrow(_keyed_batches(record_path, key), KEYED_SCHEMA)


def split_keyed(keyed: DataFrame, value: str) -> tuple[DataFrame, DataFrame]:
    """(error rows shaped ``doc_id, key, <value>, error``, the records that have a key)."""
    from pyspark.sql import functions as F

    errors = keyed.where(F.col("error").isNotNull()).select(
        F.col("path").alias("doc_id"),
        F.lit(None).cast("string").alias("key"),
        F.lit(None).cast("string").alias(value),
        "error",
    )
    return errors, keyed.where(F.col("error").isNull() & F.col("key").isNotNull())


def record_key(key: str) -> Callable[[bytes], str | None]:
    """The function giving a record's key: ``@name`` (fast) or an XPath expression."""
    match = _ATTRIBUTE.fullmatch(key.strip())
    if match is not None:
        from xcep.spark.records import root_attribute

        name = match.group(1)
        return lambda data: root_attribute(data, name)
    import xml.etree.ElementTree as ET

    import elementpath

    try:
        selector = elementpath.Selector(key)
    except elementpath.ElementPathError as exc:
        raise ValueError(f"partition key {key!r}: {exc}") from None

    def value(data: bytes) -> str | None:
        try:
            items = selector.select(ET.fromstring(data))
        except (ET.ParseError, elementpath.ElementPathError):
            return None
        if not isinstance(items, list):
            items = [items]
        if not items:
            return None
        item = items[0]
        return "".join(item.itertext()) if hasattr(item, "itertext") else str(item)

    return value


def ordered_records(table: pa.Table) -> list[bytes]:
    """A partition's records in position order (file path, then record position)."""
    order = sorted(
        zip(
            table.column("path").to_pylist(),
            table.column("record").to_pylist(),
            range(table.num_rows),
            strict=True,
        )
    )
    contents = table.column("content")
    return [contents[i].as_py() for _, _, i in order]


def partition_stream(key: str, document: bytes, errors="skip", **options):
    """The event stream of a partition's document (see ``Wrapper``); ``options`` those
    of ``SourceOptions``."""
    import io

    from xcep.events import EventStream, Input

    source = [Input(f"partition {key}", file=io.BytesIO(document))]
    return EventStream(source, errors=errors, **options)


class Wrapper:
    """Records → one document: the records inside the record path's ancestors."""

    def __init__(self, record_path: str) -> None:
        ancestors = parse_record_path(record_path)[:-1]
        self.depth = len(ancestors)  # the elements around the records
        self.head = "".join(f"<{name}>" for name in ancestors).encode()
        self.tail = "".join(f"</{name}>" for name in reversed(ancestors)).encode()

    def __call__(self, records) -> bytes:
        return self.head + b"".join(records) + self.tail


def _keyed_batches(record_path: str, key: str):
    """Units → records at the record path, each with its partition key."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from xcep.errors import InputError
        from xcep.spark.records import split_records
        from xcep.spark.sources import gunzip
        from xcep.spark.units import unit_rows

        key_of = record_key(key)
        for batch in batches:
            out: list[tuple] = []
            for (path, record, content, error), time in zip(
                unit_rows(batch), batch.column("time").to_pylist(), strict=True
            ):
                if error is not None:
                    out.append((None, path, record, None, error, time))
                    continue
                if record is not None:  # the source cut the records already
                    pieces = [(record, content)]
                else:
                    pieces = []
                    try:
                        for piece in split_records(gunzip(content), record_path, path):
                            pieces.append((piece.position, piece.content))
                    except InputError as exc:
                        out.append((None, path, None, None, str(exc), time))
                for position, data in pieces:
                    out.append((key_of(data), path, position, data, None, time))
            columns = list(zip(*out, strict=True)) if out else [[]] * 6
            types = [pa.string(), pa.string(), pa.int64(), pa.binary(), pa.string()]
            types.append(batch.schema.field("time").type)
            yield pa.RecordBatch.from_arrays(
                [pa.array(list(c), t) for c, t in zip(columns, types, strict=True)],
                names=["key", "path", "record", "content", "error", "time"],
            )

    return run
