"""Readers of the canonical tabular inputs (README, "Input: drop files in a raw directory").

JSON Lines, CSV and Parquet files whose columns are the contract's: checkpoint records, job
metadata, long fabric counters, pool telemetry and topology. Reading is vectorised (polars);
a line-by-line path runs only when the fast path meets a malformed file, to isolate bad lines.

A checkpoint file holds finished records and in-flight markers (``status = "started"``, written
when a rank begins a checkpoint): ``canonicalise`` routes each marker to ``checkpoint_starts``
(checked against its own required fields: no ``end_time`` or ``bytes`` needed, and any it has
ignored) and every other record to ``checkpoint_writes``, in the one pass that types the file,
so the fast and the line-by-line readers route them alike.
"""

from __future__ import annotations

import bisect
import csv
import functools
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import (
    CHECKPOINT_STARTS,
    CHECKPOINT_WRITES,
    FABRIC_COUNTERS,
    PROVENANCE,
    STARTED,
    STATUS_SPELLINGS,
    STATUSES,
    TABLES,
    TIERS,
)
from ckptwatch.settings import INGEST, IngestSettings
from ckptwatch.sources.base import (
    PanicException,
    Parsed,
    Reject,
    Rejects,
    clip_raw,
    field_limit_checks,
    load_json,
    safe_text,
)
from ckptwatch.sources.coerce import (
    coerce_series,
    int_bounds,
    integral_expr,
    read_in_steps,
    typed_coerce_expr,
)

LINE = "__line"
RAW = "__raw"
#: How much of a CSV the delimiter is detected from (its first line within it).
HEADER_BYTES = 1 << 16

#: Raw column names accepted for a canonical column (first is the contract's name).
ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "checkpoint_writes": {
        "start_ts": ("start_time", "start_ts", "start"),
        "end_ts": ("end_time", "end_ts", "end"),
    },
    "checkpoint_starts": {"start_ts": ("start_time", "start_ts", "start")},
    "fabric_counters": {"ts": ("ts", "time", "timestamp", "collected_at")},
    "pool_metrics": {"ts": ("ts", "time", "timestamp")},
    "jobs": {},
    "topology": {"leaf_switch": ("leaf_switch", "leaf", "switch")},
}
#: Columns the ingest fills in itself (not read from the file).
DERIVED = {"checkpoint_writes": {"duration_s"}, "fabric_counters": {"source"}}
PROVENANCE_NAMES = {f.name for f in PROVENANCE}


@dataclass(frozen=True)
class Frame:
    """A raw file loaded as a frame, with the 1-based line of each record and its raw text."""

    df: pl.DataFrame
    rejects: list[Reject]
    #: A record's raw text spelled from ``df``'s own columns, when ``df`` holds no ``RAW``
    #: column: spelled only for the records that are rejected (``_spell_raw``).
    raw: pl.Expr | None = None
    #: The file's bytes, when ``df`` holds no ``RAW`` column and a record is a line: a rejected
    #: record's raw text is its line (``LINE``), decoded only when one is (``_spell_raw``).
    data: bytes | memoryview | None = None
    #: The file's line number of ``data``'s first line (a chunk of a file: ``read_table``).
    first_line: int = 1

    @property
    def spells_raw(self) -> bool:
        """True when ``df`` holds no ``RAW`` column (``_spell_raw`` spells it)."""
        return self.raw is not None or self.data is not None

    @functools.cached_property
    def lines(self) -> list[str]:
        """``data``'s lines, decoded once (asked only when a record of it is rejected)."""
        return _lines(self.data or b"")


def _canonical_dtypes(table: str) -> dict[str, pl.DataType]:
    schema = TABLES[table].schema
    empty = pl.from_arrow(schema.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return {k: v for k, v in empty.schema.items() if k not in PROVENANCE_NAMES}


def _jsonable(v: Any) -> Any:
    """A JSON value as one cell: scalars as they are, text made storable, nested values as
    JSON text (``RecursionError`` for nesting too deep to write back)."""
    if isinstance(v, str):
        return safe_text(v)
    return v if v is None or isinstance(v, int | float | bool) else safe_text(json.dumps(v))


def _json_array(lines: list[str]) -> bool:
    """True when the text is one JSON array (not JSON Lines): its first non-blank line opens
    an array that the line does not close, or it is the file's one line and an array."""
    filled = (ln.strip() for ln in lines if ln.strip())
    first = next(filled, "")
    if not first.startswith("["):
        return False
    try:
        value = json.loads(first)
    except (ValueError, RecursionError):
        return True  # ``[`` or ``[{…},`` opening a multi-line array
    return isinstance(value, list) and next(filled, None) is None


#: Leading ASCII whitespace (what ``bytes.lstrip()`` strips), matched without copying the data.
_LEADING_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")


def _opens_array(data: bytes) -> bool:
    """True when ``data``'s first byte after leading whitespace is ``[`` (a JSON array). A
    file's ``lstrip()`` copied the whole file whenever it began with whitespace."""
    start = _LEADING_SPACE.match(data)
    at = start.end() if start else 0
    return data[at:at + 1] == b"["


def load_jsonl(data: bytes | memoryview, table: str, *, first_line: int = 1,
               cap: int = INGEST.max_quarantine_rows) -> Frame:
    """JSON Lines: fast polars path; line by line only when a line is malformed or blank.
    A file that is one JSON array is a ``RecordError`` (the whole file is unreadable).
    ``first_line``: ``data`` is a chunk of whole lines of a file, from this line on (records
    are numbered by the file's lines; only a file's first chunk can be an array). A view
    (``memoryview``) is copied for the parse only: the frame keeps the view. ``cap``: malformed
    lines kept (``max_quarantine_rows``)."""
    raw = data if isinstance(data, bytes) else bytes(data)
    if not _opens_array(raw):  # an array is judged below
        fast = _jsonl_at_once(raw, first_line, data)
        if fast is not None:
            return fast
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if first_line == 1 and _json_array(lines):
        raise RecordError("the file is one JSON array, not JSON Lines (one object a line): "
                          "convert it, e.g. jq -c '.[]' FILE")
    rows: list[dict[str, Any]] = []
    rejects = Rejects(cap=cap)
    for i, ln in enumerate(lines, start=first_line):
        if not ln.strip():
            continue
        try:
            obj = load_json(ln, one_line=True)
        except RecordError as exc:
            rejects.append(Reject(exc.reason, i, clip_raw(ln), table))
            continue
        if not isinstance(obj, dict):
            rejects.append(Reject(f"expected a JSON object, got {type(obj).__name__}", i,
                                  clip_raw(ln), table))
            continue
        try:
            row = {safe_text(str(k)): _jsonable(v) for k, v in obj.items()}
        except (RecursionError, ValueError):
            rejects.append(Reject("invalid JSON (a value is nested too deeply to read)", i,
                                  clip_raw(ln), table))
            continue
        row[LINE] = i
        row[RAW] = safe_text(ln)
        rows.append(row)
    if not rows:
        return Frame(pl.DataFrame({LINE: [], RAW: []},
                                  schema={LINE: pl.Int64, RAW: pl.String}), rejects)
    strs = [{k: (v if k == LINE or v is None else str(v)) for k, v in r.items()} for r in rows]
    df = pl.DataFrame(strs, infer_schema_length=None)
    return Frame(df, rejects)


def _jsonl_at_once(data: bytes, first_line: int = 1,
                   kept: bytes | memoryview | None = None) -> Frame | None:
    """The file read by ``pl.read_ndjson`` in one pass, when that reads every line as one flat
    object (no nested value); else None (the careful reader reads it line by line). Polars
    reads a line only as one object, and a blank line (spaces, ``\\r``) it skips or refuses,
    so a frame of one row a line is the file's records, in order. The lines' text is neither
    decoded nor held: only a rejected record's is spelled (``Frame.data``: ``kept``, else
    ``data``), where a column of every line cost a second copy of the file and a tenth of its
    ingest."""
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    try:
        df = _sampled_ndjson(data) if lines > SAMPLE_LINES else None
        if df is None:
            df = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    except (Exception, PanicException):  # noqa: BLE001 - any failure (a polars panic
        return None  # included) leaves the file to the careful reader
    if df.height != lines or any(isinstance(t, pl.Struct | pl.List) for t in df.dtypes):
        return None
    numbers = pl.int_range(first_line, first_line + df.height, dtype=pl.Int64)
    return Frame(df.with_columns(numbers.alias(LINE)), [], data=data if kept is None else kept,
                 first_line=first_line)


#: Lines ``_sampled_ndjson`` takes the column types from: the first half of them, the rest
#: spread evenly over the data (a checkpoint file opens with every rank's start marker, which
#: lacks the columns of a finished record).
SAMPLE_LINES = 1000
#: JSON's white space: a key's closing quote may be followed by it before the colon.
_JSON_WHITE = np.array([0x20, 0x09, 0x0A, 0x0D], dtype=np.uint8)


def _sample(data: bytes, n: int) -> bytes:
    """About ``n`` whole lines of ``data``: its first ``n // 2``, then one after each of
    ``n // 2`` offsets spread evenly over it."""
    lines: list[bytes] = []
    at = 0
    for _ in range(n // 2):
        end = data.find(b"\n", at)
        if end < 0:
            return data
        lines.append(data[at:end])
        at = end + 1
    for k in range(1, n // 2 + 1):
        begin = data.find(b"\n", at + (len(data) - at) * k // (n // 2 + 1)) + 1
        end = data.find(b"\n", begin)
        if begin > 0 and end > begin:
            lines.append(data[begin:end])
    return b"\n".join(lines)


def _sampled_ndjson(data: bytes, sample_lines: int | None = None) -> pl.DataFrame | None:
    """``data`` read as JSON Lines with the column types inferred from a sample of its lines
    (``_sample``), when that is provably the frame that inferring them from every line gives
    (which is ~3/4 of that read: 94 of 120 ms for 8 MB of checkpoint records), but for the
    order of its columns; else None, and the caller's full read as before. Read with given
    types, polars leaves out, silently, a key that they lack (``_flat_with_keys`` checks that
    every key of every line is a column); and raises where a value does not fit them (a float
    or text in an integer column, a value in a column the sample saw only null), which the
    full read then settles. The values it converts (a number or a boolean in a text column,
    an integer in a float column) it converts as the full read does, whose type for that
    column is then the same; a line that repeats a key it reads as the full read does.
    A nested value (``_flat_with_keys``) gives None, as do columns whose names differ only in
    case or surrounding spaces (``_rename`` would pick one by their order). ``sample_lines``:
    the sample's size (default ``SAMPLE_LINES``)."""
    if b"\\" in data:  # an escape: ``_flat_with_keys`` cannot tell strings from the bytes
        return None
    try:
        sample = io.BytesIO(_sample(data, sample_lines or SAMPLE_LINES))
        schema = pl.read_ndjson(sample, infer_schema_length=None).schema
        df = pl.read_ndjson(io.BytesIO(data), schema=schema)
    except (Exception, PanicException):  # noqa: BLE001 - a value the sampled types cannot
        return None  # hold (or any other failure): the full read decides
    if len({c.strip().lower() for c in df.columns}) < df.width \
            or not _flat_with_keys(data, df.columns, df.height):
        return None
    return df


def _flat_with_keys(data: bytes, names: Sequence[str], objects: int) -> bool:
    """Whether JSON Lines ``data`` (``objects`` objects, valid, with no backslash) nests no
    value and has no key but ``names``, seen from its bytes. With no escape a string is the
    bytes between two quotes, and the quotes alternate, opening and closing. Nothing is
    nested when, outside the strings, there is no ``[`` and one ``{`` an object (counted
    only where the bytes hold a ``[`` or more braces: a text may hold them). A key is a
    string whose closing quote is followed by a colon (a value's, by a comma or a brace), at
    once unless white space comes between, which gives False here. A key of up to 8 bytes is
    compared as one integer (its bytes, with its length above them when it has fewer than 8:
    no byte of a JSON key is below 0x20, so no 8-byte key reads as a shorter one), a longer
    one 8 bytes at a time."""
    raw = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(raw == 0x22)
    if quotes.size % 2:
        return False
    if b"[" in data or data.count(b"{") != objects:
        opens = np.flatnonzero((raw == 0x7B) | (raw == 0x5B))
        outside = raw[opens[np.searchsorted(quotes, opens) % 2 == 0]]  # even quotes before
        if np.count_nonzero(outside == 0x5B) or np.count_nonzero(outside == 0x7B) != objects:
            return False
    closing = quotes[1::2]
    after = raw[np.minimum(closing + 1, raw.size - 1)]  # the last byte: itself, a quote
    if np.isin(after, _JSON_WHITE).any():
        return False
    is_key = after == 0x3A
    start = quotes[0::2][is_key] + 1
    length = closing[is_key] - start
    wanted = [name.encode() for name in names]
    tail = start > raw.size - 8  # a short key at the data's very end: no 8-byte window
    for at, size in zip(start[tail].tolist(), length[tail].tolist(), strict=True):
        if data[at:at + size] not in wanted:
            return False
    start, length = start[~tail], length[~tail]
    if not start.size:
        return True
    windows = np.lib.stride_tricks.sliding_window_view(raw, 8)
    short = length <= 8
    size = length[short].astype(np.uint64)
    word = windows[start[short]].view("<u8").ravel()
    mask = (np.uint64(1) << (size * np.uint64(8))) - np.uint64(1)  # shift by 64: not used
    code = np.where(size == 8, word, (word & mask) | (size << np.uint64(56)))
    known = [int.from_bytes(n, "little") | (len(n) << 56 if len(n) < 8 else 0)
             for n in wanted if len(n) <= 8]
    if not np.isin(code, np.array(known, dtype=np.uint64)).all():
        return False
    for size_long in np.unique(length[~short]).tolist():  # 8 bytes at a time
        at = start[length == size_long]
        group = [n for n in wanted if len(n) == size_long]
        match_any = np.zeros(at.size, dtype=bool)
        for name in group:
            match = np.ones(at.size, dtype=bool)
            for o in [*range(0, size_long - 8, 8), size_long - 8]:
                match &= windows[at + o].view("<u8").ravel() \
                    == np.uint64(int.from_bytes(name[o:o + 8], "little"))
            match_any |= match
        if not match_any.all():
            return False
    return True


#: Delimiters a CSV header may use, in order of preference when counts tie.
DELIMITERS = (",", ";", "\t", "|")


def csv_delimiter(header: str) -> str:
    """The delimiter of a CSV whose header line is ``header``: the most frequent of
    ``DELIMITERS`` in it (a comma when there is none)."""
    counts = [(header.count(d), -k, d) for k, d in enumerate(DELIMITERS)]
    best = max(counts)
    return best[2] if best[0] else ","


def load_csv(data: bytes, table: str, *, cap: int = INGEST.max_quarantine_rows) -> Frame:
    """CSV with a header row (its delimiter detected: ``csv_delimiter``); every value read as
    text, typed later. A file with blank lines (lines over the record limit are blanked)
    takes the line-by-line path, whose line numbers count them. ``cap``: malformed records
    kept (``max_quarantine_rows``)."""
    head = data[:HEADER_BYTES].decode("utf-8", errors="replace").lstrip("\ufeff")
    sep = csv_delimiter(head.split("\n", 1)[0])
    try:
        if b"\n\n" in data or b"\n\r\n" in data:
            raise ValueError("blank lines: take the careful path")
        df = pl.read_csv(io.BytesIO(data), infer_schema=False, truncate_ragged_lines=False,
                         separator=sep)
        df = df.with_columns(pl.int_range(2, df.height + 2, dtype=pl.Int64).alias(LINE))
        cols = [c for c in df.columns if c != LINE]
        return Frame(df, [], raw=pl.concat_str([pl.col(c).fill_null("") for c in cols],
                                                separator=sep))
    except (Exception, PanicException):  # noqa: BLE001 - ragged or odd CSV (or a polars
        pass  # panic): isolate the bad lines below
    text = data.decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        return Frame(pl.DataFrame(), [])
    except csv.Error as exc:
        raise RecordError(f"unreadable CSV header: {exc}") from exc
    repeats: dict[str, int] = {}
    for k, h in enumerate(header):  # named as polars names them: the first keeps its name
        if h in repeats:
            header[k] = f"{h}_duplicated_{repeats[h]}"
            repeats[h] += 1
        else:
            repeats[h] = 0
    rows: list[dict[str, Any]] = []
    rejects = Rejects(cap=cap)
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit()
            rejects.append(Reject(f"unreadable CSV record: {exc}", reader.line_num, None,
                                  table))
            continue
        line = reader.line_num
        if not any(v.strip() for v in rec):
            continue
        if len(rec) != len(header):
            rejects.append(Reject(f"CSV row has {len(rec)} fields, header has {len(header)}",
                                  line, clip_raw(sep.join(rec)), table))
            continue
        row: dict[str, Any] = dict(zip(header, rec, strict=True))
        row[LINE] = line
        row[RAW] = sep.join(rec)
        rows.append(row)
    df = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    return Frame(df, rejects)


def _as_text(df: pl.DataFrame, col: str) -> pl.Expr:
    """A column of a type that does not cast to text (nested, binary, duration…) as text:
    binary decoded as UTF-8 (bad bytes escaped), anything else as its JSON value."""
    dtype = df.schema[col]
    if dtype == pl.Binary:
        return pl.col(col).map_elements(lambda b: b.decode("utf-8", "backslashreplace"),
                                        return_dtype=pl.String, skip_nulls=True)
    if dtype == pl.Null:
        return pl.col(col).cast(pl.String)
    as_json = pl.struct(pl.col(col).alias("v")).struct.json_encode().str.slice(5).str.head(-1)
    return pl.when(pl.col(col).is_not_null()).then(as_json)


_TEXT_CASTABLE = (pl.String, pl.Boolean, pl.Date, pl.Datetime, pl.Time, pl.Decimal,
                  pl.Categorical, pl.Enum)


def load_parquet(data: bytes, table: str) -> Frame:
    """Parquet: the record number stands in for the line. Columns of types that do not read as
    text (lists, structs, binary, durations) are turned into text first; nothing here raises
    anything but ``RecordError``."""
    try:
        df = pl.read_parquet(io.BytesIO(data))
        odd = [c for c, t in df.schema.items()
               if not (t.is_numeric() or isinstance(t, _TEXT_CASTABLE) or t in _TEXT_CASTABLE)]
        if odd:
            df = df.with_columns(_as_text(df, c).alias(c) for c in odd)
        df = df.with_columns(pl.int_range(1, df.height + 1, dtype=pl.Int64).alias(LINE))
        raw = pl.struct([c for c in df.columns if c != LINE]).struct.json_encode()
        df = df.with_columns(raw.alias(RAW))
    except (Exception, PanicException) as exc:  # noqa: BLE001 - pyarrow/polars raise many
        text = " ".join(str(exc).split())[:300]  # types (and panic) for bad files
        raise RecordError(f"unreadable Parquet: {safe_text(text)}") from exc
    return Frame(df, [])


LOADERS = {".jsonl": load_jsonl, ".ndjson": load_jsonl, ".json": load_jsonl,
           ".csv": load_csv, ".parquet": load_parquet}


def line_chunks(data: bytes, size: int) -> Iterator[tuple[int, int, int]]:
    """``data`` cut into chunks of whole lines of about ``size`` bytes (a chunk ends at the
    first newline at or after ``size`` bytes, or at the end): each chunk's start and end
    offsets and the number of its first line."""
    start, line = 0, 1
    while start < len(data):
        cut = data.find(b"\n", start + max(size, 1) - 1)
        end = len(data) if cut < 0 else cut + 1
        yield start, end, line
        line += data.count(b"\n", start, end)
        start = end


def read_table(data: bytes, table: str, suffix: str, *, file_label: str,
               limits: IngestSettings = INGEST) -> Parsed:
    """A canonical table file (``LOADERS`` by ``suffix``) loaded and typed (``canonicalise``).
    A JSON Lines file over the ingest's ``table_chunk_bytes`` is loaded and typed a chunk of
    whole lines at a time (``canonicalise_frames``: the same result), so that its working set
    is a chunk's: one frame of a 360 MB file took 1.5 GB beside its bytes. ``limits``: the
    run's (rejects kept, field length, chunk size)."""
    loader = LOADERS[suffix]
    size, cap = limits.table_chunk_bytes, limits.max_quarantine_rows
    if loader is not load_jsonl or len(data) <= size or _opens_array(data):
        if loader is load_jsonl:
            frame = load_jsonl(data, table, cap=cap)
        elif loader is load_csv:
            frame = load_csv(data, table, cap=cap)
        else:  # Parquet: no malformed records to keep
            frame = loader(data, table)
        return canonicalise(frame, table, file_label=file_label, limits=limits)
    view = memoryview(data)
    frames = (load_jsonl(view[start:end], table, first_line=line, cap=cap)
              for start, end, line in line_chunks(data, size))
    return canonicalise_frames(frames, table, file_label=file_label, limits=limits)


def _rename(df: pl.DataFrame, table: str, wanted: dict[str, pl.DataType]) -> tuple[
        pl.DataFrame, list[str], dict[str, str]]:
    """Map raw column names (case/space-insensitive, aliases) to canonical names."""
    lower = {c.strip().lower(): c for c in df.columns if c not in (LINE, RAW)}
    mapping: dict[str, str] = {}
    for canon in wanted:
        for alias in ALIASES.get(table, {}).get(canon, (canon,)):
            if alias in lower and lower[alias] not in mapping:
                mapping[lower[alias]] = canon
                break
    extra = sorted(c for c in df.columns if c not in mapping and c not in (LINE, RAW))
    return df.rename(mapping), extra, {v: k for k, v in mapping.items()}


#: The column (of a checkpoint file's typed frame) that is true for a start marker's row.
MARKER = "__marker"


def marker_columns() -> set[str]:
    """The columns of a checkpoint record that a start marker carries (``checkpoint_starts``);
    the others (``end_time``, ``bytes``, phases) it may lack, and any it has are ignored."""
    return {f.name for f in CHECKPOINT_STARTS.schema} - PROVENANCE_NAMES


def _is_marker(df: pl.DataFrame) -> pl.Expr:
    """True for a raw checkpoint record whose ``status`` is ``started`` (any case, trimmed)."""
    if "status" not in df.columns:
        return pl.lit(False)
    status = pl.col("status").cast(pl.String).str.strip_chars().str.to_lowercase()
    return (status == STARTED).fill_null(False)


def _row_checks(table: str) -> list[tuple[pl.Expr, str | pl.Expr]]:
    """Row-level validity rules: (expression true where bad, reason)."""
    checks: list[tuple[pl.Expr, str | pl.Expr]] = []
    if table == CHECKPOINT_WRITES.name:
        finished = ~pl.col(MARKER)  # the rules on end_time, bytes and phases skip markers
        checks += [
            (finished & (pl.col("end_ts") < pl.col("start_ts")), "end_time before start_time"),
            (finished & (pl.col("bytes") < 0), "negative bytes"),
            (~pl.col("tier").is_in(TIERS), f"tier must be one of {', '.join(TIERS)}"),
            (finished & ~pl.col("status").is_in(STATUSES),
             f"status must be one of {', '.join(STATUS_SPELLINGS)} (any case; or {STARTED} "
             "for a start marker)"),
            (pl.col("step") < 0, "negative step"),
            (pl.col("rank") < 0, "negative rank"),
        ]
        for phase in ("open_s", "write_s", "fsync_s", "close_s"):
            checks.append((finished & (pl.col(phase) < 0), f"negative {phase}"))
    if table == "jobs":
        checks += [
            (pl.col("n_ranks") <= 0, "n_ranks must be positive"),
            (pl.col("checkpoint_timeout_s") <= 0, "checkpoint_timeout_s must be positive"),
        ]
    return checks


def _unreadable_text(i: int, name: str, kind: str, dtype: pl.DataType,
                     flag: pl.Expr) -> pl.Expr:
    """The reason for column ``i``'s unreadable value (null where ``flag`` is false): an
    integral number outside the column's integer type is "out of range", else "is not …"."""
    value = pl.col(f"__o{i}").cast(pl.String).str.slice(0, 80)
    not_kind = pl.format("{}: '{}' is not {}", pl.lit(name), value, pl.lit(kind))
    if dtype not in (pl.Int64, pl.Int32):
        return pl.when(flag).then(not_kind)
    lo, hi = int_bounds(dtype)
    out_of_range = pl.format("{}: '{}' is out of range (an integer from {} to {})",
                             pl.lit(name), value, pl.lit(str(lo)), pl.lit(str(hi)))
    return pl.when(flag & integral_expr(f"__o{i}")).then(out_of_range).when(flag).then(not_kind)


@dataclass
class _FileSeen:
    """What ``canonicalise_frames`` learns of a file one frame at a time: its columns (in the
    order first seen), the extra ones, its records, and whether all of them are start markers."""

    columns: dict[str, None] = field(default_factory=dict)
    extra: set[str] = field(default_factory=set)
    records: int = 0
    only_markers: bool = True


def canonicalise(frame: Frame, table: str, *, file_label: str,
                 source: str = "canonical", limits: IngestSettings = INGEST) -> Parsed:
    """Type, validate and split a loaded frame (a whole file) into canonical rows and rejects.

    For ``checkpoint_writes``, start markers (``status = "started"``) go to
    ``checkpoint_starts`` (see the module docstring); a file of markers only needs no
    ``end_time`` or ``bytes`` column."""
    return canonicalise_frames([frame], table, file_label=file_label, source=source, whole=True,
                               limits=limits)


def canonicalise_frames(frames: Iterable[Frame], table: str, *, file_label: str,
                        source: str = "canonical", whole: bool = False,
                        limits: IngestSettings = INGEST) -> Parsed:
    """``canonicalise`` of one file given as consecutive frames (chunks of its lines, numbered
    as the file's lines: ``read_table``), each typed before the next is loaded, so that a frame
    can be dropped once typed: the same rows, rejects (in the same order) and notes as the file
    in one frame. What spans frames is settled at the end: the duplicate rule (the last record
    of a (job_id, step, rank) in the file wins), a required column the whole file lacks (a
    ``RecordError``: ``whole``, one frame that is the file, raises it before any typing), and
    the note naming the extra columns (``TableTyper``)."""
    typer = TableTyper(table, file_label=file_label, source=source, whole=whole, limits=limits)
    rows: list[tuple[str, pl.DataFrame]] = []
    finished: list[pl.DataFrame] = []  # a checkpoint file's records, before the duplicate rule
    spellers: list[Frame] = []  # what spells a finished record's raw text (``_spell_raw``)
    for frame in frames:
        typed = typer.add(frame)
        if typed is None:
            continue
        if whole or frame.raw is not None:
            spellers.append(frame)
        elif frame.data is not None:  # its lines only: the frame's rows are let go
            spellers.append(Frame(_NO_ROWS, [], data=frame.data, first_line=frame.first_line))
        rows += typed.rows.items()
        if typed.finished is not None:
            finished.append(typed.finished)
    out = typer.finish()
    for name, frame_rows in rows:
        out.add(name, frame_rows)
    if finished:
        good = _latest_per_rank(pl.concat(finished), out, table, spellers)
        out.add(table, finished_rows(good, table))
    return out


@dataclass
class Typed:
    """One frame of a file typed (``TableTyper.add``): its canonical rows per table, and a
    checkpoint file's finished records before the duplicate rule (``LINE``, the columns read;
    ``finished_rows`` makes them rows)."""

    rows: dict[str, pl.DataFrame]
    finished: pl.DataFrame | None = None


class TableTyper:
    """``canonicalise_frames`` a frame at a time, for a reader that writes each frame's rows
    as it goes: ``add`` types a frame (its rejects kept here), ``finish`` settles what spans
    frames but the duplicate rule (the caller's: ``_latest_per_rank`` over every finished
    record): a required column the file lacks, the rejects in order, the notes."""

    def __init__(self, table: str, *, file_label: str, source: str = "canonical",
                 whole: bool = False, limits: IngestSettings = INGEST) -> None:
        self.table = table
        self.file_label = file_label
        self.source = source
        self.whole = whole
        self.limits = limits
        # the loaders' rejects (malformed lines) come first, as in one frame
        self.loaded = Rejects(cap=limits.max_quarantine_rows)
        self.typing = Rejects(cap=limits.max_quarantine_rows)
        self.seen = _FileSeen()

    def add(self, frame: Frame) -> Typed | None:
        """``frame`` typed (None: it holds no valid record); its rejects kept."""
        self.loaded.extend(frame.rejects)
        table = self.table
        good = _type_frame(frame, table, self.seen, self.typing, whole=self.whole,
                           max_field_chars=self.limits.max_field_chars)
        if good is None:
            return None
        if table == CHECKPOINT_WRITES.name:
            # Every marker is kept (a rank that retried has two): stg_checkpoint_starts keeps
            # the earliest start of each (job_id, step, rank).
            starts = good.filter(pl.col(MARKER)).select(
                list(_canonical_dtypes(CHECKPOINT_STARTS.name)))
            return Typed({CHECKPOINT_STARTS.name: starts},
                         good.filter(~pl.col(MARKER)).drop(MARKER))
        if table == FABRIC_COUNTERS.name:
            good = good.with_columns(pl.lit(self.source).alias("source"))
        return Typed({table: good.select(list(_canonical_dtypes(table)))})

    def finish(self) -> Parsed:
        """The file's rejects (the loaders' first, as in one frame) and notes, no rows; a
        ``RecordError`` when it lacks a required column."""
        if not self.whole and self.seen.records:
            _check_required(self.table, self.seen)
        out = Parsed(limits=self.limits)
        out.rejects = Rejects([], cap=self.typing.cap)
        out.rejects.extend(self.loaded)
        out.rejects.extend(self.typing)
        if self.seen.extra:
            out.notes.append(f"{self.file_label}: extra columns ignored: "
                             f"{', '.join(sorted(self.seen.extra))}")
        return out


def finished_rows(good: pl.DataFrame, table: str) -> pl.DataFrame:
    """Finished checkpoint records (``Typed.finished``, after the duplicate rule) as the
    table's canonical rows: their duration computed."""
    good = good.with_columns(
        ((pl.col("end_ts") - pl.col("start_ts")).dt.total_microseconds() / 1e6)
        .alias("duration_s"))
    return good.select(list(_canonical_dtypes(table)))


def last_per_key(good: pl.DataFrame) -> pl.DataFrame:
    """Of records with the same (job_id, step, rank) the last (``LINE``) only: the duplicate
    rule inside one frame, without its rejects (``_latest_per_rank``)."""
    if good.height == good.select(CHECKPOINT_KEY).n_unique():
        return good
    return good.filter(pl.col(LINE) == pl.col(LINE).max().over(CHECKPOINT_KEY))


#: An empty frame (a ``Frame`` kept only to spell its lines).
_NO_ROWS = pl.DataFrame()


def _check_required(table: str, seen: _FileSeen) -> None:
    """A ``RecordError`` when the file (``seen``: its columns, records, markers) lacks a
    required column: a file of start markers only needs only the columns a marker carries."""
    dtypes = _canonical_dtypes(table)
    readable = {k for k in dtypes if k not in DERIVED.get(table, set())}
    required = {c for c in readable if not dtypes_nullable(table, c)}
    checkpoints = table == CHECKPOINT_WRITES.name
    needed = required & marker_columns() if checkpoints and seen.only_markers else required
    missing = sorted(c for c in needed if c not in seen.columns and c != "status")
    if missing:
        names = [ALIASES.get(table, {}).get(c, (c,))[0] for c in missing]
        raise RecordError(
            f"missing required column(s) {', '.join(names)} for {TABLES[table].name} "
            f"(found: {', '.join(seen.columns)}); none of its {seen.records} records were "
            "ingested"
        )


def _type_frame(frame: Frame, table: str, seen: _FileSeen, rejects: Rejects, *,
                whole: bool, max_field_chars: int) -> pl.DataFrame | None:
    """``frame``'s valid records typed (``LINE``, ``RAW``, the canonical columns and
    ``MARKER``; None: it has none), its invalid ones added to ``rejects`` (spelled out for those
    kept only), and what it shows of the file added to ``seen``. ``whole``: the frame is the
    file, whose missing required column is a ``RecordError`` at once."""
    df = frame.df
    if df.height == 0:
        return None
    dtypes = _canonical_dtypes(table)
    readable = {k: v for k, v in dtypes.items() if k not in DERIVED.get(table, set())}
    df, extra, user_names = _rename(df, table, readable)
    seen.extra.update(extra)
    seen.columns.update(dict.fromkeys(c for c in df.columns if c not in (LINE, RAW)))
    seen.records += df.height
    checkpoints = table == CHECKPOINT_WRITES.name
    marker = _is_marker(df) if checkpoints else pl.lit(False)
    #: Columns every row of this table uses (a marker's); the rest only finished records use.
    shared = marker_columns() if checkpoints else set(readable)
    seen.only_markers = seen.only_markers and checkpoints and df.select(marker.all()).item()
    required = {c for c in readable if not dtypes_nullable(table, c)}
    if whole:
        _check_required(table, seen)

    def applies(col: str) -> pl.Expr:
        """Where a rule on ``col`` applies: every row, or (a column a marker lacks) the
        finished records only."""
        return pl.lit(True) if col in shared else ~pl.col(MARKER)

    # Each column is coerced once (value ``__v<i>``, flag ``__b<i>``: present but unreadable):
    # in steps on its own (``read_in_steps``), else by its expression, all of those in one
    # pass; reasons are spelled out only for the rows that are rejected.
    coerced: list[pl.Series | pl.Expr] = []
    values: list[pl.Expr] = []
    # (column index, canonical name, name in the file, what it must be, canonical type)
    reasons: list[tuple[int, str, str, str, pl.DataType]] = []
    for i, (col, dtype) in enumerate(readable.items()):
        if col not in df.columns:
            values.append(pl.lit(None, dtype=dtype).alias(col))
            continue
        source = df.schema[col]
        val, bad = coerce_series(df[col], dtype) if read_in_steps(source, dtype) \
            else typed_coerce_expr(col, dtype, source)
        coerced += [val.alias(f"__v{i}"), bad.alias(f"__b{i}")]
        values.append(pl.col(f"__v{i}").alias(col))
        kind = (f"a timestamp (ISO-8601 or epoch seconds, years {INGEST.min_year}-"
                f"{INGEST.max_year})") if isinstance(dtype, pl.Datetime) else (
            "an integer" if dtype in (pl.Int64, pl.Int32) else "a finite number")
        reasons.append((i, col, user_names.get(col, col), kind, dtype))
    stage = df.with_columns(coerced).with_columns(marker.alias(MARKER))
    raw = pl.lit(None, dtype=pl.String).alias(RAW) if frame.spells_raw else pl.col(RAW)
    typed = stage.select(pl.col(LINE), raw, *values, pl.col(MARKER),
                         *[pl.col(f"__b{i}") for i, *_ in reasons],
                         *[pl.col(col).alias(f"__o{i}") for i, (col, _) in
                           enumerate(readable.items()) if col in df.columns])
    if checkpoints:
        # the lake holds one spelling per status (lake.schema.STATUS_SPELLINGS); an unknown
        # one stays as written, for the status check below to name
        status = pl.col("status").fill_null("ok").str.strip_chars().str.to_lowercase()
        typed = typed.with_columns(
            status.replace(STATUS_SPELLINGS).alias("status"),
            pl.col("tier").str.to_lowercase())
    flags = {i: pl.col(f"__b{i}").fill_null(False) & applies(col) for i, col, *_ in reasons}
    # computed once, as a column: every "missing" check reads it
    typed = typed.with_columns((pl.any_horizontal(list(flags.values())) if flags
                                else pl.lit(False)).alias("__unreadable"))
    unreadable = pl.col("__unreadable")
    checks: list[tuple[pl.Expr, str | pl.Expr]] = [
        (pl.col(col).is_null() & ~unreadable & applies(col), f"missing {col}")
        for col in sorted(required)]
    checks += [(bad.fill_null(False), reason) for bad, reason in _row_checks(table)]
    # A text column whose longest value has no more bytes than the limit has no value over it
    # (a character is at least a byte): its check is left out (one pass over the lengths,
    # which Arrow keeps, instead of counting every value's characters).
    limit = max_field_chars
    text_columns = [c for c, t in readable.items() if t == pl.String]
    longest = typed.select(pl.col(c).str.len_bytes().max() for c in text_columns).row(0) \
        if text_columns else ()
    checks += field_limit_checks([c for c, n in zip(text_columns, longest, strict=True)
                                  if n is not None and n > limit], limit)
    flagged = pl.any_horizontal([unreadable, *(c for c, _ in checks)])
    typed = typed.with_columns(flagged.alias("__bad"))
    bad_rows = typed.filter(pl.col("__bad"))
    if bad_rows.height:
        texts = [_unreadable_text(i, name, kind, dtype, flags[i])
                 for i, _, name, kind, dtype in reasons]
        texts += [pl.when(c).then(reason if isinstance(reason, pl.Expr) else pl.lit(reason))
                  for c, reason in checks]
        why = pl.concat_str(texts, separator="; ", ignore_nulls=True)
        shown = bad_rows.head(rejects.room)  # the rest only counted: memory stays bounded
        rejects.dropped += bad_rows.height - shown.height
        shown = _spell_raw([frame], shown)
        for line, text, reason, is_marker in shown.select(
                LINE, RAW, why.alias("__reason"), MARKER).iter_rows():
            rejects.append(Reject(reason, line, clip_raw(text or ""),
                                  CHECKPOINT_STARTS.name if is_marker else table))
    return typed.filter(~pl.col("__bad")).select(LINE, RAW, *readable, MARKER)


#: The key of a checkpoint record: one rank's write of one checkpoint.
CHECKPOINT_KEY = ["job_id", "step", "rank"]


def _lines(data: bytes | memoryview) -> list[str]:
    """``data``'s lines, decoded (bad bytes replaced)."""
    return str(data, "utf-8", errors="replace").split("\n")


def _spell_raw(frames: Sequence[Frame], rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (records of ``frames``: one file's, by ``LINE``) with their raw text spelled
    where their frame holds no ``RAW`` column: by ``frame.raw`` (the file in one frame), or,
    a record being a line, from ``frame.data`` (of several frames, one's lines decoded at a
    time)."""
    spellers = [f for f in frames if f.spells_raw]
    if not spellers or not rows.height:
        return rows
    spell = spellers[0].raw
    if spell is not None:
        raw = spellers[0].df.join(rows.select(LINE), on=LINE, how="semi").select(
            LINE, spell.alias(RAW))
        return rows.drop(RAW).join(raw, on=LINE, how="left", maintain_order="left")
    texts = rows[RAW].to_list() if RAW in rows.columns else [None] * rows.height
    numbers = rows[LINE].to_list()
    firsts = [f.first_line for f in spellers]
    wanted: dict[int, list[int]] = {}  # speller -> the rows it spells
    for k, (line, text) in enumerate(zip(numbers, texts, strict=True)):
        if text is None:
            wanted.setdefault(bisect.bisect_right(firsts, line) - 1, []).append(k)
    for s, ks in wanted.items():
        frame = spellers[s]
        lines = frame.lines if len(spellers) == 1 else _lines(frame.data or b"")
        for k in ks:
            texts[k] = lines[numbers[k] - frame.first_line]
    return rows.with_columns(pl.Series(RAW, texts, dtype=pl.String))


def _latest_per_rank(good: pl.DataFrame, out: Parsed, table: str,
                     frames: Sequence[Frame]) -> pl.DataFrame:
    """Duplicate rule inside one file: of records with the same (job_id, step, rank) the last
    in the file is kept; each earlier one is quarantined saying which line replaced it. (Across
    files, ``stg_checkpoint_writes`` keeps the most recently ingested record.)"""
    last = pl.col(LINE).max().over(CHECKPOINT_KEY)
    if good.height == good.select(CHECKPOINT_KEY).n_unique():
        return good
    marked = good.with_columns(last.alias("__last"))
    for line, raw, kept in _spell_raw(frames, marked.filter(
            pl.col(LINE) != pl.col("__last"))).select(LINE, RAW, "__last").iter_rows():
        out.rejects.append(Reject(duplicate_reason(kept), line, clip_raw(raw or ""), table))
    return marked.filter(pl.col(LINE) == pl.col("__last")).drop("__last")


def duplicate_reason(kept: int) -> str:
    """Why a record is rejected that the record at line ``kept`` replaces."""
    return (f"duplicate record: line {kept} has the same job_id, step and rank and is kept "
            "(the last record in a file wins)")


def dtypes_nullable(table: str, col: str) -> bool:
    """Whether the canonical column may be null."""
    return bool(TABLES[table].schema.field(col).nullable)

