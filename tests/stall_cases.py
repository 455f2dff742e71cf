"""Small hand-built lakes for stall detection and attribution tests (literal rows, no simulator).

A job of 8 ranks on nodes n1 (ranks 0-3) and n2 (ranks 4-7) under leaf01, writing to pool targets
t1 (even ranks) and t2 (odd ranks); checkpoint every 300 s, ~10 s each. Telemetry every 30 s.
``build`` injects one cause at the stalled step and returns the lake. ``Case.unfinished`` names
ranks that hang at the stalled step: they write a start marker and never their record (the job's
timeout is 120 s; the later checkpoints take the data far past it, so that checkpoint timed out).
``Case.wa_only``/``smart_every_s`` make a gc seen only through write amplification, sampled
coarsely; ``Case.omit`` leaves telemetry families out. ``Case.local``: the same job on node-local
drives (every rank of a node writes to ``<node>:nvme0``; GC hits n1's drive, so n1's ranks are
the slow ones), SMART per node and no pool. The SMART tools keep their own clocks:
``ocp_every_s``/``ocp_offset_s`` run the OCP log (media bytes) at its own cadence and moment,
``smart_offset_s`` smartctl (host bytes, busy time); the counters are exact at any instant
(piecewise linear over the 30 s grid). ``busy`` adds the controller busy time (whole minutes, as
drives count it): busy while written to, more while collecting garbage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

T0 = datetime(2026, 11, 28, tzinfo=UTC)
N_CKPT = 12
INTERVAL_S = 300
STALL_STEP = 8
NODES = {"n1": range(0, 4), "n2": range(4, 8)}


@dataclass
class Case:
    """What to inject. Times are offsets in seconds from T0."""

    stall: str | None = None  # gc | metadata | fabric_pause | unknown | None
    pause_burst_at_s: float | None = None  # a pause burst on n1 (not during a checkpoint)
    idle_gc_target: str | None = None  # gc on a target nobody writes to, during the stall step
    mild_metadata_step: int | None = None  # metadata latency up a little; ranks barely slower
    unfinished: tuple[int, ...] = ()  # ranks that start the stalled step and never finish it
    markers: bool = False  # every rank writes a start marker at every step
    extra: dict[str, float] = field(default_factory=dict)
    #: gc seen only through write amplification: t1's NAND writes rise to this multiple of its
    #: host writes during the stall (no gc_active, no free-blocks dip); None: the full gc.
    wa_only: float | None = None
    smart_every_s: int = 60  # SMART sampling interval (a multiple of 30)
    #: a pause burst on n2 during the stalled step (n2's ranks are not slow in a gc/fabric case)
    pause_on_n2_at_stall: bool = False
    #: telemetry families left out: topology, phases, ocp (media bytes), pool, fabric, smart
    omit: tuple[str, ...] = ()
    #: seconds added to every timestamp of a telemetry table (fabric_counters, pool_metrics,
    #: nvme_smart): that tool's own clock
    clock_offset_s: dict[str, float] = field(default_factory=dict)
    #: node-local drives: every rank writes to its node's drive, GC on n1's, no pool
    local: bool = False
    #: the OCP log's own cadence (None: with smartctl's, smart_every_s) and its delay after
    #: smartctl's moment, seconds
    ocp_every_s: float | None = None
    ocp_offset_s: float = 0.0
    #: smartctl's (host bytes, busy time) moment, seconds after the grid's
    smart_offset_s: float = 0.0
    #: controller_busy_time_min rows (with smartctl's)
    busy: bool = False
    #: every drive busy during the stall (a drive is busy whenever its ranks write), GC or not
    busy_everywhere_at_stall: bool = False


def _ckpt_start(step: int) -> datetime:
    return T0 + timedelta(seconds=60 + step * INTERVAL_S)


def _rows(case: Case) -> dict[str, list[dict[str, object]]]:
    cw, fab, pool, smart, starts = [], [], [], [], []
    for step in range(N_CKPT):
        start = _ckpt_start(step)
        for node, ranks in NODES.items():
            for rank in ranks:
                target = f"{node}:nvme0" if case.local else ("t1" if rank % 2 == 0 else "t2")
                gc_drive = "n1:nvme0" if case.local else "t1"
                o, w, f, c = 0.2, 8.0 + 0.1 * (rank % 3), 1.0, 0.2
                if step == STALL_STEP:
                    if case.stall == "gc" and target == gc_drive:
                        w, f = 30.0, 6.0
                    elif case.stall == "metadata":
                        o, c = 12.0, 9.0
                    elif case.stall == "fabric_pause" and node == "n1":
                        w = 35.0
                    elif case.stall == "unknown" and node == "n2":
                        w = 34.0
                if step == case.mild_metadata_step:
                    o, c = 0.5, 0.4
                hangs = step == STALL_STEP and rank in case.unfinished
                tier = "local" if case.local else "pool"
                if case.markers or hangs:
                    starts.append({"job_id": "j", "step": step, "rank": rank, "node": node,
                                   "tier": tier, "target": target, "start_ts": start})
                if hangs:
                    continue
                end = start + timedelta(seconds=o + w + f + c)
                cw.append({"job_id": "j", "step": step, "rank": rank, "node": node,
                           "tier": tier, "target": target, "start_ts": start, "end_ts": end,
                           "duration_s": (end - start).total_seconds(), "bytes": 10**9,
                           "open_s": o, "write_s": w, "fsync_s": f, "close_s": c,
                           "status": "ok"})
    horizon = 60 + N_CKPT * INTERVAL_S
    stall_t = 60 + STALL_STEP * INTERVAL_S
    pause = {"n1": 0.0, "n2": 0.0}
    drives = ("n1", "n2") if case.local else ("t1", "t2", "t3")
    gc_host = "n1" if case.local else "t1"
    media = dict.fromkeys(drives, 0.0)
    host = dict(media)
    busy = dict(media)  # seconds
    # Each drive's counters on the 30 s grid: (s, host bytes, media bytes, busy s).
    grid: dict[str, list[tuple[float, float, float, float]]] = {d: [] for d in drives}
    for s in range(0, horizon + 30, 30):
        ts = T0 + timedelta(seconds=s)
        in_stall = stall_t - 30 <= s <= stall_t + 90
        for node in NODES:
            rate = 2.0
            if case.stall == "fabric_pause" and node == "n1" and in_stall:
                rate = 20000.0
            if case.pause_burst_at_s is not None and node == "n1" and \
                    case.pause_burst_at_s <= s < case.pause_burst_at_s + 60:
                rate = 20000.0
            if case.pause_on_n2_at_stall and node == "n2" and in_stall:
                rate = 20000.0
            pause[node] += rate * 30
            fab.append({"ts": ts, "node": node, "device": "mlx5_0", "port": "1",
                        "counter": "rx_prio3_pause", "value": pause[node], "source": "canonical"})
        in_checkpoint = (s - 60) % INTERVAL_S == 30  # the 30 s that hold a checkpoint's writes
        for t in drives:
            gc_on = (case.stall == "gc" and t == gc_host and in_stall
                     and case.wa_only is None) or (case.idle_gc_target == t and in_stall)
            wa = 1.05 + 0.004 * ((s // 60) % 3 - 1)  # the drive's own small wobble
            if case.wa_only is not None and case.stall == "gc" and t == gc_host and in_stall:
                wa = case.wa_only
            md = 0.6
            if case.stall == "metadata" and in_stall:
                md = 150.0
            if case.mild_metadata_step is not None and \
                    abs(s - (60 + case.mild_metadata_step * INTERVAL_S)) <= 60:
                md = 1.5
            written = 0.0 if t == "t3" else 3e7
            host[t] += written * 30
            media[t] += (written * wa + (4e8 if gc_on else 0.0)) * 30
            # busy s per s: a little idle, most of the checkpoint's 10 s of writes, nearly all
            # of the time while collecting garbage
            # (GC keeps a local drive busy for minutes around the burst that slows the ranks)
            rate = 0.02 + (0.8 * 10 / 30 if in_checkpoint and written else 0.0)
            around = abs(s - stall_t) <= 240 and case.local
            if gc_on or (around and case.stall == "gc" and t == gc_host and case.wa_only is None):
                rate = 0.95
            if case.busy_everywhere_at_stall and (in_stall or around) and written:
                rate = 0.95
            busy[t] += rate * 30
            grid[t].append((float(s), host[t], media[t], busy[t]))
            if case.local:
                continue  # node-local drives: no pool
            for metric, value in (("gc_active", 1.0 if gc_on else 0.0),
                                  ("free_blocks_pct", 8.0 if gc_on else 35.0),
                                  ("metadata_latency_ms", md)):
                pool.append({"ts": ts, "pool": "p", "target": t, "metric": metric,
                             "value": value})
    smart = _smart_rows(case, grid, horizon)
    jobs = [{"job_id": "j", "n_ranks": 8, "checkpoint_timeout_s": 120.0,
             "checkpoint_interval_s": float(INTERVAL_S), "step_time_s": None,
             "gpus_per_node": 4, "tier": "local" if case.local else "pool"}]
    topo: list[dict[str, object]] = [
        {"node": n, "leaf_switch": "leaf01", "nic": "mlx5_0", "port": "1"} for n in NODES]
    if "phases" in case.omit:
        for row in cw:
            row.update(open_s=None, write_s=None, fsync_s=None, close_s=None)
    tables: dict[str, list[dict[str, object]]] = {
        "checkpoint_writes": cw, "fabric_counters": fab, "pool_metrics": pool,
        "nvme_smart": smart, "jobs": jobs, "topology": topo}
    tables_of = {"topology": "topology", "pool": "pool_metrics", "fabric": "fabric_counters",
                 "smart": "nvme_smart"}
    left_out = {tables_of[o] for o in case.omit if o in tables_of} | (
        {"pool_metrics"} if case.local else set())
    tables = {k: v for k, v in tables.items() if k not in left_out}
    for table, offset in case.clock_offset_s.items():
        for row in tables.get(table, []):
            row["ts"] = row["ts"] + timedelta(seconds=offset)  # type: ignore[operator]
    return tables | ({"checkpoint_starts": starts} if starts else {})


def _smart_rows(case: Case, grid: dict[str, list[tuple[float, float, float, float]]],
                horizon: int) -> list[dict[str, object]]:
    """Each drive's SMART rows, each tool at its own moments: smartctl (host bytes, busy time)
    every ``smart_every_s`` from ``smart_offset_s``, the OCP log (media bytes) every
    ``ocp_every_s`` from ``ocp_offset_s``; the counters read at those instants."""
    rows: list[dict[str, object]] = []

    def at(every: float, offset: float) -> np.ndarray:
        return np.arange(offset, horizon + 1e-9, every)

    for t, points in grid.items():
        g = np.array(points)
        tools = [(at(case.smart_every_s, case.smart_offset_s), "host_written_bytes", g[:, 1])]
        if case.busy:
            # drives count busy time in whole minutes
            tools.append((at(case.smart_every_s, case.smart_offset_s),
                          "controller_busy_time_min", np.floor(g[:, 3] / 60.0)))
        if "ocp" not in case.omit:
            tools.append((at(case.ocp_every_s or case.smart_every_s,
                             case.smart_offset_s + case.ocp_offset_s), "media_written_bytes",
                          g[:, 2]))
        for times, metric, values in tools:
            # a whole-minute counter steps, the byte counters grow steadily within a step
            read = (values[np.searchsorted(g[:, 0], times, side="right") - 1]
                    if metric == "controller_busy_time_min" else np.interp(times, g[:, 0], values))
            for x, v in zip(times, read, strict=True):
                rows.append({"ts": T0 + timedelta(seconds=float(x)), "node": t,
                             "device": "nvme0", "source": "nvme-ocp-smart", "metric": metric,
                             "value": float(v), "model": None, "serial": None,
                             "firmware": None})
    return rows


def build(root: Path, case: Case) -> Path:
    """Write the case's rows straight into a new lake at ``root``."""
    lake = Lake(root)
    lake.init()
    now = datetime(2026, 11, 29, tzinfo=UTC)
    for table, rows in _rows(case).items():
        t = TABLES[table]
        df = pl.DataFrame(rows, infer_schema_length=None).with_columns(
            pl.lit("case").alias("source_file"),
            pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("ingested_ts"))
        empty = pl.from_arrow(t.schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        df = df.select([pl.col(c).cast(d) if c in df.columns else pl.lit(None, d).alias(c)
                        for c, d in empty.schema.items()])
        for rel, part in lake.plan_parts(f"case-{table}".ljust(16, "0"), t, df):
            lake.write_part(rel, t, part)
    return root
