"""Does the nightly run grow with the days the lake keeps? One simulated day after another.

Generates ``--days`` consecutive cluster-days (``ckptwatch.simulate.scenario``, one seed per
day), then
runs the nightly flow once per day into one lake, each run in a fresh subprocess (like
``bench/run.py``), and prints per run: the days in the lake, seconds and peak RSS. The nightly
run reads the report day only (lookback_days 0), so both should stay flat; a last run over the
whole lake (every day as lookback) shows what the bound saves.

Run:  .venv/bin/python bench/days.py [--nodes 128] [--days 4] [--hours 24] [--format-mix world]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
START = datetime(2026, 11, 1, tzinfo=UTC)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--fabric-interval", type=float, default=40.0)
    ap.add_argument("--format-mix", choices=("world", "default"), default="world",
                    help="the days' formats (bench/generate_day.py; default: %(default)s)")
    args = ap.parse_args()
    sys.path.insert(0, str(BENCH))
    from generate_day import SMART_INTERVAL
    from run import _line, run_child

    from ckptwatch.simulate.scenario import simulate

    tail = "" if args.format_mix == "default" else f"-{args.format_mix}"
    work = OUT / f"days-{args.nodes}n{tail}"
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    print(f"{'stage':30} {'rows':>12} {'s':>8} {'rows/s':>11} {'RSS MB':>7} "
          f"{'ref s':>8} {'ratio':>6}", flush=True)
    results = []
    for k in range(args.days):
        raw = work / f"raw-day{k + 1}"
        if not raw.is_dir():
            start = (START + timedelta(days=k)).strftime("%Y-%m-%dT%H:%M:%SZ")
            simulate(raw, 100 + k, args.nodes, args.hours, overwrite=True, start=start,
                     fabric_interval_s=args.fabric_interval, format_mix=args.format_mix,
                     smart_interval_s=SMART_INTERVAL[args.format_mix])
        res = run_child("nightly-into", raw, lake)
        row = {"stage": f"nightly, lake of {k + 1} day(s)", **res}
        results.append(row)
        print(_line(row), flush=True)
    res = run_child("nightly-whole", work / f"raw-day{args.days}", lake)
    row = {"stage": f"nightly, whole lake ({args.days} days)", **res}
    results.append(row)
    print(_line(row), flush=True)
    (OUT / f"days-{args.nodes}n{tail}.json").write_text(json.dumps(
        {"nodes": args.nodes, "cpus": os.cpu_count(), "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
