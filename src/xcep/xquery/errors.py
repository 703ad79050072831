"""XQuery errors: one line with the query position and, where one exists, the W3C error code."""

from __future__ import annotations

from xcep.errors import EXIT_INPUT, EXIT_USAGE, QueryError


class XQueryError(QueryError):
    """A static or dynamic error of a query.

    ``code`` is the W3C error code (``XPST0003`` for syntax, ``XPTY0004`` for
    a type error, ...) or ``None``; ``line`` and ``column`` are 1-based
    positions in the query text when known.
    """

    language = "xquery"

    def __init__(
        self, message: str, code: str | None = None, line: int | None = None, column: int = 0
    ) -> None:
        super().__init__(message, line=line, column=column)
        self.code = code

    @property
    def static(self) -> bool:
        """A static error (``XPST…``, ``XQST…``: the query itself is wrong), found when
        compiling or, for some, when running; the others are dynamic or type errors."""
        return bool(self.code) and self.code[2:4] == "ST"

    @property
    def exit_code(self) -> int:  # a wrong query is a usage error, a failing one bad input
        return EXIT_USAGE if self.static else EXIT_INPUT

    def __str__(self) -> str:
        where = f"query line {self.line}, column {self.column}: " if self.line else "query: "
        code = f"{self.code} " if self.code else ""
        return f"{where}{code}{self.message}"


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def static_error(text: str, offset: int, message: str, code: str = "XPST0003") -> XQueryError:
    line, column = position(text, offset)
    return XQueryError(message, code, line, column)
