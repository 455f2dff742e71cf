"""Stall detection and the per-stall features attribution reads.

Detection is the ``stalls`` mart (barrier time against the job's healthy baseline); the rank and
signal evidence comes from the ``stall_ranks`` and ``stall_signals`` marts. This module turns
those rows into one feature row per stall: where the slow ranks concentrate, where their time
went, and what each signal family did on their hosts against its own noise and against the
other hosts. Every feature has a physical meaning (no artefact of one generator).

Evidence is measured against each series' own noise (``int_signal_noise``: median and MAD of
the series over the connection's days): a window level's robust z-score says how far it stands
outside that series' variation, whatever the series' unit or the generator's habits, and the
*separation* says whether the signal singles out the slow ranks' hosts (share of slow hosts
that stand out minus share of the other hosts of the checkpoint that do). Coarse sampling is
normal: the window level covers every sampling interval that overlaps the window (one SMART
interval of minutes may span the whole checkpoint), never requiring a sample inside it. Fabric
levels are also held against the same node's levels over the job's checkpoints
(``counter_windows``): pause frames that grow with checkpoint traffic are that node's normal.

A checkpoint whose ranks never finished (a start marker, no record) is a stall with a lower
bound for its barrier, and a timed-out one is a stall whatever the ratio (``stalls`` mart); its
unfinished ranks are slow ranks of ``stall_ranks``, so the features look at their hosts, leaf
switches and targets, and the context lists where they were last seen (``unfinished_*``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from ckptwatch.analysis.unfinished import where_seen
from ckptwatch.lake import signalstats
from ckptwatch.lake.query import run_sql
from ckptwatch.lake.seam import (
    PINNED_SAMPLES,
    PINNED_SERIES,
    PINNED_STORED,
    PINNED_VIEWS,
    pinned_views,
)

#: A job filter: None (every job), one job, or several (``ckptwatch.analysis.findings``
#: attributes groups of jobs as tasks of their own: a job's stalls are the same either way).
Jobs = str | Sequence[str] | None


def _jobs(job: Jobs) -> list[str] | None:
    """``job`` as the ``$job`` parameter of the queries below: a list of jobs, or None."""
    return None if job is None else [job] if isinstance(job, str) else list(job)


def detect_stalls(con: duckdb.DuckDBPyConnection, job: Jobs = None) -> pl.DataFrame:
    """Every stall (optionally of one job, or of a list of jobs), oldest first."""
    return run_sql(con, """
        select job_id, step, tier, start_ts, end_ts, n_ranks, n_started, n_unfinished,
               p50_s, p99_s, barrier_s, barrier_is_lower_bound, timed_out, timeout_reason,
               n_timed_out, baseline_s, ratio_to_baseline, excess_s, n_stragglers
        from stalls
        where is_stall and ($job is null or list_contains($job, job_id))
        order by start_ts, job_id, step
    """, {"job": _jobs(job)})


#: Feature columns, in model order. Each is documented in ``FEATURE_DOCS``.
FEATURES = (
    "ratio_to_baseline", "slow_frac", "has_phases", "metadata_share", "target_purity",
    "leaf_purity", "node_purity", "fabric_z_slow", "fabric_separation", "fabric_log_contrast",
    "fabric_log_rate_slow", "gc_active_slow", "gc_active_contrast", "wa_z_slow",
    "wa_separation", "wa_rise_slow", "free_blocks_z_slow", "busy_z_slow", "metadata_latency_z",
    "tier_pool", "has_topology", "has_fabric", "has_wa", "has_pool",
)
FEATURE_DOCS = {
    "ratio_to_baseline": "barrier time / the job's healthy baseline (the median of the healthy "
                         "checkpoints among its previous 10)",
    "slow_frac": "share of the checkpoint's ranks that were slow",
    "has_phases": "1 when the records carry open/write/fsync/close phases",
    "metadata_share": "share of the slow ranks' extra time spent in open+close (metadata)",
    "target_purity": "slow share of the most-hit target's ranks minus that of the others",
    "leaf_purity": "same for the most-hit leaf switch",
    "node_purity": "same for the most-hit node",
    "fabric_z_slow": "pause / PortXmitWait during the window on the slow ranks' nodes: robust "
                     "z-score against each node's own series (median, MAD), max",
    "fabric_separation": "share of the slow ranks on nodes whose pause / PortXmitWait stands "
                         "out (of its own noise and of the other nodes) minus that share of "
                         "the checkpoint's other ranks",
    "fabric_log_contrast": "log10 of the top slow node's pause rate over the other nodes' "
                           "highest (each +1 /s)",
    "fabric_log_rate_slow": "log10 of the top slow node's pause / PortXmitWait rate (+1 /s)",
    "gc_active_slow": "mean gc_active or background_active.<kind> (the pool's background work: "
                      "gc, aggregation, compaction, scrub, rebuild, restripe) on the slow "
                      "ranks' targets during the window (max)",
    "gc_active_contrast": "that minus the same on the other targets",
    "wa_z_slow": "write amplification (OCP media vs SMART host bytes written) on the slow ranks' "
                 "drives over the intervals of their common time base (the sparser tool's "
                 "samples, the other interpolated) that overlap the window: robust z-score "
                 "against that drive's own per-interval series, max",
    "wa_separation": "share of the slow ranks writing to targets whose GC evidence (write "
                     "amplification, gc_active, or controller busy time above the other "
                     "targets') stands out minus that share of the other ranks",
    "wa_rise_slow": "write amplification during the window minus its median, on the drive of "
                    "wa_z_slow",
    "free_blocks_z_slow": "free blocks below their median, in robust z, on the slow ranks' "
                          "drives and targets (max)",
    "busy_z_slow": "controller busy time rate on those drives, robust z against its own "
                   "series (max); GC evidence only where it also stands out of the other "
                   "targets' busy time (CONTRAST_ONLY)",
    "metadata_latency_z": "pool metadata latency during the window, robust z against each "
                          "target's own series (max over the job's targets)",
    "tier_pool": "1 for a pool-tier checkpoint",
    "has_topology": "1 when the slow ranks' nodes have a known leaf switch",
    "has_fabric": "1 when the slow ranks' nodes have pause / PortXmitWait telemetry",
    "has_wa": "1 when the slow ranks' drives have a write amplification in the window (media "
              "and host bytes written on a common time base)",
    "has_pool": "1 when the job's targets or their pool's metadata service have pool "
                "telemetry (gc_active, background work, metadata latency)",
}

#: A series' noise is at least this much (absolute, in the signal's unit; or this share of its
#: median): a constant series (MAD 0) still varies by a count, a tick, a hundredth of a ratio.
NOISE_FLOOR: dict[str, tuple[float, float]] = {
    "pause": (1.0, 0.05), "xmit_wait": (1000.0, 0.05), "cnp": (1.0, 0.05),
    "gc_active": (0.05, 0.0), "free_blocks_pct": (0.5, 0.02),
    "write_amplification": (0.01, 0.005), "metadata_latency_ms": (0.02, 0.05),
    "controller_busy_time_min": (1e-4, 0.05),
    # the pool's own reports: background work (any kind, as gc_active), interval means
    "background_active": (0.05, 0.0), "write_latency_ms": (0.05, 0.05),
    "queue_depth": (0.5, 0.05), "queue_wait_ms": (0.05, 0.05), "active_requests": (0.5, 0.05),
}
#: Hosts doing the same work in the same window differ by this much (absolute, or this share
#: of their median) before one stands out of the others: rates by a quarter, write
#: amplification by a few hundredths.
CONTRAST_FLOOR: dict[str, tuple[float, float]] = {
    "pause": (1.0, 0.25), "xmit_wait": (1000.0, 0.25), "gc_active": (0.05, 0.0),
    "write_amplification": (0.02, 0.0),
    # busy minutes per second: a tenth of the controller's time (5 sigma: half its time more
    # than the other drives), so the counter's whole-minute steps stand out of nothing
    "controller_busy_time_min": (1.0 / 600.0, 0.25),
    "background_active": (0.05, 0.0), "write_latency_ms": (0.1, 0.25),
    "queue_depth": (1.0, 0.25), "queue_wait_ms": (0.1, 0.25),
}
#: Signals that share a noise and contrast floor under their base name: background work of
#: every kind (background_active.rebuild, …) is an activity level in 0..1.
_FLOOR_BASES = ("background_active",)
#: Pool write latency up on more than this share of the job's targets is the pool as a whole,
#: not GC on the slow ranks' targets (``features_of``: ``write_latency_share_up``).
POOL_WIDE_SHARE = 0.5


def floor_key(signal: str) -> str:
    """The name a signal's ``NOISE_FLOOR`` / ``CONTRAST_FLOOR`` is listed under."""
    base = signal.split(".", 1)[0]
    return base if base in _FLOOR_BASES else signal
#: Signals that stand out only against the other hosts in the same window, never by their own
#: noise alone: a drive's busy time grows with the checkpoint's own writes, so every drive
#: being written to is far above its idle median; only a drive busier than the drives of the
#: checkpoint's other ranks, doing the same work, points to GC. Without such hosts it says
#: nothing.
CONTRAST_ONLY = frozenset({"controller_busy_time_min"})
#: A window level at least this many robust standard deviations above its series' median
#: stands out of that series' noise ("elevated"); 5 sigma: rare by chance over a day of samples.
Z_ELEVATED = 5.0


def _purity(ranks: pl.DataFrame, col: str) -> tuple[float, str | None]:
    """Slow share of the most-hit group minus the slow share of the rest."""
    r = ranks.filter(pl.col(col).is_not_null())
    if r.height == 0 or r["is_slow"].sum() == 0:
        return 0.0, None
    g = (r.group_by(col).agg(pl.len().alias("n"), pl.col("is_slow").sum().alias("slow"))
         .sort(["slow", col], descending=[True, False]))
    if g.height < 2:
        return 0.0, str(g[col][0])
    top = g.row(0, named=True)
    rest_n = r.height - top["n"]
    rest_slow = int(r["is_slow"].sum()) - top["slow"]
    return float(top["slow"] / top["n"] - (rest_slow / rest_n if rest_n else 0.0)), str(top[col])


def _max(df: pl.DataFrame, col: str, default: float) -> float:
    if df.height == 0:
        return default
    v = df[col].drop_nulls().drop_nans() if df[col].dtype.is_float() else df[col].drop_nulls()
    return float(v.max()) if len(v) else default  # type: ignore[arg-type]


def robust_z(level: pl.Expr, median: pl.Expr, mad: pl.Expr, signal: pl.Expr) -> pl.Expr:
    """How many robust standard deviations (1.4826 x MAD, at least the signal's
    ``NOISE_FLOOR``) ``level`` stands above ``median``; 0 where either is unknown."""
    key = signal.str.replace(r"^(background_active)\..*$", "$1")
    floor_abs = key.replace_strict({k: v[0] for k, v in NOISE_FLOOR.items()}, default=1e-9,
                                   return_dtype=pl.Float64)
    floor_rel = key.replace_strict({k: v[1] for k, v in NOISE_FLOOR.items()}, default=0.05,
                                   return_dtype=pl.Float64)
    sigma = pl.max_horizontal(1.4826 * mad.fill_null(0.0), floor_abs,
                              floor_rel * median.abs().fill_null(0.0))
    return ((level - median) / sigma).fill_nan(None).fill_null(0.0)


def _with_noise(signals: pl.DataFrame, noise: pl.DataFrame | None) -> pl.DataFrame:
    """``signals`` with each series' ``median_level``/``mad_level`` (``int_signal_noise``;
    without it, the baseline as median and no spread) and the window level's robust ``z``."""
    if noise is None or noise.height == 0 or signals.height == 0:
        s = signals.with_columns(pl.col("baseline_level").alias("median_level"),
                                 pl.lit(0.0).alias("mad_level"))
    else:
        s = signals.join(noise.select("host", "family", "signal", "median_level", "mad_level"),
                         on=["host", "family", "signal"], how="left")
        s = s.with_columns(pl.coalesce("median_level", "baseline_level").alias("median_level"))
    return s.with_columns(robust_z(pl.col("level"), pl.col("median_level"), pl.col("mad_level"),
                                   pl.col("signal")).alias("z"))


def _wa_by_host(tgt: pl.DataFrame) -> pl.DataFrame:
    """Per target host: write amplification in the window (``stall_signals``' ratio row:
    media over host bytes on the drives' common time base), its series' median and MAD
    (``int_signal_noise``, joined by ``_with_noise``), and its robust z."""
    return tgt.filter((pl.col("signal") == "write_amplification")
                      & pl.col("level").is_not_null()).select(
        "host", pl.col("level").alias("wa"), "median_level", "mad_level", "z",
        "sample_interval_max_s")


def _busy_x_others(busy: pl.DataFrame, slow: set[str]) -> float | None:
    """The slow targets' highest busy-time rate over the other targets' median (None without
    both)."""
    levels = busy.filter(pl.col("level").is_not_null())
    top = levels.filter(pl.col("host").is_in(list(slow)))["level"]
    rest = levels.filter(~pl.col("host").is_in(list(slow)))["level"]
    if not top.len() or not rest.len():
        return None
    med = float(rest.median())  # type: ignore[arg-type]
    return float(top.max()) / med if med > 0 else None  # type: ignore[arg-type]


def _standing_out(df: pl.DataFrame, slow: set[str]) -> dict[str, bool]:
    """Per host of ``df`` (rows: host, signal, level, z): does one of its series stand out
    both of its own noise (z at least ``Z_ELEVATED``) and of the same signal's levels on the
    other (fast) hosts in the same window (as many robust deviations of those, at least the
    signal's ``CONTRAST_FLOOR``)? Without fast hosts, its own noise decides (for a signal of
    ``CONTRAST_ONLY``, nothing stands out then)."""
    out: dict[str, bool] = {}
    for (signal,), g in df.group_by("signal"):
        fast = g.filter(~pl.col("host").is_in(list(slow)))["level"].drop_nulls().drop_nans()
        if not fast.len() and signal in CONTRAST_ONLY:
            continue
        key = floor_key(str(signal))
        a, r = CONTRAST_FLOOR.get(key, (0.0, 0.25))
        med = float(fast.median()) if fast.len() else 0.0  # type: ignore[arg-type]
        mad = float((fast - med).abs().median()) if fast.len() else 0.0  # type: ignore[arg-type]
        sigma = max(1.4826 * mad, a, r * abs(med), NOISE_FLOOR.get(key, (1e-9, 0))[0])
        for host, level, z in zip(g["host"], g["level"], g["z"], strict=True):
            if level is None or z is None:
                continue
            zw = (level - med) / sigma if fast.len() else z
            out[host] = out.get(host, False) or (z >= Z_ELEVATED and zw >= Z_ELEVATED)
    return out


def rank_targets(ranks: pl.DataFrame) -> pl.DataFrame:
    """``ranks`` with one row per rank and target: a striped record names its targets joined by
    commas (``fs-OST0001,fs-OST0002``); ``rank_row`` numbers the rank's row."""
    return ranks.with_row_index("rank_row").with_columns(
        pl.col("target_host").str.split(",").list.eval(pl.element().str.strip_chars())
    ).explode("target_host")


def _separation(stands_out: Mapping[str, bool], ranks: pl.DataFrame, col: str) -> float:
    """Share of the slow ranks whose host (``col``: node or target host, among hosts with the
    signal) stands out, minus that share of the other ranks: 1 when the signal singles out
    exactly the slow ranks, 0 or below when healthy ranks sit on hosts that show it as much.
    ``ranks`` may hold a rank once per target (``rank_targets``): a rank stands out when one of
    its targets does."""
    r = ranks.filter(pl.col(col).is_in(list(stands_out)))
    if r.height == 0:
        return 0.0
    r = r.with_columns(pl.col(col).replace_strict(dict(stands_out), return_dtype=pl.Boolean)
                       .alias("_out"))
    if "rank_row" in r.columns:
        r = r.group_by("rank_row").agg(pl.col("_out").any(), pl.col("is_slow").first())
    out = r["_out"]
    slow = r["is_slow"].fill_null(False)
    n_slow, n_fast = int(slow.sum()), int((~slow).sum())
    s_share = int((out & slow).sum()) / n_slow if n_slow else 0.0
    f_share = int((out & ~slow).sum()) / n_fast if n_fast else 0.0
    return s_share - f_share


def _background_detail(gca: pl.DataFrame, slow: set[str]) -> list[dict[str, Any]]:
    """Background work (``gc_active``, ``background_active.<kind>``) that stands out of its
    own noise on the slow ranks' targets, highest first: kind, host, level in the window, the
    same kind's highest level on the other targets, z."""
    out = []
    for r in gca.filter(pl.col("host").is_in(list(slow)) & (pl.col("z") >= Z_ELEVATED)) \
            .sort(["z", "host"], descending=[True, False]).iter_rows(named=True):
        sig = str(r["signal"])
        kind = sig.split(".", 1)[1] if "." in sig else ("gc" if sig == "gc_active"
                                                         else "background work")
        others = gca.filter((pl.col("signal") == sig) & ~pl.col("host").is_in(list(slow)))
        out.append({"kind": kind, "signal": sig, "host": r["host"], "level": r["level"],
                    "others": _max(others, "level", 0.0), "z": r["z"]})
    return out


def _write_latency(tgt: pl.DataFrame, by_target: pl.DataFrame,
                   slow: set[str]) -> dict[str, Any]:
    """The pool's write latency (interval means, ``write_latency_ms``) on the job's targets:
    the targets where it stands out of its own noise (``write_latency_up``), their share of
    the targets that report it (``write_latency_share_up``), the slow ranks' targets where it
    also stands out of the other targets (``write_latency_slow_up``), the separation of that,
    and the top slow target's level, median and z. Up on a few targets, the slow ranks': GC
    evidence; up on most of them: the pool as a whole (``POOL_WIDE_SHARE``)."""
    wl = tgt.filter((pl.col("signal") == "write_latency_ms") & pl.col("level").is_not_null())
    hosts = set(wl["host"].to_list())
    up = sorted(wl.filter(pl.col("z") >= Z_ELEVATED)["host"].unique().to_list())
    out = _standing_out(wl.select("host", "signal", "level", "z"), slow)
    top = wl.filter(pl.col("host").is_in(list(slow))).sort("z", descending=True).head(1)
    return {
        "write_latency_up": up,
        "write_latency_share_up": len(up) / len(hosts) if hosts else 0.0,
        "write_latency_n_targets": len(hosts),
        "write_latency_slow_up": sorted(h for h, v in out.items() if v and h in slow),
        "write_latency_separation": _separation(out, by_target, "target_host"),
        "write_latency_z_slow": _max(top, "z", 0.0),
        "write_latency_ms_slow": _max(top, "level", 0.0),
        "write_latency_base_ms": _max(top, "median_level", 0.0),
    }


def _queue_up(rows: pl.DataFrame, hosts: set[str]) -> list[dict[str, Any]]:
    """Queue depth / queue wait (the pool's interval means) that stand out of their own noise
    on ``hosts``, and of the other hosts' where there are any (``_standing_out``): signal,
    host, level, median, z; highest z first."""
    q = rows.filter(pl.col("signal").is_in(["queue_depth", "queue_wait_ms"])
                    & pl.col("level").is_not_null())
    out = _standing_out(q.select("host", "signal", "level", "z"), hosts)
    up = q.filter(pl.col("host").is_in([h for h, v in out.items() if v and h in hosts])
                  & (pl.col("z") >= Z_ELEVATED)).sort(["z", "host"], descending=[True, False])
    return [{"signal": r["signal"], "host": r["host"], "level": r["level"],
             "base": r["median_level"] or 0.0, "z": r["z"]} for r in up.iter_rows(named=True)]


def stall_features(con: duckdb.DuckDBPyConnection, job: Jobs = None) -> pl.DataFrame:
    """One row per stall (of ``job``: one job or a list of them): identity columns,
    ``FEATURES`` and the context evidence needs."""
    with pinned_views(con, PINNED_VIEWS):
        return _stall_features(con, _jobs(job))


def _stall_features(con: duckdb.DuckDBPyConnection, job: list[str] | None) -> pl.DataFrame:
    stalls = detect_stalls(con, job)
    if stalls.height == 0:
        return stalls.with_columns([pl.lit(None, pl.Float64).alias(f) for f in FEATURES])
    ranks = run_sql(con, "select * from stall_ranks "
                    "where ($job is null or list_contains($job, job_id))", {"job": job})
    stored = signalstats.stored(con)  # the day's statistics, when stored for this connection
    with (pinned_views(con, PINNED_SAMPLES, stored=stored),
          pinned_views(con, PINNED_SERIES, one_thread_if_short=True, stored=stored),
          pinned_views(con, PINNED_STORED, stored=stored, only_stored=True)):
        signals = run_sql(con, "select * from stall_signals "
                          "where ($job is null or list_contains($job, job_id))",
                          {"job": job})
        hosts = sorted(set(signals["host"].to_list()))
        noise = run_sql(con, "select * from int_signal_noise where list_contains($hosts, host)",
                        {"hosts": hosts})
        # the stalled jobs' checkpoints only: a job's history is its own (stored with the
        # day's statistics, else computed for these jobs and hosts alone)
        history = run_sql(con, """
            select job_id, step, host, family, level
            from counter_window_fabric_levels()
            where list_contains($jobs, job_id) and list_contains($hosts, host)
        """, {"jobs": sorted(set(stalls["job_id"].to_list())), "hosts": hosts})
        coverage = {(r["job_id"], int(r["step"])): r for r in run_sql(
            con, "select * from stall_coverage "
            "where ($job is null or list_contains($job, job_id))",
            {"job": job}).iter_rows(named=True)}
        own = _pool_job_rows(con, job)
        # the pool's load over each pool stall's window (pool_demand: every rank record's
        # seconds): only when a stall wrote to a pool
        loads = (_saturation_rows(con, job) if (stalls["tier"] == "pool").any() else {})
    rows = []
    for st in stalls.iter_rows(named=True):
        key = (pl.col("job_id") == st["job_id"]) & (pl.col("step") == st["step"])
        cov = coverage.get((st["job_id"], int(st["step"])))
        rows.append({**st, **features_of(ranks.filter(key), signals.filter(key), noise,
                                         history.filter(pl.col("job_id") == st["job_id"])),
                     "coverage": None if cov is None else coverage_of(cov),
                     "pool_job": own.get((st["job_id"], int(st["step"])), []),
                     "pool_load": loads.get((st["job_id"], int(st["step"])))})
    return pl.DataFrame(rows, infer_schema_length=None)


def _built(con: duckdb.DuckDBPyConnection, view: str) -> bool:
    """Whether the connection built ``view`` (a connection builds only the views asked of it)."""
    return bool(con.execute("select count(*) from duckdb_views() where view_name = ?",
                            [view]).fetchall()[0][0])


def _pool_job_rows(con: duckdb.DuckDBPyConnection,
                   job: list[str] | None) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each stall's ``stall_pool_jobs`` rows (the job's own pool latency from the pool's
    per-job statistics: Lustre job_stats), highest ratio to the job's usual level first; none
    when the connection did not build the mart."""
    if not _built(con, "stall_pool_jobs"):
        return {}
    # Most pools keep no per-job statistics: one look at the raw table spares the stalls step
    # the interval means of every pool series that the mart would compute to find none.
    per_job = con.execute("select count(*) from (select 1 from pool_metrics "
                          "where contains(metric, '.job=') limit 1)").fetchall()
    if not per_job[0][0]:
        return {}
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in run_sql(con, """
            select job_id, step, target, signal, pool_job_id, level_ms, max_ms, baseline_ms,
                n_ops
            from stall_pool_jobs
            where $job is null or list_contains($job, job_id)
            order by job_id, step, level_ms / nullif(baseline_ms, 0) desc nulls last, target
            """, {"job": job}).iter_rows(named=True):
        out.setdefault((r["job_id"], int(r["step"])), []).append(r)
    return out


def _saturation_rows(con: duckdb.DuckDBPyConnection,
                     job: list[str] | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Each pool stall's ``stall_saturation`` row (the shared pool's load over its window;
    of its pools, the most loaded); none when the connection did not build the mart."""
    if not _built(con, "stall_saturation"):
        return {}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in run_sql(con, """
            select * from stall_saturation
            where $job is null or list_contains($job, job_id)
            order by job_id, step, utilisation_median desc nulls last, pool
            """, {"job": job}).iter_rows(named=True):
        out.setdefault((r["job_id"], int(r["step"])), r)
    return out


#: The ``stall_coverage`` columns a stall's ``coverage`` carries (its key left out).
COVERAGE_COLUMNS = (
    "telemetry", "missing", "has_fabric", "has_smart", "has_pool", "has_pool_gc",
    "has_pool_metadata", "has_topology", "has_phases", "n_nodes", "n_fabric_nodes",
    "n_targets", "n_smart_targets", "n_pool_gc_targets", "n_pool_metadata_targets",
    "writes_to_pool", "fabric_missing_nodes", "fabric_missing_leaves",
)


def coverage_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stall's ``coverage``: its ``stall_coverage`` row, lists as lists."""
    return {k: list(row[k]) if isinstance(row[k], (list, tuple)) else row[k]
            for k in COVERAGE_COLUMNS}


def _against_checkpoints(fab: pl.DataFrame, history: pl.DataFrame | None,
                         step: int | None) -> pl.DataFrame:
    """``fab`` (fabric rows of one stall) with ``z`` lowered to the z of its level against the
    same host's levels over the job's checkpoints (``counter_windows``: median and MAD), where
    known: a node that always pauses more while checkpointing is not singled out by doing so
    again."""
    if history is None or history.height == 0 or fab.height == 0 or step is None:
        return fab
    h = history.filter(pl.col("level").is_not_null())
    normal = h.group_by("host", "family").agg(pl.col("level").median().alias("ck_median"))
    spread = h.join(normal, on=["host", "family"]).group_by("host", "family").agg(
        (pl.col("level") - pl.col("ck_median")).abs().median().alias("ck_mad"),
        pl.col("ck_median").first())
    now = h.filter(pl.col("step") == step).select("host", "family",
                                                  pl.col("level").alias("ck_level"))
    f = fab.join(spread, on=["host", "family"], how="left").join(now, on=["host", "family"],
                                                                  how="left")
    floor_abs = pl.col("family").replace_strict({k: v[0] for k, v in CONTRAST_FLOOR.items()},
                                                default=1.0, return_dtype=pl.Float64)
    sigma = pl.max_horizontal(1.4826 * pl.col("ck_mad").fill_null(0.0), floor_abs,
                              0.25 * pl.col("ck_median").abs().fill_null(0.0))
    zc = ((pl.col("ck_level") - pl.col("ck_median")) / sigma)
    return f.with_columns(pl.when(zc.is_not_null()).then(pl.min_horizontal(pl.col("z"), zc))
                          .otherwise(pl.col("z")).alias("z")).drop(
        "ck_median", "ck_mad", "ck_level")


def features_of(ranks: pl.DataFrame, signals: pl.DataFrame,
                noise: pl.DataFrame | None = None,
                history: pl.DataFrame | None = None) -> dict[str, Any]:
    """Features (and their context) of one stall from its ``stall_ranks``/``stall_signals``
    rows, the series' noise (``int_signal_noise``; None: baselines without spread) and the
    job's fabric levels per checkpoint and host (``counter_windows``; None: not used)."""
    n = max(ranks.height, 1)
    slow = ranks.filter(pl.col("is_slow"))
    has_phases = float(ranks["metadata_excess_s"].drop_nulls().len() > 0) if ranks.height else 0.0
    meta = float(slow["metadata_excess_s"].fill_null(0).clip(lower_bound=0).sum()
                 if slow.height else 0.0)
    data = float(slow["data_excess_s"].fill_null(0).clip(lower_bound=0).sum()
                 if slow.height else 0.0)
    metadata_share = float(meta / (meta + data)) if meta + data > 0 else 0.5
    by_target = rank_targets(ranks)
    target_purity, top_target = _purity(by_target, "target_host")
    leaf_purity, top_leaf = _purity(ranks, "leaf_switch")
    node_purity, top_node = _purity(ranks, "node")
    slow_nodes = set(slow["node"].to_list())
    slow_targets = set(by_target.filter(pl.col("is_slow"))["target_host"].drop_nulls().to_list())
    sig = _with_noise(signals, noise)

    # Fabric: per rank node, the larger z of pause and PortXmitWait.
    fab = sig.filter(pl.col("family").is_in(["pause", "xmit_wait"]) & pl.col("is_rank_node"))
    fab = _against_checkpoints(fab, history, int(ranks["step"][0]) if ranks.height else None)
    fab_slow = fab.filter(pl.col("host").is_in(list(slow_nodes)))
    fab_other = fab.filter(~pl.col("host").is_in(list(slow_nodes)))
    fab_out = _standing_out(fab, slow_nodes)
    top_fab = fab_slow.sort("z", descending=True).head(1)
    fabric_rate = _max(top_fab, "level", 0.0)
    fabric_base = _max(top_fab, "median_level", 0.0)
    same_family = (fab_other.filter(pl.col("family") == top_fab["family"][0]) if top_fab.height
                   else fab_other)
    other_rate = _max(same_family, "level", fabric_base)

    # GC: per target host (pool target, or the node of a local drive), write amplification
    # against its own per-interval noise, and gc_active where the pool reports it.
    tgt = sig.filter(pl.col("is_target"))
    in_slow = pl.col("host").is_in(list(slow_targets))
    wa = _wa_by_host(tgt)
    wa_slow = wa.filter(in_slow).sort("z", descending=True)
    # gc_active and the pool's background work of every kind (background_active.rebuild, …):
    # activity levels in 0..1, GC-like where they single out the slow ranks' targets.
    gca = tgt.filter((pl.col("signal") == "gc_active")
                     | pl.col("signal").str.starts_with("background_active"))
    busy_all = tgt.filter(pl.col("signal") == "controller_busy_time_min")
    # Busy time counts as GC evidence only where it stands out of the other targets' too
    # (CONTRAST_ONLY): busy because every rank writes is no GC.
    busy_out = _standing_out(busy_all.select("host", "signal", "level", "z"), slow_targets)
    gc_out = _standing_out(pl.concat([
        wa.select("host", pl.lit("write_amplification").alias("signal"),
                  pl.col("wa").alias("level"), "z"),
        gca.select("host", "signal", "level", "z")]), slow_targets)
    gc_out = {h: gc_out.get(h, False) or busy_out.get(h, False)
              for h in gc_out.keys() | busy_out.keys()}
    background = _background_detail(gca, slow_targets)
    gc_slow = _max(gca.filter(in_slow), "level", 0.0)
    gc_other = _max(gca.filter(~in_slow), "level", 0.0)
    wa_best: dict[str, Any] = {}
    if wa_slow.height:
        b = wa_slow.row(0, named=True)
        wa_best = {"host": b["host"], "wa": b["wa"], "base": b["median_level"] or 0.0,
                   "z": b["z"], "interval_s": b["sample_interval_max_s"]}
    fb = tgt.filter((pl.col("signal") == "free_blocks_pct") & in_slow).with_columns(
        (-robust_z(pl.col("level_min"), pl.col("median_level"), pl.col("mad_level"),
                   pl.col("signal"))).alias("drop_z"),
        (pl.col("median_level") - pl.col("level_min")).alias("drop"))
    busy = busy_all.filter(in_slow)
    # Metadata is looked for where the pool keeps it: the data targets (a pool that reports
    # metadata per target) and the metadata services of their pool (an MDT, a DAOS pool
    # service: is_metadata_service).
    md_host = pl.col("is_target") | (pl.col("is_metadata_service")
                                     if "is_metadata_service" in sig.columns else pl.lit(False))
    md = sig.filter((pl.col("signal") == "metadata_latency_ms") & md_host)
    top_md = md.sort("z", descending=True).head(1)
    md_services = (set(sig.filter(pl.col("is_metadata_service"))["host"].to_list())
                   if "is_metadata_service" in sig.columns else set())
    pool_write = _write_latency(tgt, by_target, slow_targets)
    queue_slow = _queue_up(tgt, slow_targets)
    queue_md = _queue_up(sig.filter(md_host), md_services) if md_services else []
    tier = ranks["tier"][0] if ranks.height else None
    unfinished = (ranks.filter(pl.col("is_unfinished")) if "is_unfinished" in ranks.columns
                  else ranks.clear())
    has_pool = float(gca.height > 0 or md.height > 0)
    return {
        "slow_frac": slow.height / n,
        "n_slow": slow.height,
        "has_phases": has_phases,
        "metadata_share": metadata_share,
        "target_purity": target_purity, "top_target": top_target,
        "leaf_purity": leaf_purity, "top_leaf": top_leaf,
        "node_purity": node_purity, "top_node": top_node,
        "slow_nodes": sorted(slow_nodes), "slow_targets": sorted(slow_targets),
        "slow_leaves": sorted(set(slow["leaf_switch"].drop_nulls().to_list())),
        "fabric_z_slow": _max(fab_slow, "z", 0.0),
        "fabric_separation": _separation(fab_out, ranks, "node"),
        "fabric_log_contrast": math.log10((fabric_rate + 1.0) / (other_rate + 1.0)),
        "fabric_log_rate_slow": math.log10(fabric_rate + 1.0),
        "fabric_rate_slow": fabric_rate,
        "fabric_base_slow": fabric_base,
        "fabric_other_slow": other_rate,
        "fabric_hosts_elevated": sorted(h for h, v in fab_out.items() if v and h in slow_nodes),
        "fabric_others_elevated": sorted(h for h, v in fab_out.items()
                                         if v and h not in slow_nodes),
        "gc_active_slow": gc_slow,
        "gc_active_contrast": gc_slow - gc_other,
        "wa_z_slow": float(wa_best.get("z", 0.0)),
        "wa_separation": _separation(gc_out, by_target, "target_host"),
        "wa_rise_slow": float(wa_best["wa"] - wa_best["base"]) if wa_best else 0.0,
        "wa_detail": wa_best,
        "gc_targets_elevated": sorted(h for h, v in gc_out.items() if v and h in slow_targets),
        "free_blocks_z_slow": _max(fb, "drop_z", 0.0),
        "free_blocks_drop_slow": _max(fb, "drop", 0.0),
        "busy_z_slow": _max(busy, "z", 0.0),
        "busy_targets_elevated": sorted(h for h, v in busy_out.items()
                                        if v and h in slow_targets),
        "busy_others_elevated": sorted(h for h, v in busy_out.items()
                                       if v and h not in slow_targets),
        "busy_x_others": _busy_x_others(busy_all, slow_targets),
        "metadata_latency_z": _max(md, "z", 0.0),
        "metadata_latency_ms": _max(top_md, "level", 0.0),
        "metadata_latency_base_ms": _max(top_md, "median_level", 0.0),
        "metadata_host": top_md["host"][0] if top_md.height else None,
        "metadata_on_service": bool(top_md.height and top_md["host"][0] in md_services),
        "background_slow": background,
        "background_signals": sorted(set(gca["signal"].to_list())),
        **pool_write,
        "queue_slow": queue_slow,
        "queue_metadata": queue_md,
        "tier_pool": 1.0 if tier == "pool" else 0.0,
        "has_topology": float(slow["leaf_switch"].drop_nulls().len() > 0),
        "has_fabric": float(fab_slow.height > 0),
        "has_wa": float(wa.filter(in_slow).height > 0),
        "has_pool": has_pool,
        "unfinished_nodes": list(where_seen(unfinished["node"].to_list())),
        "unfinished_leaves": list(where_seen(unfinished["leaf_switch"].to_list(),
                                             split_commas=True)),
        "unfinished_targets": list(where_seen(unfinished["target"].to_list())),
    }
