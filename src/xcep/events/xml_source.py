"""XML to nested-word events, with expat, one or many documents per input.

Choices (see docs/events.md):
- text is coalesced (character data, CDATA sections and entity expansions
  between two tags make one text event); whitespace-only text is dropped
  unless ``keep_whitespace``; comments and processing instructions are dropped;
- names are kept as written, ``prefix:local`` (no namespace processing);
  namespace declarations (``xmlns``, ``xmlns:p``) are not reported as attributes
  unless ``namespaces`` (an XQuery that declares namespaces resolves names with them);
- secure: no external entity or DTD is ever read, an internal entity may expand
  to at most ``max_entity_chars`` characters, a document may produce at most
  ``max_amplification`` characters per input byte once it declares entities,
  and nesting deeper than ``max_depth`` or a start tag with more than
  ``max_attributes`` attributes is an error (the compiled tokenizer counts a
  long tag's attributes before reading them: a hostile tag costs no memory);
- several documents may follow each other in one input (with or without
  whitespace between them). A malformed document is reported and skipped: the
  reader resumes at the next XML declaration ``<?xml`` when the input's first
  document had one, otherwise at the next line that starts with ``<`` and a
  name.

Two tokenizers share this work. The compiled one (``_tokenizer.c``, built
with the package when a C compiler is there) reads the common case: UTF-8,
ASCII names, the predefined and character references, comments, CDATA,
processing instructions, a DOCTYPE without internal subset. At anything else,
and at anything that may be an error, it stops before it and hands the rest of
the document over to expat, which is fed a prefix that reopens the elements
still open (events muted) and then the bytes from where the compiled one
stopped. So every document gives the events and the errors expat gives; the
compiled tokenizer is only faster. ``SourceOptions(compiled=False)`` turns it
off.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass
from pyexpat import ErrorString, ExpatError, ParserCreate
from typing import TYPE_CHECKING, BinaryIO

from xcep.errors import InputError
from xcep.events.model import ATTR, CLOSE, NO_NAME, OPEN, TEXT

if TYPE_CHECKING:
    from collections.abc import Iterator

    from xcep.events.context import StreamContext
    from xcep.events.model import EventBatch

_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
_ENTITY_REF = re.compile(r"&([^;&\s]+);")
_RESYNC_DECLARED = re.compile(rb"<\?xml[ \t\r\n?]")
_RESYNC_LINE = re.compile(rb"\n<[A-Za-z_:\x80-\xff]")
_BOM = b"\xef\xbb\xbf"
RESYNC_LOOKAHEAD = 1 << 20  # bytes searched for the next declaration before lines are tried
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that do not start a character

try:
    from xcep.events import _tokenizer
except ImportError:  # built without a C compiler: expat's callbacks do all the work
    _tokenizer = None
_END_TAG = re.compile(rb"</[^>]*>")
_PROLOG, _BODY = 0, 1  # where the compiled tokenizer is in a document
# After a root element: white space, comments and processing instructions (not the next
# document's XML declaration) still belong to its document.
_AFTER_ROOT = re.compile(
    rb"(?:[ \t\r\n]+"  # white space
    rb"|<!--(?:[^-]|-[^-])*-->"  # a comment
    rb"|<\?(?!xml[ \t\r\n?])[A-Za-z_:][^?]*(?:\?(?!>)[^?]*)*\?>)*"  # a processing instruction
)


class _DocumentError(Exception):
    """Raised inside expat handlers: the message, and where expat was when it was raised
    (``at``: line, column and byte index; else the position after expat stops is used)."""

    def __init__(self, message: str, at: tuple[int, int, int] | None = None) -> None:
        super().__init__(message)
        self.at = at


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
        """The line and column (in characters, as expat counts them) of ``pos``."""
        data, end = self.data, pos - self.base  # (counted in place: no copy of the head)
        newlines = data.count(b"\n", 0, end)
        if data.find(b"\r", 0, end) >= 0:  # as expat: a lone \r ends a line too (rare)
            newlines += data.count(b"\r", 0, end) - data.count(b"\r\n", 0, end)
        tail = data[max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end)) + 1 : end]
        # characters: the bytes that start one (not UTF-8 continuation bytes), in C
        width = len(tail) if tail.isascii() else len(tail.translate(None, _CONTINUATION))
        if newlines:
            return self.line + newlines, width + 1
        return self.line, self.column + width

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
        self._declaration: list = [None, None, 0]  # (document start, next <?xml, scanned)
        self.scan = _tokenizer.scan if _tokenizer is not None and self.options.compiled else None

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

    def _could_declare(self, start: int) -> bool:
        head = bytes(self.window.data[start - self.window.base :]).removeprefix(_BOM)
        return b"<?xml".startswith(head[:5]) or _BOM.startswith(head)

    def batches(self) -> Iterator[EventBatch]:
        window = self.window
        pos = 0
        while True:
            match = _NOT_SPACE.search(window.data, pos - window.base)
            if match is None:
                window.drop_before(window.end)
                pos = window.end
                yield from self.ctx.before_wait()
                if not self._fill():
                    return
                continue
            start = window.base + match.start()
            if self.declared is None:  # read on while the start could be "<?xml"
                while window.end - start < 6 and self._could_declare(start) and self._fill():
                    pass
                head = bytes(window.data[start - window.base : start - window.base + 8])
                self.declared = head.removeprefix(_BOM).startswith(b"<?xml")
            pos = yield from self._document(start)

    def _document(self, start: int) -> Iterator[EventBatch]:
        """Parse the document that starts at ``start``; return where the next may start."""
        window, options = self.window, self.options
        if not (options.keep_raw and start - window.base < options.raw_limit):
            window.drop_before(start)
        doc = self.ctx.new_document()
        handover = None
        if self.scan is not None:
            handover = yield from self._scan_document(start, doc)
            if isinstance(handover, int):
                return handover
        return (yield from self._expat_document(start, doc, handover))

    def _scan_document(self, start: int, doc: int) -> Iterator[EventBatch]:
        """The compiled tokenizer's part of a document: where the next one starts
        when it read the whole document, else what expat needs to go on
        (``None``: the whole document)."""
        window, ctx, options = self.window, self.ctx, self.options
        builder = ctx.builder
        columns = builder.columns()
        stack = bytearray()  # (node, name id) of each open element, as int64 pairs
        parts: list[str] = []  # text read since the last tag
        next_node, phase, pos, prolog = 0, _PROLOG, start, b""
        while True:
            status, at, next_node, root_at = self.scan(
                window.data,
                pos - window.base,
                self.eof,
                phase,
                doc,
                next_node,
                columns,
                builder.symbols,
                stack,
                parts,
                options.keep_whitespace,
                options.max_depth,
                options.max_attributes,
                options.namespaces,
            )
            pos = window.base + at
            if root_at >= 0:
                prolog = bytes(window.data[start - window.base : root_at])
                phase = _BODY
            if status == _tokenizer.DONE:
                ctx.document_done()
                if _NOT_SPACE.search(window.data, pos - window.base) is None:
                    yield from ctx.before_wait()  # what follows the root is not here yet
                return self._after_root(pos)
            if status == _tokenizer.PROLOG:
                return None
            if status == _tokenizer.LIMIT:
                message = (
                    f"an element with more than the limit of {options.max_attributes} attributes"
                )
                return (yield from self._failed(start, doc, pos, message))
            if status == _tokenizer.HANDOVER:
                pairs = array("q", bytes(stack))
                names = builder.symbols.names
                opened = b"".join(b"<%s>" % names[name].encode() for name in pairs[1::2])
                return _Handover(pos, prolog + opened, pairs[::2].tolist(), next_node, parts)
            batch = builder.take()  # MORE: the window holds no more complete tokens
            if batch is not None:
                yield batch
            raw = options.keep_raw and pos - start <= options.raw_limit
            window.drop_before(self._droppable(start, start if raw else pos))
            yield from ctx.before_wait()
            self._fill()

    def _expat_document(
        self, start: int, doc: int, handover: _Handover | None
    ) -> Iterator[EventBatch]:
        """Expat's part of a document: all of it, or the rest after ``handover``."""
        window, ctx, options = self.window, self.ctx, self.options
        line0, column0 = window.line_column(start) if handover is None else (0, 0)
        parser = ParserCreate()
        parser.ordered_attributes = True
        parser.buffer_text = True
        parser.buffer_size = 65536
        if handover is None:
            origin = fed = start  # the input position of the parser's first byte
        else:  # reopen what is open, muted: no handlers yet
            parser.Parse(handover.prefix, False)
            origin, fed = handover.pos - len(handover.prefix), handover.pos
        state = _Handlers(ctx, doc, parser, handover)
        try:
            while True:
                if fed < window.end:
                    data = bytes(window.data[fed - window.base :])
                    fed = window.end
                    parser.Parse(data, False)
                else:
                    yield from ctx.before_wait()
                    if not self._fill():
                        parser.Parse(b"", True)
                        return window.end
                    continue
                batch = ctx.builder.take()
                if batch is not None:
                    yield batch
                if state.root_end is not None:
                    keep = origin + state.root_end - 2  # and what tells <root/> from </root>
                elif options.keep_raw and fed - start <= options.raw_limit:
                    keep = start
                else:
                    keep = fed
                # expat may hold an incomplete token: keep it (it starts just past the last
                # parse event), so that an error in it can be located and resynced from
                window.drop_before(
                    self._droppable(start, min(keep, origin + parser.CurrentByteIndex))
                )
        except ExpatError as exc:
            if state.root_end is not None:  # the root closed: what follows is the next document
                end = origin + state.root_end
                at = end - window.base
                empty = state.root_quiet and at >= 2 and window.data[at - 2 : at] == b"/>"
                tag = None if empty else _END_TAG.match(window.data, at)
                return self._after_root(end if tag is None else window.base + tag.end())
            message = ErrorString(exc.code)
            line, column = exc.lineno, exc.offset
            error_pos = origin + parser.ErrorByteIndex
        except _DocumentError as exc:
            message = str(exc)
            line, column, index = exc.at or (
                parser.CurrentLineNumber,
                parser.CurrentColumnNumber,
                parser.CurrentByteIndex,
            )
            error_pos = origin + index
        if handover is None:
            line, column = line0 + line - 1, column + (column0 if line == 1 else 1)
            return (yield from self._failed(start, doc, error_pos, message, (line, column)))
        return (yield from self._failed(start, doc, error_pos, message))

    def _failed(
        self, start: int, doc: int, error_pos: int, message: str, at: tuple | None = None
    ) -> Iterator[EventBatch]:
        """Report the document at ``start`` malformed at ``error_pos`` (line and column
        ``at``, else counted from the input); return where the next document starts."""
        window, ctx = self.window, self.ctx
        line, column = at or window.line_column(max(error_pos, window.base))
        error = InputError(message, self.source, doc, line, column)
        next_start = self._resync(max(error_pos, start + 1, window.base), start)
        if start >= window.base and next_start - start <= self.options.raw_limit:
            error.raw = bytes(window.data[start - window.base : next_start - window.base])
        ctx.document_failed(error)
        batch = ctx.builder.take()
        if batch is not None:
            yield batch
        return next_start

    def _droppable(self, start: int, upto: int) -> int:
        """How far the window may be cut while the document at ``start`` is parsed: in a
        stream with declarations, not past the first one after ``start`` — where the next
        document starts if this one turns out bad (an unclosed literal or CDATA section
        runs into it), whatever the parser consumed."""
        if not self.declared:
            return upto
        window = self.window
        if self._declaration[0] != start:  # a new document: search from its start
            self._declaration = [start, None, start + 1]
        _, found, scanned = self._declaration
        if found is None:
            match = _RESYNC_DECLARED.search(window.data, max(scanned, window.base) - window.base)
            if match is not None:
                found = self._declaration[1] = window.base + match.start()
            else:  # keep what a declaration cut by the window's end may start with
                self._declaration[2] = scanned = max(scanned, window.end - 8)
                return min(upto, scanned)
        return min(upto, found)

    def _after_root(self, pos: int) -> int:
        """Where the next document may start, after a root element that closed at ``pos``.

        Decided here rather than by expat, whose idea of where junk after a document
        starts depends on how the input was cut into chunks."""
        window = self.window
        while True:
            data = window.data
            at = _AFTER_ROOT.match(data, pos - window.base).end()
            if data.startswith(b"<!--", at):  # an unfinished comment, or a bad one
                cut = data.find(b"-->", at) < 0
            elif data.startswith(b"<?", at):
                cut = data.find(b"?>", at) < 0
            else:
                cut = len(data) - at < 4 and b"<!--".startswith(data[at:])
            if not (cut and len(data) - at < 1 << 20 and self._fill()):
                return window.base + at

    def _resync(self, pos: int, start: int) -> int:
        """The position of the next document after the malformed one at ``start``: the
        next XML declaration after ``start`` when the input's first document had one
        (an error can be found inside the next declaration), else (or when
        none comes within ``RESYNC_LOOKAHEAD`` bytes: the documents after may have
        none) the next line that starts with an element."""
        if self.declared:  # the first declaration after the bad document's own: the error
            # may have been found inside the next one (an unclosed literal runs into it)
            after = max(start + 1, self.window.base)
            found = self._search(_RESYNC_DECLARED, 0, after, start, RESYNC_LOOKAHEAD)
            if found is not None:
                return found
        return self._search(_RESYNC_LINE, 1, pos, start, None)

    def _search(self, pattern, skip: int, pos: int, start: int, within: int | None):
        """Where ``pattern`` first matches from ``pos`` (plus ``skip``), reading on; None
        when it is not within ``within`` bytes (what was read is kept, to search
        again), the end of the input when it never matches."""
        window, options = self.window, self.options
        origin = pos
        while True:
            match = pattern.search(window.data, pos - window.base)
            if match is not None:
                return window.base + match.start() + skip
            pos = max(pos, window.end - 8)
            if within is not None and window.end - origin > within:
                return None
            if within is None and (not options.keep_raw or pos - start > options.raw_limit):
                window.drop_before(pos)
            if not self._fill():
                return None if within is not None else window.end


@dataclass(slots=True)
class _Handover:
    """Where the compiled tokenizer left a document to expat, and its state there."""

    pos: int  # the input position expat goes on from
    prefix: bytes  # what expat reads first, muted: the prolog and the open elements
    stack: list[int]  # node index of each open element
    next_node: int
    parts: list[str]  # text read since the last tag


class _Handlers:
    """The expat callbacks of one document, writing into the stream's builder."""

    def __init__(
        self, ctx: StreamContext, doc: int, parser, handover: _Handover | None = None
    ) -> None:
        options = ctx.options
        builder = ctx.builder
        symbols = builder.symbols
        symbols_get = symbols.get
        docs, kinds, names = builder.docs.append, builder.kinds.append, builder.names.append
        values, depths, nodes = builder.values.append, builder.depths.append, builder.nodes.append
        keep_whitespace = options.keep_whitespace
        namespaces = options.namespaces
        max_depth = options.max_depth
        max_attributes = 2 * options.max_attributes  # names and values
        text_parts: list[str] = [] if handover is None else handover.parts
        stack: list[int] = [] if handover is None else handover.stack  # node of each open element
        next_node = 0 if handover is None else handover.next_node
        self.root_end: int | None = None  # where the root's end tag starts, or past <root/>
        self.root_content: int | None = None
        self.root_quiet = False  # may the root be <root/>? (nothing read inside it)
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
            if depth > max_depth or len(attributes) > max_attributes:
                at = (parser.CurrentLineNumber, parser.CurrentColumnNumber, parser.CurrentByteIndex)
                if depth > max_depth:
                    message = f"nesting deeper than the limit of {max_depth} elements"
                else:
                    message = (
                        f"an element with more than the limit of {max_attributes // 2} attributes"
                    )
                raise _DocumentError(message, at)
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
                    if (
                        not namespaces
                        and attribute.startswith("xmlns")
                        and attribute[5:6] in ("", ":")
                    ):
                        continue
                    docs(doc)
                    kinds(ATTR)
                    names(symbols[attribute])
                    values(attributes[i + 1])
                    depths(depth + 1)
                    nodes(node)
                    node += 1
            next_node = node
            if depth == 1:
                self.root_content = node  # the node its content would start with

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
                self.root_quiet = next_node == self.root_content  # nothing read inside
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
