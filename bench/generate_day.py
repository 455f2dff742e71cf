"""Generate one simulated cluster-day in the real raw formats for the benchmarks.

Calls ``ckptwatch.simulate.scenario.simulate`` (the same generator as ``ckptwatch simulate``):
topology, jobs, per-rank checkpoint records (CSV and JSON Lines), pool metrics (CSV), SMART
envelopes and fabric envelopes per host, in the format mix below.

Counter volume: the simulator models one NIC per node, and an envelope carries all of that NIC's
counters (21 for ethtool on RoCE leaves, 32 for perfquery -x on InfiniBand leaves, ~27 on
average with ``--fabric mixed``). A real 512-node cluster with 8 NICs per node sampled every
10 s gives about 35 M counter rows a day; the same row count comes from one NIC per node
sampled every 40 s (512 x 2160 samples x ~32 counters), which is the default here.

Format mix (``--format-mix``, default ``world``): every supported format, as a cluster sends
them (``ckptwatch.simulate.telemetry.mix``): drives as smartctl JSON + OCP JSON, nvme-cli
smart-log JSON + OCP text, or smartctl JSON + OCP text; RoCE nodes as ethtool -S or a
node_exporter scrape; InfiniBand nodes as perfquery -x, a sysfs snapshot or a node_exporter
scrape. SMART every ``--smart-interval`` s (default 180; each drive 0.67-1.33x that: 2-4 min).
``--format-mix default`` writes the simulator's own formats (the day benchmarked before; SMART
every 15 min there unless ``--smart-interval`` says otherwise). ``--nics-per-node 8`` gives the
8 rails of a GPU node (the extra rails carry the node's counters scaled).

Run:  .venv/bin/python bench/generate_day.py [--nodes 512] [--hours 24] [--fabric-interval 40]
      [--smart-interval 180] [--format-mix world] [--nics-per-node 1] [--seed 9]
      [--out bench/out/raw-512n-24h-world]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ckptwatch.simulate.config import FORMAT_MIXES
from ckptwatch.simulate.scenario import simulate

OUT = Path(__file__).resolve().parent / "out"


#: SMART seconds between samples per drive by format mix (the default mix's day as before).
SMART_INTERVAL = {"world": 180.0, "default": 900.0}


def raw_dir_for(nodes: int, hours: float, mix: str = "world", nics: int = 1) -> Path:
    """Where the day of ``nodes`` x ``hours`` in format ``mix`` goes by default (the default
    mix's day keeps its old name)."""
    tail = ("" if mix == "default" else f"-{mix}") + (f"-{nics}nic" if nics != 1 else "")
    return OUT / f"raw-{nodes}n-{hours:g}h{tail}"


def generate(out: Path, *, nodes: int, hours: float, seed: int, fabric_interval_s: float,
             mix: str = "world", smart_interval_s: float | None = None,
             nics: int = 1) -> dict[str, int]:
    """Write the scenario (overwriting ``out``); returns rows per raw file kind."""
    summary = simulate(out, seed, nodes, hours, overwrite=True,
                       fabric_interval_s=fabric_interval_s, format_mix=mix,
                       smart_interval_s=smart_interval_s or SMART_INTERVAL[mix],
                       nics_per_node=nics)
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
    ap.add_argument("--smart-interval", type=float, default=None,
                    help="mean seconds between SMART samples per drive (default: 180 for the "
                         "world mix, 900 for the default mix)")
    ap.add_argument("--format-mix", choices=FORMAT_MIXES, default="world",
                    help="world: every supported format; default: the simulator's own "
                         "(default: %(default)s)")
    ap.add_argument("--nics-per-node", type=int, default=1,
                    help="NICs per node, 1-8 (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or raw_dir_for(args.nodes, args.hours, args.format_mix, args.nics_per_node)
    t0 = time.monotonic()
    kinds = generate(out, nodes=args.nodes, hours=args.hours, seed=args.seed,
                     fabric_interval_s=args.fabric_interval, mix=args.format_mix,
                     smart_interval_s=args.smart_interval, nics=args.nics_per_node)
    print(f"wrote {out} in {time.monotonic() - t0:.1f} s: "
          + ", ".join(f"{k} {v:,} lines" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
