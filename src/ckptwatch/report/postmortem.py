"""Post-mortem of one stall: the data the notebook plots.

``notebooks/stall_postmortem.ipynb`` only calls these functions, the figures of
:mod:`ckptwatch.report.plots` and :func:`ckptwatch.report.display.show`; everything it shows is
computed here from the SQL marts (``checkpoint_ranks``, ``stall_ranks``, ``stalls``,
``postmortem_signals``, ``stg_checkpoint_writes``) and from the attribution
(:func:`ckptwatch.analysis.findings.attribute_stalls`), so it is testable without a kernel::

    case = open_stall("data/lake", "job-98372")           # the job's worst stall
    timeline = rank_timeline(case)                        # one row per rank and phase
    durations = rank_durations(case)                      # this checkpoint vs the job's normal
    chronic_slow_hosts(case)                              # hosts always a little slow
    signals = signal_window(case)                         # pause, PortXmitWait, gc, … around it
    evidence_table(case)                                  # the attribution's evidence

:func:`ckptwatch.report.notebook.execute_notebook` runs the notebook for one stall;
``ckptwatch postmortem`` is its command line.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, StallRecord
from ckptwatch.analysis.quantiles import quantiles
from ckptwatch.errors import StallNotFoundError
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.report.slow_hosts import SLOW_HOSTS_VIEWS, slow_hosts
from ckptwatch.safetext import escape_controls

#: The phases of a rank's checkpoint write, in the order they happen.
PHASES = ("open", "write", "fsync", "close")
#: Signals shown around the window: (panel, title, unit). Fabric counters are rates summed over
#: a host's NICs, ports and counters (as in ``stall_signals``); the rest are gauges.
SIGNAL_PANELS: tuple[tuple[str, str, str], ...] = (
    ("pause", "pause frames (PFC / link)", "frames/s"),
    ("xmit_wait", "InfiniBand PortXmitWait", "ticks/s"),
    ("gc_active", "gc_active (pool targets)", "fraction"),
    ("free_blocks", "free blocks", "%"),
    ("metadata_latency", "pool metadata latency", "ms"),
)
#: Host roles in :func:`signal_window`, most to least interesting.
ROLES = ("slow", "same leaf", "this checkpoint", "other")
#: Ranks drawn at most in the timeline (every slow rank, then the slowest others).
MAX_TIMELINE_RANKS = 96


@dataclass
class StallCase:
    """One stall opened for a post-mortem: the lake's connection and the stall's report."""

    con: duckdb.DuckDBPyConnection
    lake: Path
    #: The stall, as :func:`ckptwatch.analysis.findings.find_stalls` found it.
    stall: StallRecord
    #: True when a trained attribution model scored the causes (else rules only).
    with_model: bool

    @functools.cached_property
    def report(self) -> dict[str, Any]:
        """The stall's JSON form (the record of ``ckptwatch stalls --format json``)."""
        return self.stall.to_dict()

    @property
    def job(self) -> str:
        """The stall's job id."""
        return str(self.report["job_id"])

    @property
    def step(self) -> int:
        """The stall's checkpoint step."""
        return int(self.report["step"])

    @property
    def start_ts(self) -> datetime:
        """When the checkpoint's first rank started."""
        return datetime.fromisoformat(str(self.report["start_ts"]))

    @property
    def end_ts(self) -> datetime:
        """When its last rank finished (start + barrier time); with unfinished ranks, where the
        known window ends (the timeout, or the end of the data)."""
        return datetime.fromisoformat(str(self.report["end_ts"]))

    @property
    def title(self) -> str:
        """``job-1 step 42 (pool)``."""
        return f"{self.job} step {self.step} ({self.report['tier']})"


def worst_stall(stalls: Sequence[StallRecord]) -> StallRecord:
    """The stall with the longest barrier time (ties: the larger ratio to baseline)."""
    return max(stalls, key=lambda r: (r.barrier_s, r.ratio_to_baseline or 0.0))


def unknown_job(con: duckdb.DuckDBPyConnection, lake: Path | str, job: str) -> str | None:
    """None when the lake has checkpoints of ``job``; else the message that says it has not,
    naming up to ten jobs it has (control characters escaped: it is printed)."""
    known = run_sql(con, "select count(*) as n from checkpoint_latency where job_id = $job",
                    {"job": job})["n"][0]
    if known:
        return None
    jobs = run_sql(con, "select distinct job_id from checkpoint_latency order by 1 "
                   "limit 10")["job_id"].to_list()
    return escape_controls(f"job {job!r} has no checkpoints in {lake} (jobs there: "
                           f"{', '.join(jobs) or 'none'})")


#: The views a post-mortem reads (``connect(..., views=...)`` builds these and what they read,
#: not every view of ``sql/``): the attribution's, and the marts of the cells below.
POSTMORTEM_VIEWS = (*ATTRIBUTION_VIEWS, *SLOW_HOSTS_VIEWS, "checkpoint_latency",
                    "checkpoint_ranks", "postmortem_signals", "stg_checkpoint_writes",
                    "int_node_leaves")


def open_stall(lake: Path | str, job: str, step: int | None = None, *,
               con: duckdb.DuckDBPyConnection | None = None) -> StallCase:
    """Connect to the lake and find the stall ``job``/``step`` (``step`` None: the worst one).

    Raises :class:`StallNotFoundError` naming the job's stalls when ``step`` is not one of them.
    """
    from ckptwatch.analysis.attribution import load_default_model
    from ckptwatch.analysis.findings import attribute_stalls

    con = con or connect(lake, views=POSTMORTEM_VIEWS)
    model = load_default_model()
    reports = attribute_stalls(con, job=job, model=model).stalls
    if not reports:
        unknown = unknown_job(con, lake, job)
        if unknown:
            raise StallNotFoundError(unknown)
        raise StallNotFoundError(escape_controls(
            f"job {job!r} has no stall in {lake}: nothing to post-mortem (`ckptwatch stalls` "
            "lists every stall)"))
    if step is None:
        return StallCase(con, Path(lake), worst_stall(reports), model is not None)
    rec = next((r for r in reports if r.step == int(step)), None)
    if rec is None:
        steps = ", ".join(str(r.step) for r in reports[:20])
        raise StallNotFoundError(escape_controls(
            f"job {job} step {step} is not a stall (stalls of this job: {steps}); omit "
            "--step for the worst one"))
    return StallCase(con, Path(lake), rec, model is not None)


def headline(case: StallCase) -> str:
    """A Markdown paragraph: what stalled, how badly, whether and why it timed out, and the
    top cause."""
    r = case.report
    top = r["causes"][0]
    bound = "≥ " if r["barrier_is_lower_bound"] else ""
    ranks = ("no rank finished" if r["p50_s"] is None else
             f"rank p50 {r['p50_s']:.1f} s, p99 {r['p99_s']:.1f} s")
    lines = [
        f"### {case.title}: {bound}{r['barrier_s']:.1f} s barrier, "
        f"x{r['ratio_to_baseline']:.1f} the job's normal {r['baseline_s']:.1f} s",
        "",
        f"- window: {case.start_ts:%Y-%m-%d %H:%M:%S} → {case.end_ts:%H:%M:%S} UTC; "
        f"{ranks}; **{r['n_slow']} of {r['n_ranks'] + r['n_unfinished']} ranks slow**",
    ]
    if r["why_timed_out"]:
        lines.append(f"- **{r['why_timed_out']}**")
    if r["never_finished"]:
        lines.append(f"- **{r['never_finished']}**")
    lines.append(f"- top cause: **{top['cause']}** (score {top['score']:.2f}; attribution: "
                 f"{'rules + model' if case.with_model else 'rules only'})")
    lines += [f"  - {ev}" for ev in top["evidence"][:4]]
    if r.get("missing_telemetry"):
        lines.append(f"- telemetry that reached the slow ranks: "
                     f"{', '.join(r['telemetry']) or 'none'}; missing: "
                     f"{', '.join(r['missing_telemetry'])}")
    return "\n".join(lines)


# -- ranks ------------------------------------------------------------------------------------

#: The stalled checkpoint's ranks, in rank order.
_RANKS_SQL = """
select * exclude (job_id, step, tier) from checkpoint_ranks
where job_id = $job and step = $step
order by rank
"""


def rank_timeline(case: StallCase, max_ranks: int = MAX_TIMELINE_RANKS) -> pl.DataFrame:
    """One row per (rank, phase) of the stalled checkpoint, phases laid end to end.

    Columns: ``rank, node, leaf_switch, target, status, is_slow, duration_s, phase,
    phase_start_s, phase_s`` (seconds from the checkpoint's first start). Phases are
    ``PHASES`` plus ``other`` (time the phases do not account for); a rank without phase
    timings is one ``total`` segment. With more than ``max_ranks`` ranks, every slow rank is
    kept, then the slowest others (the frame's ``shown_of`` column says how many there were).
    """
    ranks = run_sql(case.con, _RANKS_SQL, {"job": case.job, "step": case.step})
    if ranks.height == 0:
        raise StallNotFoundError(f"no rank records for {case.title}")
    n_all = ranks.height
    if n_all > max_ranks:
        ranks = (ranks.sort(["is_slow", "duration_s"], descending=[True, True])
                 .head(max_ranks).sort("rank"))
    t0 = ranks["start_ts"].min()
    rows: list[dict[str, Any]] = []
    for r in ranks.iter_rows(named=True):
        offset = (r["start_ts"] - t0).total_seconds()
        base = {k: r[k] for k in ("rank", "node", "leaf_switch", "target", "status", "is_slow",
                                  "duration_s")}
        phases = [(p, r[f"{p}_s"]) for p in PHASES]
        if any(v is None for _, v in phases):
            rows.append({**base, "phase": "total", "phase_start_s": offset,
                         "phase_s": r["duration_s"]})
            continue
        at = offset
        for p, v in phases:
            rows.append({**base, "phase": p, "phase_start_s": at, "phase_s": float(v)})
            at += float(v)
        rest = float(r["duration_s"]) - (at - offset)
        if rest > 0.01 * float(r["duration_s"]):
            rows.append({**base, "phase": "other", "phase_start_s": at, "phase_s": rest})
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.lit(n_all).alias("shown_of"))


def slow_ranks(case: StallCase) -> pl.DataFrame:
    """The stall's slow ranks: where they ran and wrote, and which phases lost the time."""
    return run_sql(case.con, """
        select
            rank, node, leaf_switch, target, status,
            round(duration_s, 2) as duration_s,
            round(normal_rank_s, 2) as normal_s,
            round(duration_s / nullif(normal_rank_s, 0), 1) as x_normal,
            round(open_s - normal_open_s, 2) as open_excess_s,
            round(write_s - normal_write_s, 2) as write_excess_s,
            round(fsync_s - normal_fsync_s, 2) as fsync_excess_s,
            round(close_s - normal_close_s, 2) as close_excess_s,
        from stall_ranks
        where job_id = $job and step = $step and is_slow
        order by duration_s desc, rank
    """, {"job": case.job, "step": case.step})


@dataclass(frozen=True)
class RankDurations:
    """Rank durations of the stalled checkpoint against those of the job's normal checkpoints."""

    #: This checkpoint: ``rank, duration_s, is_slow``.
    this: pl.DataFrame
    #: Every rank duration of the job's checkpoints that are not stalls (``duration_s``).
    normal: pl.DataFrame
    #: The job's normal rank duration (median of per-checkpoint medians, as in stall_ranks).
    normal_rank_s: float
    #: A rank is slow at or above this duration.
    slow_threshold_s: float
    n_normal_checkpoints: int


def rank_durations(case: StallCase) -> RankDurations:
    """This checkpoint's rank durations and the job's normal (non-stall) rank durations; the
    slow-rank threshold is the one ``stall_ranks`` applied on this connection (its session
    variables: the defaults of ``sql/session.sql`` or the overrides the stalls were found
    with)."""
    this = run_sql(case.con, """
        select rank, duration_s, is_slow, normal_rank_s
        from stall_ranks where job_id = $job and step = $step order by rank
    """, {"job": case.job, "step": case.step})
    normal = run_sql(case.con, """
        select writes.step, writes.duration_s
        from stg_checkpoint_writes as writes
        semi join (select job_id, step from stalls where job_id = $job and not is_stall) as ok
            using (job_id, step)
        where writes.job_id = $job
    """, {"job": case.job})
    normal_s = float(this["normal_rank_s"].drop_nulls().first() or 0.0)  # type: ignore[arg-type]
    active = run_sql(case.con, "select cast(getvariable('slow_rank_factor') as double) as f, "
                     "cast(getvariable('slow_rank_min_excess_s') as double) as e").row(0)
    factor, min_excess_s = active
    threshold = max(factor * normal_s, normal_s + min_excess_s)
    return RankDurations(this.drop("normal_rank_s"), normal.select("duration_s"), normal_s,
                         threshold, normal["step"].n_unique())


def duration_summary(d: RankDurations) -> pl.DataFrame:
    """p50 / p90 / p99 / max of the rank durations: this checkpoint vs the job's normal (the
    quantiles of ``checkpoint_latency``, :func:`ckptwatch.analysis.quantiles.quantiles`)."""
    rows = []
    for label, s in (("this checkpoint", d.this["duration_s"]),
                     ("normal checkpoints", d.normal["duration_s"])):
        if s.len() == 0:
            continue
        qs = quantiles(s.to_list(), (0.5, 0.9, 0.99))
        rows.append({"ranks of": label, "n": s.len(),
                     **{f"{q}_s": round(float(v or 0.0), 2)
                        for q, v in zip(("p50", "p90", "p99"), qs, strict=True)},
                     "max_s": round(float(s.cast(pl.Float64).max() or 0.0), 2)})  # type: ignore[arg-type]
    return pl.DataFrame(rows)


# -- signals ----------------------------------------------------------------------------------

#: The post-mortem's signal panels in [t0, t1], per host.
_SIGNALS_SQL = """
select panel, host, ts, value from postmortem_signals
where ts >= $t0 and ts <= $t1
order by panel, host, ts
"""


def window_bounds(case: StallCase, pad_s: float | None = None) -> tuple[datetime, datetime]:
    """The time range of :func:`signal_window`: the checkpoint ± ``pad_s`` (default: the
    larger of 10 minutes and 5 barrier times, so slow counters have samples either side)."""
    pad = pad_s if pad_s is not None else max(600.0, 5.0 * float(case.report["barrier_s"]))
    return case.start_ts - timedelta(seconds=pad), case.end_ts + timedelta(seconds=pad)


def host_roles(case: StallCase) -> dict[str, str]:
    """Host -> role for the checkpoint's hosts: ``slow`` (a slow rank ran or wrote there),
    ``same leaf`` (a node on a slow node's leaf switch), ``this checkpoint`` (ran or served
    its ranks). Hosts not listed are ``other``."""
    ranks = run_sql(case.con, """
        select node, leaf_switch, target_host, is_slow from stall_ranks
        where job_id = $job and step = $step
    """, {"job": case.job, "step": case.step})
    leaves = run_sql(case.con, "select node, leaf_switch from int_node_leaves")
    slow = ranks.filter(pl.col("is_slow"))
    slow_hosts = set(slow["node"].to_list()) | set(slow["target_host"].drop_nulls().to_list())
    slow_leaves = set(slow["leaf_switch"].drop_nulls().to_list())
    roles: dict[str, str] = {}
    for node, leaf in leaves.iter_rows():
        if leaf in slow_leaves:
            roles[node] = "same leaf"
    for host in set(ranks["node"].to_list()) | set(ranks["target_host"].drop_nulls().to_list()):
        roles[host] = "this checkpoint"
    for host in slow_hosts:
        roles[host] = "slow"
    return roles


def signal_window(case: StallCase, pad_s: float | None = None) -> pl.DataFrame:
    """The signals of :data:`SIGNAL_PANELS` for every host around the stall's window.

    Columns: ``panel, host, role, ts, value``. Counters (pause, PortXmitWait) are rates over
    the interval that ends at ``ts``, summed over the host's NICs and counters; gauges are the
    sample's value (averaged over a host's drives). ``role`` is from :func:`host_roles`.
    """
    t0, t1 = window_bounds(case, pad_s)
    frame = run_sql(case.con, _SIGNALS_SQL, {"t0": t0, "t1": t1})
    roles = host_roles(case)
    return frame.with_columns(
        pl.col("ts").dt.convert_time_zone("UTC"),
        pl.col("host").replace_strict(roles, default="other", return_dtype=pl.String)
        .alias("role"))


def signal_summary(signals: pl.DataFrame, case: StallCase) -> pl.DataFrame:
    """Per panel and role: mean and peak during the checkpoint vs mean outside it."""
    inside = (pl.col("ts") >= case.start_ts) & (pl.col("ts") <= case.end_ts + timedelta(
        seconds=90))
    if signals.height == 0:
        return pl.DataFrame()
    order = {p: i for i, (p, _, _) in enumerate(SIGNAL_PANELS)}
    return (signals.group_by("panel", "role")
            .agg(pl.col("host").n_unique().alias("hosts"),
                 pl.col("value").filter(inside).mean().alias("during_mean"),
                 pl.col("value").filter(inside).max().alias("during_peak"),
                 pl.col("value").filter(~inside).mean().alias("outside_mean"))
            .with_columns(pl.col("panel").replace_strict(order, default=99).alias("_o"),
                          pl.col("role").replace_strict({r: i for i, r in enumerate(ROLES)},
                                                        default=9).alias("_r"))
            .sort("_o", "_r").drop("_o", "_r"))


# -- evidence ---------------------------------------------------------------------------------


def evidence_table(case: StallCase) -> pl.DataFrame:
    """The attribution's verdicts: one row per evidence line, causes ranked."""
    rows = []
    for i, c in enumerate(case.report["causes"], start=1):
        lines = c["evidence"] or ["(no signal of this cause)"]
        for ev in lines:
            rows.append({"rank": i, "cause": c["cause"], "score": c["score"],
                         "supported": c["supported"], "rule_score": c["rule_score"],
                         "model_score": c["model_score"], "evidence": ev})
    return pl.DataFrame(rows, schema={"rank": pl.Int64, "cause": pl.String,
                                      "score": pl.Float64, "supported": pl.Boolean,
                                      "rule_score": pl.Float64, "model_score": pl.Float64,
                                      "evidence": pl.String})


def chronic_slow_hosts(case: StallCase) -> pl.DataFrame:
    """The job's chronic slow hosts (``slow_hosts`` mart: consistently slower than the rest
    over the job's checkpoints, docs/slow-hosts.md), most consistently slow first, and whether
    each held slow ranks of this stall (``slow_here``): a stall on a host that is always a
    little slow is a different story from one on a healthy host."""

    hosts = slow_hosts(case.con, case.job)
    here = run_sql(case.con, """
        select distinct node
        from stall_ranks
        where job_id = $job and step = $step and is_slow
    """, {"job": case.job, "step": case.step})["node"].to_list()
    return hosts.select(
        "node", "n_checkpoints", "n_slowest", "n_above_median",
        pl.col("median_excess_pct").round(1), pl.col("median_excess_s").round(2),
        pl.col("p_value").round(4), pl.col("node").is_in(here).alias("slow_here"))


def next_steps(case: StallCase) -> str:
    """Markdown: commands to dig further into this stall."""
    lake = case.lake
    return "\n".join([
        "- every feature behind the scores: "
        f"`ckptwatch explain --lake {lake} --job {case.job} --step {case.step}`",
        "- the signals during the window, per host and series: "
        f"`ckptwatch sql --lake {lake} \"select * from stall_signals where job_id = "
        f"'{case.job}' and step = {case.step} order by level_vs_baseline desc\"`",
        f"- the job's headroom to its timeout: `ckptwatch alerts --lake {lake}`",
        "- hosts consistently slower than the rest of the job's checkpoints: "
        f"`ckptwatch slow-hosts --lake {lake} --job {case.job}`",
    ])
