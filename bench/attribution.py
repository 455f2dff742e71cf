"""Benchmark: attribution (``find_stalls``, what ``ckptwatch stalls`` runs) stage by stage at a
DuckDB cap, beside one bare DuckDB ``lag()`` pass over the same lake's counter tables.

Each stage runs in a fresh interpreter (its own peak RSS) and prints wall seconds, CPU seconds
(user + system: the figure that holds on a shared machine) and peak RSS:

- ``lag``: deltas and rates by ``lag()`` over every fabric counter and SMART sample (the work
  attribution cannot avoid: no dedup, resets, saturation, catalog or windows);
- ``stalls``, ``stall_ranks``, ``int_signal_series``, ``stall_signals``, ``int_signal_noise``,
  ``history``: the queries ``ckptwatch.analysis.stalls.stall_features`` runs, each alone on a
  connection built for attribution (``ATTRIBUTION_VIEWS``), ``--explain`` writes each one's
  EXPLAIN ANALYZE. ``int_signal_series`` is the per-series medians and MADs (one thread, as
  ``stall_features`` pins them); ``stall_signals`` and ``int_signal_noise`` alone compute them
  again each (``stall_features`` reads the pinned table in both);
- ``find_stalls``: the whole of it. ``--save FILE`` writes its stalls, causes, scores and
  features as JSON, so that two runs (before and after a change) can be compared exactly
  (``--compare BEFORE AFTER``); ``--phases`` prints where its time went (the connection,
  each pin of ``pinned_views``, each query of ``stall_features``; wall seconds). For a
  "before" run: ``CKPTWATCH_SQL_DIR`` names the SQL as it
  was, ``ATTRIBUTION_UNPINNED=1`` has every query compute its views again (no
  ``stalls.PINNED_VIEWS``, no ``stalls.PINNED_SAMPLES``).

The lake is read as it is: its counter deltas are read materialised when ``derived/`` is fresh
(``ckptwatch.lake.derived.refresh``; ``bench/derived.py`` builds a linked copy of the bench lake
with them), computed otherwise. Nothing of the lake is written but the empty tables a lake of
an older version lacks.

Run:  .venv/bin/python bench/attribution.py [--lake bench/out/work/lake] [--memory 2GB]
          [--stages lag,stalls,...,find_stalls] [--explain DIR] [--save FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lag import COUNTER_TABLES_LAG  # bench/lag.py: this script's directory is on sys.path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
STAGES = ("lag", "stalls", "stall_ranks", "int_signal_series", "stall_signals",
          "int_signal_noise", "history", "find_stalls")

#: One plain pass of lag() deltas and rates over the lake's counter tables (bench/lag.py).
BARE_LAG = COUNTER_TABLES_LAG


def _query(stage: str) -> str:
    """The query of ``stall_features`` that ``stage`` names (the stall hosts: every host)."""
    if stage == "stalls":
        return "select * from stalls where is_stall"
    if stage == "history":
        return ("select job_id, step, host, family, sum(level) as level from counter_windows "
                "where family in ('pause', 'xmit_wait') group by job_id, step, host, family")
    if stage == "int_signal_noise":  # stall_features names the stall hosts: here every host
        return "select * from int_signal_noise"
    if stage == "int_signal_series":  # a table macro (int_signal_noise.sql)
        return "select * from int_signal_series()"
    return f"select * from {stage}"


def _operators(profile: dict[str, Any], top: int = 25) -> str:
    """The ``top`` operators of a DuckDB JSON profile by their own time: seconds, rows out,
    what they are (the first line of their extra info)."""
    found: list[tuple[float, int, str]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        info = node.get("extra_info") or {}
        what = "; ".join(f"{k}={str(v)[:90]}" for k, v in info.items()
                         if k in ("Function", "Table", "Groups", "Conditions", "Join Type",
                                  "Aggregates", "Projections", "Filters", "CTE Index",
                                  "Estimated Cardinality"))
        found.append((float(node.get("operator_timing", node.get("timing", 0.0))),
                      int(node.get("operator_cardinality", node.get("intermediate_rows", 0))),
                      f"{'  ' * min(depth, 12)}"
                      f"{node.get('operator_name', node.get('name', '?')).strip()} {what}"))
        for child in node.get("children", []):
            walk(child, depth + 1)

    if "operator" in profile:  # DuckDB 2: sections; operators under "operator"
        for node in profile["operator"]:
            walk(node, 0)
        query, system = profile.get("query", {}), profile.get("system", {})
        lines = [f"cpu {float(query.get('cpu_time', 0.0)):.2f} s, binding "
                 f"{float(profile.get('planner', {}).get('binding_time', 0.0)):.2f} s, "
                 f"peak buffer memory {int(system.get('peak_buffer_memory', 0)) >> 20} MB"]
    else:
        walk(profile, 0)
        total = float(profile.get("latency", 0.0))
        lines = [f"latency {total:.2f} s, cpu {float(profile.get('cpu_time', 0.0)):.2f} s, "
                 f"peak buffer memory {int(profile.get('system_peak_buffer_memory', 0)) >> 20} MB"]
    lines += [f"{t:8.2f} s {n:>12,}  {what}" for t, n, what in
              sorted(found, key=lambda r: -r[0])[:top]]
    return "\n".join(lines) + "\n"


def _digest(found: Any) -> tuple[str, list[dict[str, Any]]]:
    rows = [r.to_dict() for r in found.stalls]
    return hashlib.sha256(json.dumps(rows, default=str, sort_keys=True).encode()
                          ).hexdigest()[:16], rows


def _close(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-9 relative or 1e-12 absolute (DuckDB's parallel sums may differ in
    the last bits: a z-score that cancels to zero is 0.0 in one run, -4.5e-16 in the next, with
    the same SQL on the 512-node day)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= max(1e-9 * max(abs(a), abs(b)), 1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def compare(before: Path, after: Path) -> list[str]:
    """Differences between two ``--save`` files: stalls, causes, scores, features."""
    a = {(r["job_id"], r["step"]): r for r in json.loads(before.read_text())}
    b = {(r["job_id"], r["step"]): r for r in json.loads(after.read_text())}
    out = [f"stall {k} only in {before}" for k in sorted(a.keys() - b.keys())]
    out += [f"stall {k} only in {after}" for k in sorted(b.keys() - a.keys())]
    for k in sorted(a.keys() & b.keys()):
        out += [f"stall {k}: {field} {a[k][field]!r} != {b[k][field]!r}"
                for field in sorted(a[k].keys() | b[k].keys())
                if not _close(a[k].get(field), b[k].get(field))]
    return out


def _timing_phases() -> dict[str, float]:
    """Wrap ``find_stalls``' connection, ``pinned_views`` and ``stall_features``' queries so
    that each adds its wall seconds to the returned dict, keyed by what it is (a pin by the
    names it pins, a query by its first words)."""
    from contextlib import contextmanager

    import ckptwatch.analysis.findings as findings
    import ckptwatch.analysis.stalls as stalls

    phases: dict[str, float] = {}

    def add(key: str, t0: float) -> None:
        phases[key] = phases.get(key, 0.0) + time.perf_counter() - t0

    run_sql, pinned, connect = stalls.run_sql, stalls.pinned_views, findings.connect

    def timed_sql(con: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return run_sql(con, sql, *args, **kwargs)
        finally:
            add("query: " + " ".join(sql.split())[:48], t0)

    @contextmanager
    def timed_pin(con: Any, names: Any, **kwargs: Any) -> Any:
        names = tuple(names)
        t0 = time.perf_counter()
        with pinned(con, names, **kwargs):
            add("pin: " + ", ".join(names), t0)
            yield

    def timed_connect(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return connect(*args, **kwargs)
        finally:
            add("connect", t0)

    stalls.run_sql, stalls.pinned_views, findings.connect = timed_sql, timed_pin, timed_connect
    return phases


def child(stage: str, lake_root: Path, memory: str, explain: Path | None,
          save: Path | None, phases: bool = False) -> dict[str, Any]:
    """One stage in this process: rows, a digest of them, wall and CPU seconds, peak RSS."""
    import duckdb

    from ckptwatch.analysis.detection import DetectionSettings
    from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, find_stalls
    from ckptwatch.lake.query import connect, run_sql
    from ckptwatch.lake.store import Lake

    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    digest = ""
    timed: dict[str, float] | None = None
    if stage == "lag":
        con = duckdb.connect(config={"memory_limit": memory})
        lake = Lake(lake_root)
        got = con.execute(BARE_LAG, {"fabric_glob": lake.glob("fabric_counters"),
                                     "smart_glob": lake.glob("nvme_smart")}).fetchone()
        n = int(got[0]) if got else 0
    elif stage == "find_stalls":
        if os.environ.get("ATTRIBUTION_UNPINNED"):  # as before: every query computes its views
            import ckptwatch.analysis.stalls

            ckptwatch.analysis.stalls.PINNED_VIEWS = ()
            ckptwatch.analysis.stalls.PINNED_SAMPLES = ()
        timed = _timing_phases() if phases else None
        found = find_stalls(lake_root, memory_limit=memory)
        digest, rows = _digest(found)
        n = len(rows)
        if save is not None:
            save.write_text(json.dumps(rows, default=str, indent=1, sort_keys=True) + "\n")
    else:
        con = connect(lake_root, memory_limit=memory, views=ATTRIBUTION_VIEWS)
        DetectionSettings().apply(con)
        sql = _query(stage)
        if stage in ("int_signal_series", "int_signal_noise"):  # medians on one thread, as
            con.execute("set threads = 1").fetchall()  # stall_features computes them
        if explain is not None:
            explain.mkdir(parents=True, exist_ok=True)
            profile = explain / f"{stage}.json"
            con.execute("pragma enable_profiling = 'json'")
            con.execute(f"pragma profiling_output = '{profile}'")  # a setting: no parameter
            n = len(con.execute(sql).fetchall())
            con.execute("pragma disable_profiling")
            (explain / f"{stage}.txt").write_text(_operators(json.loads(profile.read_text())))
        else:
            frame = run_sql(con, sql)
            n = frame.height
            digest = hashlib.sha256(str(frame.sort(frame.columns).hash_rows().sum()).encode()
                                    ).hexdigest()[:16]
    after = resource.getrusage(resource.RUSAGE_SELF)
    out = {"rows": n, "digest": digest, "s": time.perf_counter() - t0,
           "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
           "rss_mb": after.ru_maxrss / 1024}
    if stage == "find_stalls" and timed is not None:
        out["phases"] = timed
    return out


def run(stage: str, args: argparse.Namespace) -> dict[str, Any]:
    """``child`` in a fresh interpreter; a failure (e.g. out of memory) is reported, not fatal."""
    argv = [sys.executable, __file__, "--child", stage, "--lake", str(args.lake),
            "--memory", args.memory]
    if args.explain:
        argv += ["--explain", str(args.explain)]
    if args.save:
        argv += ["--save", str(args.save)]
    if args.phases:
        argv += ["--phases"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"rows": 0, "digest": f"failed: {last[:160]}", "s": float("nan"),
                "cpu_s": float("nan"), "rss_mb": float("nan")}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--lake", type=Path, default=OUT / "work" / "lake",
                    help="an ingested lake (bench/run.py ingests the 512-node day into "
                         "bench/out/work/lake)")
    ap.add_argument("--memory", default="2GB", help="DuckDB memory cap (default 2GB)")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"comma-separated, of {', '.join(STAGES)}")
    ap.add_argument("--explain", type=Path, help="write each view stage's EXPLAIN ANALYZE here")
    ap.add_argument("--save", type=Path, help="write find_stalls' stalls as JSON here")
    ap.add_argument("--phases", action="store_true",
                    help="find_stalls: print the seconds of its connection, pins and queries")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                    help="only compare two --save files (stalls, causes, scores, features)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compare:
        diffs = compare(*args.compare)
        n = len(json.loads(args.compare[0].read_text()))
        print("\n".join(diffs) if diffs else f"same {n} stalls, causes, scores and features")
        return 1 if diffs else 0
    if args.child:
        print(json.dumps(child(args.child, args.lake, args.memory, args.explain, args.save,
                               args.phases)))
        return 0
    stages = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        print(f"--stages: unknown stage(s) {', '.join(unknown)} (of {', '.join(STAGES)})",
              file=sys.stderr)
        return 2
    if not (args.lake / "fabric_counters").is_dir():
        print(f"no lake with fabric counters at {args.lake}: run bench/run.py first",
              file=sys.stderr)
        return 2
    from ckptwatch.lake import derived

    print(f"attribution over {args.lake} (counter deltas "
          f"{'materialised' if derived.is_fresh(args.lake) else 'computed'}), DuckDB "
          f"{args.memory}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"  {'stage':<18} {'rows':>10} {'wall s':>8} {'CPU s':>8} {'RSS MB':>8}  digest")
    got: dict[str, dict[str, Any]] = {}
    for stage in stages:
        r = got[stage] = run(stage, args)
        print(f"  {stage:<18} {r['rows']:>10,} {r['s']:>8.1f} {r['cpu_s']:>8.1f} "
              f"{r['rss_mb']:>8.0f}  {r['digest']}", flush=True)
        for what, secs in sorted(r.get("phases", {}).items(), key=lambda kv: -kv[1]):
            print(f"      {secs:6.2f} s  {what}")
    if "lag" in got and "find_stalls" in got:
        lag, ours = got["lag"], got["find_stalls"]
        print(f"  find_stalls / lag(): {ours['s'] / lag['s']:.2f}x wall, "
              f"{ours['cpu_s'] / lag['cpu_s']:.2f}x CPU (target <= 3x; <= 15 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
