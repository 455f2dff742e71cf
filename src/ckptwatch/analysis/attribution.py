"""Attribute stalls to causes: interpretable rules, a scikit-learn model, and evidence.

Each cause in ``CAUSES`` gets a rule score in [0, 1] from physically meaningful features (see
``ckptwatch.analysis.stalls.FEATURE_DOCS``) and a *support* verdict: is there at least one
signal of that
cause on the slow ranks' hosts? A cause without support is never reported, whatever the model
says; a stall where no cause has support is ``unknown`` (an honest unknown beats a confident
wrong answer). When a trained model is available (``ckptwatch train-model``), each supported
cause's score is the mean of its rule score and the model's probability, then calibrated: an
isotonic map fitted on the training seeds' out-of-fold scores turns it into the chance that the
cause is right (``ckptwatch evaluate`` prints the reliability table that checks it).

Support rests on evidence measured against each series' own noise (robust z-scores, see
``ckptwatch.analysis.stalls``) that also singles out the slow ranks' hosts: a signal as high on
the checkpoint's healthy hosts supports nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.analysis.stalls import FEATURES, POOL_WIDE_SHARE, Z_ELEVATED

CAUSES = ("gc", "metadata", "fabric_pause", "saturation")
#: Telemetry was there and no cause stands out.
UNKNOWN = "unknown"
#: None of the telemetry any cause needs reached the slow ranks' hosts: nothing could be
#: judged (``stall_coverage``). Never a model class: the rules decide it before any score.
NO_TELEMETRY = "no_telemetry"
#: What the model learns and predicts (a simulated stall's truth is one of these).
MODEL_LABELS = (*CAUSES, UNKNOWN)
#: Every top label a stall can get (``evaluate`` counts each).
LABELS = (*MODEL_LABELS, NO_TELEMETRY)
#: The telemetry families (``stall_coverage``'s ``has_*`` columns) each cause is judged on:
#: with none of them, the cause cannot be judged, whatever its features say.
NEEDS: dict[str, tuple[str, ...]] = {
    "gc": ("smart", "pool_gc"),
    "metadata": ("pool_metadata", "phases"),
    "fabric_pause": ("fabric",),
    # the pool's own write throughput (pool_demand's measured_bps); the records' demand alone
    # shows the jobs' burst but not the other tenants'
    "saturation": ("pool",),
}
#: The telemetry feeds (``stall_coverage``): with none of them, a stall where no cause stands
#: out is ``no_telemetry``. Phases come with the checkpoint records: they can show a metadata
#: stall, but their silence clears neither gc nor a fabric pause.
FEEDS = ("fabric", "smart", "pool")
#: Below this score a supported cause is still listed, but never as the top cause.
MIN_TOP_SCORE = 0.2
#: A signal supports a cause when it singles out the slow ranks' hosts: the share of them on
#: which it stands out of its noise, minus that share on the checkpoint's other hosts, is at
#: least this (``stalls.features_of``: ``*_separation``).
SEPARATION_SUPPORT = 0.5
#: A pool whose load (max of the ranks' demand and its measured write throughput, over its
#: capacity) had a median of at least this over a stall's window wrote at its ceiling: the
#: pool set the pace, not the ranks (``stall_saturation.utilisation_median``). GC, metadata
#: and a fabric pause slow the ranks and so the pool's throughput falls (0.15-0.4 measured on
#: simulated days), a burst keeps it at the ceiling (0.73-0.98). Below a second's
#: ``saturation_utilisation`` (sql/session.sql): the pool's telemetry averages its
#: throughput over intervals of 30 s and more, which dilutes a burst of a minute.
CEILING_SHARE = 0.65
#: A burst slows every rank of its jobs, not a few: at least this share of the ranks slow.
SATURATION_SLOW_FRAC = 0.5


@dataclass
class CauseVerdict:
    """One cause of a stall: score, whether a signal supports it, and the evidence."""

    cause: str
    score: float
    supported: bool
    rule_score: float
    model_score: float | None = None
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{cause, score, evidence}`` plus the parts of the score."""
        return {"cause": self.cause, "score": round(self.score, 3),
                "evidence": self.evidence, "supported": self.supported,
                "rule_score": round(self.rule_score, 3),
                "model_score": None if self.model_score is None else round(self.model_score, 3)}


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def _k(x: float) -> str:
    """A rate for people: 41 k/s, 950 /s, 0.12 /s."""
    if x >= 1e6:
        return f"{x / 1e6:.1f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k/s"
    if x >= 10:
        return f"{x:.0f} /s"
    return f"{x:.2f} /s"


def _hosts(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def _strength(z: float) -> float:
    """How strongly a robust z-score speaks, in [0, 1]: 0 at the noise, 1 at 300 sigma."""
    return _clip(math.log10(1.0 + max(z, 0.0)) / 2.5)


#: The job's own latency (the pool's per-job statistics) is quoted when at least this many
#: times its usual level (its median over its intervals on that target).
OWN_LATENCY_X = 2.0


def _own_latency_lines(rows: list[dict[str, Any]], signal: str, what: str) -> list[str]:
    """The stall's job's own ``signal`` on the pool (``stall_pool_jobs``: Lustre job_stats),
    where it stood at least ``OWN_LATENCY_X`` times its usual level: the target most above
    its level, and how many others were."""
    up = [r for r in rows if r["signal"] == signal and r["baseline_ms"]
          and r["level_ms"] >= OWN_LATENCY_X * r["baseline_ms"]]
    if not up:
        return []
    top = up[0]  # highest ratio first (stall_pool_jobs, as analysis.stalls orders them)
    more = f" (and {len(up) - 1} more of its targets)" if len(up) > 1 else ""
    return [f"the job's own {what} latency on {top['target']} (the pool's per-job "
            f"statistics, job {top['pool_job_id']}): {top['level_ms']:.1f} ms vs "
            f"{top['baseline_ms']:.2f} ms its median, x{top['level_ms'] / top['baseline_ms']:.0f}"
            f" over {top['n_ops']:.0f} operations{more}"]


def _queue_lines(rows: list[dict[str, Any]], where: str) -> list[str]:
    """Evidence lines of the queue rows of ``stalls._queue_up`` (at most two)."""
    unit = {"queue_depth": "requests", "queue_wait_ms": "ms"}
    return [f"{r['signal'].replace('_', ' ')} on {r['host']} ({where}): {r['level']:.1f} vs "
            f"{r['base']:.1f} {unit.get(r['signal'], '')} median, {r['z']:.0f} sigma above its "
            "own noise" for r in rows[:2]]


def _queue_boost(rows: list[dict[str, Any]]) -> float:
    """Queue depth / wait up where a cause points raise its score by up to a quarter: a queue
    grows behind any slow target, so it is supporting evidence, never a cause alone."""
    return 1.0 + 0.25 * max((_strength(r["z"]) for r in rows), default=0.0)


def _pool_wide(f: Mapping[str, Any]) -> str | None:
    """The note that the pool's write latency is up on most of the job's targets, or None."""
    up, n = f.get("write_latency_up") or [], f.get("write_latency_n_targets") or 0
    if not n or f.get("write_latency_share_up", 0.0) <= POOL_WIDE_SHARE:
        return None
    # Write latency up on most of the job's targets is the pool as a whole: evidence of
    # saturation where the pool was at its ceiling (_saturation_verdict), else a note.
    return (f"pool write latency up on {len(up)}/{n} of the job's targets ({_hosts(up)}): the "
            "pool as a whole is slow, not GC on the slow ranks' targets")


def pool_notes(f: Mapping[str, Any]) -> list[str]:
    """What the pool's write latency says when it supports no cause: up on most of the job's
    targets (the pool as a whole), or up on the slow ranks' targets with no background-work
    telemetry to show GC (Lustre reports none)."""
    wide = _pool_wide(f)
    out = [] if wide is None else [wide]
    if wide is None and f.get("write_latency_slow_up") and not f.get("background_slow") \
            and f.get("gc_active_slow", 0.0) <= 0 and f.get("wa_z_slow", 0.0) < Z_ELEVATED:
        out.append(f"pool write latency up on the slow ranks' targets "
                   f"({_hosts(f['write_latency_slow_up'])}): "
                   f"{f['write_latency_ms_slow']:.1f} ms vs {f['write_latency_base_ms']:.2f} "
                   "ms median, but the pool reports no background work there (no GC "
                   "telemetry): gc cannot be confirmed")
    return out


def rule_verdicts(f: Mapping[str, Any]) -> list[CauseVerdict]:
    """Rule score, support and evidence of each cause for one stall's features.

    A cause is supported only by a signal that stands out of its own series' noise
    (``Z_ELEVATED``) on the slow ranks' hosts *and* singles them out (separation at least
    ``SEPARATION_SUPPORT``): activity as high on the checkpoint's healthy hosts is no cause.
    """
    data_side = 0.5 + 0.5 * (1.0 - f["metadata_share"])
    out = []
    saturation = _saturation_verdict(f, data_side)
    ceiling = _ceiling(f["pool_load"]["utilisation_median"]) if saturation.supported else 0.0

    # fabric_pause: pause frames / PortXmitWait on the slow ranks' NICs, out of their noise
    # and not on the checkpoint's other nodes.
    z, sep = f["fabric_z_slow"], f["fabric_separation"]
    fab_support = z >= Z_ELEVATED and sep >= SEPARATION_SUPPORT
    fab_score = _strength(z) * _clip(sep) * data_side
    ev = []
    incast = saturation.supported and z >= Z_ELEVATED
    if incast:
        # pauses on the writers of a pool at its ceiling: the incast of the burst (a switch
        # pauses its senders when the pool's ports queue up), its consequence, ranked below
        fab_score *= 1.0 - ceiling
    if z >= Z_ELEVATED:
        hosts = f.get("fabric_hosts_elevated") or []
        leaves = f.get("slow_leaves") or []
        where = (f" of {leaves[0]}" if len(leaves) == 1 else "")
        base = f["fabric_base_slow"]
        times = f" (x{f['fabric_rate_slow'] / base:.0f})" if base > 0 else ""
        ev.append(f"pause / PortXmitWait on {len(hosts)}/{len(f['slow_nodes'])} slow nodes"
                  f"{where} ({_hosts(hosts or f['slow_nodes'])}): {_k(f['fabric_rate_slow'])} vs "
                  f"{_k(base)} baseline{times}, {z:.0f} sigma above its own noise")
        others = f.get("fabric_others_elevated") or []
        if others:
            ev.append(f"as high on {len(others)} of the checkpoint's other nodes "
                      f"({_hosts(others)}): not specific to the slow ranks")
        elif f["fabric_log_contrast"] > 0.3:
            ev.append(f"x{10 ** f['fabric_log_contrast']:.0f} the checkpoint's other nodes")
    if f["leaf_purity"] > 0.5 and f.get("top_leaf"):
        ev.append(f"slow ranks cluster on leaf {f['top_leaf']} (purity {f['leaf_purity']:.2f})")
    if incast:
        ev.append("the pool was at its ceiling over the window (saturation): pauses on its "
                  "writers are the burst's incast, a consequence ranked below it")
        saturation.evidence.append(
            f"pause / PortXmitWait up on {len(f.get('fabric_hosts_elevated') or [])}/"
            f"{len(f['slow_nodes'])} of the slow ranks' nodes: the incast of the saturated "
            "pool, its consequence, not its cause")
    out.append(CauseVerdict("fabric_pause", fab_score, fab_support, fab_score, evidence=ev))

    # gc: the slow ranks' drives / targets collect garbage: write amplification (OCP media vs
    # SMART host bytes), gc_active, or controller busy time out of their noise, on the slow
    # ranks' targets only. Busy time counts where it also stands out of the other targets'
    # (busy_targets_elevated): a drive is busy whenever a rank writes to it, so busy on every
    # drive of the checkpoint is the checkpoint, not GC.
    wz, gca, sep = f["wa_z_slow"], f["gc_active_slow"], f["wa_separation"]
    gca_z = gca / 0.05  # gc_active is 0 when idle: its noise floor (stalls.NOISE_FLOOR)
    busy_z = f["busy_z_slow"] if f.get("busy_targets_elevated") else 0.0
    gc_support = max(wz, gca_z, busy_z) >= Z_ELEVATED and sep >= SEPARATION_SUPPORT
    # Busy time says less than the NAND writes do (host writes keep a controller busy too).
    strength = max(_strength(wz), _clip(gca), 0.5 * _strength(f["free_blocks_z_slow"]),
                   0.75 * _strength(busy_z))
    concentration = 0.5 + 0.5 * _clip(f["target_purity"])
    gc_score = strength * _clip(sep) * data_side * concentration
    # The pool's write latency up on a few targets, the slow ranks', and their queues back
    # GC evidence up (raise the score); never a support alone: a target is slow for many
    # reasons, and Lustre reports no GC to tell which (pool_notes says so).
    wl_few = (bool(f.get("write_latency_slow_up"))
              and f.get("write_latency_separation", 0.0) >= SEPARATION_SUPPORT
              and f.get("write_latency_share_up", 0.0) <= POOL_WIDE_SHARE)
    if gc_support:
        if wl_few:
            gc_score = min(1.0, gc_score * (1.0 + 0.25 * _strength(f["write_latency_z_slow"])))
        gc_score = min(1.0, gc_score * _queue_boost(f.get("queue_slow") or []))
    ev = []
    targets = f.get("slow_targets") or []
    for b in (f.get("background_slow") or [])[:3]:
        if b["signal"] == "gc_active":
            continue  # its own line below
        ev.append(f"{b['kind']} on {b['host']}: {b['level']:.2f} of the window (others "
                  f"{b['others']:.2f}), {b['z']:.0f} sigma above its own noise")
    # gc_active's own line, as the pool's gc flag reads (background_active kinds: lines above)
    if gca > 0 and set(f.get("background_signals") or ["gc_active"]) == {"gc_active"}:
        ev.append(f"gc_active on the slow ranks' targets ({_hosts(targets)}): {gca:.2f} of the "
                  f"window (others {gca - f['gc_active_contrast']:.2f})")
    if wz >= Z_ELEVATED and f.get("wa_detail"):
        d = f["wa_detail"]
        every = f", one sample per {d['interval_s']:.0f} s" if d.get("interval_s") else ""
        ev.append(f"write amplification on {d['host']}: {d['wa']:.2f} vs {d['base']:.2f} "
                  f"median (media vs host bytes written{every}), {wz:.0f} sigma above its own "
                  "noise")
    if f["free_blocks_z_slow"] >= Z_ELEVATED:
        ev.append(f"free blocks {f['free_blocks_drop_slow']:.0f} percentage points below their "
                  "median on the slow ranks' drives")
    if busy_z >= Z_ELEVATED:
        times = (f" (x{f['busy_x_others']:.1f} the other targets')"
                 if f.get("busy_x_others") else "")
        ev.append(f"controller busy time on {_hosts(f['busy_targets_elevated'])}: "
                  f"{busy_z:.0f} sigma above its own noise{times}")
    elif f["busy_z_slow"] >= Z_ELEVATED:
        against = ("no higher than on the other ranks' targets" if f.get("busy_x_others")
                   else "with no other ranks' target to compare with")
        ev.append(f"controller busy time {f['busy_z_slow']:.0f} sigma above its own noise, "
                  f"{against}: drives are busy whenever ranks write, not a sign of GC alone")
    if f["target_purity"] > 0.5 and f.get("top_target"):
        ev.append(f"slow ranks cluster on target {f['top_target']} "
                  f"(purity {f['target_purity']:.2f})")
    if max(wz, gca_z, busy_z) >= Z_ELEVATED and sep < SEPARATION_SUPPORT:
        ev.append("as high on targets the fast ranks use: not specific to the slow ranks")
    if gc_support and wl_few:
        ev.append(f"pool write latency on {_hosts(f['write_latency_slow_up'])}: "
                  f"{f['write_latency_ms_slow']:.1f} ms vs {f['write_latency_base_ms']:.2f} ms "
                  f"median, {f['write_latency_z_slow']:.0f} sigma above its own noise, on "
                  f"{len(f.get('write_latency_up') or [])}/{f['write_latency_n_targets']} of "
                  "the job's targets")
    if gc_support:
        ev += _queue_lines(f.get("queue_slow") or [], "a slow ranks' target")
        ev += _own_latency_lines(f.get("pool_job") or [], "write_latency_ms", "write")
    wide = _pool_wide(f)
    if wide is not None:
        ev.append(wide)
    out.append(CauseVerdict("gc", gc_score, gc_support, gc_score, evidence=ev))

    # metadata: pool metadata latency out of its noise; open/close time up across many ranks.
    mz = f["metadata_latency_z"]
    share = f["metadata_share"]
    time_there = share >= 0.3 or f["has_phases"] == 0
    md_support = (mz >= Z_ELEVATED and time_there) or (
        share >= 0.7 and f["slow_frac"] >= 0.5 and f["has_phases"] > 0)
    md_score = max(_strength(mz) * (0.3 + 0.7 * share) * float(time_there),
                   0.6 * share * f["slow_frac"] * f["has_phases"])
    if md_support:
        md_score = min(1.0, md_score * _queue_boost(f.get("queue_metadata") or []))
    ev = []
    if mz >= Z_ELEVATED:
        on = (f" on {f['metadata_host']} (the pool's metadata service)"
              if f.get("metadata_on_service") else "")
        ev.append(f"pool metadata latency{on} {f['metadata_latency_ms']:.1f} ms vs "
                  f"{f['metadata_latency_base_ms']:.2f} ms median, {mz:.0f} sigma above its "
                  "own noise")
    if md_support:
        ev += _queue_lines(f.get("queue_metadata") or [], "the metadata service")
    ev += _own_latency_lines(f.get("pool_job") or [], "metadata_latency_ms", "metadata")
    if f["has_phases"] and share >= 0.3:
        ev.append(f"{share:.0%} of the slow ranks' extra time in open/close, "
                  f"{f['slow_frac']:.0%} of ranks slow")
    out.append(CauseVerdict("metadata", md_score, md_support, md_score, evidence=ev))
    out.append(saturation)
    return out


#: How ``stall_saturation.capacity_source`` reads in evidence.
CAPACITY_SOURCES = {
    "configured": "configured",
    "telemetry": "estimated: the most its telemetry showed it taking with healthy latency",
    "records": "estimated: the most the ranks' records showed it taking",
}


def _bytes(n: float) -> str:
    """Bytes for people: 9.4 TB, 310 GB, 12 MB."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _ceiling(utilisation: float) -> float:
    """How strongly a pool's load over a stall's window says it was at its ceiling, in
    [0, 1]: 0 at half its capacity, 1 from 0.9 of it."""
    return _clip((utilisation - 0.5) / 0.4)


def _saturation_verdict(f: Mapping[str, Any], data_side: float) -> CauseVerdict:
    """saturation: the shared pool wrote at its ceiling over the stall's window
    (``CEILING_SHARE``), every rank slowed rather than a few (``SATURATION_SLOW_FRAC``), the
    slow ranks' extra time in the data path, not in open/close, and no metadata latency out of
    its noise with open/close time behind it (metadata's); where the pool reports write
    latency, up on most of the job's targets, not on a few (GC's)."""
    load = f.get("pool_load") or {}
    u = load.get("utilisation_median")
    if u is None:
        return CauseVerdict("saturation", 0.0, False, 0.0)
    n_lat = f.get("write_latency_n_targets") or 0
    wide = n_lat > 0 and f.get("write_latency_share_up", 0.0) > POOL_WIDE_SHARE
    few = (n_lat > 0 and not wide and bool(f.get("write_latency_up"))
           and f.get("write_latency_separation", 0.0) >= SEPARATION_SUPPORT)
    broad = f["slow_frac"] >= SATURATION_SLOW_FRAC
    # no metadata-specific evidence: the extra time in write/fsync, not open/close, and no
    # metadata latency out of its noise that open/close time confirms (a burst of ranks
    # creating their files raises the metadata service's latency a little too: alone, that
    # is the burst's, not a metadata cause)
    share, has_phases = f["metadata_share"], f["has_phases"]
    md_latency = f.get("metadata_latency_z", 0.0) >= Z_ELEVATED and (
        has_phases == 0 or share >= 0.3)
    data_path = (has_phases == 0 or share < 0.5) and not md_latency
    # the records alone show the jobs' demand against their own busiest seconds: a ceiling
    # needs the pool's measured throughput or a configured capacity
    known = bool(load.get("has_measured")) or load.get("capacity_source") == "configured"
    support = u >= CEILING_SHARE and broad and data_path and not few and known
    score = (_ceiling(u) * (0.5 + 0.5 * f["slow_frac"]) * data_side
             * (1.0 if wide or not n_lat else 0.8))
    ev = []
    if u >= CEILING_SHARE:
        cap = load["capacity_bps"]
        source = CAPACITY_SOURCES.get(str(load.get("capacity_source")),
                                      str(load.get("capacity_source")))
        ev.append(f"pool {load['pool']} wrote at {u:.0%} of its capacity ({cap / 1e9:.1f} GB/s,"
                  f" {source}) over the stall's window (median of its {load['n_seconds']} s; "
                  f"{load['saturated_share']:.0%} of them saturated)")
        jobs = load.get("jobs") or []
        shares = ", ".join(
            ("this job" if j["job_id"] == f.get("job_id") else j["job_id"])
            + f" {j['share']:.0%}" for j in jobs[:3])
        more = f" (+{len(jobs) - 3} more)" if len(jobs) > 3 else ""
        ev.append(f"{load['peak_ranks']:,} ranks at once of {load['n_jobs']} "
                  f"job{'s' if load['n_jobs'] != 1 else ''} wrote "
                  f"{_bytes(load['demand_bytes'])} in {load['n_seconds']} s against "
                  f"{cap / 1e9:.1f} GB/s: {shares}{more}")
        if not broad:
            ev.append(f"but only {f['slow_frac']:.0%} of the ranks were slow: a burst slows "
                      "every rank")
        if few:
            ev.append("but the pool's write latency is up on a few of the job's targets, the "
                      "slow ranks', not across the pool")
    wide_line = _pool_wide(f)
    if support and wide_line is not None:
        ev.append(wide_line)
    if support:
        ev += _queue_lines(f.get("queue_slow") or [], "a target of the job")
    return CauseVerdict("saturation", score, support, score, evidence=ev)


def feature_matrix(features: pl.DataFrame) -> np.ndarray:
    """The model's input: ``FEATURES`` with ratios on a log scale."""
    cols = []
    for name in FEATURES:
        v = features[name].cast(pl.Float64).fill_null(0.0).to_numpy()
        if name == "ratio_to_baseline":
            v = np.log10(np.maximum(v, 1e-3))
        elif name.endswith("_z") or "_z_" in name:  # robust z-scores: signed log scale
            v = np.sign(v) * np.log1p(np.abs(v))
        cols.append(v)
    return np.column_stack(cols) if cols else np.zeros((0, len(FEATURES)))


class AttributionModel:
    """A scikit-learn classifier over ``FEATURES`` (``MODEL_LABELS`` as classes)."""

    def __init__(self, estimator: Any, meta: dict[str, Any], calibration: Any = None) -> None:
        self.estimator = estimator
        self.meta = meta
        #: Isotonic map from a stall's raw top score to the chance that its top cause is right
        #: (``fit_calibration``); None: scores stay raw.
        self.calibration = calibration

    @classmethod
    def train(cls, features: pl.DataFrame, labels: list[str], *, seed: int = 0,
              meta: dict[str, Any] | None = None) -> AttributionModel:
        """Fit on labelled stalls (labels from ``MODEL_LABELS``)."""
        from sklearn.ensemble import GradientBoostingClassifier

        from ckptwatch.errors import ModelError

        causes = sorted(set(labels))
        if len(causes) < 2:
            only = causes[0] if causes else "none"
            raise ModelError(f"{len(labels)} labelled stall(s), of one cause ({only}): a model "
                             "needs stalls of at least two causes (use more seeds, or longer "
                             "or larger scenarios)")
        est = GradientBoostingClassifier(n_estimators=150, max_depth=3, learning_rate=0.1,
                                         subsample=0.9, random_state=seed)
        est.fit(feature_matrix(features), np.array(labels))
        return cls(est, {**(meta or {}), "features": list(FEATURES), "n_train": len(labels)})

    def fit_calibration(self, features: pl.DataFrame, labels: list[str], *,
                        seed: int = 0) -> None:
        """Fit ``calibration`` on labelled stalls (full feature rows, with their context):
        out-of-fold model probabilities (5-fold cross-validation, so the map learns how right
        the model is on stalls it has not seen), the raw top score of each stall, and whether
        its top cause was the truth; an isotonic regression of the one on the other."""
        from collections import Counter

        from sklearn.base import clone
        from sklearn.isotonic import IsotonicRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

        x, y = feature_matrix(features), np.array(labels)
        k = min(5, *Counter(labels).values())
        if k < 2:  # a cause with one stall: no fold could learn it and test it too
            self.calibration = None
            self.meta["calibration"] = {"method": None, "n": len(labels),
                                        "why": "too few stalls of some cause to calibrate"}
            return
        folds = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        proba = cross_val_predict(clone(self.estimator), x, y, cv=folds, method="predict_proba")
        classes = sorted(set(labels))
        scores, right = [], []
        for row, p, truth in zip(features.iter_rows(named=True), proba, labels, strict=True):
            probs = {c: float(p[classes.index(c)]) if c in classes else 0.0
                     for c in MODEL_LABELS}
            top = attribute_one(row, probs)[0]
            scores.append(top.score)
            right.append(float(top.cause == truth))
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip", increasing=True)
        iso.fit(np.array(scores), np.array(right))
        self.calibration = iso
        self.meta["calibration"] = {"method": "isotonic", "n": len(labels),
                                    "out_of_fold_accuracy": float(np.mean(right))}

    def calibrate(self, score: float) -> float:
        """The calibrated form of a raw combined score (itself without ``calibration``)."""
        if self.calibration is None:
            return score
        return float(self.calibration.predict(np.array([score]))[0])

    def probabilities(self, features: pl.DataFrame) -> list[dict[str, float]]:
        """Per stall: probability of each label."""
        if features.height == 0:
            return []
        proba = self.estimator.predict_proba(feature_matrix(features))
        classes = list(self.estimator.classes_)
        return [{c: float(p[classes.index(c)]) if c in classes else 0.0 for c in MODEL_LABELS}
                for p in proba]

    def save(self, path: Path) -> None:
        """Write the model (joblib) next to a JSON card of how it was built."""
        import json

        import joblib

        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump({"estimator": self.estimator, "meta": self.meta,
                     "calibration": self.calibration}, path)
        path.with_suffix(".json").write_text(json.dumps(self.meta, indent=2, default=str))

    @classmethod
    def load(cls, path: Path) -> AttributionModel:
        """Read a model written by ``save``; features must match this version's."""
        import joblib

        from ckptwatch.errors import ModelError

        blob = joblib.load(path)
        if blob.get("meta", {}).get("features") != list(FEATURES):
            raise ModelError(f"model {path} was built for other features; rebuild it with "
                                 "`ckptwatch train-model`")
        return cls(blob["estimator"], blob["meta"], blob.get("calibration"))


def judgeable(coverage: Mapping[str, Any] | None) -> dict[str, bool]:
    """Per cause: whether any family it needs (``NEEDS``) reached the stall (``coverage``: a
    ``stall_coverage`` row; None: coverage unknown, every cause judged as before)."""
    if coverage is None:
        return dict.fromkeys(CAUSES, True)
    can = {c: any(bool(coverage.get(f"has_{fam}")) for fam in fams)
           for c, fams in NEEDS.items()}
    # a checkpoint that wrote to no shared pool cannot have saturated one: judged, not it
    can["saturation"] = can["saturation"] or not coverage.get("writes_to_pool", True)
    return can


def _names(items: list[str], limit: int = 4) -> str:
    return _hosts(sorted(items), limit)


def coverage_evidence(coverage: Mapping[str, Any] | None, f: Mapping[str, Any]) -> list[str]:
    """One line per cause that cannot be judged: which telemetry did not reach which hosts."""
    if coverage is None:
        return []
    can = judgeable(coverage)
    out = []
    if not can["fabric_pause"]:
        leaves = list(coverage.get("fabric_missing_leaves") or [])
        nodes = list(coverage.get("fabric_missing_nodes") or f.get("slow_nodes") or [])
        where = (f"{_names(leaves)}'s nodes ({_names(nodes)})" if leaves
                 else f"the slow ranks' nodes ({_names(nodes)})" if nodes
                 else "the slow ranks' nodes")
        out.append(f"no fabric counters (pause / PortXmitWait) reached {where}: fabric_pause "
                   "cannot be judged")
    targets = list(f.get("slow_targets") or [])
    on_targets = f"the slow ranks' targets ({_names(targets)})" if targets else \
        "the slow ranks' targets"
    if not can["gc"]:
        out.append(f"no SMART or pool GC telemetry reached {on_targets}: gc cannot be judged")
    if not can["saturation"]:
        out.append("no pool telemetry reached the job's pool: its write throughput is unknown "
                   "(the records show only these jobs' demand): saturation is judged only "
                   "against a configured capacity ([pool] write_bandwidth_gbs)")
    if not can["metadata"]:
        out.append(f"no pool metadata telemetry reached {on_targets} and the slow ranks' "
                   "records carry no phase seconds: metadata cannot be judged")
    return out


def attribute_one(f: Mapping[str, Any], proba: Mapping[str, float] | None = None,
                  calibrate: Callable[[float], float] | None = None) -> list[CauseVerdict]:
    """Ranked causes of one stall (``unknown`` first when nothing supports a cause;
    ``no_telemetry``, score 0, first when none of the ``FEEDS`` reached the stall (a cause the
    records' phases support is ranked below it):
    ``f["coverage"]``, a ``stall_coverage`` row). ``calibrate``: maps each ranked score to a
    calibrated one (``AttributionModel.calibrate``), after ranking on the raw scores."""
    verdicts = rule_verdicts(f)
    coverage = f.get("coverage")
    can = judgeable(coverage)
    for v in verdicts:
        if proba is not None:
            v.model_score = proba.get(v.cause, 0.0)
            v.score = 0.5 * v.rule_score + 0.5 * v.model_score
        if not v.supported:
            v.score = 0.0
    ranked = sorted((v for v in verdicts if v.supported), key=lambda v: -v.score)
    gaps = coverage_evidence(coverage, f)
    no_feed = coverage is not None and not any(coverage.get(f"has_{f}") for f in FEEDS)
    if coverage is not None and no_feed:
        # Without a feed no cause is confirmed: what the records' phases suggest stays ranked
        # below the verdict, never above it (day one on a cluster looks like this).
        judged = [c for c, ok in can.items() if ok]
        hint = next((v for v in ranked if v.score >= MIN_TOP_SCORE), None)
        if hint is not None:
            judged_note = (f"the records' phases point to {hint.cause} (score "
                           f"{hint.score:.2f}), with no pool, SMART or fabric telemetry to "
                           "confirm it")
        elif judged:
            judged_note = f"only {', '.join(judged)} could be judged, and it does not stand out"
        else:
            judged_note = "no cause can be judged"
        none = CauseVerdict(NO_TELEMETRY, 0.0, False, 0.0, None, [
            "no fabric, SMART or pool telemetry reached the slow ranks' hosts during the window "
            + (f"(only {', '.join(coverage.get('telemetry') or [])}): "
               if coverage.get("telemetry") else "(nor phases nor topology): ")
            + judged_note, *gaps])
        if calibrate is not None:
            for v in ranked:
                v.score = calibrate(v.score)
        return [none, *ranked]
    if not ranked or ranked[0].score < MIN_TOP_SCORE:
        p_unknown = proba.get(UNKNOWN) if proba else None
        # Sure that nothing stands out only as far as the causes that could be judged.
        top = (1.0 - (ranked[0].score if ranked else 0.0)) * sum(can.values()) / len(can)
        unknown = CauseVerdict(UNKNOWN, top if p_unknown is None else 0.5 * (top + p_unknown),
                               True, top, p_unknown,
                               ["no signal of gc, metadata or a fabric pause stands out on the "
                                "slow ranks' hosts during the window", *pool_notes(f), *gaps])
        ranked = [unknown, *ranked]
    elif gaps:
        ranked[0].evidence = [*ranked[0].evidence, *gaps]
    if calibrate is not None:
        for v in ranked:
            v.score = calibrate(v.score)
    return ranked


def attribute(features: pl.DataFrame, model: AttributionModel | None = None) -> list[
        list[CauseVerdict]]:
    """Ranked causes for every stall row of ``features``."""
    probas: list[dict[str, float] | None] = (
        list(model.probabilities(features)) if model is not None else [None] * features.height)
    cal = model.calibrate if model is not None and model.calibration is not None else None
    return [attribute_one(row, p, cal) for row, p in zip(features.iter_rows(named=True), probas,
                                                         strict=True)]


def load_default_model(path: Path | None = None) -> AttributionModel | None:
    """The model at ``path`` (default ``config.model_path()``), or None when none was built."""
    from ckptwatch.settings import model_path

    p = path or model_path()
    return AttributionModel.load(p) if p.exists() else None
