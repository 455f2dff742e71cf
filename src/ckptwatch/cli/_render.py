"""Human-readable summaries of an ingest run and of what the lake holds."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.safetext import (
    CONTROL_PATTERN,
    escape_controls,
    escape_json_controls,
    escape_lines,
    shell_command,
)

if TYPE_CHECKING:
    from ckptwatch.ingest.run import IngestReport

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
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_rows=200, tbl_cols=30, tbl_width_chars=400,
                   tbl_formatting="ASCII_MARKDOWN", fmt_str_lengths=160,
                   thousands_separator=","):
        return str(printable_frame(df, float_precision=float_precision, digits=digits))


def write_data(df: pl.DataFrame, fmt: str) -> None:
    """Write ``df`` to standard output as ``csv`` or ``json``. JSON: control characters as
    ``\\u00XX`` (valid JSON, the same values). CSV carries the values exactly, except on a
    terminal, where their control characters are escaped as in the tables."""
    if fmt == "json":
        sys.stdout.write(escape_json_controls(df.write_json()) + "\n")
        return
    text = df.write_csv()
    sys.stdout.write(escape_lines(text) if sys.stdout.isatty() else text)


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
