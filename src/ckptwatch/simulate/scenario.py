"""Scenario generator behind ``ckptwatch simulate``: a synthetic cluster's raw telemetry plus truth.

A cluster of nodes x 8 GPUs under leaf switches shares a disaggregated NVMe-oF pool. Jobs on the
``local`` and ``pool`` tiers checkpoint every few minutes (``ckptwatch.simulate.workload``).
Incidents are then injected on top (``ckptwatch.simulate.incidents`` plans them,
``ckptwatch.simulate.effects`` applies them) - stalls by ``gc``, ``metadata``, ``fabric_pause``
or ``unknown``, and confounders that leave a signal but stall nothing - and the raw files of the
input contract (README "Input") are written together with ``labels.json`` (the telemetry in
``ckptwatch.simulate.telemetry``). The truth in ``stalls`` is computed from the written data: a
checkpoint whose barrier time is at least twice its job's median, with the incidents that made it
so, primary cause first.

Every rank of every checkpoint writes a start marker (``status = "started"``, at its start)
before its finished record, in the job's own format and time encoding, the lines in the order
a recorder appends them (markers at their start, records at their end). ``hang_ranks``
(``ckptwatch.simulate.hang``) makes ranks of one checkpoint never finish.

Everything derives from ``numpy.random.Generator(PCG64(seed))`` and the fixed ``--start``; the same
seed and options give byte-identical files.

Imports point one way: scenario -> workload, incidents, effects, telemetry -> cluster.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.errors import SimulationConfigError
from ckptwatch.lake.schema import STARTED
from ckptwatch.simulate.cluster import (
    GB,
    GPUS_PER_NODE,
    Background,
    Cluster,
    Incident,
    Job,
    WriteLoad,
)
from ckptwatch.simulate.config import SimulationConfig
from ckptwatch.simulate.effects import STALL_RATIO, apply_incidents, labelled_stalls
from ckptwatch.simulate.hang import Hang, hang_labels, plan_hang
from ckptwatch.simulate.incidents import IncidentPlanner
from ckptwatch.simulate.telemetry.fabric import fabric_counters, write_fabric
from ckptwatch.simulate.telemetry.mix import rail_name
from ckptwatch.simulate.telemetry.pool import pool_metrics
from ckptwatch.simulate.telemetry.pool_formats import write_pool_tools
from ckptwatch.simulate.telemetry.pool_layout import PoolLayout, plan_clear, pool_layout
from ckptwatch.simulate.telemetry.sampling import Clocks, Progress
from ckptwatch.simulate.telemetry.smart import write_smart
from ckptwatch.simulate.workload import build_cluster, build_jobs, healthy_phases

GENERATOR_VERSION = "1.2"  # 1.2: start markers, hang_ranks
#: Files and directories the generator owns inside OUT_DIR.
OUTPUTS = ("topology.csv", "jobs", "checkpoints", "pool", "smart", "fabric", "labels.json")


@dataclass
class SimulationSummary:
    """What a run wrote: rows per file, incidents by cause and kind, stalls."""

    out_dir: Path
    seed: int
    files: dict[str, int] = field(default_factory=dict)
    incidents: dict[str, int] = field(default_factory=dict)
    stalls: int = 0

    def format(self) -> str:
        """A short human summary: files and rows per directory, incidents, stalls."""
        groups: dict[str, list[int]] = {}
        for rel, rows in self.files.items():
            key = rel.split("/")[0] + ("/" if "/" in rel else "")
            groups.setdefault(key, [0, 0, 0])
            size = (self.out_dir / rel).stat().st_size
            groups[key] = [groups[key][0] + 1, groups[key][1] + rows, groups[key][2] + size]
        lines = [f"scenario seed {self.seed} -> {self.out_dir}"]
        for key, (n, rows, size) in sorted(groups.items()):
            lines.append(f"  {key:<16} {n:>5} file(s) {rows:>10,} rows {size / 1e6:>9.2f} MB")
        by = ", ".join(f"{k} {v}" for k, v in sorted(self.incidents.items())) or "none"
        lines.append(f"  incidents: {by}")
        lines.append(f"  labelled stalls: {self.stalls}")
        return "\n".join(lines)


def simulate(out_dir: Path, seed: int, nodes: int = 8, hours: float = 4.0, *,
             progress: Progress | None = None, overwrite: bool = False,
             **opts: Any) -> SimulationSummary:
    """Write one scenario under ``out_dir``; ``opts`` are ``SimulationConfig`` fields."""
    known = {f.name for f in fields(SimulationConfig)}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise SimulationConfigError(f"unknown simulate option(s): {', '.join(unknown)}")
    cfg = SimulationConfig(nodes=nodes, hours=hours, **opts)
    cfg.validate()
    # OUT_DIR checked now, changed only once the scenario is planned: an option found wrong
    # while planning (a --phase-offset for no job) leaves nothing behind
    _check_out(Path(out_dir), overwrite)
    say = progress or (lambda _msg: None)
    t0 = cfg.start_epoch()
    t1 = t0 + cfg.hours * 3600.0
    # A child stream depends only on its index: the tenth (the format mix's own draws), the
    # eleventh (the variety options': background episodes), the twelfth (the clocks': host
    # clock errors, tools apart) and the thirteenth (the pool format's) leave the first nine,
    # and so the default scenario's files, as they were.
    (r_topo, r_jobs, r_ckpt, r_inc, r_bg, r_pool, r_smart, r_fab, r_misc,
     r_mix, r_var, r_clock, r_pfmt) = np.random.Generator(np.random.PCG64(seed)).spawn(13)
    cluster = build_cluster(cfg, r_topo)
    layout = pool_layout(cfg.pool_format, cluster.pool, len(cluster.targets), cluster.targets,
                         r_pfmt)
    cluster = replace(cluster, pool=layout.pool, targets=layout.targets)
    layout = plan_clear(layout, r_pfmt, t0, t1, cfg.nodes)
    clocks = _clocks(cfg, cluster, r_clock)
    bg = Background.build(r_bg, t0, t1)
    jobs = build_jobs(cfg, cluster, r_jobs, t0, t1)
    healthy_phases(jobs, cluster, bg, r_ckpt)
    incidents = IncidentPlanner(cluster, jobs, bg, r_inc, t0, t1,
                                expected=cfg.incidents_per_hour * cfg.hours,
                                smart_interval_s=cfg.smart_interval_s,
                                gc_evidence=cfg.gc_evidence,
                                signal_strength=cfg.signal_strength,
                                background_per_stall=cfg.background_per_stall,
                                variety_rng=r_var,
                                bursts=cfg.bursts_per_hour * cfg.hours,
                                collide=not cfg.aligned_phases).plan()
    apply_incidents(jobs, incidents, r_misc)
    hang = plan_hang(cfg.hang_ranks, seed, jobs)
    _prepare(Path(out_dir), overwrite)
    say(f"simulate: {len(jobs)} jobs, {sum(j.steps.size * j.n_ranks for j in jobs):,} rank rows, "
        f"{len(incidents)} incidents")
    resets = []
    if cfg.hours >= 2:
        resets.append((int(r_misc.integers(cfg.nodes)), t0 + r_misc.uniform(0.3, 0.8) * (t1 - t0)))
    summary = SimulationSummary(out_dir=Path(out_dir), seed=seed)
    out = Path(out_dir)

    def record(path: Path, rows: int) -> None:
        """Note the rows written to ``path``."""
        summary.files[path.relative_to(out).as_posix()] = rows

    if "topology" not in cfg.omit:
        record(*_write_topology(out, cluster))
    record(*_write_jobs(out, jobs))
    for j, job in enumerate(jobs):
        unfinished = hang.unfinished(j, job.starts.size, job.n_ranks) if hang else None
        record(*_write_checkpoints(out, job, cluster, r_misc, unfinished,
                                   phases="phases" not in cfg.omit))
    say("simulate: checkpoints written")
    load = _write_load(jobs)
    if "pool" not in cfg.omit and cfg.pool_format != "csv":
        for path, rows in write_pool_tools(out / "pool", layout, cluster, load, incidents, bg,
                                           t0, t1, cfg.pool_interval_s, r_pfmt,
                                           clocks).items():
            record(path, rows)
    elif cfg.pool_format == "csv":
        pool = pool_metrics(cluster, load, incidents, bg, t0, t1, cfg.pool_interval_s, r_pool,
                            clocks)
        if "pool" not in cfg.omit:
            (out / "pool").mkdir(exist_ok=True)
            pool.write_csv(out / "pool" / "pool_metrics.csv")
            record(out / "pool" / "pool_metrics.csv", pool.height)
    say("simulate: pool metrics written")
    if "smart" not in cfg.omit:
        for path, rows in write_smart(out / "smart", cluster, load, incidents, bg, t0, t1,
                                      cfg.smart_interval_s, r_smart, progress,
                                      mix=cfg.format_mix, with_ocp="ocp" not in cfg.omit,
                                      wa_noise=0.03 if cfg.signal_strength == "weak" else 0.01,
                                      clocks=clocks,
                                      pool_drives=cfg.pool_format != "lustre").items():
            record(path, rows)
    if "fabric" not in cfg.omit:
        traffic = np.full(cfg.nodes, 0.05 * GB)
        for job in jobs:
            traffic[job.nodes] = job.traffic_bps
        ts, counters = fabric_counters(cluster, load, incidents, traffic, resets, t0, t1,
                                       cfg.fabric_interval_s, r_fab, clocks)
        for path, rows in write_fabric(out / "fabric", cluster, ts, counters,
                                       cfg.fabric_format, r_fab, progress, mix=cfg.format_mix,
                                       nics=cfg.nics_per_node, mix_rng=r_mix,
                                       clocks=clocks).items():
            record(path, rows)
    labels = _labels(cfg, seed, cluster, jobs, incidents, resets, hang, clocks, layout)
    (out / "labels.json").write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    record(out / "labels.json", len(labels["incidents"]) + len(labels["stalls"]))
    summary.incidents = dict(Counter(f"{i['cause']}/{i['kind']}" for i in labels["incidents"]))
    summary.stalls = len(labels["stalls"])
    return summary


def _clocks(cfg: SimulationConfig, cluster: Cluster, rng: np.random.Generator) -> Clocks:
    """The telemetry's clocks: each node's and pool target's clock error (drawn within
    ``clock_skew_s``, or as ``host_clock`` gives it), the tools' shifts, apart or aligned."""
    hosts = [*cluster.nodes, *cluster.targets]
    given = dict(cfg.host_clock)
    unknown = sorted(set(given) - set(hosts))
    if unknown:
        raise SimulationConfigError(f"host_clock names no host of the cluster: "
                                    f"{', '.join(unknown)}")
    offset: dict[str, float] = {}
    if cfg.clock_skew_s > 0:
        drawn = rng.uniform(-cfg.clock_skew_s, cfg.clock_skew_s, len(hosts))
        offset = {h: round(float(x), 3) for h, x in zip(hosts, drawn, strict=True)}
    offset.update({h: float(x) for h, x in given.items()})
    return Clocks(apart=cfg.tool_clocks == "apart", shift=dict(cfg.sample_shift),
                  offset={h: x for h, x in offset.items() if x}, rng=rng)


def _check_out(out: Path, overwrite: bool) -> list[str]:
    """Check OUT_DIR (nothing is changed): the generator's own outputs already in it."""
    if out.exists() and not out.is_dir():
        raise SimulationConfigError(f"{out} exists and is not a directory; choose another OUT_DIR")
    present = [name for name in OUTPUTS if (out / name).exists()]
    if present and not overwrite:
        raise SimulationConfigError(f"{out} already holds a scenario ({', '.join(present)}); "
                             "pass --force to replace it or choose an empty OUT_DIR")
    return present


def _prepare(out: Path, overwrite: bool) -> None:
    """Check OUT_DIR, remove the generator's own files when overwriting, make subdirs."""
    for name in _check_out(out, overwrite):
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    for sub in ("jobs", "checkpoints"):
        (out / sub).mkdir(parents=True, exist_ok=True)


def _labels(cfg: SimulationConfig, seed: int, cluster: Cluster, jobs: list[Job],
            incidents: list[Incident], resets: list[tuple[int, float]],
            hang: Hang | None = None, clocks: Clocks | None = None,
            layout: PoolLayout | None = None) -> dict[str, Any]:
    """The truth of ``labels.json``: jobs, incidents (with what they stalled), stalls, and
    (with ``hang_ranks``) the checkpoint that never finished; with a ``--pool-format`` other
    than csv, the pool's format, servers, metadata target and statistics clear."""
    stalls = [s for job in jobs for s in labelled_stalls(job, incidents)]
    hangs: list[dict[str, Any]] = []
    if hang is not None:
        entry, stall = hang_labels(hang, jobs, cluster, _iso)
        hangs.append(entry)
        same = [s for s in stalls if (s["job_id"], s["step"]) == (entry["job_id"],
                                                                 entry["step"])]
        if same:  # already a stall by its finished ranks: it also timed out
            same[0].update(timed_out=True, unfinished_ranks=stall["unfinished_ranks"])
        else:
            stalls.append(stall)
    by_incident: dict[str, list[dict[str, Any]]] = {}
    for s in stalls:
        for iid in s["incidents"]:
            by_incident.setdefault(iid, []).append({"job_id": s["job_id"], "step": s["step"]})

    def target_names(idx: tuple[int, ...]) -> list[str]:
        """Pool target names of target indices."""
        return [cluster.targets[t] for t in idx]

    out_incidents = []
    for inc in incidents:
        stalled = by_incident.get(inc.id, [])
        kind, variant = inc.kind, inc.variant
        if kind == "stall" and not stalled:  # its effect stayed below the stall threshold
            kind, variant = "confounder", f"{variant}_subthreshold"
        out_incidents.append({
            "id": inc.id, "cause": inc.cause, "kind": kind, "variant": variant,
            "job_id": inc.job_id,
            "steps": [s["step"] for s in stalled if s["job_id"] == inc.job_id],
            "stalled": stalled, "start": _iso(inc.start), "end": _iso(inc.end),
            "scope": {"nodes": [cluster.nodes[n] for n in inc.nodes],
                      "leaf": None if inc.leaf is None else cluster.leaves[inc.leaf],
                      "targets": target_names(inc.targets),
                      "devices": ["{}:{}".format(*cluster.drive_name(d)) for d in inc.drives]
                      + [f"{h}:{dev}" for t in inc.targets
                         for h, dev in map(cluster.drive_name, cluster.target_drives(t))],
                      **({"ranks": list(inc.ranks)} if inc.ranks else {}),
                      **({"jobs": list(inc.jobs)} if inc.jobs else {})},
            "magnitude": {"slowdown": round(inc.slowdown, 3),
                          **{k: round(v, 3) for k, v in inc.signal.items()
                             if not k.startswith("_")}},
        })
    return {
        "seed": seed, "generator_version": GENERATOR_VERSION, "start": _iso(cfg.start_epoch()),
        "nodes": cfg.nodes, "hours": cfg.hours, "stall_ratio": STALL_RATIO,
        "pool": {"name": cluster.pool, "targets": list(cluster.targets),
                 "bandwidth_gbs": round(cluster.target_bw * len(cluster.targets) / GB, 3),
                 **(_pool_labels(layout, cluster) if layout and layout.format != "csv" else {})},
        "fabric_format": cfg.fabric_format,
        "jobs": [{"job_id": job.job_id, "tier": job.tier,
                  "nodes": [cluster.nodes[n] for n in job.nodes], "n_ranks": job.n_ranks,
                  "checkpoint_interval_s": job.interval_s, "checkpoint_timeout_s": job.timeout_s,
                  "baseline_barrier_s": round(job.baseline_s, 3), "checkpoints": job.steps.size,
                  "bytes_per_rank": int(np.median(job.nbytes)), "time_encoding": job.encoding,
                  "file": _ckpt_name(job)} for job in jobs],
        "incidents": out_incidents, "stalls": stalls,
        "counter_resets": [{"node": cluster.nodes[n], "device": device, "at": _iso(t)}
                           for n, t in resets
                           for device in [rail_name(cluster.nic[n], cluster.fabric[n], r)
                                          for r in range(cfg.nics_per_node)]],
        **({"format_mix": cfg.format_mix} if cfg.format_mix != "default" else {}),
        **({"nics_per_node": cfg.nics_per_node} if cfg.nics_per_node != 1 else {}),
        **({"hangs": hangs} if hangs else {}),
        **({"clocks": _clock_labels(cfg, clocks)} if clocks and (
            clocks.apart or clocks.shift or clocks.offset) else {}),
    }


def _pool_labels(layout: PoolLayout, cluster: Cluster) -> dict[str, Any]:
    """The pool format's layout and its statistics clear (where and when; for GPFS on the
    node whose mmpmon counters were reset)."""
    out: dict[str, Any] = layout.labels()
    if layout.clear is not None:
        hosts = (list(layout.servers) + ([layout.metadata_server] if layout.metadata_server
                                         else []))
        if layout.format == "gpfs":
            hosts = list(cluster.nodes)
        out["stats_cleared"] = [{"host": hosts[layout.clear.server],
                                 "at": _iso(layout.clear.at)}]
    return out


def _clock_labels(cfg: SimulationConfig, clocks: Clocks) -> dict[str, Any]:
    """How the telemetry was sampled and stamped, for a reader checking a verdict against it:
    the tools' clocks, the shifts, each host's clock error (s; absent: none)."""
    return {"tool_clocks": cfg.tool_clocks, "clock_skew_s": cfg.clock_skew_s,
            "sample_shift_s": dict(clocks.shift), "host_offset_s": dict(clocks.offset)}


# ------------------------------------------------------------------------------ raw files


def _iso(t: float) -> str:
    """ISO-8601 UTC with milliseconds and ``Z`` for epoch seconds."""
    return str(np.datetime_as_string(np.datetime64(int(round(t * 1000)), "ms"), unit="ms")) + "Z"


def _ckpt_name(job: Job) -> str:
    """The job's checkpoint file, relative to OUT_DIR."""
    return f"checkpoints/{job.job_id}.{'csv' if job.encoding == 'csv' else 'jsonl'}"


def _write_topology(out: Path, cluster: Cluster) -> tuple[Path, int]:
    """``topology.csv``: node, leaf switch, NIC, port."""
    path = out / "topology.csv"
    pl.DataFrame({"node": cluster.nodes, "leaf_switch": [cluster.leaves[x] for x in cluster.leaf],
                  "nic": cluster.nic, "port": [cluster.port] * len(cluster.nodes)}).write_csv(path)
    return path, len(cluster.nodes)


def _write_jobs(out: Path, jobs: list[Job]) -> tuple[Path, int]:
    """``jobs/jobs.csv``: one row per job."""
    path = out / "jobs" / "jobs.csv"
    pl.DataFrame({
        "job_id": [j.job_id for j in jobs], "n_ranks": [j.n_ranks for j in jobs],
        "checkpoint_timeout_s": [j.timeout_s for j in jobs],
        "checkpoint_interval_s": [j.interval_s for j in jobs],
        "step_time_s": [j.step_time_s for j in jobs], "gpus_per_node": [GPUS_PER_NODE] * len(jobs),
        "tier": [j.tier for j in jobs],
    }).write_csv(path)
    return path, len(jobs)


def _iso_column(epoch: np.ndarray, offset_s: int, suffix: pl.Expr | str) -> pl.Expr:
    """ISO-8601 text for epoch seconds shifted by ``offset_s``, with ``suffix``."""
    us = pl.Series(np.round((epoch + offset_s) * 1e6).astype(np.int64))
    text = pl.lit(pl.from_epoch(us, time_unit="us").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f"))
    return pl.concat_str([text, suffix if isinstance(suffix, pl.Expr) else pl.lit(suffix)])


def _write_checkpoints(out: Path, job: Job, cluster: Cluster, rng: np.random.Generator,
                       unfinished: np.ndarray | None = None, *,
                       phases: bool = True) -> tuple[Path, int]:
    """The job's start markers and rank records, in its time encoding (CSV or JSON Lines),
    in the order a recorder appends them: a marker at its rank's start, a record at its end
    (a marker first on a tie). ``unfinished``: a (checkpoint, rank) mask of ranks that write
    their marker and never their record. Returns the path and the lines written."""
    k, n = job.starts.size, job.n_ranks
    o, w, f, c = (np.round(x, 6) for x in job.final)
    start = job.starts[:, None] + job.skew
    end = start + o + w + f + c + job.gap
    targets = (np.array(cluster.targets)[job.rank_target] if job.tier == "pool" else
               np.array([f"{h}:{d}" for h, d in map(cluster.drive_name, job.rank_drive)]))
    df = pl.DataFrame({
        "job_id": np.full(k * n, job.job_id), "step": np.repeat(job.steps, n).astype(np.int64),
        "rank": np.tile(np.arange(n), k),
        "node": np.tile(np.array(cluster.nodes)[job.rank_node], k),
        "tier": np.full(k * n, job.tier), "start_time": np.round(start.ravel(), 6),
        "end_time": np.round(end.ravel(), 6), "bytes": np.tile(job.nbytes.astype(np.int64), k),
        "target": np.tile(targets, k), "open_s": o.ravel(), "write_s": w.ravel(),
        "fsync_s": f.ravel(), "close_s": c.ravel(),
        "status": np.array(["ok", "timeout", "error"])[job.status.ravel()],
    })
    if job.encoding != "epoch":
        offset, suffix = (3600, "+01:00") if job.encoding == "iso_offset" else (0, "+00:00")
        mixed: pl.Expr | str = suffix
        if job.encoding == "iso":
            mixed = pl.when(pl.Series(rng.random(k * n) < 0.15)).then(pl.lit("Z")).otherwise(
                pl.lit(suffix))
        elif job.encoding == "csv":
            mixed = "Z"
        df = df.with_columns(_iso_column(start.ravel(), offset, mixed).alias("start_time"),
                             _iso_column(end.ravel(), offset, mixed).alias("end_time"))
    if not phases:  # a recorder that logs only start and end
        df = df.drop("open_s", "write_s", "fsync_s", "close_s")
    markers = df.select("job_id", "step", "rank", "node", "tier", "start_time", "target",
                        pl.lit(STARTED).alias("status"))
    done = np.ones(k * n, dtype=bool) if unfinished is None else ~unfinished.ravel()
    records = df.filter(pl.Series(done))
    # Write order: markers at their start, records at their end; markers first on a tie.
    when = np.concatenate([start.ravel(), end.ravel()[done]])
    order = np.argsort(when, kind="stable")
    path = out / _ckpt_name(job)
    if job.encoding == "csv":
        both = pl.concat([markers, records], how="diagonal_relaxed").select(df.columns)
        both[order].write_csv(path)
    else:
        lines = (markers.write_ndjson().splitlines() + records.write_ndjson().splitlines())
        path.write_text("".join(lines[i] + "\n" for i in order), encoding="utf-8")
    return path, int(when.size)


def _write_load(jobs: list[Job]) -> WriteLoad:
    """Every rank write of every job, flattened, for the telemetry generators."""
    parts: dict[str, list[np.ndarray]] = {}
    for job in jobs:
        o, w, f, c = job.final
        start = job.starts[:, None] + job.skew
        shape = o.shape
        cols = {
            "node": np.broadcast_to(job.rank_node, shape),
            "drive": np.broadcast_to(job.rank_drive if job.tier == "local" else -1, shape),
            "target": np.broadcast_to(job.rank_target, shape),
            "open_start": start, "write_start": start + o, "write_end": start + o + w,
            "close_end": start + o + w + f + c,
            "nbytes": np.broadcast_to(job.nbytes, shape) * np.where(job.status == 2, 0.5, 1.0),
            "meta_ops": np.full(shape, 3.0 * job.files if job.tier == "pool" else 0.0),
        }
        for name, values in cols.items():
            parts.setdefault(name, []).append(np.asarray(values).ravel())
    return WriteLoad(**{k: np.concatenate(v) for k, v in parts.items()})
