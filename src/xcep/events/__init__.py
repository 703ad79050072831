"""Nested-word event streams: every input, XML or JSON, as open/attr/text/close events."""

from xcep.events.model import (
    ATTR,
    CLOSE,
    NO_NAME,
    OPEN,
    TEXT,
    Event,
    EventBatch,
    EventBuilder,
    Kind,
    Symbols,
)
from xcep.events.options import SourceOptions
from xcep.events.stream import (
    FORMATS,
    EventStream,
    Input,
    StreamStats,
    expand_inputs,
    iter_events,
    parse,
)

__all__ = [
    "ATTR",
    "CLOSE",
    "FORMATS",
    "NO_NAME",
    "OPEN",
    "TEXT",
    "Event",
    "EventBatch",
    "EventBuilder",
    "EventStream",
    "Input",
    "Kind",
    "SourceOptions",
    "StreamStats",
    "Symbols",
    "expand_inputs",
    "iter_events",
    "parse",
]
