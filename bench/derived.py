"""Benchmark: the counter-delta refresh (``ckptwatch.lake.derived.refresh``) beside one bare
DuckDB ``lag()`` pass over the same lake's fabric counters, in the same run, at the same cap.

The raw tables of ``--lake`` are hard-linked into ``WORK/lake`` (``--work``, default
``bench/out/derived``; nothing of the source lake is written, its own ``derived/`` is not
copied), then each stage runs in a fresh interpreter (its own peak RSS):

- ``lag``: ``bench/lag.py``'s ``FABRIC_LAG``, deltas and rates by ``lag()`` over every fabric
  counter sample: the work a refresh cannot avoid (no dedup, resets, saturation or write);
- ``refresh``: materialise every day from nothing (``derived/`` removed first).

For each it prints wall seconds, CPU seconds (user + system: the figure that holds on a shared
machine) and peak RSS, and the refresh's ratio to the ``lag()`` pass in both, against the
target (issue 18: the refresh <= 1.5x the bare pass).

Run:  .venv/bin/python bench/derived.py [--lake bench/out/work/lake] [--memory 3GB] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
#: The target: a refresh costs at most this many bare lag() passes (CPU seconds).
TARGET_RATIO = 1.5


def child(stage: str, lake_root: Path, memory: str) -> dict[str, Any]:
    """One stage in this process: rows, wall and CPU seconds, peak RSS."""
    import duckdb

    from ckptwatch.lake import derived
    from ckptwatch.lake.store import Lake

    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    if stage == "lag":
        sys.path.insert(0, str(BENCH))
        from lag import FABRIC_LAG

        con = duckdb.connect(config={"memory_limit": memory})
        got = con.execute(FABRIC_LAG, {"fabric_glob": Lake(lake_root).glob(
            "fabric_counters")}).fetchone()
        rows = int(got[0]) if got else 0
    elif stage == "refresh":
        shutil.rmtree(lake_root / derived.DERIVED_DIR, ignore_errors=True)
        done = derived.refresh(lake_root, memory_limit=memory)
        con = duckdb.connect()
        got = con.execute("select count(*) from read_parquet($g)", {"g": str(
            lake_root / derived.DERIVED_DIR / derived.DELTAS / "*" / "*.parquet")}).fetchone()
        rows = int(got[0]) if got else 0
        print(f"    refresh built {len(done.built)} day(s)", file=sys.stderr)
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"rows": rows, "s": time.perf_counter() - t0,
            "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "rss_mb": after.ru_maxrss / 1024}


def run(stage: str, lake_root: Path, memory: str) -> dict[str, Any]:
    """``child`` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, __file__, "--child", stage, "--lake", str(lake_root),
                           "--memory", memory], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"{stage} failed: {last}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def link_lake(source: Path, dest: Path) -> None:
    """``dest``: the raw tables of ``source``, hard-linked (no ``derived/``)."""
    from ckptwatch.lake.derived import DERIVED_DIR

    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, copy_function=os.link,
                    ignore=lambda d, names: [DERIVED_DIR] if Path(d) == source else [])


def main() -> int:
    from ckptwatch.flows.nightly import NIGHTLY_DUCKDB_MEMORY

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--lake", type=Path, default=OUT / "work" / "lake",
                    help="a lake with counter tables (bench/run.py ingests the 512-node day "
                         "into bench/out/work/lake)")
    ap.add_argument("--memory", default=NIGHTLY_DUCKDB_MEMORY,
                    help=f"DuckDB memory cap of both stages (default: the nightly flow's, "
                         f"{NIGHTLY_DUCKDB_MEMORY})")
    ap.add_argument("--work", type=Path, default=OUT / "derived",
                    help="directory for the linked lake and derived.json (default: "
                         "bench/out/derived; another one lets two runs share a machine)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.lake, args.memory)))
        return 0
    if not (args.lake / "fabric_counters").is_dir():
        print(f"no lake with fabric counters at {args.lake}: run bench/run.py first",
              file=sys.stderr)
        return 2
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    lake = work / "lake"
    link_lake(args.lake.resolve(), lake)
    print(f"counter deltas of {args.lake} (linked into {lake}), DuckDB {args.memory}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    lag = run("lag", lake, args.memory)
    ours = run("refresh", lake, args.memory)
    print(f"  {'stage':<34} {'rows':>12} {'wall s':>8} {'CPU s':>8} {'RSS MB':>8}")
    for name, r in (("bare lag() pass (fabric counters)", lag),
                    ("refresh (every counter, written)", ours)):
        print(f"  {name:<34} {r['rows']:>12,} {r['s']:>8.1f} {r['cpu_s']:>8.1f} "
              f"{r['rss_mb']:>8.0f}")
    cpu_ratio = ours["cpu_s"] / lag["cpu_s"]
    verdict = ("held" if cpu_ratio <= TARGET_RATIO
               else f"missed by {cpu_ratio / TARGET_RATIO - 1:.0%}")
    print(f"  refresh / lag(): {ours['s'] / lag['s']:.2f}x wall, {cpu_ratio:.2f}x CPU "
          f"(target <= {TARGET_RATIO}x CPU: {verdict})")
    (work / "derived.json").write_text(json.dumps(
        {"lake": str(args.lake), "memory": args.memory, "lag": lag, "refresh": ours,
         "cpu_ratio": cpu_ratio, "target_ratio": TARGET_RATIO}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
