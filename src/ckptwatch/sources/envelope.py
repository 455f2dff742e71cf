"""The JSON Lines envelope (docs/formats.md, "How tool output reaches ckptwatch"), and bare
tool-output files.

An envelope line is ``{"node", "device", "port", "collected_at", "source", "output"}``; ``output``
is the tool's raw JSON object or raw text. ``source`` picks the parser; when it is missing the
format is recognised from the content. A file that is a tool's raw output on its own (e.g.
``smart/<node>/nvme0.json``) takes its node from the directory and its time from the file name
(or the tool's own clock, or the file's mtime).
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import PROVENANCE, TABLES
from ckptwatch.settings import INGEST, IngestSettings
from ckptwatch.sources import load_all
from ckptwatch.sources.base import (
    BULK_PARSERS,
    INPUT_ERRORS,
    JSON_BULK_PARSERS,
    LONG_DIGITS,
    PLAIN_TEXT,
    TOOL_FORMATS,
    Parsed,
    Reject,
    ToolContext,
    clip_raw,
    detect_tool,
    detect_tools,
    load_json,
    plain_json_strings,
    read_json_line,
    safe_text,
)

PROVENANCE_NAMES = {f.name for f in PROVENANCE}
#: A key a ``ToolParser``'s result may hold beside its tables: the records of one output that
#: cannot be read while the rest of it can (a malformed line of ``mmdiag --waiters``), each
#: ``{"reason", "raw"}``. Each is quarantined with its reason (and the envelope's line); the
#: output's rows are kept.
LINE_REJECTS = "__rejects"
#: The envelope's own keys (docs/formats.md, "How tool output reaches ckptwatch"); any other
#: key is reported in a note.
ENVELOPE_KEYS = {"node", "device", "port", "collected_at", "source", "output"}


def parse_time(value: Any) -> datetime:
    """An envelope's ``collected_at``: ISO-8601 (offset or Z; naive is UTC) or epoch seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            raise ValueError(f"implausible timestamp {_short_repr(value)}") from None
        ts = _from_epoch(seconds, value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:  # fromisoformat's ValueError says what is wrong: let it through
            ts = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            try:
                ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
            except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC time
                raise ValueError(f"implausible timestamp {_short_repr(value)}") from None
        else:
            ts = _from_epoch(seconds, value)
    else:
        raise ValueError(f"not a timestamp: {_short_repr(value)}")
    if not INGEST.min_year <= ts.year <= INGEST.max_year:
        raise ValueError(f"implausible timestamp {_short_repr(value)}")
    return ts


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _from_epoch(seconds: float, value: Any) -> datetime:
    """Epoch seconds -> UTC; NaN, infinities and values beyond the calendar are ValueError."""
    if not math.isfinite(seconds):
        raise ValueError(f"not a timestamp: {_short_repr(value)}")
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"implausible timestamp {_short_repr(value)}") from None


_LOADED = False


def _load_formats() -> None:
    """``load_all`` once per process (it walks the package on every call: a hot-path cost)."""
    global _LOADED
    if not _LOADED:
        load_all()
        _LOADED = True


@functools.cache
def _row_schema(table: str) -> dict[str, pl.DataType]:
    empty = pl.from_arrow(TABLES[table].schema.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return {k: v for k, v in empty.schema.items() if k not in PROVENANCE_NAMES}


def _typed_frame(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Row dicts as a frame of ``schema`` (plus ``__line``). Columns are built without a
    Python call per cell; only when Arrow refuses a column's text (lone surrogates) is that
    frame rebuilt with every string made storable (``safe_text``), which leaves valid text as
    it is: the rows are the same either way."""
    lines = pl.Series("__line", list(map(operator.methodcaller("get", "__line"), rows)),
                      dtype=pl.Int64)
    try:  # map + methodcaller: no Python frame per cell
        columns: dict[str, Any] = {
            k: list(map(operator.methodcaller("get", k), rows)) for k in schema}
        for k, dtype in schema.items():
            if isinstance(dtype, pl.Datetime):
                columns[k] = _datetimes(k, columns[k], dtype)
        df = pl.DataFrame(columns, schema=schema, strict=False)
    except INPUT_ERRORS:  # UnicodeEncodeError (a ValueError) above all
        columns = {k: [_storable(r.get(k)) for r in rows] for k in schema}
        df = pl.DataFrame(columns, schema=schema, strict=False)
    return df.with_columns(lines)


def _datetimes(name: str, values: list[Any], dtype: pl.DataType) -> list[Any] | pl.Series:
    """A column of datetimes as a Series, each distinct value converted once (all rows of an
    envelope share its time; converting an aware datetime is the slow part of a frame). The
    values are those a conversion of the whole list gives; other lists are returned as they
    are."""
    if not all(type(v) is datetime for v in values):
        return values
    first: dict[datetime, int] = {}
    index = [first.setdefault(v, len(first)) for v in values]
    if len(first) * 2 > len(values):
        return values
    distinct = pl.Series(name, list(first), dtype=dtype, strict=False)
    return distinct.gather(pl.Series(index, dtype=pl.UInt32))


def _storable(value: Any) -> Any:
    """A string with lone surrogates escaped (Arrow stores UTF-8 only); other values as they are."""
    return safe_text(value) if isinstance(value, str) else value


def rows_to_frames(result: dict[str, list[dict[str, Any]]], out: Parsed) -> None:
    """Type parser row dicts with the canonical schema (one frame per table) and add them.

    A row whose required column is missing or of the wrong type, whose number is NaN or
    infinite, or whose time lies outside the plausible years (``INGEST``) is rejected (with the
    line recorded under ``__line`` by ``read_envelopes``), never written half-empty or poisoned.
    Text that is not valid UTF-8 (lone surrogates) is kept with the bad code points escaped.
    The parser's unreadable records (``LINE_REJECTS``) are quarantined.
    """
    _add_line_rejects(result.get(LINE_REJECTS, ()), out)
    for table, rows in result.items():
        if rows and table != LINE_REJECTS:
            _add_valid(_typed_frame(rows, _row_schema(table)), table, out)


def _add_line_rejects(bad: Iterable[dict[str, Any]], out: Parsed) -> None:
    """Quarantine the records a parser could not read (``LINE_REJECTS``)."""
    for record in bad:
        out.rejects.append(Reject(safe_text(str(record["reason"])), record.get("__line"),
                                  clip_raw(str(record.get("raw") or ""))))


def rows_to_frames_together(results: Sequence[dict[str, list[dict[str, Any]]]],
                            outs: Sequence[Parsed]) -> None:
    """``rows_to_frames(results[k], outs[k])`` for every ``k``, each table's rows of all of
    them typed in one frame (a frame per file costs ~5 ms in polars: hundreds of DLIO per-rank
    files of 50 rows each). A file with a row that ``rows_to_frames`` rejects is typed on its
    own, so its rejects and their reasons are exactly those; the others get their rows in
    their order. The row dicts are not changed."""
    valid: dict[str, dict[int, pl.DataFrame]] = {}
    spoilt: set[int] = set()
    limit = outs[0].limits.max_field_chars if outs else INGEST.max_field_chars
    tables = dict.fromkeys(t for result in results for t, rows in result.items() if rows)
    for table in tables:
        rows = [r for result in results for r in result.get(table, [])]
        files = pl.Series("__file", [k for k, result in enumerate(results)
                                     for _ in result.get(table, [])], dtype=pl.Int64)
        valid[table] = _valid_by_file(
            _typed_frame(rows, _row_schema(table)).with_columns(files), table, spoilt, limit)
    for k, (result, out) in enumerate(zip(results, outs, strict=True)):
        if k in spoilt:
            rows_to_frames(result, out)
            continue
        for table, rows in result.items():
            if rows:
                out.add(table, valid[table][k])


def _valid_by_file(df: pl.DataFrame, table: str, spoilt: set[int],
                   limit: int) -> dict[int, pl.DataFrame]:
    """A typed frame of several files' rows (``__file``: the file, ``__line``) split into each
    file's rows, in their order, as ``_add_valid`` adds them (without ``__line``); the files
    with a row ``rows_to_frames`` rejects (``_invalid``) are added to ``spoilt``."""
    df = df.with_columns(_invalid(table, limit).alias("__bad"))
    spoilt.update(df.filter(pl.col("__bad"))["__file"].unique().to_list())
    return {key[0]: part.drop("__line", "__file", "__bad")
            for key, part in df.partition_by("__file", as_dict=True, maintain_order=True).items()}


def _checked(table: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The columns of ``table``'s typed frames that ``rows_to_frames`` checks: required,
    floats, times, texts."""
    schema = _row_schema(table)
    required = [f.name for f in TABLES[table].schema
                if not f.nullable and f.name in schema]
    floats = [c for c, t in schema.items() if t == pl.Float64]
    times = [c for c, t in schema.items() if isinstance(t, pl.Datetime)]
    texts = [c for c, t in schema.items() if t == pl.String]
    return required, floats, times, texts


def _invalid(table: str, limit: int) -> pl.Expr:
    """True for a row of a typed frame of ``table`` that ``rows_to_frames`` rejects: a required
    column null, a number not finite, a time outside the plausible years, a text over the
    field limit (``limit``: ``max_field_chars``)."""
    required, floats, times, texts = _checked(table)
    missing = pl.any_horizontal([pl.col(c).is_null() for c in required])
    non_finite = pl.any_horizontal([~pl.col(c).is_finite() for c in floats]) \
        if floats else pl.lit(False)
    years = pl.any_horizontal([
        (pl.col(c).dt.year() < INGEST.min_year) | (pl.col(c).dt.year() > INGEST.max_year)
        for c in times]) if times else pl.lit(False)
    long = pl.any_horizontal([pl.col(c).str.len_chars().fill_null(0) > limit for c in texts]) \
        if texts else pl.lit(False)
    return missing | non_finite.fill_null(False) | years.fill_null(False) | long


def _add_valid(df: pl.DataFrame, table: str, out: Parsed) -> None:
    """Reject the rows of a typed frame (``_typed_frame``'s columns) that ``rows_to_frames``
    rejects (``_invalid``), with the same reasons, and add the rest. A text value over the
    field limit (``max_field_chars``) rejects its row too."""
    required, floats, times, texts = _checked(table)
    limit = out.limits.max_field_chars
    bad = df.select(_invalid(table, limit)).to_series()
    if not bad.any():
        out.add(table, df.drop("__line"))
        return
    flagged = df.filter(bad)
    shown = flagged.head(out.capped.room)  # the rest only counted: memory stays bounded
    out.capped.dropped += flagged.height - shown.height
    for row in shown.iter_rows(named=True):
        what = str(row.get("metric") or row.get("counter") or "")
        if len(what) > limit:
            what = what[:40] + "…"
        problems = []
        cols = ", ".join(c for c in required if row[c] is None)
        if cols:
            problems.append(f"has no valid {cols}")
        for c in floats:
            v = row[c]
            if v is not None and not math.isfinite(v):
                problems.append(f"{c} is {v} (not a finite number)")
        for c in times:
            v = row[c]
            if v is not None and not INGEST.min_year <= v.year <= INGEST.max_year:
                problems.append(f"{c} {v.isoformat()} is outside the plausible years "
                                f"{INGEST.min_year}-{INGEST.max_year}")
        for c in texts:
            v = row[c]
            if v is not None and len(v) > limit:
                problems.append(f"{c} is {len(v)} characters, over the limit of {limit} "
                                "(CKPTWATCH_MAX_FIELD_CHARS)")
        out.rejects.append(Reject(
            f"{table} row {what!s} {'; '.join(problems)}".replace("  ", " "),
            row["__line"], None, table))
    out.add(table, df.filter(~bad).drop("__line"))


def _accumulate(into: dict[str, list[dict[str, Any]]],
                result: dict[str, list[dict[str, Any]]], line: int | None) -> None:
    for table, rows in result.items():
        for r in rows:  # the parser's own fresh dicts: marked in place, not copied
            r["__line"] = line
        into.setdefault(table, []).extend(rows)


def parse_tool_output(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """Run the registered parser for ``ctx.source`` over one raw output."""
    _load_formats()
    fmt = TOOL_FORMATS.get(ctx.source)
    if fmt is None:
        known = ", ".join(sorted(TOOL_FORMATS)) or "none"
        raise RecordError(f"no parser for source '{ctx.source}' (known: {known})")
    try:
        return fmt.parse(output, ctx)
    except RecordError:
        raise
    except RecursionError as exc:
        raise RecordError(f"{ctx.source} output malformed: nested too deeply to read") from exc
    except OverflowError as exc:
        raise RecordError(f"{ctx.source} output malformed: a number is too large to store "
                          f"({exc})") from exc
    except INPUT_ERRORS as exc:
        text = " ".join(str(exc).split())[:200]
        raise RecordError(f"{ctx.source} output malformed: {type(exc).__name__}: "
                          f"{safe_text(text)}") from exc


def read_envelopes(data: bytes, *, file_label: str, default_node: str | None = None,
                   bulk: bool = True, limits: IngestSettings = INGEST) -> Parsed:
    """Parse a JSON Lines envelope file; bad lines are rejected with their line number.

    Keys other than the envelope's own (``ENVELOPE_KEYS``) are not read; they are listed in a
    note on the file, never fatal.

    Envelopes of a text format with a bulk parser (``BULK_PARSERS``: ethtool, perfquery, …)
    and JSON outputs of a format with one (``JSON_BULK_PARSERS``: smartctl, nvme-cli
    smart-log, the OCP log; ``json_bulk``) are parsed together, in polars, after the line
    loop; the rest one by one. Lines are read with orjson where it reads them as ``json`` does
    (``base.read_json_line``). Either way a file gives the same rows, in the same order, and the
    same rejects (``bulk=False`` reads every line with ``json`` and parses every envelope one
    by one: the reference the tests hold the bulk path to). ``read_envelope_files`` reads
    several files at once, each as this reads it.
    """
    return read_envelope_files([EnvelopeFile(data, file_label, default_node)], bulk=bulk,
                               limits=limits)[0]


@dataclass(frozen=True)
class EnvelopeFile:
    """One envelope file to read (``read_envelope_files``): its bytes, the name its notes
    give, and the node a line without one takes (the file's ``<kind>/<node>/`` place)."""

    data: bytes
    label: str
    default_node: str | None = None


def read_envelope_files(files: Sequence[EnvelopeFile], *, bulk: bool = True,
                        limits: IngestSettings = INGEST) -> list[Parsed]:
    """``read_envelopes`` of each of ``files``, the envelopes of all of them set aside for the
    bulk parsers together: one call per source and chunk of ``_BULK_CHUNK`` envelopes, not one
    per file and source (a bulk call has a fixed cost of some 40 polars operations). Each
    row keeps its file and line (``_Bulk`` numbers the lines of the files one after another),
    so every file gets exactly the rows, rejects and notes it gets read on its own; a file
    with more rejects than the quarantine keeps (which ones are kept depends on when its
    envelopes were parsed) is read again on its own."""
    _load_formats()
    aside = _Bulk()
    opened = [_open(f, aside, bulk, limits) for f in files]
    taken = aside.take_lines([f.default_node for f in files]) if bulk and files else None
    scans = [_scan(scan, f, lines, base, aside, bulk,
                   None if taken is None else taken[base:base + len(lines)])
             for f, (scan, lines, base) in zip(files, opened, strict=True)]
    aside.flush()
    done = _finish_together(scans, aside) if len(scans) > 1 else {}
    parsed = [done[k] if k in done else _finish(scan, aside.frames_of(k))
              for k, scan in enumerate(scans)]
    if len(files) > 1:
        parsed = [read_envelope_files([f], bulk=bulk, limits=limits)[0] if p.capped.dropped else p
                  for f, p in zip(files, parsed, strict=True)]
    return parsed


@dataclass
class _Scan:
    """One file's line loop (``_scan``): its rows parsed one by one (``__line``: the file's
    own line), rejects, the envelope keys not read, and how many envelopes it set aside."""

    label: str
    out: Parsed = field(default_factory=Parsed)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    extra: dict[str, int] = field(default_factory=dict)
    taken: int = 0


def _open(file: EnvelopeFile, aside: _Bulk, bulk: bool, limits: IngestSettings
          ) -> tuple[_Scan, list[str], int]:
    """``file``'s scan and lines, and the number before its first line in ``aside``
    (``_Bulk.add_file``, which keeps them and the lines as a Series; 0 without ``bulk``)."""
    scan = _Scan(file.label, Parsed(limits=limits))
    lines = file.data.decode("utf-8", errors="replace").split("\n")
    if not bulk:
        return scan, lines, 0
    return scan, lines, aside.add_file(scan, lines, pl.Series(lines, dtype=pl.String))


def _scan(scan: _Scan, file: EnvelopeFile, lines: list[str], base: int, aside: _Bulk,
          bulk: bool, taken: np.ndarray | None = None) -> _Scan:
    """Read ``file``'s lines (``_open``): each envelope checked, then set aside in ``aside``
    for a bulk parser (parsed when ``_BULK_CHUNK`` are held, or at the end) or parsed one by
    one. ``taken``: per line, whether ``_Bulk.take_lines`` set it aside already (those lines
    are not read again here: they are what this loop sets aside)."""
    out, rows, extra, default_node = scan.out, scan.rows, scan.extra, file.default_node
    texts = aside.file_texts(base, len(lines)) if bulk else None
    # lines with a \u escape (never set aside for a bulk parser: ``_Bulk.take``)
    escaped = texts.str.contains("\\u", literal=True).to_list() if texts is not None else []
    long_lines: list[bool] = []  # lines with a run of 19 digits: found when first asked

    def long_digits(k: int) -> bool:
        if not long_lines:
            assert texts is not None
            long_lines.extend(texts.str.contains(LONG_DIGITS))
        return long_lines[k]

    if taken is not None and taken.any():
        scan.taken += int(taken.sum())
        numbered: Iterable[tuple[int, str]] = (
            (i, lines[i - 1]) for i in (np.flatnonzero(~taken) + 1).tolist())
    else:
        numbered = enumerate(lines, start=1)
    for i, line in numbered:
        if not line or line.isspace():  # blank (``not line.strip()``, without a copy)
            continue
        try:
            env = read_json_line(line, functools.partial(long_digits, i - 1)) if bulk \
                else load_json(line, one_line=True)
            if not isinstance(env, dict):
                raise RecordError(f"expected a JSON object, got {type(env).__name__}")
            if not ENVELOPE_KEYS.issuperset(env):  # keys not read: noted, in line order
                for key in env:
                    if key not in ENVELOPE_KEYS:
                        extra.setdefault(safe_text(str(key))[:80], i)
            if "output" not in env:
                raise RecordError("envelope has no 'output'")
            node = env.get("node") or default_node
            if not isinstance(node, str) or not node.strip():
                raise RecordError(
                    "envelope has no 'node' (and the file is not under <kind>/<node>/)")
            if "collected_at" not in env:
                raise RecordError("envelope has no 'collected_at'")
            source, asked = env.get("source"), False
            if not source and bulk and not escaped[i - 1]:  # recognised first: a bulk parser
                source, asked = detect_tool(env["output"]), True  # of its format may read it
            if bulk and not escaped[i - 1] and aside.take(base + i, env, node, source):
                scan.taken += 1
                if aside.held >= _BULK_CHUNK:  # parsed now: the objects held stay few
                    aside.flush()
                continue
            try:
                ts = parse_time(env["collected_at"])
            except ValueError as exc:
                raise RecordError(f"collected_at: {exc}") from exc
            output = env["output"]
            if not source and not asked:
                source = detect_tool(output)
            if not source:
                raise RecordError("envelope names no 'source' and the output matches no known "
                                  "format")
            dev, port = env.get("device"), env.get("port")
            ctx = ToolContext(node=safe_text(node.strip()), ts=ts, source=str(source),
                              device=_name(dev), port=_name(port))
            _accumulate(rows, parse_tool_output(output, ctx), i)
        except RecordError as exc:
            out.rejects.append(Reject(safe_text(exc.reason), i, clip_raw(line)))
    return scan


def _finish(scan: _Scan, bulk_frames: dict[str, list[pl.DataFrame]]) -> Parsed:
    """One file's rows as typed frames (its bulk parsers' frames, ``__line`` its own line, and
    its rows parsed one by one, in line order), its rejects in line order and its note."""
    out, rows = scan.out, scan.rows
    line_rejects = rows.pop(LINE_REJECTS, [])
    if scan.taken:
        out.rejects.sort(key=lambda r: r.line or 0)  # stable: one reject a line, in line order
        # the records of outputs parsed one by one after the line loop (declined by a bulk
        # parser) in line order too, after the others: as reading every line in turn has them
        line_rejects = sorted(line_rejects, key=lambda r: r.get("__line") or 0)
    _add_line_rejects(line_rejects, out)
    if scan.taken:
        first = {t: min(row["__line"] for row in r) for t, r in rows.items() if r}
        for t, frames in bulk_frames.items():
            for low in (f["__line"].min() for f in frames if f.height):
                if isinstance(low, int):
                    first[t] = min(first.get(t, low), low)
        for table in sorted(first, key=first.__getitem__):  # as rows_to_frames orders them
            schema = _row_schema(table)
            parts = [f for f in bulk_frames.get(table, []) if f.height]
            if rows.get(table):
                slow = _typed_frame(rows[table], schema)
                parts.append(slow.with_columns(
                    pl.int_range(pl.len(), dtype=pl.Int64).over("__line").alias("__idx")))
            if parts:  # in line order (the rows of declined envelopes were parsed last)
                _add_valid(_in_line_order(pl.concat(parts)).drop("__idx"), table, out)
    else:
        rows_to_frames(rows, out)
    _note_extra(scan)
    return out


def _finish_together(scans: Sequence[_Scan], aside: _Bulk) -> dict[int, Parsed]:
    """``_finish`` of the files whose rows all came from the bulk parsers and are all valid,
    in one pass over each table's frames instead of one per file (each file's share of a
    frame, its checks and its reordering cost ~3 ms a file: a third of the time of 75 small
    smartctl files). File ``k``: ``scans[k]``, its lines numbered after ``aside.bases[k]``.
    The others (a row parsed one by one, an invalid row, frames out of line order) are left
    to ``_finish``; so are all when a table's frames are not in line order."""
    fast = [k for k, scan in enumerate(scans)
            if scan.taken and not any(scan.rows.values())]
    if len(fast) < 2:
        return {}
    bases = pl.Series("bases", aside.bases, dtype=pl.Int64)
    shares: dict[str, dict[int, pl.DataFrame]] = {}
    firsts: dict[int, dict[str, int]] = {}
    spoilt: set[int] = set()
    for table, frames in aside.frames.items():
        frames = [f for f in frames if f.height]
        if not frames:
            continue
        big = pl.concat(frames)
        if not _is_in_line_order(big):
            return {}
        big = big.with_columns(
            (bases.search_sorted(big["__line"], side="left") - 1).alias("__file"))
        per_file = big.group_by("__file").agg(pl.col("__line").min().alias("__first"))
        for k, first in per_file.iter_rows():
            firsts.setdefault(k, {})[table] = first - aside.bases[k]
        shares[table] = _valid_by_file(big.drop("__idx"), table, spoilt,
                                       scans[0].out.limits.max_field_chars)
    done: dict[int, Parsed] = {}
    for k in fast:
        if k in spoilt:
            continue
        scan = scans[k]
        out = scan.out
        out.rejects.sort(key=lambda r: r.line or 0)  # stable: one reject a line, in line order
        first = firsts.get(k, {})
        for table in sorted(first, key=first.__getitem__):  # as rows_to_frames orders them
            out.add(table, shares[table][k])
        _note_extra(scan)
        done[k] = out
    return done


def _note_extra(scan: _Scan) -> None:
    """The note of the envelope keys ``scan``'s file has that are not read."""
    extra = scan.extra
    if extra:
        shown = ", ".join(f"{k!r} (first on line {n})" for k, n in list(extra.items())[:10])
        more = f" and {len(extra) - 10} more" if len(extra) > 10 else ""
        scan.out.notes.append(f"{scan.label}: envelope keys not read: {shown}{more}")


def _in_line_order(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` sorted by (``__line``, ``__idx``); one pass, no sort, when it already is (the
    usual case: one bulk parser's rows, chunk after chunk)."""
    return df if _is_in_line_order(df) else df.sort("__line", "__idx")


def _is_in_line_order(df: pl.DataFrame) -> bool:
    """Whether ``df`` is sorted by (``__line``, ``__idx``), without nulls: the pairs are
    distinct, so a frame strictly increasing in them is the sorted frame."""
    line, idx = pl.col("__line"), pl.col("__idx")
    step = line.diff()
    return bool(df.select(((step > 0) | ((step == 0) & (idx.diff() > 0))).fill_null(True).all()
                          & (line.null_count() + idx.null_count() == 0)).item())


#: Envelopes set aside at most before they are parsed (a JSON object held costs several times
#: its text: memory stays bounded on a large file); lines ``_Bulk.take_lines`` decodes at once.
_BULK_CHUNK = 8192

#: The columns of the envelopes set aside (``_Bulk.parse``; output null: a JSON object).
_TAKEN = {"__line": pl.Int64, "node": pl.String, "at": pl.String, "source": pl.String,
          "device": pl.String, "port": pl.String, "output": pl.String}
#: An envelope line ``_Bulk.take_lines`` reads in bulk: a JSON object whose keys are envelope
#: keys (``ENVELOPE_KEYS``) and whose values are strings without a control character or a
#: ``\u`` escape (JSON's blanks around them). ``json`` reads such a line as polars'
#: ``json_decode`` does; a key given twice is found by counting ``_KEY_AT``, which matches
#: only a key (in a string a ``"`` is escaped: it never follows ``{``, ``,`` or a blank).
_WS = r"[ \t\r]*"
_STR = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"'
_KEY = '"(?:' + "|".join(sorted(ENVELOPE_KEYS)) + ')"'
_SIMPLE_LINE = (rf"^{_WS}\{{{_WS}{_KEY}{_WS}:{_WS}{_STR}{_WS}"
                rf"(?:,{_WS}{_KEY}{_WS}:{_WS}{_STR}{_WS})*\}}{_WS}$")
_KEY_AT = rf"[{{,]{_WS}{_KEY}{_WS}:"
_ENVELOPE = pl.Struct({k: pl.String for k in sorted(ENVELOPE_KEYS)})
#: A node ``take_lines`` sets aside as it is (``safe_text(node.strip())`` is the node itself):
#: printable ASCII, no blank at either end.
_PLAIN_NODE = r"^[!-~](?:[ -~]*[!-~])?$"

#: ``collected_at`` spellings read in bulk (others go through ``parse_time`` one by one):
#: ``2026-11-28T00:00:07Z`` with optional milli- or microseconds, ``Z`` or ``+00:00``.
_BULK_TIME = (r"^\d{4}-\d{2}-\d{2}T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{3}|\.\d{6})?"
              r"(?:Z|\+00:00)$")


class _Bulk:
    """Envelopes set aside by ``read_envelope_files`` for a bulk parser, and their parse.

    The files' lines are numbered one after another (file ``k``'s line ``i`` is ``bases[k] +
    i``): the frames parsed carry that number in ``__line`` until ``frames_of`` hands each file
    its own, and an envelope declined or rejected here goes to its file's ``_Scan`` under its
    own line."""

    def __init__(self) -> None:
        #: the lines of the files added, one after another, and each file's lines as a
        #: Series (where outputs are plain text: ``_Scan``'s ``texts``)
        self.lines: list[str] = []
        self.texts: list[pl.Series] = []
        #: per file added: the number before its first line, and its scan
        self.bases: list[int] = []
        self.scans: list[_Scan] = []
        #: (line, node, collected_at, source, device, port, output) per envelope set aside;
        #: output None: a JSON object, kept in ``docs``
        self.rows: list[tuple[int, str, str, str, str | None, str | None, str | None]] = []
        self.docs: dict[int, dict[str, Any]] = {}
        #: envelopes set aside in bulk (``take_lines``): frames of ``rows``' columns
        self.pending: list[pl.DataFrame] = []
        self.n_pending = 0
        #: the frames of the envelopes parsed so far (``flush``)
        self.frames: dict[str, list[pl.DataFrame]] = {}

    def add_file(self, scan: _Scan, lines: list[str], texts: pl.Series) -> int:
        """Number ``lines`` after those of the files added before; returns the number before
        the first (the file's line ``i`` is set aside as ``base + i``)."""
        base = len(self.lines)
        self.lines.extend(lines)
        self.texts.append(texts)
        self.bases.append(base)
        self.scans.append(scan)
        return base

    def file_texts(self, base: int, n: int) -> pl.Series:
        """The lines of the file numbered after ``base`` (``n`` of them), as a Series."""
        if len(self.texts) > 1:
            self.texts = [pl.concat(self.texts, rechunk=False)]
        return self.texts[0].slice(base, n)

    @property
    def held(self) -> int:
        """Envelopes set aside, not parsed yet."""
        return len(self.rows) + self.n_pending

    def take_lines(self, defaults: Sequence[str | None]) -> np.ndarray:
        """Set aside, in bulk, the lines of the files added that ``_scan``'s loop would set
        aside as they are (``take``): the envelopes of a text output whose every key is an
        envelope key given once with a string value of plain escapes (``_SIMPLE_LINE``: no
        ``\\u``, so never a lone surrogate), with ``output`` and ``collected_at``, a node (its
        own of printable ASCII without blanks at its ends, or the file's, ``defaults[k]``, when
        it names none), and a ``source`` with a bulk parser (``BULK_PARSERS``), named or
        recognised (``base.detect_tools``: what ``detect_tool`` names). The lines are decoded
        by polars a chunk of ``_BULK_CHUNK`` lines at a time (memory: a chunk's envelopes),
        not one by one in Python; any other line is left to the loop, which reads, checks,
        rejects or parses it as ever. Returns, per line (all files', one after another),
        whether it was set aside."""
        n = len(self.lines)
        taken = np.zeros(n, dtype=bool)
        if not self.texts or not n:
            return taken
        if len(self.texts) > 1:  # the files' lines as one Series (chunks: no copy)
            self.texts = [pl.concat(self.texts, rechunk=False)]
        texts = self.texts[0]
        bases = pl.Series(self.bases, dtype=pl.Int64)
        nodes = pl.Series("__default", [
            safe_text(d.strip()) if isinstance(d, str) and d.strip() else None
            for d in defaults], dtype=pl.String)
        for low in range(0, n, _BULK_CHUNK):
            part = texts.slice(low, _BULK_CHUNK)
            where = part.str.contains(_SIMPLE_LINE).fill_null(False).arg_true()
            if not where.len():
                continue
            lines = part.gather(where)
            try:
                env = lines.str.json_decode(_ENVELOPE).struct.unnest()
            except INPUT_ERRORS:  # (never on lines of _SIMPLE_LINE): the loop reads them
                continue
            line = (where.cast(pl.Int64) + (low + 1)).alias("__line")
            given = sum(env[k].is_not_null().cast(pl.Int32) for k in _ENVELOPE.to_schema())
            env = env.with_columns(
                line, nodes.gather(bases.search_sorted(line, side="left") - 1),
                (lines.str.count_matches(_KEY_AT) == given).alias("__once"),
                pl.select(plain_json_strings(pl.lit(lines))).to_series().alias("__plain"))
            node = pl.col("node")
            named = node.is_not_null() & (node != "")
            env = env.filter(
                pl.col("__once") & pl.col("output").is_not_null()
                & pl.col("collected_at").is_not_null()
                & pl.when(named).then(node.str.contains(_PLAIN_NODE))
                .otherwise(pl.col("__default").is_not_null()))
            unnamed = (pl.col("source").is_null() | (pl.col("source") == "")).alias("__ask")
            env = env.with_columns(unnamed)
            ask = env["__ask"].arg_true()
            if ask.len():
                env = env.with_columns(env["source"].scatter(
                    ask, detect_tools(env["output"].gather(ask), env["__plain"].gather(ask))))
            env = env.filter(pl.col("source").is_in(list(BULK_PARSERS)))
            if not env.height:
                continue
            self.pending.append(env.select(
                "__line", pl.when(named).then(node).otherwise(pl.col("__default")).alias("node"),
                pl.col("collected_at").alias("at"), "source", "device", "port", "output",
                "__plain"))
            self.n_pending += env.height
            taken[env["__line"].to_numpy() - 1] = True
            if self.held >= _BULK_CHUNK:
                self.flush()
        return taken

    def _file(self, line: int) -> tuple[_Scan, int]:
        """The scan of the file a set-aside ``line`` belongs to, and the file's own line."""
        k = bisect.bisect_left(self.bases, line) - 1
        return self.scans[k], line - self.bases[k]

    def flush(self) -> None:
        """Parse the envelopes set aside since the last flush (``parse``) and keep their
        frames."""
        if self.rows or self.pending:
            for table, frames in self.parse().items():
                self.frames.setdefault(table, []).extend(frames)
            self.rows, self.docs, self.pending, self.n_pending = [], {}, [], 0

    def frames_of(self, k: int) -> dict[str, list[pl.DataFrame]]:
        """The frames parsed of file ``k`` (in the order parsed), ``__line`` its own line."""
        if len(self.bases) <= 1:  # one file (or none: ``bulk=False``), numbered as its own
            return self.frames
        low, high = self.bases[k], (self.bases[k + 1] if k + 1 < len(self.bases)
                                    else len(self.lines))
        out: dict[str, list[pl.DataFrame]] = {}
        line = pl.col("__line")
        for table, frames in self.frames.items():
            for f in frames:
                lines = f["__line"]
                first, last = lines.min(), lines.max()
                if not isinstance(first, int) or not isinstance(last, int) \
                        or last <= low or first > high:
                    continue
                part = f if low < first and last <= high else f.filter(
                    (line > low) & (line <= high))
                out.setdefault(table, []).append(part.with_columns(line - low))
        return out

    def take(self, i: int, env: dict[str, Any], node: str, source: Any) -> bool:
        """Set envelope ``env`` (line ``i``, checked up to its ``collected_at``; a line
        without a ``\\u`` escape, which can make a lone surrogate a bulk parse might read
        differently) aside when a bulk parser reads it: text output of a source with one
        (``BULK_PARSERS``), or a JSON object of a source with one (``JSON_BULK_PARSERS``).
        ``source``: the envelope's, or the format its output was recognised as where it names
        none."""
        output, at = env["output"], env["collected_at"]
        if type(source) is not str or type(at) is not str:
            return False
        if type(output) is dict and source in JSON_BULK_PARSERS:
            self.docs[i] = output
            output = None
        elif type(output) is not str or source not in BULK_PARSERS:
            return False
        dev, port = env.get("device"), env.get("port")  # text here is valid UTF-8 (no \\u)
        self.rows.append((i, safe_text(node.strip()), at, source,
                          dev if dev is None or type(dev) is str else _name(dev),
                          port if port is None or type(port) is str else _name(port), output))
        return True

    def _reject(self, line: int, reason: str) -> None:
        """Reject set-aside ``line`` into its file's rejects, under the file's own line."""
        scan, own = self._file(line)
        scan.out.rejects.append(Reject(safe_text(reason), own, clip_raw(self.lines[line - 1])))

    def parse(self) -> dict[str, list[pl.DataFrame]]:
        """Parse the envelopes set aside: typed frames per table (with ``__line`` and
        ``__idx``); an envelope a bulk parser declines is parsed one by one into its file's
        rows, and one whose time or output is bad is rejected into its file's rejects, as the
        line loop would."""
        taken = [pl.DataFrame(list(zip(*self.rows, strict=True)), orient="col",
                              schema=_TAKEN).with_columns(
            pl.lit(None, dtype=pl.Boolean).alias("__plain"))] if self.rows else []
        taken += self.pending  # (their ``__plain`` is known: ``take_lines``)
        # in line order (the envelopes the loop set aside come after those taken in bulk)
        env = taken[0] if len(taken) == 1 else pl.concat(taken).sort("__line")
        if self.texts:  # the text parsers' plain-text test, from the lines
            if len(self.texts) > 1:  # the files' lines as one Series (chunks: no copy)
                self.texts = [pl.concat(self.texts, rechunk=False)]
            text = (env["output"].is_not_null() & env["__plain"].is_null()).arg_true()
            if text.len():
                plain = pl.select(plain_json_strings(pl.lit(
                    self.texts[0].gather(env["__line"].gather(text) - 1)))).to_series()
                env = env.with_columns(env["__plain"].scatter(text, plain))
            env = env.with_columns(pl.col("__plain").fill_null(False))
        else:
            env = env.drop("__plain")
        fast = pl.col("at").str.contains(_BULK_TIME)
        env = env.with_columns(
            pl.when(fast).then(pl.col("at").str.replace(r"(?:Z|\+00:00)$", "")
                               .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", time_unit="us",
                                                strict=False)
                               .dt.replace_time_zone("UTC")).alias("ts"))
        env = env.with_columns(pl.when(pl.col("ts").dt.year().is_between(
            INGEST.min_year, INGEST.max_year)).then(pl.col("ts")).alias("ts"))
        slow_ts = env.filter(pl.col("ts").is_null())
        if slow_ts.height:  # other spellings, and the bad ones: parse_time reads or rejects
            read: list[datetime | None] = []
            for i, at in slow_ts.select("__line", "at").iter_rows():
                try:
                    read.append(parse_time(at))
                except ValueError as exc:
                    read.append(None)
                    self._reject(i, f"collected_at: {exc}")
            env = env.update(slow_ts.select("__line", pl.Series(
                "ts", read, dtype=pl.Datetime("us", "UTC"))), on="__line")
            env = env.filter(pl.col("ts").is_not_null())
        frames: dict[str, list[pl.DataFrame]] = {}
        declined: list[int] = []
        env = env.with_columns(pl.col("output").is_null().alias("__json"))
        for (source, is_json), group in env.partition_by("source", "__json", as_dict=True,
                                                         maintain_order=True).items():
            given = group.select(pl.col("__line").alias("__env"), "output", "device", "port",
                                 "node", *(["__plain"] if "__plain" in group.columns else []))
            if is_json:
                found, no = JSON_BULK_PARSERS[str(source)](
                    given.select("__env", "device", "port", "node"),
                    [self.docs[i] for i in given["__env"]])
            else:
                found, no = BULK_PARSERS[str(source)](given)
            declined += no.to_list()
            ctx_cols = group.select(pl.col("__line").alias("__env"), "ts", "node", "source")
            for table, part in found.items():
                frames.setdefault(table, []).append(_bulk_typed(part, ctx_cols, table))
        if declined:  # parsed one by one, exactly as the line loop parses them
            by_line = {}
            for i, node, ts, source, dev, port, output in env.filter(
                    pl.col("__line").is_in(declined)).select(
                    "__line", "node", "ts", "source", "device", "port", "output").iter_rows():
                by_line[i] = (node, ts, source, dev, port, output)
            for i in sorted(by_line):
                node, ts, source, dev, port, output = by_line[i]
                if output is None:
                    output = self.docs[i]
                ctx = ToolContext(node=node, ts=ts, source=source, device=dev, port=port)
                try:
                    result = parse_tool_output(output, ctx)
                except RecordError as exc:
                    self._reject(i, exc.reason)
                    continue
                scan, own = self._file(i)
                _accumulate(scan.rows, result, own)
        return frames


def _bulk_typed(part: pl.DataFrame, ctx_cols: pl.DataFrame, table: str) -> pl.DataFrame:
    """A bulk parser's rows of ``table`` with the envelope's ``ts``, ``node`` and ``source``
    (``ctx_cols``; a ``ts`` the rows hold, a time their output prints, stands), typed as the
    table's rows, ``__env`` as ``__line``, and ``__idx``."""
    own = [c for c in ctx_cols.columns if c != "__env" and c in part.columns]
    return part.join(ctx_cols.drop(own), on="__env", how="left", maintain_order="left").select(
        *[pl.col(c).cast(t) for c, t in _row_schema(table).items()],
        pl.col("__env").alias("__line"), "__idx")


def _bulk_tool_file(text: str, ctx: ToolContext, out: Parsed) -> bool:
    """``rows_to_frames(parse_tool_output(text, ctx), out)`` by the format's bulk parser
    (``BULK_PARSERS``), the whole file one output: the same rows, in the same order. False,
    and nothing added, when it declines the text (the registered parser then reads it)."""
    env = pl.DataFrame({"__env": [1], "output": [text], "device": [ctx.device],
                        "port": [ctx.port], "node": [ctx.node]},
                       schema={"__env": pl.Int64, "output": pl.String, "device": pl.String,
                               "port": pl.String, "node": pl.String})
    found, declined = BULK_PARSERS[ctx.source](env)
    if declined.len():
        return False
    ctx_cols = pl.DataFrame({"__env": [1], "ts": [ctx.ts], "node": [ctx.node],
                             "source": [ctx.source]},
                            schema={"__env": pl.Int64, "ts": pl.Datetime("us", "UTC"),
                                    "node": pl.String, "source": pl.String})
    for table, part in found.items():
        typed = _bulk_typed(part, ctx_cols, table).sort("__idx")
        _add_valid(typed.with_columns(pl.lit(None, dtype=pl.Int64).alias("__line"))
                   .drop("__idx"), table, out)
    return True


def _name(value: Any) -> str | None:
    """An envelope's device/port as text (numbers are common for ports); None when absent."""
    if value is None:
        return None
    return safe_text(value if isinstance(value, str) else str(value))


_NAME_TS = re.compile(r"(\d{4}-?\d{2}-?\d{2}T\d{2}:?\d{2}:?\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")
_NAME_EPOCH = re.compile(r"(?<!\d)(1\d{9}(?:\.\d+)?)(?!\d)")


def time_from_name(name: str) -> datetime | None:
    """A collection time written into a file name (ISO basic/extended, or epoch seconds)."""
    m = _NAME_TS.search(name)
    if m:
        text = m.group(1)
        if "-" not in text[:8]:
            text = f"{text[0:4]}-{text[4:6]}-{text[6:8]}{text[8:]}"
        date, _, clock = text.partition("T")
        zone = ""
        zm = re.search(r"(Z|[+-]\d{2}:?\d{2})$", clock)
        if zm:
            zone, clock = zm.group(1), clock[: zm.start()]
        if ":" not in clock:
            clock = f"{clock[0:2]}:{clock[2:4]}:{clock[4:]}"
        try:
            return parse_time(f"{date}T{clock}{zone}")
        except ValueError:
            return None
    m = _NAME_EPOCH.search(name)
    if m:
        try:
            return parse_time(float(m.group(1)))
        except ValueError:
            return None
    return None


_TOOL_WORDS = {"smartctl", "smart", "nvme", "perfquery", "ethtool", "sysfs", "prometheus",
               "node", "metrics", "scrape", "ocp", "counters", "stats", "output", "out"}


def device_from_name(name: str) -> str | None:
    """The device a bare tool file names: ``eth0_2026….txt`` -> ``eth0``; tool words -> None."""
    stem = name.split(".", 1)[0]
    token = re.split(r"[_\-@]", stem, maxsplit=1)[0]
    if not token or token.lower() in _TOOL_WORDS or token[0].isdigit():
        return None
    return token


@dataclass(frozen=True)
class ToolFile:
    """One bare tool output to read (``read_tool_files``): ``read_tool_file``'s arguments."""

    data: bytes
    label: str
    node: str
    ts: datetime
    device: str | None = None


def read_tool_files(files: Sequence[ToolFile], *,
                    limits: IngestSettings = INGEST) -> list[Parsed]:
    """``read_tool_file`` of each of ``files``, the text outputs of a format with a bulk parser
    (``BULK_PARSERS``) given to it together: one call per format, not one per file (a bulk
    call has a fixed cost of some 30 polars operations: a day of ``mmpmon`` output is a file
    per node). Each file gets exactly the rows it gets read on its own; a file its bulk parser
    declines, with a row the table's checks reject, or of another format, is read on its
    own."""
    _load_formats()
    parsed: dict[int, Parsed] = {}
    groups: dict[str, list[tuple[int, ToolContext, str]]] = {}
    texts = {k: text for k, f in enumerate(files)
             if not (text := f.data.decode("utf-8", errors="replace")).lstrip().startswith("{")}
    # (JSON: read on its own) recognised together: the formats' needs looked for at once
    outputs = pl.Series("t", list(texts.values()), dtype=pl.String)
    sources = dict(zip(texts, detect_tools(outputs, outputs.str.contains(PLAIN_TEXT))
                       .to_list(), strict=True)) if texts else {}
    for k, f in enumerate(files):
        source = sources.get(k)
        if source is None or source not in BULK_PARSERS:
            continue
        text = texts[k]
        device = f.device if f.device is not None else device_from_name(
            f.label.rsplit("/", 1)[-1])
        groups.setdefault(source, []).append(
            (k, ToolContext(node=f.node, ts=f.ts, source=source, device=device), text))
    for source, group in groups.items():
        ctxs = [ctx for _, ctx, _ in group]
        ids = [k for k, _, _ in group]
        env = pl.DataFrame({"__env": ids, "output": [text for _, _, text in group],
                            "device": [c.device for c in ctxs], "port": [c.port for c in ctxs],
                            "node": [c.node for c in ctxs]},
                           schema={"__env": pl.Int64, "output": pl.String, "device": pl.String,
                                   "port": pl.String, "node": pl.String})
        found, declined = BULK_PARSERS[source](env)
        ctx_cols = pl.DataFrame({"__env": ids, "ts": [c.ts for c in ctxs],
                                 "node": [c.node for c in ctxs], "source": source},
                                schema={"__env": pl.Int64, "ts": pl.Datetime("us", "UTC"),
                                        "node": pl.String, "source": pl.String})
        spoilt = set(declined.to_list())
        valid: dict[str, dict[int, pl.DataFrame]] = {}
        for table, part in found.items():
            typed = (_bulk_typed(part, ctx_cols, table).sort("__line", "__idx")
                     .drop("__idx").rename({"__line": "__file"})
                     .with_columns(pl.lit(None, dtype=pl.Int64).alias("__line")))
            valid[table] = _valid_by_file(typed, table, spoilt, limits.max_field_chars)
        for k in ids:
            if k in spoilt:
                continue
            out = parsed[k] = Parsed(limits=limits)
            for table, by_file in valid.items():
                if k in by_file:
                    out.add(table, by_file[k])
    tried = {k for group in groups.values() for k, _, _ in group}
    return [parsed[k] if k in parsed else read_tool_file(
        f.data, file_label=f.label, node=f.node, ts=f.ts, device=f.device, limits=limits,
        bulk=k not in tried) for k, f in enumerate(files)]


def is_text(name: str) -> bool:
    """Whether ``name`` encodes as UTF-8: a file system name's undecodable bytes are kept as
    surrogates, which a polars frame cannot hold (such a file is read by the plain parser)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_tool_file(data: bytes, *, file_label: str, node: str, ts: datetime,
                   device: str | None = None, limits: IngestSettings = INGEST,
                   bulk: bool = True) -> Parsed:
    """A bare tool output (JSON object or text) for one node; the whole file is one record.
    Text of a format with a bulk parser (``BULK_PARSERS``) is read by it (``bulk``), unless
    it declines the text: the same rows either way."""
    _load_formats()
    out = Parsed(limits=limits)
    text = data.decode("utf-8", errors="replace")
    output: Any = text
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            output = load_json(text)
        except RecordError as exc:
            out.rejects.append(Reject(exc.reason, None, clip_raw(text)))
            return out
    source = detect_tool(output)
    if source is None:
        out.rejects.append(Reject("not a recognised tool output (smartctl, nvme-cli, perfquery, "
                                  "sysfs, ethtool, prometheus)", None, clip_raw(text)))
        return out
    if device is None:
        device = device_from_name(file_label.rsplit("/", 1)[-1])
    ctx = ToolContext(node=node, ts=ts, source=source, device=device)
    if bulk and type(output) is str and source in BULK_PARSERS and is_text(node) \
            and _bulk_tool_file(output, ctx, out):
        return out
    try:
        rows_to_frames(parse_tool_output(output, ctx), out)
    except RecordError as exc:
        out.rejects.append(Reject(exc.reason, None, clip_raw(text)))
    return out
