"""Human-readable summaries of an ingest run and of what the lake holds."""

from __future__ import annotations

import json
import math
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ckptwatch.errors import QueryError
from ckptwatch.lake.query import connect, relation, relation_frame, run_sql
from ckptwatch.safetext import (
    CONTROL_PATTERN,
    escape_controls,
    escape_json_controls,
    escape_lines,
    shell_command,
)

if TYPE_CHECKING:  # polars is imported where a frame is printed (~0.3 s: not for `sql`)
    import polars as pl
    from duckdb.sqltypes import DuckDBPyType

    from ckptwatch.ingest.run import IngestReport

#: What a table shows: more rows, the first and last half with a ``...`` row between; more
#: columns, the first and last half with a ``...`` column between; cells longer than
#: ``CELL_CHARS`` cut there and ended with ``...``; lines wider than ``TABLE_WIDTH``: the cells
#: wrapped (by polars: :func:`write_result` hands such a table to it).
TABLE_ROWS = 200
TABLE_COLS = 30
TABLE_WIDTH = 400
CELL_CHARS = 160
#: Rows :func:`write_result` fetches at a time.
BATCH_ROWS = 2048

TABLE_ORDER = ("checkpoint_writes", "checkpoint_starts", "checkpoint_loads", "jobs", "nvme_smart",
               "fabric_counters", "pool_metrics", "topology")


def _format_float(value: float | None, digits: int) -> str | None:
    """``value`` with ``digits`` decimals and a thousands separator, as polars prints it, but
    a value that rounds to zero is ``0.0`` (never ``-0.0``)."""
    if value is None:
        return None
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if round(value, digits) == 0:
        value = 0.0
    return f"{value:,.{digits}f}"


def _nested_text(value: object) -> str:
    """A list or struct value as polars shows it (``["a", "b"]``, ``{"k": 1}``), its strings'
    control characters escaped like every other cell's."""
    if isinstance(value, str):
        return '"' + escape_controls(value) + '"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_nested_text(str(k))}: {_nested_text(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_nested_text(v) for v in value) + "]"
    if value is None:
        return "null"
    return escape_controls(value)


def printable_frame(df: pl.DataFrame, *, float_precision: int = 2,
                    digits: Mapping[str, int] | None = None) -> pl.DataFrame:
    """``df`` ready to print: float columns as text with their decimals (``digits`` per
    column, else ``float_precision``), strings, nested values and column names with their
    control characters escaped (:func:`ckptwatch.safetext.escape_controls`)."""
    import polars as pl

    digits = digits or {}
    out = []
    for name, dtype in df.schema.items():
        col = df[name]
        if dtype.is_float():
            places = digits.get(name, float_precision)
            col = pl.Series(name, [_format_float(v, places) for v in col.to_list()],
                            dtype=pl.Utf8)
        elif dtype in (pl.Categorical, pl.Enum) or isinstance(dtype, pl.Categorical | pl.Enum):
            col = col.cast(pl.Utf8)
        elif dtype.is_nested() or dtype == pl.Object:
            col = pl.Series(name, [None if v is None else _nested_text(v)
                                   for v in col.to_list()], dtype=pl.Utf8)
        if col.dtype == pl.Utf8 and col.str.contains(CONTROL_PATTERN).any():
            col = col.map_elements(escape_controls, return_dtype=pl.Utf8)
        out.append(col.alias(escape_controls(name)))
    return pl.DataFrame(out) if out else df


def render_table(df: pl.DataFrame, *, float_precision: int = 2,
                 digits: Mapping[str, int] | None = None) -> str:
    """A plain text table of a small frame, safe to print: floats with ``float_precision``
    decimals (``digits``: per column, e.g. the places a column was rounded to), control
    characters in values and names escaped (:func:`printable_frame`)."""
    with _table_config():
        return str(printable_frame(df, float_precision=float_precision, digits=digits))


def _table_config() -> pl.Config:
    """How polars draws our tables; :func:`write_result` draws them the same without it."""
    import polars as pl

    return pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                     tbl_rows=TABLE_ROWS, tbl_cols=TABLE_COLS, tbl_width_chars=TABLE_WIDTH,
                     tbl_formatting="ASCII_MARKDOWN", fmt_str_lengths=CELL_CHARS,
                     thousands_separator=",")


def write_data(df: pl.DataFrame, fmt: str) -> None:
    """Write ``df`` to standard output as ``csv`` or ``json``. JSON: control characters as
    ``\\u00XX`` (valid JSON, the same values). CSV carries the values exactly, except on a
    terminal, where their control characters are escaped as in the tables."""
    if fmt == "json":
        sys.stdout.write(escape_json_controls(df.write_json()) + "\n")
        return
    text = df.write_csv()
    sys.stdout.write(escape_lines(text) if sys.stdout.isatty() else text)



# --- Query results printed from DuckDB's rows, without polars --------------------------------
#
# ``ckptwatch sql`` prints what render_table / write_data print for the frame run_sql would
# return, but from the rows DuckDB streams (BATCH_ROWS at a time): importing polars is most
# of the time of a small query. Results holding a type drawn here differently from polars, or
# repeated column names (polars renames them), go through polars as before.

_INT_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                        "UINTEGER", "UBIGINT"})
_SCALAR_KINDS = {"BOOLEAN": "bool", "DOUBLE": "float", "FLOAT": "float", "VARCHAR": "str",
                 "DATE": "date", "TIMESTAMP": "ts", "TIMESTAMP WITH TIME ZONE": "tstz",
                 **dict.fromkeys(_INT_TYPES, "int")}
#: Session time zones whose TIMESTAMPTZ values polars shows as ``… UTC``.
_UTC_ZONES = frozenset({"UTC", "Etc/UTC"})


def _kind(dtype: DuckDBPyType, fmt: str, utc: bool) -> str | None:
    """How a column of ``dtype`` is written in ``fmt``; ``None``: not here (through polars).
    FLOAT's shortest text is the 32-bit value's in polars' CSV and JSON; polars writes no
    nested value to CSV; TIMESTAMPTZ only in UTC (polars names other zones its own way)."""
    if dtype.id == "null":
        return "null"
    if dtype.id == "list":
        child = _kind(dtype.child, fmt, utc)
        return "list" if fmt != "csv" and child is not None else None
    kind = _SCALAR_KINDS.get(str(dtype))
    if kind == "tstz" and not utc:
        return None
    if str(dtype) == "FLOAT" and fmt != "table":
        return None
    return kind


def _kinds(con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation,
           fmt: str) -> list[str] | None:
    """Each column's kind (:func:`_kind`), or ``None`` when the result goes through polars."""
    if len(set(rel.columns)) < len(rel.columns):
        return None
    types = rel.types
    utc = True
    if any(str(t).endswith("WITH TIME ZONE") for t in types):
        zone = con.execute("select current_setting('TimeZone')").fetchone()
        utc = zone is not None and zone[0] in _UTC_ZONES
    kinds = [_kind(t, fmt, utc) for t in types]
    return None if None in kinds else [k for k in kinds if k is not None]


def _clock(value: datetime) -> str:
    """Date and time of ``value`` as polars writes them (``2026-03-02 01:02:03``)."""
    return (f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}")


def _fraction(value: datetime) -> str:
    """Its fraction of a second as polars shows it: none, milliseconds or microseconds."""
    us = value.microsecond
    if not us:
        return ""
    return f".{us // 1000:03d}" if us % 1000 == 0 else f".{us:06d}"


def polars_float_text(value: float) -> str:
    """``value`` as polars writes it to CSV and JSON: the shortest text that reads back as
    ``value`` (Python's), but ``1e-5`` to ``1e-4`` in positional form and exponents unpadded
    (``1e-7``, ``1e+16``), ``NaN``, ``inf``, ``-inf``."""
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, _, exp = text.partition("e")
    power = int(exp)
    if power == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


def _table_cell(value: object, kind: str, places: int) -> str:
    """A value as :func:`render_table` shows it, a long text cut to ``CELL_CHARS + 1``
    characters (enough to tell that it is cut, and how)."""
    if value is None:
        return "null"
    if kind == "str":
        text = str(value)[:CELL_CHARS + 1]
        return escape_controls(text)[:CELL_CHARS + 1]
    if kind == "int":
        return f"{value:,}"
    if kind == "float":
        return _format_float(value, places) or "null"  # type: ignore[arg-type]
    if kind == "bool":
        return "true" if value else "false"
    if kind == "ts" or kind == "tstz":
        stamp = _clock(value) + _fraction(value)  # type: ignore[arg-type]
        return stamp + " UTC" if kind == "tstz" else stamp
    if kind == "list":
        return _nested_text(value)[:CELL_CHARS + 1]
    return str(value)  # a date


def _csv_field(value: object, kind: str) -> str:
    """A value as polars' ``write_csv`` writes it."""
    if value is None or kind == "null":
        return ""
    if kind == "str":
        return _csv_quoted(str(value))
    if kind == "float":
        return polars_float_text(value)  # type: ignore[arg-type]
    if kind == "bool":
        return "true" if value else "false"
    if kind == "ts" or kind == "tstz":
        clock = _clock(value).replace(" ", "T")  # type: ignore[arg-type]
        stamp = f"{clock}.{value.microsecond:06d}"  # type: ignore[attr-defined]
        return stamp + "+0000" if kind == "tstz" else stamp
    return str(value)  # an integer, a date


def _csv_quoted(text: str) -> str:
    """A CSV field quoted as polars quotes it: when empty or holding ``,``, ``"`` or a line end."""
    if text == "" or any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _json_value(value: object, kind: str, child: list[str]) -> str:
    """A value as polars' ``write_json`` writes it (``child``: the kinds inside a list)."""
    if value is None:
        return "null"
    if kind == "str":
        return json.dumps(value, ensure_ascii=False)
    if kind == "float":
        return "null" if not math.isfinite(value) else polars_float_text(value)  # type: ignore[arg-type]
    if kind == "bool":
        return "true" if value else "false"
    if kind == "ts":
        return f'"{_clock(value)}{_fraction(value)}"'  # type: ignore[arg-type]
    if kind == "tstz":
        return f'"{_clock(value).replace(" ", "T")}{_fraction(value)}+00:00"'  # type: ignore[arg-type]
    if kind == "date":
        return f'"{value}"'
    if kind == "list":
        return "[" + ",".join(_json_value(v, child[0], child[1:]) for v in value) + "]"  # type: ignore[attr-defined]
    return str(value)  # an integer


def _list_kinds(dtype: DuckDBPyType) -> list[str]:
    """The kinds inside a list type, outermost first (``INTEGER[][]``: list, int)."""
    kinds = []
    while dtype.id == "list":
        dtype = dtype.child
        kinds.append("list" if dtype.id == "list" else _kind(dtype, "json", True) or "str")
    return kinds


def _draw_table(names: list[str], rows: list[list[str]]) -> str | None:
    """``rows`` (every row shown, a ``...`` row among them) under ``names``, as polars draws
    them; ``None`` when polars must (a line over ``TABLE_WIDTH``, or text beyond ASCII, whose
    display width polars measures)."""
    if not names:
        return "||"
    if len(names) > TABLE_COLS:
        half = TABLE_COLS // 2
        names = [*names[:half], "...", *names[-half:]]
        rows = [[*r[:half], "...", *r[-half:]] for r in rows]
    cut = [[_cut(c) for c in row] for row in [names, *rows]]
    widths = [max(len(row[i]) for row in cut) for i in range(len(names))]
    if 1 + sum(w + 3 for w in widths) > TABLE_WIDTH or not all(
            c.isascii() for row in cut for c in row):
        return None
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
             for row in cut]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cut(text: str) -> str:
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "..."


def _polars_table(names: list[str], head: list[list[str]], tail: list[list[str]],
                  n_rows: int) -> str:
    """The same table drawn by polars from its text cells (what :func:`_draw_table` leaves to
    it). Of more than ``TABLE_ROWS`` rows polars is given the first and last half and one row
    between, which it shows as ``...``."""
    import polars as pl

    rows = head + ([head[-1]] if n_rows > TABLE_ROWS else []) + tail
    frame = pl.DataFrame([pl.Series(name, [r[i] for r in rows], dtype=pl.Utf8)
                          for i, name in enumerate(names)])
    with _table_config():
        return str(frame)


def _rows(con: duckdb.DuckDBPyConnection,
          rel: duckdb.DuckDBPyRelation) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``rel``, run once and streamed ``BATCH_ROWS`` at a time."""
    try:
        con.execute(rel.sql_query())
        while batch := con.fetchmany(BATCH_ROWS):
            yield batch
    except duckdb.Error as exc:
        raise QueryError(str(exc).splitlines()[0]) from exc


def write_result(con: duckdb.DuckDBPyConnection, sql: str, fmt: str, *,
                 float_precision: int = 2) -> int:
    """Run ``sql`` and write its result to standard output as ``table``
    (:func:`render_table`), ``csv`` or ``json`` (:func:`write_data`), the same text, from
    DuckDB's rows a batch at a time (the table keeps the rows it shows: ``TABLE_ROWS``).
    Returns the number of rows. CSV and JSON are written as the rows arrive: an error in the
    middle of the result leaves the rows before it written."""
    rel = relation(con, sql)
    kinds = _kinds(con, rel, fmt) if rel is not None else []
    if rel is not None and kinds is None:
        df = relation_frame(rel)
        if fmt == "table":
            print(render_table(df, float_precision=float_precision))
        else:
            write_data(df, fmt)
        return df.height
    names = rel.columns if rel is not None else []
    batches = _rows(con, rel) if rel is not None else iter(())
    assert kinds is not None
    if fmt == "table":
        return _write_table(names, kinds, batches, float_precision)
    out = sys.stdout
    n_rows = 0
    if fmt == "csv":
        safe = escape_lines if out.isatty() else str
        out.write(safe(",".join(_csv_quoted(n) for n in names) + "\n"))
        for batch in batches:
            n_rows += len(batch)
            out.write(safe("".join(
                ",".join(_csv_field(v, k) for v, k in zip(row, kinds, strict=True)) + "\n"
                for row in batch)))
        return n_rows
    keys = [json.dumps(n, ensure_ascii=False) + ":" for n in names]
    inner = [_list_kinds(t) for t in (rel.types if rel is not None else [])]
    cols = list(zip(keys, kinds, inner, strict=True))
    out.write("[")
    for batch in batches:
        text = ",".join(
            "{" + ",".join(key + _json_value(v, kind, child)
                           for v, (key, kind, child) in zip(row, cols, strict=True)) + "}"
            for row in batch)
        out.write(("," if n_rows else "") + escape_json_controls(text))
        n_rows += len(batch)
    out.write("]\n")
    return n_rows


def _write_table(names: list[str], kinds: list[str],
                 batches: Iterator[list[tuple[Any, ...]]], float_precision: int) -> int:
    """The table of :func:`write_result`: the first and last ``TABLE_ROWS // 2`` rows kept."""
    half = TABLE_ROWS // 2
    head: list[list[str]] = []
    tail: deque[list[str]] = deque(maxlen=half)
    n_rows = 0
    for batch in batches:
        for row in batch:
            cells = [_table_cell(v, k, float_precision) for v, k in zip(row, kinds, strict=True)]
            if len(head) < half:
                head.append(cells)
            else:
                tail.append(cells)
            n_rows += 1
    shown = head + list(tail) if n_rows <= TABLE_ROWS else [*head, ["..."] * len(names), *tail]
    header = [escape_controls(n) for n in names]
    table = _draw_table(header, shown)
    if table is None:
        table = _polars_table(header, head, list(tail), n_rows)
    print(table)
    return n_rows

def render_ingest(report: IngestReport, *, max_notes: int = 10) -> str:
    """What the run read, wrote and rejected, and where to look."""
    lines = [
        f"ingest {report.raw_dir} -> {report.lake}  ({report.elapsed_s:.1f} s)",
        f"  files: {len(report.files)} seen, {report.count('ingested')} ingested, "
        f"{report.count('skipped')} already in the lake, {report.count('ignored')} ignored, "
        f"{report.count('failed')} failed",
    ]
    if report.recovered:
        lines.append(f"  rolled back {report.recovered} file(s) left half-written by a "
                     "killed run; they were re-ingested")
    rows = report.rows
    lines.append("  rows written: " + (", ".join(
        f"{t} {rows[t]:,}" for t in TABLE_ORDER if t in rows) or "none (nothing new)"))
    q = report.quarantined
    if q:
        worst = sorted((f for f in report.files if f.quarantined), key=lambda f: -f.quarantined)
        lines.append(f"  quarantined: {q:,} record(s) from {len(worst)} file(s) -> "
                     f"{Path(report.lake) / 'quarantine'}")
        for f in worst[:max_notes]:
            lines.append(f"    {f.rel}: {f.quarantined}")
        lines.append("  see why:  " + shell_command([
            "ckptwatch", "sql", "--lake", report.lake, "select source_file, line, reason "
            "from quarantine order by source_file, line"]))
    else:
        lines.append("  quarantined: 0")
    failed = [f for f in report.files if f.status == "failed"]
    for f in failed[:max_notes]:
        lines.append(f"  FAILED {f.rel}: {f.error}")
    notes = [n for f in report.files for n in f.notes if f.status != "ignored"]
    for n in notes[:max_notes]:
        lines.append(f"  note: {n}")
    if len(notes) > max_notes:
        lines.append(f"  … {len(notes) - max_notes} more notes")
    from ckptwatch.ingest.run import unused_metrics_lines

    lines += [f"  unused metric names: {line}" for line in unused_metrics_lines(
        report.unused_metrics)]
    return "\n".join(escape_controls(line) for line in lines)  # file names come from disk


def lake_overview(lake: Path) -> str:
    """Row counts per table and p50/p99 of the checkpoints per job (seconds, to the 0.1 s
    they are rounded to)."""
    con = connect(lake)
    counts = run_sql(con, 'select table_name as "table", n_rows as rows from int_lake_table_rows')
    jobs = run_sql(con, """
        select job_id, tier, n_checkpoints,
               round(rank_p50_s, 1) as rank_p50_s,
               round(barrier_p50_s, 1) as barrier_p50_s,
               round(barrier_p99_s, 1) as barrier_p99_s,
               round(barrier_max_s, 1) as barrier_max_s,
               timeout_s,
        from job_latency order by job_id
    """)
    con.close()
    return "\n".join([
        escape_controls(f"lake {lake}: rows per table"), render_table(counts), "",
        "checkpoint latency per job (barrier = slowest rank; p50/p99 over the job's "
        "checkpoints)", render_table(jobs, float_precision=1),
    ])
