"""``ckptwatch simulate OUT_DIR --seed N``: write a synthetic scenario with labelled stalls."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ckptwatch.simulate.config import (
    DEFAULT_START,
    FORMAT_MIXES,
    GC_EVIDENCE,
    MAX_CLOCK_SKEW_S,
    OMITTABLE,
    POOL_FORMATS,
    SIGNAL_STRENGTHS,
    TOOL_CLOCKS,
    SimulationConfig,
)

_DEFAULTS = SimulationConfig()
#: Clusters at least this large report progress on stderr.
PROGRESS_NODES = 64


def register(subparsers: Any) -> None:
    """Add the ``simulate`` sub-command."""
    p = subparsers.add_parser(
        "simulate",
        help="generate a synthetic cluster scenario (raw telemetry + labels.json)",
        description="Write a deterministic scenario in the raw input formats: per-rank "
        "checkpoint timings, jobs, topology, pool metrics, NVMe SMART (smartctl + OCP) and "
        "fabric counters, with injected stall causes (gc, metadata, fabric_pause, unknown), "
        "confounders, and the truth in labels.json. Same seed and options -> identical files.",
    )
    p.add_argument("out_dir", type=Path, metavar="OUT_DIR",
                   help="directory to write the scenario into (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--nodes", type=int, default=_DEFAULTS.nodes,
                   help="compute nodes, 8 GPUs (ranks) each (default: %(default)s)")
    p.add_argument("--hours", type=float, default=_DEFAULTS.hours,
                   help="scenario length in hours (default: %(default)s)")
    p.add_argument("--start", default=DEFAULT_START,
                   help="scenario start, ISO-8601 with offset (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=None,
                   help="number of jobs on disjoint node sets, >= 2 (default: 2-4 from the seed)")
    p.add_argument("--incidents-per-hour", type=float, default=_DEFAULTS.incidents_per_hour,
                   help="mean rate of injected incidents (stalls and confounders); 0 gives a "
                   "clean scenario (default: %(default)s)")
    p.add_argument("--pool-targets", type=int, default=None,
                   help="NVMe-oF pool targets (default: nodes/2 within 2..64)")
    p.add_argument("--pool-bandwidth-gbs", type=float, default=None,
                   help="aggregate pool write bandwidth in GB/s (default: 6.25 per target)")
    p.add_argument("--nodes-per-leaf", type=int, default=None,
                   help="nodes under each leaf switch (default: 4 below 64 nodes, else 16)")
    p.add_argument("--fabric", choices=("mixed", "roce", "ib"), default=_DEFAULTS.fabric,
                   help="node fabric: mixed alternates RoCE and InfiniBand leaves "
                   "(default: %(default)s)")
    p.add_argument("--fabric-format", choices=("raw", "canonical"),
                   default=_DEFAULTS.fabric_format,
                   help="raw: fabric/<node>.jsonl with ethtool -S / perfquery -x text; "
                   "canonical: fabric/counters.csv long form (default: %(default)s)")
    p.add_argument("--drives-per-node", type=int, default=_DEFAULTS.drives_per_node,
                   help="node-local NVMe drives per node, 1/2/4/8 (default: %(default)s)")
    p.add_argument("--drives-per-target", type=int, default=_DEFAULTS.drives_per_target,
                   help="NVMe drives behind each pool target (default: %(default)s)")
    p.add_argument("--fabric-interval", type=float, default=_DEFAULTS.fabric_interval_s,
                   help="seconds between fabric counter samples per NIC (default: %(default)s)")
    p.add_argument("--pool-interval", type=float, default=_DEFAULTS.pool_interval_s,
                   help="seconds between pool metric samples per target (default: %(default)s)")
    p.add_argument("--smart-interval", type=float, default=_DEFAULTS.smart_interval_s,
                   help="mean seconds between SMART samples per drive; each drive draws "
                   "0.67-1.33x this (default: %(default)s)")
    p.add_argument("--hang-ranks", type=int, default=0, metavar="N",
                   help="N ranks of one checkpoint never finish (their start markers are "
                   "written, their records never are; see ckptwatch.simulate.hang) "
                   "(default: %(default)s)")
    p.add_argument("--format-mix", choices=FORMAT_MIXES, default=_DEFAULTS.format_mix,
                   help="default: smartctl + OCP JSON, ethtool -S / perfquery -x; world: every "
                   "supported format (smartctl and nvme-cli smart-log JSON, OCP log as JSON and "
                   "text, ethtool -S, perfquery -x, sysfs snapshots, node_exporter scrapes), one "
                   "per drive or node, same values (default: %(default)s)")
    p.add_argument("--pool-format", choices=POOL_FORMATS, default=_DEFAULTS.pool_format,
                   help="how the pool reports itself: csv (pool/pool_metrics.csv, the long "
                   "CSV), or a real pool's own tools under pool/<server>/: lustre (lctl "
                   "get_param on OSSs and an MDS; no GC signal), daos (daos_metrics -C, dmg "
                   "pool query), spdk (bdev_get_iostat), gpfs (mmpmon, mmlsqos, mmdiag "
                   "--waiters); the targets take the system's names, the incidents and labels "
                   "stay (default: %(default)s)")
    p.add_argument("--nics-per-node", type=int, default=_DEFAULTS.nics_per_node,
                   help="NICs per node, 1-8: the extra rails carry the node's counters scaled "
                   "(default: %(default)s)")
    p.add_argument("--gc-evidence", choices=GC_EVIDENCE, default=_DEFAULTS.gc_evidence,
                   help="wa_only: a GC incident on a local drive shows only as a modest rise of "
                   "its write amplification (OCP media vs SMART host bytes), no gc_active or "
                   "free-block dip (default: %(default)s)")
    p.add_argument("--signal-strength", choices=SIGNAL_STRENGTHS,
                   default=_DEFAULTS.signal_strength,
                   help="weak: stall signals 10x weaker and noisier write amplification "
                   "(default: %(default)s)")
    p.add_argument("--background-per-stall", type=float, default=_DEFAULTS.background_per_stall,
                   metavar="P", help="probability, per stall, of an unrelated episode (a pause "
                   "burst, GC) on hosts the stall does not slow (default: %(default)s)")
    p.add_argument("--bursts-per-hour", type=float, default=_DEFAULTS.bursts_per_hour,
                   metavar="N", help="correlated checkpoint bursts per hour that saturate the "
                   "pool (pool jobs' checkpoints moved to one moment, every rank slowed by "
                   "demand over capacity; labelled saturation), and as many that stay under "
                   "it (default: %(default)s)")
    p.add_argument("--aligned-phases", action="store_true",
                   help="with --bursts-per-hour: the pool jobs checkpoint on one schedule, "
                   "phases within seconds (launched together), so their checkpoints collide "
                   "by themselves and a burst is such a collision pushed over the capacity")
    p.add_argument("--phase-offset", type=_offset, action="append", default=[],
                   metavar="JOB=SECONDS", help="start every checkpoint of JOB this many "
                   "seconds later (a stagger plan's advice applied; repeatable)")
    p.add_argument("--omit", type=_omit, default=_DEFAULTS.omit, metavar="FAMILIES",
                   help=f"telemetry families not written, comma-separated: {', '.join(OMITTABLE)} "
                   "(default: none)")
    p.add_argument("--tool-clocks", choices=TOOL_CLOCKS, default=_DEFAULTS.tool_clocks,
                   help="apart: each tool is its own command on its own cadence, as a cluster's "
                   "collectors run them (the OCP log seconds after the SMART health log, or 10x "
                   "denser, or 2x sparser; each NIC read in turn; devices spelled /dev/nvme0, "
                   "nvme0n1, ...); aligned: a host's tools read at one instant "
                   "(default: %(default)s)")
    p.add_argument("--clock-skew", type=float, default=_DEFAULTS.clock_skew_s, metavar="S",
                   help="each node's and pool target's clock is off by up to S seconds (drawn "
                   f"per host, 0-{MAX_CLOCK_SKEW_S:g}) in the telemetry it stamps; checkpoint "
                   "records stay on the reference clock (default: %(default)s)")
    p.add_argument("--force", action="store_true",
                   help="replace a scenario already in OUT_DIR (only the generator's own files)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=run)


def _offset(text: str) -> tuple[str, float]:
    """``--phase-offset``: ``JOB=SECONDS``."""
    job, sep, value = text.rpartition("=")
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not sep or not job or seconds != seconds:
        raise argparse.ArgumentTypeError(f"{text!r} is not JOB=SECONDS (e.g. job-10=250)")
    return job, seconds


def _omit(text: str) -> tuple[str, ...]:
    """``--omit``: comma-separated telemetry families, each one of ``OMITTABLE``."""
    names = tuple(sorted({n.strip() for n in text.split(",") if n.strip()}))
    bad = [n for n in names if n not in OMITTABLE]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown telemetry family {', '.join(bad)} (known: {', '.join(OMITTABLE)})")
    return names


def run(args: argparse.Namespace) -> int:
    """Generate the scenario and print a short summary; returns the exit code."""
    progress = None
    if args.nodes >= PROGRESS_NODES and not args.quiet:
        def progress(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)
    began = time.perf_counter()
    from ckptwatch.simulate.scenario import simulate

    summary = simulate(
        args.out_dir, args.seed, nodes=args.nodes, hours=args.hours, progress=progress,
        overwrite=args.force, start=args.start, jobs=args.jobs,
        incidents_per_hour=args.incidents_per_hour, pool_targets=args.pool_targets,
        pool_bandwidth_gbs=args.pool_bandwidth_gbs, nodes_per_leaf=args.nodes_per_leaf,
        fabric=args.fabric, fabric_format=args.fabric_format,
        drives_per_node=args.drives_per_node, drives_per_target=args.drives_per_target,
        fabric_interval_s=args.fabric_interval, pool_interval_s=args.pool_interval,
        smart_interval_s=args.smart_interval, hang_ranks=args.hang_ranks,
        format_mix=args.format_mix, pool_format=args.pool_format,
        nics_per_node=args.nics_per_node,
        gc_evidence=args.gc_evidence, signal_strength=args.signal_strength,
        background_per_stall=args.background_per_stall, bursts_per_hour=args.bursts_per_hour,
        aligned_phases=args.aligned_phases, phase_offsets=tuple(args.phase_offset),
        omit=args.omit,
        tool_clocks=args.tool_clocks, clock_skew_s=args.clock_skew,
    )
    if not args.quiet:
        print(summary.format())
        print(f"  done in {time.perf_counter() - began:.1f} s")
    return 0
