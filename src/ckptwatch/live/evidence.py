"""Live evidence of a cause for a checkpoint that is still open: attribution before it ends.

The watcher knows an open checkpoint's ranks (who started, who finished, where they run and
write). :func:`live_evidence` runs the same attribution as ``ckptwatch stalls`` on it, in a
short-lived child process (DuckDB's memory is never the watcher's own):

1. a connection over the lake builds the signal views (:func:`ckptwatch.lake.query.connect`);
2. ``stalls`` is replaced by the open checkpoint as one stall, its window from its first start
   to now, its barrier a lower bound (the age); ``stall_ranks`` by its ranks, the open ones
   slow and unfinished (they are the slowest), the finished ones not;
3. the telemetry tables (``nvme_smart``, ``fabric_counters``, ``pool_metrics``) see the lake's
   rows plus those of the raw telemetry files not yet ingested: the files under ``RAW_DIR``'s
   ``smart/``, ``fabric/`` and ``pool/`` changed since the baseline's start, for the open
   ranks' hosts and targets and a few of the checkpoint's other nodes (the contrast), read by
   the ingest's own parsers within ``max_bytes`` (the staging views drop a sample already
   ingested, so nothing counts twice);
4. :func:`ckptwatch.analysis.findings.attribute_stalls` scores the causes with the rules (and
   the trained model, when there is one), exactly as for a finished stall.

The result is one line for the alert's ``evidence`` annotation: the top cause, its score and
its numbers, or that no cause stands out yet in the telemetry received.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from ckptwatch.analysis.quantiles import quantiles

log = logging.getLogger(__name__)

#: The lake tables of telemetry that raw files add to.
TELEMETRY_TABLES = ("nvme_smart", "fabric_counters", "pool_metrics")
#: Raw directories of telemetry (docs/formats.md).
TELEMETRY_PLACES = ("smart", "fabric", "pool")
#: Nodes of the checkpoint that are not slow, read for the contrast (the rules compare the
#: slow ranks' hosts with the others).
CONTRAST_NODES = 8
#: Days of lake telemetry the baselines come from: the window's day and the day before.
BASELINE_DAYS = 1


@dataclass(frozen=True)
class RankState:
    """One rank of the open checkpoint as the watcher saw it."""

    rank: int
    node: str | None
    target: str | None
    start_s: float | None
    #: None while the rank is open.
    duration_s: float | None


@dataclass(frozen=True)
class EvidenceRequest:
    """What :func:`live_evidence` attributes: one open checkpoint, as of ``now_s``."""

    job_id: str
    tier: str
    step: int
    start_s: float
    now_s: float
    ranks: tuple[RankState, ...]
    #: The job's stall baseline as ``stalls.sql`` defines it (the median barrier time of its
    #: previous 10 checkpoints: :func:`ckptwatch.analysis.quantiles.stall_baseline`), when known.
    baseline_s: float | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        """(job_id, tier, step)."""
        return self.job_id, self.tier, self.step


def target_host(target: str | None) -> str | None:
    """The host a rank writes to: a pool target, or the node of a local ``node:device``
    (as ``stall_ranks`` derives it)."""
    return None if target is None else target.split(":", 1)[0]


def _stall_frame(req: EvidenceRequest) -> pl.DataFrame:
    """The open checkpoint as one row of ``stalls``."""
    age = max(req.now_s - req.start_s, 0.0)
    done = [r.duration_s for r in req.ranks if r.duration_s is not None]
    n_open = sum(r.duration_s is None for r in req.ranks)
    base = req.baseline_s if req.baseline_s and req.baseline_s > 0 else None
    p50, p99 = quantiles(done, (0.5, 0.99))  # checkpoint_latency's p50_s, p99_s
    return pl.DataFrame([{
        "job_id": req.job_id, "step": req.step, "tier": req.tier,
        "start_ts": datetime.fromtimestamp(req.start_s, UTC),
        "end_ts": datetime.fromtimestamp(max(req.now_s, req.start_s), UTC),
        "n_ranks": len(done), "n_started": sum(r.start_s is not None for r in req.ranks),
        "n_unfinished": n_open, "p50_s": p50, "p99_s": p99,
        "barrier_s": max([age, *done]), "barrier_is_lower_bound": n_open > 0,
        # open, judged while it runs: the batch views decide whether it timed out
        "timed_out": False, "timeout_reason": None, "n_timed_out": 0, "baseline_s": base,
        "ratio_to_baseline": max([age, *done]) / base if base else None,
        "excess_s": max([age, *done]) - base if base else None,
        "n_stragglers": n_open, "is_stall": True}],
        schema_overrides={"start_ts": pl.Datetime("us", "UTC"),
                          "end_ts": pl.Datetime("us", "UTC"), "p50_s": pl.Float64,
                          "p99_s": pl.Float64, "baseline_s": pl.Float64,
                          "timeout_reason": pl.String, "n_timed_out": pl.Int64,
                          "ratio_to_baseline": pl.Float64, "excess_s": pl.Float64})


def _ranks_frame(req: EvidenceRequest) -> pl.DataFrame:
    """The open checkpoint's ranks as rows of ``stall_ranks`` (leaf switches joined in SQL)."""
    age = max(req.now_s - req.start_s, 0.0)
    rows = []
    for r in req.ranks:
        open_ = r.duration_s is None
        rows.append({
            "job_id": req.job_id, "step": req.step, "rank": r.rank, "tier": req.tier,
            "node": r.node, "target": r.target, "target_host": target_host(r.target),
            "status": "unfinished" if open_ else "ok", "is_unfinished": open_,
            "duration_s": (req.now_s - r.start_s if r.start_s is not None else age)
            if open_ else r.duration_s,
            "metadata_excess_s": None, "data_excess_s": None, "is_slow": open_,
            "leaf_switch": None})
    return pl.DataFrame(rows, schema={
        "job_id": pl.String, "step": pl.Int64, "rank": pl.Int64, "tier": pl.String,
        "node": pl.String, "target": pl.String, "target_host": pl.String,
        "status": pl.String, "is_unfinished": pl.Boolean, "duration_s": pl.Float64,
        "metadata_excess_s": pl.Float64, "data_excess_s": pl.Float64, "is_slow": pl.Boolean,
        "leaf_switch": pl.String})


def hosts_to_read(req: EvidenceRequest) -> set[str]:
    """The hosts whose raw telemetry is read: every open rank's node and target, and up to
    ``CONTRAST_NODES`` of the checkpoint's other nodes and targets."""
    slow = {h for r in req.ranks if r.duration_s is None
            for h in (r.node, target_host(r.target)) if h}
    others = sorted({h for r in req.ranks if r.duration_s is not None
                     for h in (r.node, target_host(r.target)) if h} - slow)
    return slow | set(others[:CONTRAST_NODES])


_DATED = re.compile(r"^(?P<host>.+?)(?:[-_.]\d{4}-?\d{2}-?\d{2}(?:[T_-]?\d{2,6})?)?$")


def _file_host(rel: Path) -> str | None:
    """The host a raw telemetry file is of, from its place: ``<kind>/<node>/...`` or
    ``<kind>/<node>[-<date>].<ext>`` (``ckptwatch collect``'s names); None: unknown."""
    parts = rel.parts
    if len(parts) >= 3:
        return parts[1]
    stem = rel.name.split(".", 1)[0]
    m = _DATED.match(stem)
    return m.group("host") if m else None


def _recent_raw_files(raw_dir: Path, since_s: float) -> Iterator[tuple[str, Path,
                                                                     os.stat_result]]:
    """(place, path, stat) of every regular raw telemetry file changed since ``since_s``."""
    for place in TELEMETRY_PLACES:
        root = raw_dir / place
        if not root.is_dir():
            continue
        for path in root.rglob("*"):
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                st = path.stat()
            except OSError:
                continue
            if st.st_mtime >= since_s:
                yield place, path, st


def telemetry_exists(lake_root: Path, raw_dir: Path, since_s: float) -> bool:
    """Is there any SMART, fabric or pool telemetry to attribute with: a lake partition of a
    day since ``since_s``, or a raw telemetry file changed since then? (Directory listings
    only: without any, the watcher does not start an attribution.)"""
    from ckptwatch.lake.store import Lake

    since = datetime.fromtimestamp(since_s, UTC).date()
    lake = Lake(lake_root)
    if any(d >= since for t in TELEMETRY_TABLES for d in lake.days(t)):
        return True
    return next(_recent_raw_files(raw_dir, since_s), None) is not None


def raw_telemetry_files(raw_dir: Path, req: EvidenceRequest, since_s: float,
                        max_bytes: int) -> tuple[list[Path], list[str]]:
    """(the raw telemetry files to read, notes): changed since ``since_s``, of the hosts of
    :func:`hosts_to_read` (pool files: all), newest first, within ``max_bytes`` in total."""
    hosts = hosts_to_read(req)
    picked: list[tuple[float, Path, int]] = []
    for place, path, st in _recent_raw_files(raw_dir, since_s):
        if place != "pool":
            host = _file_host(path.relative_to(raw_dir))
            if host is not None and host not in hosts:
                continue
        picked.append((st.st_mtime, path, st.st_size))
    picked.sort(key=lambda x: (-x[0], str(x[1])))
    out: list[Path] = []
    total, notes = 0, []
    for _, path, size in picked:
        if total + size > max_bytes:
            notes.append(f"raw telemetry over {max_bytes >> 20} MiB: the oldest "
                         f"{len(picked) - len(out)} file(s) not read for the live evidence")
            break
        out.append(path)
        total += size
    return out, notes


def _raw_rows(raw_dir: Path, files: list[Path], now: datetime) -> dict[str, pl.DataFrame]:
    """The raw files' telemetry rows per lake table, with the provenance columns an ingest
    would give them (``connect(extra_rows=...)`` adds them to the lake's tables)."""
    from ckptwatch.ingest.discover import classify
    from ckptwatch.ingest.read import parse_file

    frames: dict[str, list[pl.DataFrame]] = {}
    for path in files:
        rel = path.relative_to(raw_dir).as_posix()
        pf = parse_file(classify(path, rel))
        if pf.error:
            continue
        for table, parts in pf.parsed.frames.items():
            if table in TELEMETRY_TABLES:
                frames.setdefault(table, []).extend(
                    p.with_columns(pl.lit(rel).alias("source_file"),
                                   pl.lit(now).cast(pl.Datetime("us", "UTC"))
                                   .alias("ingested_ts")) for p in parts if p.height)
    return {table: pl.concat(parts, how="diagonal_relaxed")
            for table, parts in frames.items() if parts}


def live_evidence(lake_root: str, raw_dir: str | None, req: EvidenceRequest, *,
                  max_bytes: int = 256 << 20) -> str | None:
    """The live evidence line for ``req`` (see the module docstring); None when there is no
    telemetry at all for the checkpoint's hosts. Runs in a child process of the watcher."""
    from ckptwatch.analysis.attribution import UNKNOWN, load_default_model
    from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
    from ckptwatch.lake.query import connect, run_sql

    now = datetime.fromtimestamp(req.now_s, UTC)
    first = datetime.fromtimestamp(req.start_s, UTC) - timedelta(days=BASELINE_DAYS)
    notes: list[str] = []
    raw_rows: dict[str, pl.DataFrame] = {}
    if raw_dir is not None:
        files, notes = raw_telemetry_files(Path(raw_dir), req, first.timestamp(), max_bytes)
        raw_rows = _raw_rows(Path(raw_dir), files, now)
    # The open checkpoint is the one stall, its ranks the stall's ranks: given as frames, so
    # that neither the lake's stalls nor what they read are built (~5 s at 4096 ranks). The
    # raw telemetry not yet ingested joins the lake's tables before any view reads them.
    con = connect(lake_root, days=(first.date(), now.date()),
                  views=(*ATTRIBUTION_VIEWS, "int_node_leaves"),
                  provided={"stalls": _stall_frame(req), "stall_ranks": _ranks_frame(req)},
                  extra_rows=raw_rows)
    try:
        con.execute("""
            create or replace view stall_ranks as
            select ranks.* exclude (leaf_switch), int_node_leaves.leaf_switch
            from provided_stall_ranks as ranks
            left join int_node_leaves on ranks.node = int_node_leaves.node
        """)
        n_signals = run_sql(con, "select count(*) as n from stall_signals")["n"][0]
        if not n_signals:
            return None
        findings = attribute_stalls(con, model=load_default_model())
    finally:
        con.close()
    if not findings.stalls:
        return None
    top = findings.stalls[0].top
    for note in notes:
        log.info("%s", note)
    if top.cause == UNKNOWN:
        return ("no cause stands out yet: no signal of gc, metadata or a fabric pause on the "
                "open ranks' hosts during the checkpoint")
    numbers = "; ".join(top.evidence) if top.evidence else "no numbers"
    return f"{top.cause} (score {top.score:.2f}): {numbers}"
