"""Errors users see: one line, naming where the problem is."""

from __future__ import annotations


class XcepError(Exception):
    """Base class of every error xcep reports to a user."""


def located(message: str, *where: tuple[str, object]) -> str:
    """``message`` prefixed by the known parts of where it happened, as one line:
    ``located("bad", ("line", 3), ("column", None))`` is ``"line 3: bad"``."""
    parts = [f"{name} {value}".strip() for name, value in where if value is not None]
    return f"{', '.join(parts)}: {message}" if parts else message


class InputError(XcepError):
    """Bad input: a malformed, insecure or unreadable document.

    ``source`` names the file (``<stdin>`` for standard input), ``doc`` is the
    0-based index of the document in the stream, ``line`` and ``column`` are
    1-based positions in the source (``None`` when unknown). ``raw`` holds the
    bytes of the bad document when they were kept (for dead-letter output).
    """

    def __init__(
        self,
        message: str,
        source: str = "<input>",
        doc: int | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.doc = doc
        self.line = line
        self.column = column
        self.raw: bytes | None = None

    def __str__(self) -> str:
        column = self.column if self.line is not None else None
        return located(
            self.message,
            ("", self.source),
            ("document", self.doc),
            ("line", self.line),
            ("column", column),
        )

    def to_dict(self) -> dict:
        out = {
            "source": self.source,
            "doc": self.doc,
            "line": self.line,
            "column": self.column,
            "error": self.message,
        }
        if self.raw is not None:
            out["document"] = self.raw.decode("utf-8", errors="replace")
        return out


class QueryError(XcepError):
    """A query that cannot be parsed or compiled: ``query [ID, ]column N: message``.

    ``column`` is 1-based; ``query_id`` names the query when it came from a file of many.
    """

    def __init__(self, message: str, position: int = 0, query_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.column = position + 1
        self.query_id = query_id

    def __str__(self) -> str:
        where = f"query {self.query_id}, column" if self.query_id else "query column"
        return f"{where} {self.column}: {self.message}"


class StateError(XcepError, ValueError):
    """A run state that cannot be saved, or saved bytes that cannot be restored here
    (another query, another version, or not a snapshot at all)."""


class TextFileError(XcepError):
    """A query, filter or schema file that is not UTF-8 text: names the file, the line
    and the column of the first bad byte."""


def _not_utf8(exc: UnicodeDecodeError, data: bytes) -> tuple[int, int, str]:
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return line, column, f"not UTF-8: {exc.reason} (byte {data[exc.start]:#04x})"


def read_text(path) -> str:
    """A whole UTF-8 text file (a query, a DTD), or ``TextFileError`` naming where it
    is not UTF-8."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column, message = _not_utf8(exc, data)
        where = located(message, ("", path), ("line", line), ("column", column))
        raise TextFileError(where) from None


def text_lines(path):
    """``(line number, text, None)`` per line of a UTF-8 text file (without its end of
    line), or ``(line number, None, (column, message))`` for a line that is not UTF-8:
    one bad line costs only itself."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                _, column, message = _not_utf8(exc, raw)
                yield number, None, (column, message)
