"""The ``ID TEXT`` lines of filter and query files, and the error of a bad line.

One id and one filter (or query) per line, separated by white space; blank
lines and lines starting with ``#`` are skipped; an id that reads as an
integer is one. A line that is not UTF-8 or has no text is a ``FilterError``
with its line (and column), and costs only itself. The XPush workload, the XSeq
query files and the standing queries of ``xcep run``/``serve`` read them here,
without importing any engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xcep.errors import EXIT_INPUT, QueryError, located, text_blocks

try:  # a block's lines read in C (the loop of filter_blocks is its reference)
    from xcep.events._tokenizer import id_columns
except ImportError:
    id_columns = None


class FilterError(QueryError):
    """A filter that cannot be used: names the filter id, the line and the column."""

    code = "XCEP0009"
    exit_code = EXIT_INPUT  # a bad line of a file of filters, as bad documents (docs/cli.md)
    language = "filter"

    def __init__(self, message: str, fid=None, line: int | None = None, column: int | None = None):
        super().__init__(message, line=line, column=column, query_id=fid)
        self.fid = fid

    def __str__(self) -> str:
        return located(
            self.message, ("line", self.line), ("filter", self.fid), ("column", self.column)
        )


def id_key(fid) -> tuple:
    """Ascending order of ids: integers numerically, then strings."""
    return (0, fid, "") if isinstance(fid, int) else (1, 0, str(fid))


def parse_id(text: str):
    """An id that is a decimal integer (``-?\\d+``: Unicode decimal digits too) is an int."""
    digits = text[1:] if text[:1] == "-" else text
    return int(text) if digits.isdecimal() else text


@dataclass(slots=True)
class FilterLine:
    line: int
    fid: object
    text: str


def read_filters_file(
    path, errors: list[FilterError] | None = None, what: str = "filter"
) -> list[FilterLine]:
    """The ``ID TEXT`` lines of a filters (or queries) file: malformed lines go to
    ``errors``, or raise when it is None."""
    return list(iter_filters_file(path, errors, what))


def iter_filters_file(
    path, errors: list[FilterError] | None = None, what: str = "filter"
) -> Iterator[FilterLine]:
    """``read_filters_file``, one line at a time (a million filters need not be held as
    lines besides the workload)."""
    for numbers, ids, texts in filter_blocks(path, errors, what):
        yield from map(FilterLine, numbers, ids, texts)


def filter_blocks(
    path, errors: list[FilterError] | None = None, what: str = "filter"
) -> Iterator[tuple[list[int], list, list[str]]]:
    """The ``ID TEXT`` lines of a filters (or queries) file a block at a time, as columns:
    (their line numbers, ids, texts). A malformed line goes to ``errors`` (raised where
    it is None, once the lines before it are given)."""
    for first, lines, bad in text_blocks(path):
        columns = None if id_columns is None else id_columns(lines, first)
        if columns is not None:  # read in C: every line good
            yield columns
            continue
        numbers, ids, texts = [], [], []
        failed = None
        for number, raw in enumerate(lines, first):
            if raw is None:
                failed = FilterError(bad[number][1], None, number, bad[number][0])
            else:
                line = raw.strip()
                if not line or line[0] == "#":
                    continue
                parts = line.split(None, 1)
                if len(parts) == 2:
                    numbers.append(number), ids.append(parts[0]), texts.append(parts[1])
                    continue
                failed = FilterError(f"expected an id and a {what}", parse_id(parts[0]), number)
            if errors is None:
                break
            errors.append(failed)
        yield numbers, list(map(parse_id, ids)), texts
        if failed is not None and errors is None:
            raise failed
