"""Live evidence of a cause for a checkpoint that is still open: attribution before it ends.

The watcher knows an open checkpoint's ranks (who started, who finished, where they run and
write). :func:`live_evidence` runs the same attribution as ``ckptwatch stalls`` on it, in a
short-lived child process (DuckDB's memory is never the watcher's own):

1. a connection over the lake builds the attribution's views
   (:func:`ckptwatch.lake.query.connect`), with rows added to the lake's tables before any
   view reads them (``extra_rows``, :mod:`ckptwatch.lake.seam`);
2. the open checkpoint's rows (:func:`checkpoint_rows`): a start marker per started rank and a
   record per finished one, ingested now. ``checkpoint_latency``, ``stalls`` and
   ``stall_ranks`` judge it as they judge any checkpoint: its rank p50/p99, its barrier a
   lower bound while ranks are open (its window runs to the data end, now; or to the job's
   timeout once past it), its baseline (the job's healthy level over its previous
   checkpoints in the lake, ``stalls.sql``), whether it is a stall, and its slow ranks (the
   open ones always);
3. the telemetry tables (``nvme_smart``, ``fabric_counters``, ``pool_metrics``) see the lake's
   rows plus those of the raw telemetry files not yet ingested: the files under ``RAW_DIR``'s
   ``smart/``, ``fabric/`` and ``pool/`` changed since the baseline's start, for the open
   ranks' hosts and targets and a few of the checkpoint's other nodes (the contrast), read by
   the ingest's own parsers within ``max_bytes`` (the staging views drop a sample already
   ingested, so nothing counts twice);
4. :func:`ckptwatch.analysis.findings.attribute_stalls` scores the causes with the rules (and
   the trained model, when there is one), exactly as for a finished stall.

The result is one line for the alert's ``evidence`` annotation: the top cause, its score and
its numbers; that no cause stands out yet in the telemetry received; or, while ``stalls`` does
not judge the open checkpoint a stall, how far it is from the job's baseline.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    import duckdb

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
    #: When it finished (epoch s; None: open, or unknown).
    end_s: float | None = None


@dataclass(frozen=True)
class EvidenceRequest:
    """What :func:`live_evidence` attributes: one open checkpoint, as of ``now_s``."""

    job_id: str
    tier: str
    step: int
    start_s: float
    now_s: float
    ranks: tuple[RankState, ...]

    @property
    def key(self) -> tuple[str, str, int]:
        """(job_id, tier, step)."""
        return self.job_id, self.tier, self.step


def target_host(target: str | None) -> str | None:
    """The host a rank writes to: a pool target, or the node of a local ``node:device``
    (as ``stall_ranks`` derives it)."""
    return None if target is None else target.split(":", 1)[0]


#: ``source_file`` of the rows the watcher adds for its open checkpoint.
LIVE_SOURCE = "live:watch"


def checkpoint_rows(req: EvidenceRequest) -> dict[str, pl.DataFrame]:
    """The open checkpoint as lake rows, ingested at ``req.now_s``: a start marker per started
    rank (``checkpoint_starts``) and a record per finished one (``checkpoint_writes``; its
    start from its marker, else its end minus its duration). ``connect(extra_rows=...)`` adds
    them to the lake's tables, so that ``checkpoint_latency``, ``stalls`` and ``stall_ranks``
    judge the open checkpoint exactly as they judge a finished one: its rank quantiles, its
    barrier (a lower bound while ranks are open: the data end is the markers' ingest time,
    now), its baseline and its slow ranks. The staging views keep the newest copy of a rank
    already in the lake."""
    now = datetime.fromtimestamp(req.now_s, UTC)
    starts, writes = [], []
    for r in req.ranks:
        start_s = r.start_s
        if start_s is None and r.duration_s is not None and r.end_s is not None:
            start_s = r.end_s - r.duration_s
        if start_s is None:
            continue  # neither a marker nor a placeable record: nothing to add
        base = {"job_id": req.job_id, "step": req.step, "rank": r.rank, "node": r.node,
                "tier": req.tier, "target": r.target,
                "start_ts": datetime.fromtimestamp(start_s, UTC),
                "source_file": LIVE_SOURCE, "ingested_ts": now}
        if r.start_s is not None:
            starts.append(base)
        if r.duration_s is not None:
            end_s = r.end_s if r.end_s is not None else start_s + r.duration_s
            writes.append({**base, "end_ts": datetime.fromtimestamp(end_s, UTC),
                           "duration_s": r.duration_s, "bytes": None, "status": "ok"})
    common: dict[str, pl.DataType | type[pl.DataType]] = {
        "job_id": pl.String, "step": pl.Int64, "rank": pl.Int32, "node": pl.String,
        "tier": pl.String, "target": pl.String, "start_ts": pl.Datetime("us", "UTC"),
        "source_file": pl.String, "ingested_ts": pl.Datetime("us", "UTC")}
    return {
        "checkpoint_starts": pl.DataFrame(starts, schema=common),
        "checkpoint_writes": pl.DataFrame(writes, schema={
            **common, "end_ts": pl.Datetime("us", "UTC"), "duration_s": pl.Float64,
            "bytes": pl.Int64, "status": pl.String}),
    }


def open_stall_row(con: duckdb.DuckDBPyConnection, req: EvidenceRequest
                   ) -> dict[str, Any] | None:
    """The open checkpoint's row of ``stalls`` on a connection that holds its
    :func:`checkpoint_rows` (None: no rank of it could be placed)."""
    from ckptwatch.lake.query import run_sql

    rows = run_sql(con, "select * from stalls where job_id = $job and step = $step",
                   {"job": req.job_id, "step": req.step}).to_dicts()
    return rows[0] if rows else None


def not_a_stall_yet(stall: dict[str, Any]) -> str:
    """The evidence line of an open checkpoint the ``stalls`` view does not judge a stall
    (yet): how far it is from the job's baseline."""
    ratio = stall["ratio_to_baseline"]
    return (f"not a stall yet: open {stall['barrier_s']:.1f} s, "
            + (f"x{ratio:.1f} the job's baseline {stall['baseline_s']:.1f} s"
               if ratio is not None else f"the job's baseline {stall['baseline_s']:.1f} s")
            + " (stall_factor and stall_min_excess_s of sql/session.sql)")


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
    from ckptwatch.analysis.attribution import NO_TELEMETRY, UNKNOWN, load_default_model
    from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
    from ckptwatch.lake.query import connect

    now = datetime.fromtimestamp(req.now_s, UTC)
    first = datetime.fromtimestamp(req.start_s, UTC) - timedelta(days=BASELINE_DAYS)
    notes: list[str] = []
    raw_rows: dict[str, pl.DataFrame] = {}
    if raw_dir is not None:
        files, notes = raw_telemetry_files(Path(raw_dir), req, first.timestamp(), max_bytes)
        raw_rows = _raw_rows(Path(raw_dir), files, now)
    # The open checkpoint's ranks and the raw telemetry not yet ingested join the lake's
    # tables before any view reads them: the marts judge it as any other checkpoint.
    con = connect(lake_root, days=(first.date(), now.date()), views=ATTRIBUTION_VIEWS,
                  extra_rows={**raw_rows, **checkpoint_rows(req)})
    try:
        stall = open_stall_row(con, req)
        if stall is None:
            return None
        if not stall["is_stall"]:
            return not_a_stall_yet(stall)
        findings = attribute_stalls(con, job=req.job_id, model=load_default_model())
    finally:
        con.close()
    mine = [r for r in findings.stalls if r.step == req.step]
    if not mine or mine[0].cause == NO_TELEMETRY:
        return None
    top = mine[0].top
    for note in notes:
        log.info("%s", note)
    if top.cause == UNKNOWN:
        return ("no cause stands out yet: no signal of gc, metadata or a fabric pause on the "
                "open ranks' hosts during the checkpoint")
    numbers = "; ".join(top.evidence) if top.evidence else "no numbers"
    return f"{top.cause} (score {top.score:.2f}): {numbers}"
