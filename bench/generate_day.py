"""Generate one simulated cluster-day in the real raw formats for the benchmarks.

Calls ``ckptwatch.simulate.scenario.simulate`` (the same generator as ``ckptwatch simulate``):
topology,
jobs, per-rank checkpoint records (CSV and JSON Lines), pool metrics (CSV), SMART envelopes
(smartctl / nvme-cli JSON) and fabric envelopes (ethtool -S / perfquery -x text) per node.

Counter volume: the simulator models one NIC per node, and an envelope carries all of that NIC's
counters (21 for ethtool on RoCE leaves, 32 for perfquery -x on InfiniBand leaves, ~27 on
average with ``--fabric mixed``). A real 512-node cluster with 8 NICs per node sampled every
10 s gives about 35 M counter rows a day; the same row count comes from one NIC per node
sampled every 40 s (512 x 2160 samples x ~32 counters), which is the default here.

Run:  .venv/bin/python bench/generate_day.py [--nodes 512] [--hours 24] [--fabric-interval 40]
      [--seed 9] [--out bench/out/raw-512n]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ckptwatch.simulate.scenario import simulate

OUT = Path(__file__).resolve().parent / "out"


def raw_dir_for(nodes: int, hours: float) -> Path:
    """Where the day of ``nodes`` x ``hours`` goes by default."""
    return OUT / f"raw-{nodes}n-{hours:g}h"


def generate(out: Path, *, nodes: int, hours: float, seed: int,
             fabric_interval_s: float) -> dict[str, int]:
    """Write the scenario (overwriting ``out``); returns rows per raw file kind."""
    summary = simulate(out, seed, nodes, hours, overwrite=True,
                       fabric_interval_s=fabric_interval_s)
    kinds: dict[str, int] = {}
    for rel, rows in summary.files.items():
        kind = rel.split("/", 1)[0] if "/" in rel else rel
        kinds[kind] = kinds.get(kind, 0) + rows
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--fabric-interval", type=float, default=40.0,
                    help="seconds between fabric samples (default 40: ~35 M counter rows a "
                         "day at 512 nodes)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or raw_dir_for(args.nodes, args.hours)
    t0 = time.monotonic()
    kinds = generate(out, nodes=args.nodes, hours=args.hours, seed=args.seed,
                     fabric_interval_s=args.fabric_interval)
    print(f"wrote {out} in {time.monotonic() - t0:.1f} s: "
          + ", ".join(f"{k} {v:,} lines" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
