"""What every parser returns, and the registry of raw tool-output parsers.

Parsers interpret nothing: they turn one raw input into canonical rows (see ``schema``) and
rejected records. They never raise for a bad record; only a file that cannot be read at all
raises ``RecordError`` (the whole file then goes to quarantine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl


@dataclass(frozen=True)
class Reject:
    """A record that could not be ingested, and why."""

    reason: str
    line: int | None = None
    raw: str | None = None
    table: str | None = None


@dataclass
class Parsed:
    """Canonical rows per table (without provenance columns) plus rejected records."""

    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    #: Non-fatal remarks about the input (e.g. extra columns ignored), shown in the summary.
    notes: list[str] = field(default_factory=list)

    def add(self, table: str, frame: pl.DataFrame) -> None:
        """Append rows for ``table`` (skipped when empty)."""
        if frame.height:
            self.frames.setdefault(table, []).append(frame)

    def add_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Append row dicts for ``table``."""
        if rows:
            self.add(table, pl.DataFrame(rows, infer_schema_length=None))

    def extend(self, other: Parsed) -> None:
        """Merge another result into this one."""
        for table, frames in other.frames.items():
            self.frames.setdefault(table, []).extend(frames)
        self.rejects.extend(other.rejects)
        self.notes.extend(other.notes)

    def rows(self, table: str) -> int:
        """Row count for ``table``."""
        return sum(f.height for f in self.frames.get(table, []))


@dataclass(frozen=True)
class ToolContext:
    """Where a raw tool output came from: the envelope fields, or the file's place."""

    node: str
    ts: datetime
    source: str
    device: str | None = None
    port: str | None = None


#: A tool-output parser: raw JSON object or text -> {table: [row dicts]}.
#: Raises ``RecordError`` when the output is malformed.
ToolParser = Callable[[Any, ToolContext], dict[str, list[dict[str, Any]]]]
#: Recognises a tool's raw output when the envelope names no ``source``.
Detector = Callable[[Any], bool]


@dataclass(frozen=True)
class ToolFormat:
    """A registered raw tool format (one module in ``sources/`` per format)."""

    source: str
    parse: ToolParser
    detect: Detector


TOOL_FORMATS: dict[str, ToolFormat] = {}


def register_tool(source: str, detect: Detector) -> Callable[[ToolParser], ToolParser]:
    """Decorator: register ``parse`` as the parser of envelope ``source``."""

    def wrap(parse: ToolParser) -> ToolParser:
        TOOL_FORMATS[source] = ToolFormat(source=source, parse=parse, detect=detect)
        return parse

    return wrap


def detect_tool(output: Any) -> str | None:
    """Name of the registered format that recognises ``output``, or None."""
    for fmt in TOOL_FORMATS.values():
        try:
            if fmt.detect(output):
                return fmt.source
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
    return None
