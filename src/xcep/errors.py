"""Errors users see: one line, naming where the problem is (docs/errors.md).

Every error xcep reports is an ``XcepError`` with a ``code`` (the table ``CODES``:
xcep's own, and the W3C codes of XQuery errors) and an ``exit_code`` (the command
line's status: 1 bad input, 2 a bad command line or query). A query's error is a
``QueryError(message, code, line, column, query_id)``, one subclass per language
(``FilterSyntaxError``, the XSeq ``QuerySyntaxError``, ``XsclSyntaxError``,
``XQueryError``), each also a ``ValueError``; bad input is an ``InputError`` (also a
``ValueError``); positions come from the parsers' tokens.
"""

from __future__ import annotations

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130  # docs/cli.md, "Exit codes"

CODES = {  # code -> what it means (the default message); docs/errors.md lists them
    "XCEP0000": "an error xcep reports",
    "XCEP0001": "a malformed, insecure or unreadable document",
    "XCEP0002": "a query that cannot be parsed",
    "XCEP0003": "a query this engine cannot run",
    "XCEP0004": "a run state that cannot be saved or restored",
    "XCEP0005": "a query, filter or schema file that is not UTF-8 text",
    "XCEP0006": "a DTD that cannot be read",
    "XCEP0007": "a document past the join state's budget",
    "XCEP0008": "a document without a usable timestamp",
    "XCEP0009": "a filter that cannot be used (its line in a file of filters)",
}


class XcepError(Exception):
    """Base class of every error xcep reports to a user: ``code`` (``CODES``, or a W3C
    code) and ``exit_code`` say what kind it is."""

    code = "XCEP0000"
    exit_code = EXIT_INPUT


def located(message: str, *where: tuple[str, object]) -> str:
    """``message`` prefixed by the known parts of where it happened, as one line:
    ``located("bad", ("line", 3), ("column", None))`` is ``"line 3: bad"``."""
    parts = [f"{name} {value}".strip() for name, value in where if value is not None]
    return f"{', '.join(parts)}: {message}" if parts else message


class InputError(XcepError, ValueError):
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

    code = "XCEP0001"

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


class QueryError(XcepError, ValueError):
    """A query that cannot be parsed or run: ``query [ID, ][line L, ]column N: message``.

    ``code`` overrides the class's (``CODES``; XQuery's are W3C codes), ``line`` and
    ``column`` are 1-based positions in the query (``None`` when unknown), ``query_id``
    names the query when it came from a file of many. A subclass per language.
    """

    code = "XCEP0002"
    exit_code = EXIT_USAGE
    language = "query"

    def __init__(
        self,
        message: str,
        code: str | None = None,
        line: int | None = None,
        column: int | None = None,
        query_id=None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.line = line
        self.column = column
        self.query_id = "" if query_id is None else query_id

    def __str__(self) -> str:
        where = f"query {self.query_id}, " if self.query_id != "" else "query "
        if self.line is not None:
            where += f"line {self.line}, "
        if self.column is None:
            return f"{where.rstrip(', ')}: {self.message}"
        return f"{where}column {self.column}: {self.message}"


class StateError(XcepError, ValueError):
    """A run state that cannot be saved, or saved bytes that cannot be restored here
    (another query, another version, or not a snapshot at all)."""

    code = "XCEP0004"


class TextFileError(XcepError):
    """A query, filter or schema file that is not UTF-8 text: names the file, the line
    and the column of the first bad byte."""

    code = "XCEP0005"
    exit_code = EXIT_USAGE


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
    for first, texts, bad in text_blocks(path):
        for number, text in enumerate(texts, first):
            yield number, text, bad.get(number)


def text_blocks(path, size: int = 1 << 20):
    """The lines of a UTF-8 text file a block at a time (``size`` bytes, whole lines):
    ``(the first line's number, its lines' texts without their ends, {line number:
    (column, message)} of the lines that are not UTF-8, whose text is None)``. A block
    is decoded at once; one that is not UTF-8 line by line (one bad line costs only
    itself)."""
    number = 1
    with open(path, "rb") as handle:
        head = handle.read(3)
        rest = head.removeprefix(b"\xef\xbb\xbf")
        while True:
            data = handle.read(size)
            data, end = rest + data, not data
            cut = len(data) if end else data.rfind(b"\n") + 1
            if end and not data:
                if head and number == 1:  # a byte order mark alone: one empty line
                    yield 1, [""], {}
                return
            if cut == 0:  # no end of line yet: a longer block
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
            count = block.count(b"\n") + (not block.endswith(b"\n"))  # its lines
            try:
                texts = block.decode("utf-8").split("\n")[:count]
                bad: dict = {}
            except UnicodeDecodeError:
                raws = block.split(b"\n")[:count]
                ends = [b"\n"] * count
                if not block.endswith(b"\n"):
                    ends[-1] = b""
                texts, bad = _decode_lines(list(map(bytes.__add__, raws, ends)), number)
            if b"\r" in block:
                texts = [text.rstrip("\r") if text else text for text in texts]
            yield number, texts, bad
            number += count


def _decode_lines(raws: list[bytes], first: int) -> tuple[list, dict]:
    """Lines (with their ends) decoded one by one: their texts (None where not UTF-8) and
    what is wrong with those, by line number."""
    texts, bad = [], {}
    for number, raw in enumerate(raws, first):
        try:
            texts.append(raw.decode("utf-8").removesuffix("\n"))
        except UnicodeDecodeError as exc:
            _, column, message = _not_utf8(exc, raw)
            texts.append(None)
            bad[number] = (column, message)
    return texts, bad
