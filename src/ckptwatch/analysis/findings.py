"""Stalls found and attributed, once: the typed records every later step reads.

``find_stalls`` is the one recipe "load the model, connect, detect, attribute" — the nightly
run calls it once and hands the :class:`StallFindings` to the alerts (``top_causes``) and the
daily report; ``ckptwatch stalls`` / ``explain`` / ``demo`` and the post-mortem call it too.
A :class:`StallRecord` crosses module boundaries; ``to_dict()`` is its JSON form (the keys of
``ckptwatch stalls --format json``). A stall whose ranks never finished carries
``n_unfinished``, ``timed_out`` and ``barrier_is_lower_bound`` and where its unfinished ranks
were last seen; :attr:`StallRecord.never_finished` says it in words. A stall that timed out
carries ``timeout_reason`` and ``n_timed_out``; :attr:`StallRecord.why_timed_out` says why.

Beyond one machine (the nightly flow's ``--dask``), :func:`find_stalls_by_job` splits the
stalled jobs into groups, attributes each group on a connection of its own
(:func:`stalls_of_group`, a task) and merges them in the order of one run: a stall's features
read its own job's checkpoints (baseline, fabric history) and, for the pool's load, every
job's records, whatever the filter, so a job's stalls are the same in a group as in the
whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ckptwatch.analysis.attribution import (
    FEATURES,
    AttributionModel,
    CauseVerdict,
    attribute,
    load_default_model,
)
from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.stalls import Jobs, stall_features
from ckptwatch.analysis.timeouts import why_timed_out
from ckptwatch.analysis.unfinished import never_finished
from ckptwatch.errors import ModelError, QueryError
from ckptwatch.lake.query import connect, run_sql

#: The views attribution reads (``stall_features``): a connection for it builds only these
#: and what they read.
ATTRIBUTION_VIEWS = ("stalls", "stall_ranks", "stall_signals", "int_signal_noise",
                     "counter_windows", "stall_coverage", "stall_pool_jobs",
                     "stall_saturation")


@dataclass(frozen=True)
class StallRecord:
    """One stall: the checkpoint's numbers, its ranked causes, the features behind them."""

    job_id: str
    step: int
    tier: str
    start_ts: str | None
    end_ts: str | None
    n_ranks: int
    barrier_s: float
    p50_s: float | None
    p99_s: float | None
    baseline_s: float
    ratio_to_baseline: float
    n_stragglers: int
    n_slow: int
    causes: tuple[CauseVerdict, ...]
    features: Mapping[str, Any] = field(default_factory=dict)
    #: Ranks with a start marker, and those of them that never finished (no record).
    n_started: int = 0
    n_unfinished: int = 0
    #: The checkpoint timed out (``checkpoint_latency.timed_out``), and why
    #: (``timeout_reason``: status, unfinished or barrier; None when it did not); n_timed_out:
    #: its ranks whose record says timeout.
    timed_out: bool = False
    timeout_reason: str | None = None
    n_timed_out: int = 0
    #: With unfinished ranks ``barrier_s`` is a lower bound: the barrier lasted at least that.
    barrier_is_lower_bound: bool = False
    #: Where the unfinished ranks were last seen, most common first.
    unfinished_nodes: tuple[str, ...] = ()
    unfinished_leaves: tuple[str, ...] = ()
    unfinished_targets: tuple[str, ...] = ()
    #: Which telemetry families reached the slow ranks' hosts during the window
    #: (``stall_coverage``: ``telemetry``, ``missing``, ``has_*``, …); empty: not known.
    coverage: Mapping[str, Any] = field(default_factory=dict)

    @property
    def telemetry(self) -> tuple[str, ...]:
        """The telemetry families that reached the stall (fabric, smart, pool, topology,
        phases)."""
        return tuple(self.coverage.get("telemetry") or ())

    @property
    def missing_telemetry(self) -> tuple[str, ...]:
        """The families that did not."""
        return tuple(self.coverage.get("missing") or ())

    @property
    def cause(self) -> str:
        """The top cause (``unknown`` when nothing supports one, ``no_telemetry`` when no
        cause could be judged)."""
        return self.causes[0].cause

    @property
    def top(self) -> CauseVerdict:
        """The top cause's verdict."""
        return self.causes[0]

    @property
    def never_finished(self) -> str:
        """"3 of 512 ranks never finished step 5000; last seen on node017, leaf03, target
        pool0-tgt07" (empty when every rank finished)."""
        return never_finished(
            step=self.step, n_unfinished=self.n_unfinished,
            n_ranks=self.n_ranks + self.n_unfinished, nodes=self.unfinished_nodes,
            leaves=self.unfinished_leaves, targets=self.unfinished_targets,
            timed_out=self.timed_out)

    @property
    def why_timed_out(self) -> str:
        """"timed out: 16 of 16 ranks report timeout" (empty when it did not time out)."""
        return why_timed_out(reason=self.timeout_reason if self.timed_out else None,
                             n_timed_out=self.n_timed_out,
                             n_ranks=self.n_ranks + self.n_unfinished)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the stall's columns, ``cause``, ``causes`` (ranked) and ``features``."""
        out: dict[str, Any] = {k: getattr(self, k) for k in _COLUMNS}
        for k in _UNFINISHED_LISTS:
            out[k] = list(getattr(self, k))
        out["never_finished"] = self.never_finished
        out["why_timed_out"] = self.why_timed_out
        out["cause"] = self.cause
        out["telemetry"] = list(self.telemetry)
        out["missing_telemetry"] = list(self.missing_telemetry)
        out["coverage"] = dict(self.coverage)
        out["causes"] = [v.to_dict() for v in self.causes]
        out["features"] = dict(self.features)
        return out


_COLUMNS = ("job_id", "step", "tier", "start_ts", "end_ts", "n_ranks", "barrier_s", "p50_s",
            "p99_s", "baseline_s", "ratio_to_baseline", "n_stragglers", "n_slow", "n_started",
            "n_unfinished", "timed_out", "timeout_reason", "n_timed_out",
            "barrier_is_lower_bound")
_UNFINISHED_LISTS = ("unfinished_nodes", "unfinished_leaves", "unfinished_targets")


@dataclass(frozen=True)
class StallFindings:
    """Every stall found, with its ranked causes, and how they were attributed."""

    stalls: tuple[StallRecord, ...]
    with_model: bool

    def by_cause(self) -> dict[str, int]:
        """How many stalls each top cause has."""
        counts: dict[str, int] = {}
        for s in self.stalls:
            counts[s.cause] = counts.get(s.cause, 0) + 1
        return counts

    def top_causes(self, window: pl.DataFrame) -> dict[str, tuple[int, str]]:
        """Per job, the step and top cause of its worst stall among the checkpoints of
        ``window`` (``job_id``, ``step`` columns): what an alert names as the likely cause."""
        if window.height == 0:
            return {}
        steps = {(j, int(s)) for j, s in zip(window["job_id"], window["step"], strict=True)}
        best: dict[str, tuple[float, int, str]] = {}
        for r in self.stalls:
            if (r.job_id, r.step) in steps and r.barrier_s > best.get(r.job_id, (-1.0, 0, ""))[0]:
                best[r.job_id] = (r.barrier_s, r.step, r.cause)
        return {job: (step, cause) for job, (_b, step, cause) in best.items()}


def _iso(ts: Any) -> str | None:
    return ts.isoformat() if ts is not None else None


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def stall_records(features: pl.DataFrame,
                  verdicts: Iterable[list[CauseVerdict]]) -> tuple[StallRecord, ...]:
    """Typed records from the stall feature rows and their ranked verdicts."""
    out = []
    for row, ranked in zip(features.iter_rows(named=True), verdicts, strict=True):
        out.append(StallRecord(
            job_id=row["job_id"], step=int(row["step"]), tier=row["tier"],
            start_ts=_iso(row["start_ts"]), end_ts=_iso(row["end_ts"]),
            n_ranks=int(row["n_ranks"]), barrier_s=float(row["barrier_s"]),
            p50_s=_float_or_none(row["p50_s"]), p99_s=_float_or_none(row["p99_s"]),
            baseline_s=float(row["baseline_s"]),
            ratio_to_baseline=float(row["ratio_to_baseline"]),
            n_stragglers=int(row["n_stragglers"] or 0), n_slow=int(row["n_slow"] or 0),
            causes=tuple(ranked), features={k: row.get(k) for k in FEATURES},
            n_started=int(row.get("n_started") or 0),
            n_unfinished=int(row.get("n_unfinished") or 0),
            timed_out=bool(row.get("timed_out")),
            timeout_reason=row.get("timeout_reason"),
            n_timed_out=int(row.get("n_timed_out") or 0),
            barrier_is_lower_bound=bool(row.get("barrier_is_lower_bound")),
            coverage=dict(row.get("coverage") or {}),
            **{k: tuple(row.get(k) or ()) for k in _UNFINISHED_LISTS}))
    return tuple(out)


def attribute_stalls(con: duckdb.DuckDBPyConnection, *, job: Jobs = None,
                     model: AttributionModel | None = None,
                     settings: DetectionSettings | None = None) -> StallFindings:
    """Detect and attribute the stalls of an open connection (optionally one job, or a list
    of jobs)."""
    (settings or DetectionSettings()).apply(con)
    features = stall_features(con, job)
    return StallFindings(stall_records(features, attribute(features, model)), model is not None)


def find_stalls(lake_root: Path | str, *, job: Jobs = None,
                days: tuple[date, date] | None = None, model_path: Path | None = None,
                settings: DetectionSettings | None = None,
                memory_limit: str | None = None,
                con: duckdb.DuckDBPyConnection | None = None) -> StallFindings:
    """Every stall of the lake (``days``: only those days; ``job``: only that job, or those
    jobs) with its ranked causes: the trained model at ``model_path`` (default: the settings'
    model path) when one is built, else the rules alone. ``con``: an open connection of the
    lake that builds ``ATTRIBUTION_VIEWS`` (the nightly run's, over its days), read instead of
    a new one (``days`` and ``memory_limit`` are then its own) and left open."""
    model = load_default_model(model_path)
    if con is not None:
        return attribute_stalls(con, job=job, model=model, settings=settings)
    own = connect(lake_root, days=days, memory_limit=memory_limit, views=ATTRIBUTION_VIEWS)
    try:
        return attribute_stalls(own, job=job, model=model, settings=settings)
    finally:
        own.close()


@dataclass(frozen=True)
class JobGroup:
    """Some jobs' stalls to attribute on a connection of their own (:func:`stalls_of_group`,
    a task on a Dask worker): plain values, the settings resolved by the caller."""

    lake_root: str
    jobs: tuple[str, ...]
    days: tuple[date, date] | None
    memory_limit: str | None
    #: The attribution model file (absolute), None: the rules alone.
    model_path: str | None
    settings: DetectionSettings

    @property
    def label(self) -> str:
        """``job-1, job-2`` (``+N more`` beyond three): a task's name."""
        more = f" +{len(self.jobs) - 3} more" if len(self.jobs) > 3 else ""
        return ", ".join(self.jobs[:3]) + more


#: Runs :func:`stalls_of_group` on each group (Dask tasks, ...) and returns their findings in
#: group order; every group has ended when it returns or raises.
GroupMapper = Callable[[Sequence[JobGroup]], Sequence[StallFindings]]


def stalls_of_group(group: JobGroup) -> StallFindings:
    """The stalls of ``group.jobs`` with their ranked causes, on a connection of its own over
    ``group.days`` (the rows :func:`find_stalls` gives those jobs)."""
    model = None
    if group.model_path is not None:
        path = Path(group.model_path)
        if not path.is_file():
            raise ModelError(f"attribution model {path}: not found here (the flow found it; "
                             "every worker must see it at the same path)")
        model = AttributionModel.load(path)
    own = connect(group.lake_root, days=group.days, memory_limit=group.memory_limit,
                  views=ATTRIBUTION_VIEWS)
    try:
        return attribute_stalls(own, job=list(group.jobs), model=model,
                                settings=group.settings)
    finally:
        own.close()


def stall_keys(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int]]:
    """Every stall's (job, step), in :func:`find_stalls`' order (oldest first)."""
    rows = run_sql(con, "select job_id, step from stalls where is_stall "
                        "order by start_ts, job_id, step")
    return [(str(j), int(s)) for j, s in rows.iter_rows()]


def job_groups(keys: Sequence[tuple[str, int]], n_groups: int) -> list[tuple[str, ...]]:
    """The stalled jobs of ``keys`` in at most ``n_groups`` groups of about as many stalls
    each (the job with the most stalls first, into the group with the fewest so far); each
    group's jobs sorted, groups in the order of their first job."""
    counts: dict[str, int] = {}
    for job, _step in keys:
        counts[job] = counts.get(job, 0) + 1
    n = max(1, min(n_groups, len(counts)))
    groups: list[list[str]] = [[] for _ in range(n)]
    load = [0] * n
    for job in sorted(counts, key=lambda j: (-counts[j], j)):
        i = load.index(min(load))
        groups[i].append(job)
        load[i] += counts[job]
    return sorted((tuple(sorted(g)) for g in groups if g), key=lambda g: g[0])


def merge_findings(keys: Sequence[tuple[str, int]], parts: Sequence[StallFindings],
                   with_model: bool) -> StallFindings:
    """The groups' findings as one run's: every stall of ``keys`` once, in that order."""
    found: dict[tuple[str, int], StallRecord] = {}
    for part in parts:
        for record in part.stalls:
            key = (record.job_id, record.step)
            if key in found:
                raise QueryError(f"stall {record.job_id} step {record.step} was attributed "
                                 "by two job groups")
            found[key] = record
    if set(found) != set(keys):
        missing = sorted(set(keys) - set(found))[:3]
        extra = sorted(set(found) - set(keys))[:3]
        raise QueryError(f"the job groups' stalls are not the stalls mart's (missing "
                         f"{missing or 'none'}, not stalls there {extra or 'none'})")
    return StallFindings(tuple(found[k] for k in keys), with_model)


def find_stalls_by_job(lake_root: Path | str, con: duckdb.DuckDBPyConnection, *,
                       days: tuple[date, date] | None, memory_limit: str | None,
                       n_groups: int, map_groups: GroupMapper,
                       model_path: Path | None = None,
                       settings: DetectionSettings | None = None) -> StallFindings:
    """:func:`find_stalls` over the days ``con`` reads (``days``, ``memory_limit``: those of
    ``con``), its stalled jobs attributed in at most ``n_groups`` groups by ``map_groups``
    (:func:`stalls_of_group` each, on a connection of its own); ``con`` lists the stalls and
    gives the order. The same findings as ``find_stalls(lake_root, con=con)``."""
    from ckptwatch.settings import model_path as default_model_path

    settings = settings or DetectionSettings()
    settings.apply(con)
    keys = stall_keys(con)
    path = model_path or default_model_path()
    model = str(path.absolute()) if path.exists() else None
    groups = [JobGroup(str(Path(lake_root).absolute()), jobs, days, memory_limit, model,
                       settings) for jobs in job_groups(keys, n_groups)] if keys else []
    parts = map_groups(groups) if groups else []
    if len(parts) != len(groups):
        raise QueryError(f"{len(parts)} findings for {len(groups)} job groups")
    return merge_findings(keys, parts, model is not None)
