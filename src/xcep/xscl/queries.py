"""Query files (``ID<TAB>XSCL`` per line) and document timestamps."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

from xcep.errors import XcepError, text_lines
from xcep.xscl.documents import Document, Node


def read_queries(path: str) -> tuple[list[tuple[str, str, int]], list[str]]:
    """``(id, text, line)`` for each query line; malformed lines become error messages.

    Blank lines and lines starting with ``#`` are skipped; the id is what
    comes before the first tab (or, without a tab, the first whitespace).
    """
    queries, errors = [], []
    for number, line, bad in text_lines(path):
        if bad is not None:
            errors.append(f"line {number}, column {bad[0]}: {bad[1]}")
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t", 1) if "\t" in line else line.strip().split(None, 1)
        if len(parts) < 2 or not parts[1].strip():
            errors.append(f"line {number}: expected ID<TAB>QUERY")
            continue
        queries.append((parts[0].strip(), parts[1].strip(), number))
    return queries, errors


class TimestampError(XcepError):
    """A document whose timestamp (``--timestamp PATH``) is missing or not a number."""

    code = "XCEP0008"


_STEP = re.compile(r"(//|/)?(@?)([\w.\-]+|\*)(/text\(\))?")


def timestamp_reader(path: str | None) -> Callable[[Document, int], float]:
    """A function giving a document's timestamp: the value at ``path`` (``@ts``,
    ``/item/@time``, ``//date``) read as a number or an ISO 8601 date (seconds since
    1970, UTC when no zone is given), or, without a path, the arrival position."""
    if path is None:
        return lambda doc, position: float(position)
    steps = _parse_path(path)

    def read(doc: Document, position: int) -> float:
        node = _select(doc, steps)
        if node is None:
            raise TimestampError(f"no timestamp at {path}")
        return parse_time(node.string_value.strip(), path)

    return read


def parse_time(text: str, path: str = "") -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise TimestampError(f"{text!r} at {path} is neither a number nor an ISO date") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _parse_path(path: str) -> list[tuple[str, bool, str]]:
    steps, pos = [], 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if not m or m.end() == pos:
            raise TimestampError(f"cannot read the timestamp path {path!r} at column {pos + 1}")
        axis = m.group(1) or ("/" if pos else "rel")
        steps.append((axis, bool(m.group(2)), m.group(3)))
        pos = m.end()
    return steps


def _select(doc: Document, steps: list[tuple[str, bool, str]]) -> Node | None:
    """The first node the path selects, from the root element (relative paths) or above it."""
    nodes = None
    for axis, attribute, name in steps:
        if nodes is None:  # the first step
            if axis == "rel":
                nodes = [doc.root]
                if not attribute:
                    nodes = [c for c in doc.root.children if name in ("*", c.name)]
                    continue
            elif axis == "/":
                nodes = [doc.root] if not attribute and name in ("*", doc.root.name) else []
                continue
            else:
                pool = [n for n in doc.nodes if n.kind == ("attribute" if attribute else "element")]
                nodes = [n for n in pool if name in ("*", n.name)]
                continue
        found = []
        for node in nodes:
            if attribute:
                pool = (
                    node.attrs
                    if axis != "//"
                    else [a for n in doc.nodes if node.id <= n.id <= node.end for a in n.attrs]
                )
            elif axis == "//":
                pool = [n for n in doc.nodes if node.id < n.id <= node.end and n.kind == "element"]
            else:
                pool = node.children
            found += [n for n in pool if name in ("*", n.name)]
        nodes = found
    return nodes[0] if nodes else None
