"""Stall detection and the per-stall features attribution reads.

Detection is the ``stalls`` mart (barrier time against the job's rolling median); the rank and
signal evidence comes from the ``stall_ranks`` and ``stall_signals`` marts. This module turns
those rows into one feature row per stall: where the slow ranks concentrate, where their time
went, and what each signal family did on their hosts against its own baseline and against the
other hosts. Every feature has a physical meaning (no artefact of one generator).

A checkpoint whose ranks never finished (a start marker, no record) is a stall with a lower
bound for its barrier, and a timed-out one is a stall whatever the ratio (``stalls`` mart); its
unfinished ranks are slow ranks of ``stall_ranks``, so the features look at their hosts, leaf
switches and targets, and the context lists where they were last seen (``unfinished_*``).
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import polars as pl

from ckptwatch.analysis.unfinished import where_seen
from ckptwatch.lake.query import run_sql


def detect_stalls(con: duckdb.DuckDBPyConnection, job: str | None = None) -> pl.DataFrame:
    """Every stall (optionally of one job), oldest first."""
    return run_sql(con, """
        select job_id, step, tier, start_ts, end_ts, n_ranks, n_started, n_unfinished,
               p50_s, p99_s, barrier_s, barrier_is_lower_bound, timed_out, baseline_s,
               ratio_to_baseline, excess_s, n_stragglers
        from stalls
        where is_stall and ($job is null or job_id = $job)
        order by start_ts, job_id, step
    """, {"job": job})


#: Feature columns, in model order. Each is documented in ``FEATURE_DOCS``.
FEATURES = (
    "ratio_to_baseline", "slow_frac", "has_phases", "metadata_share", "target_purity",
    "leaf_purity", "node_purity", "fabric_ratio_slow", "fabric_log_rate_slow",
    "fabric_ratio_contrast", "gc_active_slow", "gc_active_contrast", "wa_ratio_slow",
    "free_blocks_drop_slow", "busy_ratio_slow", "metadata_latency_ratio", "tier_pool",
)
FEATURE_DOCS = {
    "ratio_to_baseline": "barrier time / the job's rolling median barrier",
    "slow_frac": "share of the checkpoint's ranks that were slow",
    "has_phases": "1 when the records carry open/write/fsync/close phases",
    "metadata_share": "share of the slow ranks' extra time spent in open+close (metadata)",
    "target_purity": "slow share of the most-hit target's ranks minus that of the others",
    "leaf_purity": "same for the most-hit leaf switch",
    "node_purity": "same for the most-hit node",
    "fabric_ratio_slow": "pause / PortXmitWait rate on the slow ranks' nodes vs its baseline (max)",
    "fabric_log_rate_slow": "log10 of that rate (frames or ticks per second)",
    "fabric_ratio_contrast": "fabric ratio on slow nodes / on the other nodes of the checkpoint",
    "gc_active_slow": "mean gc_active on the slow ranks' targets during the window (max)",
    "gc_active_contrast": "that minus gc_active on the other targets",
    "wa_ratio_slow": "write amplification (media/host bytes) on the slow ranks' drives vs "
                     "baseline (max)",
    "free_blocks_drop_slow": "free blocks percentage points below baseline on those drives",
    "busy_ratio_slow": "controller busy time rate vs baseline on those drives (max)",
    "metadata_latency_ratio": "pool metadata latency during the window vs baseline (max over "
                              "the job's targets)",
    "tier_pool": "1 for a pool-tier checkpoint",
}


def _ratio(level: float | None, base: float | None, floor: float) -> float:
    if level is None or (isinstance(level, float) and math.isnan(level)):
        return 1.0
    base_v = 0.0 if base is None or (isinstance(base, float) and math.isnan(base)) else base
    return float((level + floor) / (base_v + floor))


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


def stall_features(con: duckdb.DuckDBPyConnection, job: str | None = None) -> pl.DataFrame:
    """One row per stall: identity columns, ``FEATURES`` and the context evidence needs."""
    stalls = detect_stalls(con, job)
    if stalls.height == 0:
        return stalls.with_columns([pl.lit(None, pl.Float64).alias(f) for f in FEATURES])
    ranks = run_sql(con, "select * from stall_ranks where ($job is null or job_id = $job)",
                    {"job": job})
    signals = run_sql(con, "select * from stall_signals where ($job is null or job_id = $job)",
                      {"job": job})
    rows = []
    for st in stalls.iter_rows(named=True):
        key = (pl.col("job_id") == st["job_id"]) & (pl.col("step") == st["step"])
        rows.append({**st, **features_of(ranks.filter(key), signals.filter(key))})
    return pl.DataFrame(rows, infer_schema_length=None)


def features_of(ranks: pl.DataFrame, signals: pl.DataFrame) -> dict[str, Any]:
    """Features (and their context) of one stall from its ``stall_ranks``/``stall_signals``."""
    n = max(ranks.height, 1)
    slow = ranks.filter(pl.col("is_slow"))
    has_phases = float(ranks["metadata_excess_s"].drop_nulls().len() > 0) if ranks.height else 0.0
    meta = float(slow["metadata_excess_s"].fill_null(0).clip(lower_bound=0).sum()
                 if slow.height else 0.0)
    data = float(slow["data_excess_s"].fill_null(0).clip(lower_bound=0).sum()
                 if slow.height else 0.0)
    metadata_share = float(meta / (meta + data)) if meta + data > 0 else 0.5
    target_purity, top_target = _purity(ranks.with_columns(pl.col("target_host")), "target_host")
    leaf_purity, top_leaf = _purity(ranks, "leaf_switch")
    node_purity, top_node = _purity(ranks, "node")
    slow_nodes = set(slow["node"].to_list())
    slow_targets = set(slow["target_host"].drop_nulls().to_list())

    fab = signals.filter(pl.col("family").is_in(["pause", "xmit_wait"]) & pl.col("is_rank_node"))
    fab = fab.with_columns(pl.struct("level", "baseline_level").map_elements(
        lambda s: _ratio(s["level"], s["baseline_level"], 1.0), return_dtype=pl.Float64)
        .alias("ratio"))
    fab_slow = fab.filter(pl.col("host").is_in(list(slow_nodes)))
    fab_other = fab.filter(~pl.col("host").is_in(list(slow_nodes)))
    fabric_ratio_slow = _max(fab_slow, "ratio", 1.0)
    fabric_rate = _max(fab_slow, "level", 0.0)
    fabric_ratio_other = _max(fab_other, "ratio", 1.0)

    tgt = signals.filter(pl.col("is_target"))
    in_slow = pl.col("host").is_in(list(slow_targets))

    def sig(name: str, where: pl.Expr) -> pl.DataFrame:
        return tgt.filter((pl.col("signal") == name) & where)

    gc_slow = _max(sig("gc_active", in_slow), "level", 0.0)
    gc_other = _max(sig("gc_active", ~in_slow), "level", 0.0)
    media = sig("media_written_bytes", in_slow).select("host", "level", "baseline_level")
    host_w = sig("host_written_bytes", in_slow).select("host", "level", "baseline_level")
    wa_ratio = 1.0
    wa_best: dict[str, Any] = {}
    if media.height and host_w.height:
        j = media.join(host_w, on="host", suffix="_host")
        for r in j.iter_rows(named=True):
            if not r["level_host"] or not r["baseline_level_host"] or not r["baseline_level"]:
                continue
            wa = r["level"] / r["level_host"]
            base = r["baseline_level"] / r["baseline_level_host"]
            if base > 0 and wa / base > wa_ratio:
                wa_ratio, wa_best = wa / base, {"host": r["host"], "wa": wa, "base": base}
    fb = sig("free_blocks_pct", in_slow).filter(pl.col("baseline_level").is_not_null())
    free_drop = _max(fb.with_columns((pl.col("baseline_level") - pl.col("level_min"))
                                     .alias("drop")), "drop", 0.0)
    busy = sig("controller_busy_time_min", in_slow).with_columns(
        pl.struct("level", "baseline_level").map_elements(
            lambda s: _ratio(s["level"], s["baseline_level"], 1e-4), return_dtype=pl.Float64)
        .alias("ratio"))
    busy_ratio = _max(busy, "ratio", 1.0)
    md = signals.filter((pl.col("signal") == "metadata_latency_ms") & pl.col("is_target"))
    md = md.with_columns(pl.struct("level", "baseline_level").map_elements(
        lambda s: _ratio(s["level"], s["baseline_level"], 0.05), return_dtype=pl.Float64)
        .alias("ratio"))
    md_ratio = _max(md, "ratio", 1.0)
    tier = ranks["tier"][0] if ranks.height else None
    unfinished = (ranks.filter(pl.col("is_unfinished")) if "is_unfinished" in ranks.columns
                  else ranks.clear())
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
        "fabric_ratio_slow": fabric_ratio_slow,
        "fabric_log_rate_slow": math.log10(fabric_rate + 1.0),
        "fabric_rate_slow": _max(fab_slow.sort("ratio", descending=True).head(1), "level", 0.0),
        "fabric_base_slow": _max(fab_slow.sort("ratio", descending=True).head(1),
                                 "baseline_level", 0.0),
        "fabric_ratio_contrast": fabric_ratio_slow / max(fabric_ratio_other, 1.0),
        "fabric_hosts_elevated": sorted(fab_slow.filter(pl.col("ratio") >= 5)["host"]
                                        .unique().to_list()),
        "gc_active_slow": gc_slow,
        "gc_active_contrast": gc_slow - gc_other,
        "wa_ratio_slow": wa_ratio, "wa_detail": wa_best,
        "free_blocks_drop_slow": free_drop,
        "busy_ratio_slow": busy_ratio,
        "metadata_latency_ratio": md_ratio,
        "metadata_latency_ms": _max(md.sort("ratio", descending=True).head(1), "level", 0.0),
        "metadata_latency_base_ms": _max(md.sort("ratio", descending=True).head(1),
                                         "baseline_level", 0.0),
        "tier_pool": 1.0 if tier == "pool" else 0.0,
        "unfinished_nodes": list(where_seen(unfinished["node"].to_list())),
        "unfinished_leaves": list(where_seen(unfinished["leaf_switch"].to_list(),
                                             split_commas=True)),
        "unfinished_targets": list(where_seen(unfinished["target"].to_list())),
    }
