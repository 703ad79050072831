"""JSON and JSON Lines to nested-word events.

The convention (docs/events.md has examples):
- every JSON document becomes one root element, named ``json`` by default;
- an object member ``"k": v`` becomes an element ``k`` holding ``v``; members
  keep their order, and repeated keys are all kept;
- an array that is a member's value becomes one ``k`` element per item
  (``"k": [1, 2]`` reads like ``<k>1</k><k>2</k>``); an empty array gives none;
- an array anywhere else (the document itself, or an item of an array) becomes
  one ``item`` element per item, inside the element that holds the array;
- a string becomes a text event (none for the empty string, as in XML); a
  number keeps its JSON spelling (``1.50`` stays ``1.50``); ``true`` and
  ``false`` become the texts ``true`` and ``false``; ``null`` gives an empty
  element. JSON has no attributes, so no attr events are produced.

Inputs: *JSON Lines* (``.jsonl``, ``.ndjson``) is read line by line and
streams (a blank line is skipped, a bad line is one bad document); *JSON*
(``.json``) may hold several documents one after another; it is read whole up
to ``json_stream.WHOLE_LIMIT``, as it comes past that (``json_stream``).
"""

from __future__ import annotations

import json
import re
from itertools import repeat
from typing import TYPE_CHECKING, BinaryIO

from xcep.errors import InputError
from xcep.events import json_stream
from xcep.events.model import CLOSE, NO_NAME, OPEN, TEXT

try:
    from xcep.events import _tokenizer
except ImportError:  # built without a C compiler: Python walks the values
    _tokenizer = None

if TYPE_CHECKING:
    from collections.abc import Iterator

    from xcep.events.context import StreamContext
    from xcep.events.model import EventBatch

_ITEM = "item"
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = json_stream.WHITESPACE
_NEXT_DOCUMENT = json_stream.NEXT_DOCUMENT
_SCALAR = re.compile(r"[^\s\[\]{}]*")


def value_end(text: str, start: int) -> int | None:
    """Where the JSON value at ``text[start]`` ends, by its brackets alone (strings
    skipped), whatever is wrong inside it: how a bad document among concatenated ones
    is passed over without losing the next. None when its brackets never close."""
    if text[start] not in "[{":
        return max(_SCALAR.match(text, start).end(), start + 1)
    return json_stream.bracket_end(text, start)


class _Object(list):
    """A JSON object as its list of (key, value) pairs, duplicates and order kept."""


class _TooDeep(ValueError):
    pass


class _NotJson(ValueError):
    """What Python's decoder takes and JSON (RFC 8259) does not."""


def _constant(name: str):
    raise _NotJson(f"{name} is not a JSON value")


_decoder = json.JSONDecoder(
    object_pairs_hook=_Object, parse_float=str, parse_int=str, parse_constant=_constant
)
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte that was not UTF-8 (surrogateescape)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a \ud800-\udfff escape


def _check_unicode(value) -> None:
    """A lone surrogate escape (``"\\ud800"``) decodes to no character: not text."""
    todo = [value]
    while todo:
        item = todo.pop()
        if type(item) is str:
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _NotJson("a lone surrogate (\\ud800-\\udfff) is not a character") from None
        elif type(item) is _Object:
            todo.extend(k for k, _ in item)
            todo.extend(v for _, v in item)
        elif type(item) is list:
            todo.extend(item)


def _emit(ctx: StreamContext, doc: int, value) -> int:
    """Append the events of one JSON value (the whole document) to the builder; the nodes
    it numbered."""
    return emit_values(ctx, doc, [(ctx.options.json_root, value, 1)], 0)


def emit_values(ctx: StreamContext, doc: int, todo: list, node: int) -> int:
    """Append the events of JSON values, ``todo`` = [(element name, value, depth)] last
    first, numbering nodes from ``node``; the next node number. One value is walked by
    the compiled kernel where it is built (``_tokenizer.json_events``, the same events)."""
    builder = ctx.builder
    if len(todo) == 1 and _tokenizer is not None and ctx.options.compiled:
        (name, value, depth) = todo[0]
        columns = (*builder.columns(), _ITEM)

        def long_items(name: str, items: list, depth: int, node: int) -> int:
            return _Items(name, items, depth).emit(ctx, doc, node)

        max_depth = ctx.options.max_depth
        return _tokenizer.json_events(
            value,
            name,
            depth,
            doc,
            node,
            columns,
            builder.symbols,
            max_depth,
            _Object,
            _TooDeep,
            long_items,
            _Items.LONG,
        )
    symbols = builder.symbols
    max_depth = ctx.options.max_depth
    docs, kinds, names = builder.docs.append, builder.kinds.append, builder.names.append
    values, depths, nodes = builder.values.append, builder.depths.append, builder.nodes.append
    while todo:
        item = todo.pop()
        if type(item) is int:  # a close: the marker is the index of the opening event
            docs(doc)
            kinds(CLOSE)
            names(builder.names[item])
            values(None)
            depths(builder.depths[item])
            nodes(builder.nodes[item])
            continue
        if type(item) is _Items:  # the items of a long array, at once
            node = item.emit(ctx, doc, node)
            continue
        name, value, depth = item
        if depth > max_depth:
            raise _TooDeep(f"nesting deeper than the limit of {max_depth} elements")
        todo.append(len(builder.kinds))
        docs(doc)
        kinds(OPEN)
        names(symbols[name])
        values(None)
        depths(depth)
        nodes(node)
        node += 1
        kind = type(value)
        if kind is _Object:
            children = []
            for key, member in value:
                if type(member) is not list:
                    children.append((key, member, depth + 1))
                elif len(member) >= _Items.LONG:  # a long array: its items at once
                    children.append(_Items(key, member, depth + 1))
                else:
                    children.extend((key, element, depth + 1) for element in member)
            todo.extend(reversed(children))
        elif kind is list:
            if len(value) >= _Items.LONG:
                todo.append(_Items(_ITEM, value, depth + 1))
            else:
                todo.extend((_ITEM, element, depth + 1) for element in reversed(value))
        else:
            if kind is bool:
                text = "true" if value else "false"
            elif value is None or value == "":
                continue
            else:
                text = value
            docs(doc)
            kinds(TEXT)
            names(NO_NAME)
            values(text)
            depths(depth + 1)
            nodes(node)
            node += 1
    return node


class _Items:
    """The items of a long array, each an element ``name`` at ``depth``: items of a
    structure met before (``_signature``) copy its events and put their texts in (a JSON
    file holding one array of records reads like JSON Lines); the others are emitted on
    their own. After ``TRIAL`` items that mostly miss, the rest are emitted on their own."""

    __slots__ = ("depth", "items", "name")

    LONG = 16  # items from which an array is read this way
    TRIAL = 64
    SHAPES = 256  # structures kept per array

    def __init__(self, name: str, items: list, depth: int) -> None:
        self.name, self.items, self.depth = name, items, depth

    def emit(self, ctx: StreamContext, doc: int, node: int) -> int:
        builder = ctx.builder
        name, depth = self.name, self.depth
        shapes: dict | None = {}
        hits = misses = 0
        for item in self.items:
            if shapes is None:
                node = emit_values(ctx, doc, [(name, item, depth)], node)
                continue
            try:
                key, texts = structure(item)
            except RecursionError:  # deeper than a record: on its own
                node = emit_values(ctx, doc, [(name, item, depth)], node)
                continue
            shape = shapes.get(key)
            if shape is None:
                misses += 1
                start = len(builder.kinds)
                after = emit_values(ctx, doc, [(name, item, depth)], node)
                if len(shapes) < self.SHAPES:
                    shapes[key] = _Shape(builder, start, node, after)
                node = after
                if hits + misses >= self.TRIAL and hits < misses:
                    shapes = None  # structures do not repeat here
                continue
            hits += 1
            node = shape.copy(builder, doc, node, texts)
        return node


def _holds_long_array(value) -> bool:
    """Whether a document is (or has as a member) a long array: a document of its own
    kind, not a record's (its structure is not worth a signature; its items' are)."""
    if type(value) is list:
        return len(value) >= _Items.LONG
    return type(value) is _Object and any(
        type(member) is list and len(member) >= _Items.LONG for _, member in value
    )


def structure(value) -> tuple:
    """(a key of ``value``'s structure, its texts in event order): values of one key have
    the same events but for their texts (``_signature``; RecursionError past Python's
    recursion limit)."""
    tokens: list = []
    texts: list[str] = []
    _signature(value, tokens, texts)
    return tuple(tokens), texts


def _signature(value, tokens: list, texts: list[str]) -> None:
    """A document's structure (member names, array lengths, which values give text) as
    ``tokens``, and its texts in event order: documents of one structure have the same
    events but for their texts. (Recursive, for speed: a document nested past Python's
    recursion limit raises RecursionError and is emitted on its own.)"""
    kind = type(value)
    if kind is str:
        if value:
            tokens.append(1)
            texts.append(value)
        else:
            tokens.append(0)
    elif kind is _Object:
        tokens.append(-2 - len(value))
        for key, member in value:
            tokens.append(key)
            _signature(member, tokens, texts)
    elif kind is list:
        tokens.append(-2 - len(value) - (1 << 40))
        for item in value:
            _signature(item, tokens, texts)
    elif kind is bool:
        tokens.append(1)
        texts.append("true" if value else "false")
    else:  # None
        tokens.append(0)


class _Shape:
    """The events of one structure (a document's, or an item's of a long array), but for
    its texts (``structure``); its node numbers from its first."""

    __slots__ = ("depth", "depths", "kinds", "names", "nodes", "size", "texts_at", "values")

    def __init__(self, builder, start: int, node: int, after: int) -> None:
        self.kinds = builder.kinds[start:]
        self.names = builder.names[start:]
        self.depths = builder.depths[start:]
        self.nodes = [n - node for n in builder.nodes[start:]] if node else builder.nodes[start:]
        self.depth = max(self.depths, default=0)
        self.size = after - node  # the nodes it numbers
        self.texts_at = [i for i, kind in enumerate(self.kinds) if kind == TEXT]
        self.values = [None] * len(self.kinds)

    def copy(self, builder, doc: int, node: int, texts: list[str]) -> int:
        """Append its events with ``texts`` put in, numbered from ``node``; the next."""
        n = len(self.kinds)
        builder.docs.extend(repeat(doc, n))
        builder.kinds.extend(self.kinds)
        builder.names.extend(self.names)
        builder.depths.extend(self.depths)
        builder.nodes.extend([node + n for n in self.nodes] if node else self.nodes)
        values = self.values.copy()
        for at, text in zip(self.texts_at, texts, strict=True):
            values[at] = text
        builder.values.extend(values)
        return node + self.size


SHAPES = 4096  # document structures kept per input
SHAPE_TRIAL = 1000  # documents after which the cache stops if it helps less than half the time


class JsonReader:
    """Reads one JSON or JSON Lines input.

    Feeds are mostly records of a few structures: a structure's events are kept
    (``_Shape``, up to ``SHAPES``) and a document of a known structure copies them
    and puts in its texts; after ``SHAPE_TRIAL`` documents that mostly miss, every
    document is emitted on its own."""

    def __init__(self, ctx: StreamContext, stream: BinaryIO, source: str, lines: bool) -> None:
        self.ctx = ctx
        self.stream = stream
        self.source = source
        self.lines = lines
        self.shapes: dict[tuple, _Shape] | None = {}
        self.hits = self.misses = 0

    def _emit(self, doc: int, value) -> None:
        shapes = self.shapes
        if shapes is None or (not self.lines and _holds_long_array(value)):  # (_Items)
            _emit(self.ctx, doc, value)
            return
        try:
            key, texts = structure(value)
        except RecursionError:  # deeper than a record: on its own
            _emit(self.ctx, doc, value)
            return
        shape = shapes.get(key)
        builder = self.ctx.builder
        if shape is None:
            self.misses += 1
            start = len(builder.kinds)
            after = _emit(self.ctx, doc, value)
            if len(shapes) >= SHAPES:
                shapes.clear()
            shapes[key] = _Shape(builder, start, 0, after)
            if self.misses + self.hits >= SHAPE_TRIAL and self.hits < self.misses:
                self.shapes = None  # structures do not repeat: not worth the signature
            return
        self.hits += 1
        if shape.depth > self.ctx.options.max_depth:
            raise _TooDeep(
                f"nesting deeper than the limit of {self.ctx.options.max_depth} elements"
            )
        shape.copy(builder, doc, 0, texts)

    def batches(self) -> Iterator[EventBatch]:
        if self.lines:
            yield from self._lines()
        else:
            yield from self._whole()

    # what the stream of a large .json input (json_stream.JsonStream) asks of its reader
    decoder = _decoder

    def emit_items(self, doc: int, items: list, node: int) -> int:
        """The events of ``items`` = [(element name, value, depth)] in document order."""
        return emit_values(self.ctx, doc, items[::-1], node)

    @staticmethod
    def check_text(text: str, start: int, end: int, value) -> None:
        """Refuse a decoded value whose text held bytes that were not UTF-8 or escapes of
        lone surrogates (ValueError)."""
        bad = _NOT_UTF8.search(text, start, end)
        if bad is not None:
            raise _NotJson(f"not UTF-8: byte {ord(bad.group()) - 0xDC00:#04x}")
        if _SURROGATE_ESCAPE.search(text, start, end):
            _check_unicode(value)

    def _document(
        self, text: str, start: int, line: int, column: int, checked: bool = True
    ) -> int | InputError:
        """Decode and emit the document at ``text[start:]``; return where it ends.

        ``line``/``column`` locate ``text[0]`` in the input, for error messages; unless
        ``checked``, bytes that were not UTF-8 may be in ``text`` (as surrogates).
        """
        ctx = self.ctx
        doc = ctx.new_document()
        try:
            value, end = _decoder.raw_decode(text, start)
            if self.lines and _WHITESPACE.match(text, end).end() != len(text):
                raise json.JSONDecodeError("extra data after the document", text, end)
            if not checked:
                bad = _NOT_UTF8.search(text, start, end)
                if bad is not None:
                    at = bad.start()
                    lineno = line + text.count("\n", 0, at)
                    colno = at - text.rfind("\n", 0, at)
                    byte = ord(bad.group()) - 0xDC00
                    message = f"not UTF-8: byte {byte:#04x}"
                    return InputError(message, self.source, doc, lineno, colno)
            if _SURROGATE_ESCAPE.search(text, start, end):
                _check_unicode(value)
            self._emit(doc, value)
        except json.JSONDecodeError as exc:
            lineno = line + exc.lineno - 1
            colno = exc.colno + (column - 1 if exc.lineno == 1 else 0)
            return InputError(exc.msg, self.source, doc, lineno, colno)
        except (_TooDeep, _NotJson, RecursionError) as exc:
            message = "nesting too deep to decode" if isinstance(exc, RecursionError) else str(exc)
            lineno = line + text.count("\n", 0, start)
            return InputError(message, self.source, doc, lineno)
        ctx.document_done()
        return end

    def _lines(self) -> Iterator[EventBatch]:
        ctx = self.ctx
        pending: list[bytes] = []  # the chunks of a line not ended yet (kept apart: a long
        line = 0  # line joined once, not chunk by chunk)
        first = True
        while True:
            chunk = ctx.read(self.stream)
            if first:  # a byte-order mark before the first line is not part of it
                chunk, first = chunk.removeprefix(_BOM), False
            if chunk and b"\n" not in chunk:
                pending.append(chunk)
                continue
            parts = b"".join([*pending, chunk]).split(b"\n")
            pending = [parts.pop()] if chunk else []
            for part in parts:
                line += 1
                if not part.strip():
                    continue
                try:
                    text = part.decode("utf-8")
                except UnicodeDecodeError as exc:
                    doc = ctx.new_document()
                    reason = f"not UTF-8: {exc.reason}"
                    ctx.document_failed(InputError(reason, self.source, doc, line, exc.start + 1))
                    continue
                result = self._document(text, _WHITESPACE.match(text).end(), line, 1)
                if isinstance(result, InputError):
                    ctx.document_failed(result, part)
            batch = ctx.builder.take()
            if batch is not None:
                yield batch
            if not chunk:
                return
            yield from ctx.before_wait()

    def _whole(self) -> Iterator[EventBatch]:
        ctx = self.ctx
        chunks, size = [], 0
        limit = json_stream.WHOLE_LIMIT
        while size <= limit and (chunk := ctx.read(self.stream)):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # large: read as it comes, memory bounded by its depth
            decoder = json_stream.incremental_decoder()
            text = decoder.decode(b"".join(chunks))
            yield from json_stream.JsonStream(self, text, decoder, eof=False).batches()
            return
        data = b"".join(chunks)
        try:
            text, checked = data.decode("utf-8-sig"), True
        except UnicodeDecodeError:  # bad bytes kept as lone surrogates: their documents fail
            text, checked = data.decode("utf-8-sig", errors="surrogateescape"), False
        pos = _WHITESPACE.match(text).end()
        while pos < len(text):
            result = self._document(text, pos, 1, 1, checked)
            if isinstance(result, InputError):  # skip the bad document: to its last bracket,
                end = value_end(text, pos)  # else to the next line that starts a document
                if end is None:
                    match = _NEXT_DOCUMENT.search(text, pos + 1)
                    end = match.end() if match else len(text)
                end = max(end, pos + 1)  # always onwards
                ctx.document_failed(result, text[pos:end].encode("utf-8", "surrogateescape"))
            else:
                end = result
            pos = _WHITESPACE.match(text, end).end()
            batch = ctx.builder.take()
            if batch is not None:
                yield batch
