"""Closing the loop of ``ckptwatch plan stagger`` (issue 45, item 7): per seed, a day of pool
jobs launched together (``--aligned-phases``: their checkpoints collide by themselves; bursts
only, ``--bursts-per-hour 1``, the ``burst`` family's RoCE fabric and four jobs), its stagger
plan from the lake, and the same day with the plan's delays applied (``--phase-offset``),
measured the same way: saturation stalls (the labels), each pool job's barrier p99 (the lake's
``checkpoint_latency``), and the plan's predicted peak demand against the pool's capacity.

    python bench/stagger_loop.py [--seeds 3100-3107] [--nodes 8] [--hours 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.planning.stagger_lake import stagger_plans
from ckptwatch.settings import Settings
from ckptwatch.simulate.evaluation import family_options
from ckptwatch.simulate.scenario import simulate


def day(root: Path, seed: int, nodes: int, hours: float,
        offsets: tuple[tuple[str, float], ...] = ()) -> dict[str, Any]:
    """One day simulated and ingested: saturation stalls and pool jobs' barrier p99."""
    shutil.rmtree(root, ignore_errors=True)
    opts = {**family_options("burst", seed), "incidents_per_hour": 0.0, "bursts_per_hour": 1.0,
            "aligned_phases": True, "phase_offsets": offsets}
    simulate(root / "raw", seed, nodes, hours, **opts)
    ingest(root / "raw", root / "lake")
    labels = json.loads((root / "raw" / "labels.json").read_text())
    con = connect(root / "lake", views=("checkpoint_latency", "pool_bursts"))
    try:
        p99 = dict(run_sql(con, "select job_id, quantile_cont(barrier_s, 0.99) from "
                                "checkpoint_latency where tier = 'pool' group by job_id").rows())
        bursts = run_sql(con, "select count(*) from pool_bursts").item()  # `ckptwatch bursts`
    finally:
        con.close()
    return {"saturation": sum(s["causes"][0] == "saturation" for s in labels["stalls"]),
            "p99": p99, "bursts": bursts}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", default="3100-3107")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--hours", type=float, default=3.0)
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    print("| seed | jobs delayed | peak before / after / capacity (GB/s) | bursts before -> after "
          "| saturation stalls before -> after | barrier p99 before -> after (s), per pool job |")
    print("|---:|---:|---|---|---|---|")
    worse = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            before = day(Path(tmp) / "before", seed, a.nodes, a.hours)
            plans = stagger_plans(Path(tmp) / "before" / "lake", Settings())
            if not plans:
                print(f"| {seed} | - | one pool job: nothing to stagger | | | |")
                continue
            offsets = tuple((j.job_id, j.delay_s) for p in plans for j in p.jobs if j.delay_s)
            after = day(Path(tmp) / "after", seed, a.nodes, a.hours, offsets)
            p = plans[0]
            p99 = ", ".join(f"{before['p99'][j]:.1f} -> {after['p99'].get(j, float('nan')):.1f}"
                            for j in sorted(before["p99"]))
            worse += after["saturation"] > before["saturation"] or any(
                after["p99"].get(j, 0.0) > v for j, v in before["p99"].items())
            print(f"| {seed} | {len(offsets)} | {p.peak_before_bps / 1e9:.1f} / "
                  f"{p.peak_after_bps / 1e9:.1f} / {p.capacity_bps / 1e9:.1f} | "
                  f"{before['bursts']} -> {after['bursts']} | "
                  f"{before['saturation']} -> {after['saturation']} | {p99} |")
    print(f"seeds where the plan made anything worse: {worse}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
