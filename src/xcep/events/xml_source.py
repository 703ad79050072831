"""XML to nested-word events, with expat, one or many documents per input.

Choices (see docs/events.md):
- text is coalesced (character data, CDATA sections and entity expansions
  between two tags make one text event); whitespace-only text is dropped
  unless ``keep_whitespace``; comments and processing instructions are dropped;
- names are kept as written, ``prefix:local`` (no namespace processing);
  namespace declarations (``xmlns``, ``xmlns:p``) are not reported as attributes;
- secure: no external entity or DTD is ever read, an internal entity may expand
  to at most ``max_entity_chars`` characters, a document may produce at most
  ``max_amplification`` characters per input byte once it declares entities,
  and nesting deeper than ``max_depth`` is an error;
- several documents may follow each other in one input (with or without
  whitespace between them). A malformed document is reported and skipped: the
  reader resumes at the next XML declaration ``<?xml`` when the input's first
  document had one, otherwise at the next line that starts with ``<`` and a
  name.
"""

from __future__ import annotations

import re
from pyexpat import ErrorString, ExpatError, ParserCreate
from typing import TYPE_CHECKING, BinaryIO

from xcep.errors import InputError
from xcep.events.model import ATTR, CLOSE, NO_NAME, OPEN, TEXT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from xcep.events.model import EventBatch
    from xcep.events.stream import StreamContext

_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
_ENTITY_REF = re.compile(r"&([^;&\s]+);")
_RESYNC_DECLARED = re.compile(rb"<\?xml[ \t\r\n?]")
_RESYNC_LINE = re.compile(rb"\n<[A-Za-z_:\x80-\xff]")
_BOM = b"\xef\xbb\xbf"


class _DocumentError(Exception):
    """Raised inside expat handlers; carries the message only."""


class _Window:
    """The part of the input held in memory, with the line and column of its start."""

    __slots__ = ("base", "column", "data", "line")

    def __init__(self) -> None:
        self.data = bytearray()
        self.base = 0  # absolute offset of data[0] in the input
        self.line = 1  # 1-based line of data[0]
        self.column = 1  # 1-based column of data[0]

    @property
    def end(self) -> int:
        return self.base + len(self.data)

    def line_column(self, pos: int) -> tuple[int, int]:
        head = self.data[: pos - self.base]
        newlines = head.count(b"\n")
        if newlines:
            return self.line + newlines, len(head) - head.rfind(b"\n")
        return self.line, self.column + len(head)

    def drop_before(self, pos: int) -> None:
        if pos > self.base:
            self.line, self.column = self.line_column(pos)
            del self.data[: pos - self.base]
            self.base = pos


class XmlReader:
    """Reads one XML input (a file, a pipe) holding one or more documents."""

    def __init__(self, ctx: StreamContext, stream: BinaryIO, source: str) -> None:
        self.ctx = ctx
        self.options = ctx.options
        self.stream = stream
        self.source = source
        self.window = _Window()
        self.eof = False
        self.declared: bool | None = None  # did the first document start with <?xml ?

    def _fill(self) -> bool:
        """Read one more chunk into the window; False at the end of the input."""
        if self.eof:
            return False
        chunk = self.ctx.read(self.stream)
        if not chunk:
            self.eof = True
            return False
        self.window.data += chunk
        return True

    def batches(self) -> Iterator[EventBatch]:
        window = self.window
        pos = 0
        while True:
            match = _NOT_SPACE.search(window.data, pos - window.base)
            if match is None:
                window.drop_before(window.end)
                pos = window.end
                if not self._fill():
                    return
                continue
            start = window.base + match.start()
            if self.declared is None:
                while window.end - start < 6 and self._fill():
                    pass
                head = bytes(window.data[start - window.base : start - window.base + 8])
                self.declared = head.removeprefix(_BOM).startswith(b"<?xml")
            pos = yield from self._document(start)

    def _document(self, start: int) -> Iterator[EventBatch]:
        """Parse the document that starts at ``start``; return where the next may start."""
        window, ctx, options = self.window, self.ctx, self.options
        if not (options.keep_raw and start - window.base < options.raw_limit):
            window.drop_before(start)
        line0, column0 = window.line_column(start)
        doc = ctx.new_document()
        parser = ParserCreate()
        state = _Handlers(ctx, doc, parser)
        fed = start
        try:
            while True:
                if fed < window.end:
                    data = bytes(window.data[fed - window.base :])
                    fed = window.end
                    parser.Parse(data, False)
                elif not self._fill():
                    parser.Parse(b"", True)
                    return window.end
                else:
                    continue
                batch = ctx.builder.take()
                if batch is not None:
                    yield batch
                if state.root_end is not None:
                    keep = start + state.root_end
                elif options.keep_raw and fed - start <= options.raw_limit:
                    keep = start
                else:
                    keep = fed
                # expat may hold an incomplete token: keep it (it starts just past the last
                # parse event), so that an error in it can be located and resynced from
                window.drop_before(min(keep, start + parser.CurrentByteIndex))
        except ExpatError as exc:
            if state.root_end is not None:  # the root closed: what follows is the next document
                return start + parser.ErrorByteIndex
            message = ErrorString(exc.code)
            line, column = exc.lineno, exc.offset
            error_pos = start + parser.ErrorByteIndex
        except _DocumentError as exc:
            message = str(exc)
            line, column = parser.CurrentLineNumber, parser.CurrentColumnNumber
            error_pos = start + parser.CurrentByteIndex
        column = column + (column0 if line == 1 else 1)
        error = InputError(message, self.source, doc, line0 + line - 1, column)
        next_start = self._resync(max(error_pos, start + 1, window.base), start)
        if start >= window.base and next_start - start <= options.raw_limit:
            error.raw = bytes(window.data[start - window.base : next_start - window.base])
        ctx.document_failed(error)
        batch = ctx.builder.take()
        if batch is not None:
            yield batch
        return next_start

    def _resync(self, pos: int, start: int) -> int:
        """The position of the next document after the malformed one at ``start``."""
        window, options = self.window, self.options
        pattern = _RESYNC_DECLARED if self.declared else _RESYNC_LINE
        skip = 0 if self.declared else 1  # the line pattern starts at the newline
        while True:
            match = pattern.search(window.data, pos - window.base)
            if match is not None:
                return window.base + match.start() + skip
            pos = max(pos, window.end - 8)
            if not options.keep_raw or pos - start > options.raw_limit:
                window.drop_before(pos)
            if not self._fill():
                return window.end


class _Handlers:
    """The expat callbacks of one document, writing into the stream's builder."""

    def __init__(self, ctx: StreamContext, doc: int, parser) -> None:
        options = ctx.options
        builder = ctx.builder
        symbols = builder.symbols
        symbols_get = symbols.get
        docs, kinds, names = builder.docs.append, builder.kinds.append, builder.names.append
        values, depths, nodes = builder.values.append, builder.depths.append, builder.nodes.append
        keep_whitespace = options.keep_whitespace
        max_depth = options.max_depth
        text_parts: list[str] = []
        stack: list[int] = []  # node index of each open element
        next_node = 0
        self.root_end: int | None = None
        self.parser = parser
        self.options = options
        self.entity_sizes: dict[str, int] = {}
        self.produced = 0

        # The three handlers below are the hot loop of the XML source: kept flat on purpose.
        def text(value: str) -> None:
            nonlocal next_node
            docs(doc)
            kinds(TEXT)
            names(NO_NAME)
            values(value)
            depths(len(stack) + 1)
            nodes(next_node)
            next_node += 1

        def start(name: str, attributes: list[str]) -> None:
            nonlocal next_node
            if text_parts:
                value = "".join(text_parts)
                text_parts.clear()
                if keep_whitespace or not value.isspace():
                    text(value)
            depth = len(stack) + 1
            if depth > max_depth:
                raise _DocumentError(f"nesting deeper than the limit of {max_depth} elements")
            node = next_node
            stack.append(node)
            tag = symbols_get(name)
            docs(doc)
            kinds(OPEN)
            names(symbols[name] if tag is None else tag)
            values(None)
            depths(depth)
            nodes(node)
            node += 1
            if attributes:
                for i in range(0, len(attributes), 2):
                    attribute = attributes[i]
                    if attribute.startswith("xmlns") and attribute[5:6] in ("", ":"):
                        continue
                    docs(doc)
                    kinds(ATTR)
                    names(symbols[attribute])
                    values(attributes[i + 1])
                    depths(depth + 1)
                    nodes(node)
                    node += 1
            next_node = node

        def end(name: str) -> None:
            if text_parts:
                value = "".join(text_parts)
                text_parts.clear()
                if keep_whitespace or not value.isspace():
                    text(value)
            depth = len(stack)
            tag = symbols_get(name)
            docs(doc)
            kinds(CLOSE)
            names(symbols[name] if tag is None else tag)
            values(None)
            depths(depth)
            nodes(stack.pop())
            if depth == 1:
                self.root_end = parser.CurrentByteIndex
                ctx.document_done()

        def counted_text(data: str) -> None:
            self.produced += len(data)
            limit = options.max_entity_chars + options.max_amplification * (
                parser.CurrentByteIndex + 1
            )
            if self.produced > limit:
                raise _DocumentError(
                    f"entity expansion produced {self.produced:,} characters from "
                    f"{parser.CurrentByteIndex + 1:,} bytes of input (amplification limit "
                    f"{options.max_amplification})"
                )
            text_parts.append(data)

        self.counted_text = counted_text
        parser.ordered_attributes = True
        parser.buffer_text = True
        parser.buffer_size = 65536
        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = text_parts.append
        parser.EntityDeclHandler = self.entity_declared
        parser.ExternalEntityRefHandler = self.external_entity
        parser.SkippedEntityHandler = self.skipped_entity

    def entity_declared(self, name, is_parameter, value, base, system_id, public_id, notation):
        if value is None or is_parameter:
            return  # external entities fail when referenced; parameter entities are not read
        size = len(value)
        for ref in _ENTITY_REF.finditer(value):
            size += self.entity_sizes.get(ref.group(1), 0) - len(ref.group(0))
        limit = self.options.max_entity_chars
        if size > limit:
            raise _DocumentError(
                f"entity '{name}' would expand to {size:,} characters (limit {limit:,})"
            )
        self.entity_sizes[name] = size
        self.parser.CharacterDataHandler = self.counted_text

    def external_entity(self, context, base, system_id, public_id):
        raise _DocumentError(
            f"external entity '{context}' ({system_id}) is not allowed: "
            "xcep never reads external entities"
        )

    def skipped_entity(self, name, is_parameter):
        if not is_parameter:
            raise _DocumentError(
                f"undefined entity '&{name};' (external DTDs are never read, "
                "so their entities are unknown)"
            )
