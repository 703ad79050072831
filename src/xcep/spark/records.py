"""Cut one large XML document into records: the elements at a record path.

``split_records(data, "/stocks/transaction")`` yields ``Record(position,
content)`` for each ``transaction`` child of the root ``stocks``, in document
order, ``content`` being the record's own bytes (its start tag to its end tag),
so that each record parses as a document on its own. What a record loses by
being cut out: the ancestors' attributes and the document's internal DTD (its
entities). Plain Python over expat, so it needs no Spark and is tested alone.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pyexpat import ErrorString, ExpatError, ParserCreate
from typing import TYPE_CHECKING

from xcep.errors import InputError
from xcep.events.records import parse_record_path

if TYPE_CHECKING:
    from collections.abc import Iterator


@dataclass(frozen=True, slots=True)
class Record:
    position: int  # 0-based, in document order
    content: bytes  # the record element, start tag to end tag, UTF-8


def split_records(data: bytes, record_path: str, source: str = "<file>") -> Iterator[Record]:
    """The records of ``data``; a malformed document raises InputError (records before it
    have been yielded)."""
    steps = parse_record_path(record_path)
    depth_of_record = len(steps)
    parser = ParserCreate("utf-8")  # byte offsets below are into the UTF-8 text
    text = data.decode(_encoding(data), errors="strict") if not _is_utf8(data) else None
    raw = text.encode("utf-8") if text is not None else data
    names: list[str] = []
    matched = [0]  # how many leading steps the open elements match
    found: list[tuple[int, int]] = []
    start = [0]

    def on_start(name, _attributes) -> None:
        names.append(name)
        depth = len(names)
        if matched[0] == depth - 1 and depth <= depth_of_record and name == steps[depth - 1]:
            matched[0] = depth
            if depth == depth_of_record:
                start[0] = parser.CurrentByteIndex

    def on_end(_name) -> None:
        depth = len(names)
        if matched[0] == depth:
            matched[0] -= 1
            if depth == depth_of_record:
                begin = start[0]
                start_tag_end = _tag_end(raw, begin)
                if raw[start_tag_end - 2 : start_tag_end] == b"/>":  # an empty-element tag
                    found.append((begin, start_tag_end))
                else:
                    found.append((begin, _tag_end(raw, parser.CurrentByteIndex)))
        names.pop()

    parser.StartElementHandler = on_start
    parser.EndElementHandler = on_end
    parser.SetParamEntityParsing(0)  # never read an external DTD
    position = 0
    chunk = 1 << 20
    for offset in range(0, max(len(raw), 1), chunk):
        try:
            parser.Parse(raw[offset : offset + chunk], offset + chunk >= len(raw))
        except ExpatError as exc:
            error = InputError(ErrorString(exc.code), source, 0, exc.lineno, exc.offset + 1)
        else:
            error = None
        for begin, end in found:
            yield Record(position, raw[begin:end])
            position += 1
        found.clear()
        if error is not None:
            raise error


def _tag_end(data: bytes, index: int) -> int:
    """The offset just past the tag that starts at ``index`` (quoted ``>`` skipped)."""
    quote = 0
    for i in range(index + 1, len(data)):
        byte = data[i]
        if quote:
            if byte == quote:
                quote = 0
        elif byte in (0x22, 0x27):  # " '
            quote = byte
        elif byte == 0x3E:  # >
            return i + 1
    return len(data)


def _is_utf8(data: bytes) -> bool:
    return _encoding(data) in ("utf-8", "utf8", "us-ascii", "ascii")


def _encoding(data: bytes) -> str:
    """The encoding an XML declaration names (UTF-8 when none); UTF-16 by its BOM."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if data.startswith(b"<?xml"):
        head = data[: data.find(b"?>") + 2].decode("ascii", errors="replace")
        for quote in ('"', "'"):
            marker = f"encoding={quote}"
            if marker in head:
                return head.split(marker, 1)[1].split(quote, 1)[0].lower()
    return "utf-8"


class _Found(Exception):
    pass


def root_attribute(data: bytes, attribute: str) -> str | None:
    """The value of an attribute of a record's root element (None when it has none)."""
    parser = ParserCreate("utf-8")
    found: list[str | None] = []

    def on_start(_name, attributes) -> None:
        found.append(attributes.get(attribute))
        raise _Found

    parser.StartElementHandler = on_start
    with contextlib.suppress(_Found, ExpatError):  # stop at the first start tag
        parser.Parse(data, True)
    return found[0] if found else None
