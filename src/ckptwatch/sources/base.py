"""What every parser returns, and the registry of raw tool-output parsers.

Parsers interpret nothing: they turn one raw input into canonical rows (see ``schema``) and
rejected records. They never raise for a bad record; only a file that cannot be read at all
raises ``RecordError`` (the whole file then goes to quarantine).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson  # installed with prefect
import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.settings import INGEST, IngestSettings

#: Errors a parser or reader may raise on hostile input besides ``RecordError``: caught at the
#: file boundary (``parse_tool_output``, ``ingest.parse_file``) and turned into a quarantined
#: record, never a crash of the run. ``PanicException`` (a Rust panic inside polars) derives
#: from ``BaseException``, so it is named explicitly.
try:
    from polars.exceptions import PanicException
except ImportError:  # pragma: no cover - older polars
    PanicException = RuntimeError  # type: ignore[misc,assignment]
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError,
    RecursionError, OSError, PanicException,
)


def safe_text(text: str) -> str:
    """``text`` as storable UTF-8 (Arrow stores nothing else); valid text is returned as is.

    A file name byte that is not UTF-8 (Python's surrogate escape, U+DC80-U+DCFF) becomes
    ``\\xNN``; another lone surrogate (a JSON ``"\\ud800"`` escape) becomes ``\\ud800``.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def clip_raw(raw: str | bytes) -> str:
    """A quarantined record's ``raw`` text: at most ``INGEST.quarantine_raw_max`` UTF-8 bytes of
    ``raw`` (text that is not UTF-8 escaped, a character cut in half dropped)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "backslashreplace")
    return data[: INGEST.quarantine_raw_max].decode("utf-8", "ignore")


def load_json(text: str | bytes, *, one_line: bool = False) -> Any:
    """``json.loads`` whose every failure is a ``RecordError`` with a reason a person can act on.

    Besides malformed JSON this covers nesting too deep for the parser (``[[[[…``), integers
    longer than Python's 4300-digit limit and non-UTF-8 bytes. ``one_line``: the text is one
    line of a JSON Lines file (the reason then gives only the column).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = (f"column {exc.colno}" if one_line
                 else f"line {exc.lineno} column {exc.colno}")
        # json's own message may end in "at" ("Unterminated string starting at"): no "at at"
        at = "" if exc.msg.endswith(" at") else "at "
        raise RecordError(f"invalid JSON ({exc.msg} {at}{where})") from exc
    except RecursionError as exc:
        raise RecordError("invalid JSON (nested too deeply to read)") from exc
    except ValueError as exc:  # over-long integers; undecodable bytes (UnicodeDecodeError)
        if "digits" in str(exc):
            raise RecordError(f"invalid JSON (a number has more than "
                              f"{sys.get_int_max_str_digits()} digits)") from exc
        raise RecordError(f"invalid JSON ({' '.join(str(exc).split())[:120]})") from exc


#: Text ``quick_json`` must not be given: a run of 19 digits may be an integer beyond 64 bits,
#: which orjson reads as a float where ``json`` reads an int.
LONG_DIGITS = r"[0-9]{19}"


def quick_json(line: str) -> Any:
    """``load_json(line, one_line=True)``, several times sooner on a typical line: orjson
    reads it, and what orjson refuses (malformed JSON, ``NaN``, a lone surrogate escape, a
    float beyond the double range, nesting past 1024) goes to ``load_json``, whose reading or
    reason stands. Only for text without a run of 19 digits (``LONG_DIGITS``)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return load_json(line, one_line=True)


#: Types of the values of a JSON object that orjson reads exactly as ``json`` does: an
#: integer orjson cannot hold exactly (beyond 64 bits) it reads as a float, never as one of these.
_EXACT_TYPES = frozenset((str, int, bool, type(None)))


def read_json_line(line: str, long_digits: Callable[[], bool]) -> Any:
    """``load_json(line, one_line=True)`` for any line, sooner than ``json``: ``quick_json``'s
    reading stands when it is an object of text, integers, booleans and nulls (a flat
    envelope of text output: no number orjson might have read as a float), or when
    ``long_digits()``, asked only otherwise, says the line has no run of 19 digits
    (``LONG_DIGITS``); else the line is read with ``json``."""
    value = quick_json(line)
    if type(value) is dict and _EXACT_TYPES.issuperset(map(type, value.values())):
        return value
    return load_json(line, one_line=True) if long_digits() else value


@dataclass(frozen=True)
class Reject:
    """A record that could not be ingested, and why."""

    reason: str
    line: int | None = None
    raw: str | None = None
    table: str | None = None


class Rejects(list[Reject]):
    """One file's rejected records: at most ``cap`` kept (default: the built-in
    ``max_quarantine_rows``; a parse passes its run's), the rest only counted in ``dropped``,
    so that a file of a million bad lines costs no more memory than one of a thousand."""

    def __init__(self, items: Iterable[Reject] = (), cap: int | None = None) -> None:
        super().__init__()
        self.cap = INGEST.max_quarantine_rows if cap is None else cap
        self.dropped = 0
        self.extend(items)

    def append(self, item: Reject) -> None:
        """Keep ``item`` while there is room, else count it."""
        if len(self) < self.cap:
            super().append(item)
        else:
            self.dropped += 1

    def extend(self, items: Iterable[Reject]) -> None:
        """Append each of ``items`` (and count what another ``Rejects`` dropped)."""
        for item in items:
            self.append(item)
        if isinstance(items, Rejects):
            self.dropped += items.dropped

    @property
    def room(self) -> int:
        """How many more are kept."""
        return max(self.cap - len(self), 0)

    @property
    def total(self) -> int:
        """Kept and dropped."""
        return len(self) + self.dropped

    def __reduce__(self) -> tuple[Any, ...]:  # pickled for Prefect/Dask as it is
        return (_rebuild_rejects, (list(self), self.cap, self.dropped))


def _rebuild_rejects(items: list[Reject], cap: int, dropped: int) -> Rejects:
    out = Rejects(items, cap=max(cap, len(items)))
    out.cap, out.dropped = cap, dropped
    return out


@dataclass
class Parsed:
    """Canonical rows per table (without provenance columns) plus rejected records (at most
    ``limits.max_quarantine_rows`` kept: ``Rejects``)."""

    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    #: Non-fatal remarks about the input (e.g. extra columns ignored), shown in the summary.
    notes: list[str] = field(default_factory=list)
    #: The run's ingest limits, which the parse of this file applies (rejects kept, field
    #: length).
    limits: IngestSettings = field(default=INGEST, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.rejects, Rejects):
            self.rejects = Rejects(self.rejects, cap=self.limits.max_quarantine_rows)

    @property
    def capped(self) -> Rejects:
        """The rejects as ``Rejects`` (room, dropped)."""
        assert isinstance(self.rejects, Rejects)
        return self.rejects

    def add(self, table: str, frame: pl.DataFrame) -> None:
        """Append rows for ``table`` (skipped when empty)."""
        if frame.height:
            self.frames.setdefault(table, []).append(frame)

    def extend(self, other: Parsed) -> None:
        """Merge another result into this one."""
        for table, frames in other.frames.items():
            self.frames.setdefault(table, []).extend(frames)
        self.rejects.extend(other.rejects)
        self.notes.extend(other.notes)

    def rows(self, table: str) -> int:
        """Row count for ``table``."""
        return sum(f.height for f in self.frames.get(table, []))


def field_limit_checks(columns: Sequence[str], limit: int) -> list[tuple[pl.Expr, pl.Expr]]:
    """Per text column: (true where its value has more than ``limit`` characters, the reason:
    "job_id is 300 characters, over the limit of 256 (CKPTWATCH_MAX_FIELD_CHARS)")."""
    return [(pl.col(c).str.len_chars().fill_null(0) > limit,
             pl.format("{} is {} characters, over the limit of {} (CKPTWATCH_MAX_FIELD_CHARS)",
                       pl.lit(c), pl.col(c).str.len_chars(), pl.lit(limit)))
            for c in columns]


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
    #: Text that a text output ``detect`` accepts holds, one of these at least (None: no such
    #: test): ``detect_tool`` does not ask ``detect`` about text holding none of them. Never
    #: narrower than ``detect`` (tests/sources/test_detect_needs.py): a cheap test first, so
    #: that an envelope naming no ``source`` is not given to every detector in turn.
    needs: tuple[str, ...] | None = None
    #: ``detect`` over a column of plain text (``PLAIN_TEXT``) as a polars expression: the
    #: same verdict for every such text (tests/sources/test_envelope_vectorised.py), so that
    #: ``detect_tools`` asks no Python call per envelope (None: ``detect`` is called).
    detect_plain: Callable[[pl.Expr], pl.Expr] | None = None


TOOL_FORMATS: dict[str, ToolFormat] = {}


def register_tool(source: str, detect: Detector, needs: tuple[str, ...] | None = None,
                  detect_plain: Callable[[pl.Expr], pl.Expr] | None = None,
                  ) -> Callable[[ToolParser], ToolParser]:
    """Decorator: register ``parse`` as the parser of envelope ``source``; ``needs``: text a
    text output ``detect`` accepts holds one of (``ToolFormat.needs``); ``detect_plain``:
    ``detect`` of plain text as an expression (``ToolFormat.detect_plain``)."""

    def wrap(parse: ToolParser) -> ToolParser:
        TOOL_FORMATS[source] = ToolFormat(source=source, parse=parse, detect=detect,
                                          needs=needs, detect_plain=detect_plain)
        return parse

    return wrap


def head_line_starts(prefix: str, n: int = 20, lstrip: bool = False
                     ) -> Callable[[pl.Expr], pl.Expr]:
    """A ``ToolFormat.detect_plain`` of ``any(line.startswith(prefix) for line in
    first_lines(text, n))`` (``lstrip``: of ``line.lstrip()``) for plain text, where lines
    end at ``\\n`` only and a line's leading blanks are spaces and tabs: the first line that
    starts so is one of the first ``n``."""
    starts = "(?m)^" + ("[ \t]*" if lstrip else "") + re.escape(prefix)

    def expr(text: pl.Expr) -> pl.Expr:
        at = text.str.find(starts)
        return pl.when(at.is_not_null()).then(
            text.str.slice(0, at).str.count_matches("\n", literal=True) < n).otherwise(False)

    return expr


#: A bulk parser of one text format: a frame of envelopes whose ``source`` is that format, one
#: row each (``__env``: the envelope's id; ``output``: its text; ``device``, ``port``: the
#: envelope's, null when absent) -> (``{table: rows}``, the ids it declined). Each rows frame
#: holds ``__env``, ``__idx`` (the rows' order within the envelope) and the table's columns
#: other than ``ts``, ``node`` and ``source`` (the envelope's own), in order (``__env``, then
#: ``__idx``). The rows are exactly those the registered ``ToolParser`` returns for the same
#: output, in the same order within an envelope; an envelope the bulk parser
#: cannot vouch for (an error, an odd character, a rare form) is declined, and the caller
#: gives it to the ``ToolParser``, which parses it or says what is wrong with it. An optional
#: ``__plain`` column says where ``output`` is plain text (``plain_output``).
BulkParser = Callable[[pl.DataFrame], tuple[dict[str, pl.DataFrame], pl.Series]]
BULK_PARSERS: dict[str, BulkParser] = {}


def register_bulk(source: str) -> Callable[[BulkParser], BulkParser]:
    """Decorator: register ``parse`` as the bulk parser of envelope ``source``."""

    def wrap(parse: BulkParser) -> BulkParser:
        BULK_PARSERS[source] = parse
        return parse

    return wrap


#: A bulk parser of one JSON format (``json_bulk``): a frame of envelopes whose ``source`` is
#: that format and whose ``output`` is a JSON object, one row each (``__env``, ``device``,
#: ``port`` as for ``BulkParser``), and their outputs as ``json.loads`` read them, in the same
#: order -> what a ``BulkParser`` returns, with the same promise: the rows the registered
#: ``ToolParser`` returns, and an envelope it cannot vouch for declined (never guessed).
JsonBulkParser = Callable[[pl.DataFrame, list[dict[str, Any]]],
                          tuple[dict[str, pl.DataFrame], pl.Series]]
JSON_BULK_PARSERS: dict[str, JsonBulkParser] = {}


def register_json_bulk(source: str) -> Callable[[JsonBulkParser], JsonBulkParser]:
    """Decorator: register ``parse`` as the bulk parser of envelope ``source``'s JSON output."""

    def wrap(parse: JsonBulkParser) -> JsonBulkParser:
        JSON_BULK_PARSERS[source] = parse
        return parse

    return wrap


#: Text a bulk parser reads: printable ASCII, tab and newline. On it Python's and polars'
#: regular expressions, ``strip`` and line splitting agree exactly; other text is declined.
PLAIN_TEXT = r"^[\t\n\x20-\x7E]*$"


def plain_json_strings(lines: pl.Expr) -> pl.Expr:
    """True where every string in a JSON line that has no ``\\u`` escape reads as plain text
    (``PLAIN_TEXT``): the line is ASCII, holds no DEL and no ``\\b``, ``\\f`` or ``\\r``
    escape. (A raw control character inside a JSON string is invalid JSON, which neither
    orjson nor ``json`` reads; the other escapes give printable text, a tab or a newline.)
    A few literal scans of the line instead of a regular expression over each output."""
    return ((lines.str.len_bytes() == lines.str.len_chars())
            & ~lines.str.contains("\x7f", literal=True)
            & ~lines.str.contains("\\b", literal=True)
            & ~lines.str.contains("\\f", literal=True)
            & ~lines.str.contains("\\r", literal=True))


def plain_output(env: pl.DataFrame) -> pl.Expr:
    """True where a ``BulkParser``'s envelope has plain text output (``PLAIN_TEXT``): its
    ``__plain`` column when the caller gives one (``read_envelopes`` does, from the line:
    ``plain_json_strings``), else the pattern itself."""
    if "__plain" in env.columns:
        return pl.col("__plain").fill_null(False)
    return pl.col("output").str.contains(PLAIN_TEXT)


def int_text_as_float(text: pl.Expr) -> pl.Expr:
    """Decimal integer text (at most 300 digits) as the float ``float(int(text))`` gives: both
    round correctly, and ``-0`` reads as 0.0, never -0.0."""
    value = text.cast(pl.Float64)
    return pl.when(value == 0.0).then(pl.lit(0.0)).otherwise(value)


def detect_tool(output: Any) -> str | None:
    """Name of the registered format that recognises ``output``, or None (the first in the
    order of registration; a detector whose ``needs`` text holds none of is passed over)."""
    text = output if type(output) is str else None
    for fmt in TOOL_FORMATS.values():
        if text is not None and fmt.needs is not None:
            for part in fmt.needs:  # (a loop, not any(): a hot path, ~15 formats a call)
                if part in text:
                    break
            else:
                continue
        try:
            if fmt.detect(output):
                return fmt.source
        except INPUT_ERRORS:
            continue
    return None


def detect_tools(texts: pl.Series, plain: pl.Series | None = None) -> pl.Series:
    """``detect_tool`` of each of ``texts`` (text outputs; a String Series), as a String
    Series (null: no format), without a Python call per text where it can. The formats are
    asked in the order of registration, each of the texts the ones before it did not name, as
    ``detect_tool`` asks them: a format's ``needs`` looked for in those texts at once (the
    needs of the formats without ``detect_plain`` first all in one pass: a text holding none
    of them is none of theirs), then its detector asked of the texts holding one, as an
    expression (``ToolFormat.detect_plain``) where the text is plain (``plain``: True where it
    is ``PLAIN_TEXT``; None: none is taken as plain), else one by one."""
    n = texts.len()
    found = pl.Series("source", [None] * n, dtype=pl.String)
    open_ = pl.Series([True] * n, dtype=pl.Boolean)
    others = sorted({part for fmt in TOOL_FORMATS.values() if fmt.detect_plain is None
                     for part in fmt.needs or ()})
    hit = (texts.str.contains(_any_of(others)).fill_null(False) if others
           else pl.Series([False] * n, dtype=pl.Boolean))
    for fmt in TOOL_FORMATS.values():
        if fmt.needs is None:
            where = open_.arg_true()
        elif not fmt.needs:
            continue
        else:
            near = open_ if fmt.detect_plain is not None else open_ & hit
            every = near.all()  # (the usual case: the texts themselves, not a copy of them)
            if not every:
                near = near.arg_true()
            near_texts = texts if every else texts.gather(near)
            holds = (near_texts.str.contains(fmt.needs[0], literal=True)
                     if len(fmt.needs) == 1 else near_texts.str.contains(_any_of(fmt.needs)))
            holds = holds.fill_null(False)
            where = holds.arg_true() if every else near.filter(holds)
        if not where.len():
            continue
        ask = texts if where.len() == n else texts.gather(where)
        verdict = pl.Series([False] * where.len(), dtype=pl.Boolean)
        by_hand = pl.Series([True] * where.len(), dtype=pl.Boolean)
        if fmt.detect_plain is not None and plain is not None:
            is_plain = plain.gather(where).fill_null(False)
            verdict = pl.select(pl.when(is_plain).then(
                fmt.detect_plain(pl.lit(ask)).fill_null(False)).otherwise(False)).to_series()
            by_hand = ~is_plain
        one_by_one = by_hand.arg_true()
        if one_by_one.len():
            hand = [_detects(fmt, text) for text in ask.gather(one_by_one).to_list()]
            verdict = verdict.scatter(one_by_one, pl.Series(hand, dtype=pl.Boolean))
        named = where.filter(verdict)
        if named.len():
            found = found.scatter(named, fmt.source)
            open_ = open_.scatter(named, False)
            if not open_.any():
                break
    return found


def _any_of(parts: Sequence[str]) -> str:
    """A regular expression matching any of ``parts`` (literally): polars' ``contains_any``
    is several times slower over long texts."""
    return "|".join(re.escape(p) for p in parts)


def _detects(fmt: ToolFormat, output: Any) -> bool:
    """``fmt.detect(output)``, an error in it a no (as ``detect_tool`` takes it)."""
    try:
        return bool(fmt.detect(output))
    except INPUT_ERRORS:
        return False
