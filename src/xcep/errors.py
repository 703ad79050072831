"""Errors users see: one line, naming where the problem is."""

from __future__ import annotations


class XcepError(Exception):
    """Base class of every error xcep reports to a user."""


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
        where = [self.source]
        if self.doc is not None:
            where.append(f"document {self.doc}")
        if self.line is not None:
            where.append(f"line {self.line}")
            if self.column is not None:
                where.append(f"column {self.column}")
        return f"{', '.join(where)}: {self.message}"

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
