"""A large ``.json`` input read as it comes, memory bounded by its depth.

``JsonReader`` reads a ``.json`` input whole when it is small (``WHOLE_LIMIT``).
Past that, ``JsonStream`` takes over: it walks the documents' structure itself
only where a value is too large to hold — the outermost containers of a 1 GB
array of records — and hands every value that fits in its buffer (each
record) to Python's C decoder, so that it reads about as fast as the whole
path while holding one record and the open containers, never the input.

Events are those of ``json_source`` (the same convention: members as elements,
a member's array as repeated elements, other arrays as ``item``, numbers as
spelled), made by the same emitter; a document that fails is reported with its
line and column, and the reader resumes at the next line that starts a
document.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import TYPE_CHECKING

from xcep.errors import InputError
from xcep.events.model import CLOSE, OPEN

if TYPE_CHECKING:
    from collections.abc import Iterator

    from xcep.events.model import EventBatch

WHOLE_LIMIT = 32 << 20  # characters of input read whole before the stream takes over
HOLD_LIMIT = 1 << 20  # characters a single value may take before the stream walks into it
WHITESPACE = re.compile(r"[ \t\r\n]*")  # JSON's white space (json_source uses these too)
NEXT_DOCUMENT = re.compile(r"\n(?=[\[{])")  # a line that starts a document
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")  # what may still follow a number's first part
_BRACKET_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class _Incomplete(Exception):
    """The buffer ends inside the token being read."""


class JsonStream:
    """The documents of one ``.json`` input, read chunk by chunk (see the module)."""

    def __init__(self, reader, text: str, decoder, eof: bool) -> None:
        self.reader = reader  # the JsonReader: its context, source, decoder and emitter
        self.ctx = reader.ctx
        self.text = text  # the buffer
        self.pos = 0
        self.lines = 0  # newlines in the part of the input dropped from the buffer
        self.line_start = 0  # where the line holding text[0] started, relative to text[0]
        self.decoder = decoder  # the incremental UTF-8 decoder
        self.eof = eof

    # ----- the buffer -----

    def more(self) -> bool:
        """Read one more chunk (dropping what was read); False at the end of the input."""
        if self.eof:
            return False
        if self.pos > 0:
            dropped = self.text[: self.pos]
            newlines = dropped.count("\n")
            if newlines:
                self.lines += newlines
                self.line_start = dropped.rfind("\n") + 1 - self.pos
            else:
                self.line_start -= self.pos
            self.text, self.pos = self.text[self.pos :], 0
        chunk = self.ctx.read(self.reader.stream)
        self.eof = not chunk
        self.text += self.decoder.decode(chunk, final=self.eof)
        return True

    def where(self, at: int) -> tuple[int, int]:
        """(line, column) of ``text[at]`` in the input, 1-based."""
        newlines = self.text.count("\n", 0, at)
        if newlines:
            return self.lines + newlines + 1, at - self.text.rfind("\n", 0, at)
        return self.lines + 1, at - self.line_start + 1

    def skip_space(self) -> bool:
        """Past white space, reading on; False when the input ends."""
        while True:
            self.pos = WHITESPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return True
            if not self.more():
                return False

    def expect(self, chars: str) -> str:
        if not self.skip_space():
            raise _Incomplete
        char = self.text[self.pos]
        if char not in chars:
            raise json.JSONDecodeError(f"Expecting one of {chars!r}", self.text, self.pos)
        self.pos += 1
        return char

    def decode(self):
        """The value at ``pos`` by the C decoder when the buffer holds all of it: (value,
        True); else (None, False) — it is larger than ``HOLD_LIMIT``: walk into it."""
        while True:
            text, pos = self.text, self.pos
            held = pos + HOLD_LIMIT
            if len(text) > held and text[pos] in "[{" and bracket_end(text, pos, held) is None:
                return None, False  # larger than what is held: no decoding it to find out
            try:
                value, end = self.reader.decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                if len(text) - pos > HOLD_LIMIT and text[pos] in "[{":
                    return None, False
                self.more()  # perhaps the value goes on in the next chunk
                continue
            if not self.eof and _NUMBER_TAIL.fullmatch(text, end):  # a number may go on
                self.more()
                continue
            self.reader.check_text(text, pos, end, value)
            self.pos = end
            return value, True

    # ----- documents -----

    def batches(self) -> Iterator[EventBatch]:
        ctx = self.ctx
        while self.skip_space():
            doc = ctx.new_document()
            start = self.pos
            try:
                yield from self.document(doc)
                ctx.document_done()
            except (ValueError, _Incomplete, RecursionError) as exc:
                at = exc.pos if isinstance(exc, json.JSONDecodeError) else self.pos
                line, column = self.where(min(at, len(self.text)))
                message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                if isinstance(exc, _Incomplete):
                    message = "the input ends inside the document"
                elif isinstance(exc, RecursionError):
                    message = "nesting too deep to decode"
                ctx.document_failed(InputError(message, self.reader.source, doc, line, column))
                self.resync(max(at, start + 1))
            batch = ctx.builder.take()
            if batch is not None:
                yield batch

    def resync(self, at: int) -> None:
        """To the next line that starts a document after ``at``, reading on."""
        self.pos = min(at, len(self.text))
        while True:
            match = NEXT_DOCUMENT.search(self.text, self.pos)
            if match is not None:
                self.pos = match.end()
                return
            self.pos = max(self.pos, len(self.text) - 1)
            if not self.more():
                self.pos = len(self.text)
                return

    def document(self, doc: int) -> Iterator[EventBatch]:
        """The events of the document at ``pos``: values that fit decoded whole, the
        containers around them walked into, one frame each: [kind, the element's name id
        (None: a member's array, which has no element of its own), its depth, its node,
        the slot (name, depth) of what it holds, whether nothing was read in it yet]."""
        builder, max_depth = self.ctx.builder, self.ctx.options.max_depth
        emit = self.reader.emit_items
        node = 0
        stack: list = []
        slot = (self.ctx.options.json_root, 1)  # where the next value goes: (name, depth)
        while True:
            name, depth = slot
            value, whole = self.decode()
            if whole:
                node = emit(doc, [(name, value, depth)], node)
                batch = builder.take()  # a batch's worth of a long document: out with it
                if batch is not None:
                    yield batch
            else:  # too large to hold: walk into it
                if depth > max_depth:
                    raise ValueError(f"nesting deeper than the limit of {max_depth} elements")
                is_object = self.text[self.pos] == "{"
                self.pos += 1
                self.open(doc, name, depth, node)
                inner = (None, depth + 1) if is_object else ("item", depth + 1)
                frame = ["obj" if is_object else "arr", builder.symbols[name], depth, node]
                stack.append([*frame, inner, True])
                node += 1
            while True:  # the next slot: an item, a member, or the end of containers
                if not stack:
                    return
                frame = stack[-1]
                if not self.skip_space():
                    raise _Incomplete
                if self.text[self.pos] == ("}" if frame[0] == "obj" else "]"):
                    self.pos += 1
                    stack.pop()
                    if frame[1] is not None:
                        self.close(doc, frame)
                    batch = builder.take()
                    if batch is not None:
                        yield batch
                    continue
                if not frame[5]:
                    self.expect(",")
                    if not self.skip_space():
                        raise _Incomplete
                frame[5] = False
                if frame[0] == "arr":
                    slot = frame[4]
                    break
                key, _ = self.decode()
                if not isinstance(key, str):
                    raise json.JSONDecodeError("Expecting a member name", self.text, self.pos)
                self.expect(":")
                if not self.skip_space():
                    raise _Incomplete
                depth = frame[4][1]
                if self.text[self.pos] != "[":
                    slot = (key, depth)
                    break
                items, whole = self.decode()  # a member's array: its items take its name
                if whole:
                    node = emit(doc, [(key, item, depth) for item in items], node)
                    batch = builder.take()
                    if batch is not None:
                        yield batch
                    continue
                self.pos += 1
                stack.append(["arr", None, depth, None, (key, depth), True])

    def open(self, doc: int, name: str, depth: int, node: int) -> None:
        builder = self.ctx.builder
        builder.docs.append(doc)
        builder.kinds.append(OPEN)
        builder.names.append(builder.symbols[name])
        builder.values.append(None)
        builder.depths.append(depth)
        builder.nodes.append(node)

    def close(self, doc: int, frame: list) -> None:
        builder = self.ctx.builder
        builder.docs.append(doc)
        builder.kinds.append(CLOSE)
        builder.names.append(frame[1])
        builder.values.append(None)
        builder.depths.append(frame[2])
        builder.nodes.append(frame[3])


def bracket_end(text: str, start: int, stop: int | None = None) -> int | None:
    """Where the container at ``text[start]`` ends by its brackets alone (strings
    skipped), whatever is wrong inside it; None when it does not close before ``stop``."""
    depth = 0
    for token in _BRACKET_OR_STRING.finditer(text, start, len(text) if stop is None else stop):
        first = token.group()[0]
        if first in "[{":
            depth += 1
        elif first in "]}":
            depth -= 1
            if depth == 0:
                return token.end()
    return None


def incremental_decoder():
    """UTF-8 to text as chunks come (a byte-order mark first is dropped; bytes that
    are not UTF-8 kept as lone surrogates, which fail their document)."""
    return codecs.getincrementaldecoder("utf-8-sig")(errors="surrogateescape")
