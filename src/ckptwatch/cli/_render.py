"""Human-readable summaries of an ingest run and of what the lake holds."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ckptwatch.ingest.run import IngestReport
from ckptwatch.lake.query import connect, run_sql

TABLE_ORDER = ("checkpoint_writes", "jobs", "nvme_smart", "fabric_counters", "pool_metrics",
               "topology")


def render_table(df: pl.DataFrame, *, float_precision: int = 2) -> str:
    """A plain text table of a small frame."""
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_rows=200, tbl_cols=30, tbl_width_chars=400,
                   tbl_formatting="ASCII_MARKDOWN", float_precision=float_precision,
                   fmt_str_lengths=160, thousands_separator=","):
        return str(df)


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
        lines.append(f"  see why:  ckptwatch sql --lake {report.lake} \"select source_file, "
                     "line, reason from quarantine order by source_file, line\"")
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
    return "\n".join(lines)


def lake_overview(lake: Path) -> str:
    """Row counts per table and p50/p99 of the checkpoints per job."""
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
        f"lake {lake}: rows per table", render_table(counts), "",
        "checkpoint latency per job (barrier = slowest rank; p50/p99 over the job's "
        "checkpoints)", render_table(jobs),
    ])
