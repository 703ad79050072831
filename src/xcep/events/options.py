"""Options shared by every event source, with their secure defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceOptions:
    keep_whitespace: bool = False  # keep whitespace-only text nodes
    namespaces: bool = False  # report namespace declarations (xmlns, xmlns:p) as attributes
    max_depth: int = 10_000  # deepest element nesting accepted
    max_attributes: int = 10_000  # most attributes on one element
    max_entity_chars: int = 1_000_000  # largest expansion of one internal entity
    max_amplification: int = 100  # characters produced per input byte (with entities)
    chunk_size: int = 64 * 1024  # bytes read from the input at a time
    batch_size: int = 8192  # pending events of one document released before it completes
    keep_raw: bool = False  # keep a malformed document's bytes (for dead-letter output)
    raw_limit: int = 16 * 1024 * 1024  # at most this many bytes of it
    json_root: str = "json"  # the root element's name of every JSON document
    compiled: bool = True  # XML tokenized, JSON values walked by the compiled kernel if built

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_attributes", "max_entity_chars", "chunk_size", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not self.json_root:
            raise ValueError("json_root must be a non-empty name")
