"""Benchmark of a cluster-day through every stage, each against a reference in the same run.

For each stage it prints rows, seconds, rows/s and the stage's peak RSS (each stage runs in a
fresh subprocess, which reports its own ``ru_maxrss`` and its children's), plus a reference
measured on the same data in the same run and the ratio ours/reference:

- ingest, per source format (hard-linked into its own raw directory, into a fresh lake):
  reference = bare polars reading the same files to the canonical long frame and writing zstd
  Parquet (``pl.read_csv``/``pl.read_ndjson``; envelope text split into name/value by regex);
- view build (``connect``), no reference;
- latency mart ``checkpoint_latency`` vs a hand-written DuckDB query of the same columns
  (``bench_marts.REFERENCE_SAME_COLUMNS``); counter deltas vs a bare ``lag()`` query;
- attribution (``find_stalls(lake)``), uncapped and within a 2GB DuckDB cap (issue 18: <= 15 s
  within 2 GiB), beside one bare ``lag()`` pass over the lake's counter tables at the same cap
  (``bench/lag.py``; target: attribution <= 3x it in CPU);
- alerts (``run_alerts``, dry run), and the whole nightly flow (as ``ckptwatch nightly --no-send``
  runs it, from its start: Prefect's local server booting while the flow imports; fresh lake)
  at its default DuckDB cap (3GB; target <= 90 s with peak RSS <= 2 GiB and
  the same stalls and alerts as standalone runs) and uncapped (80 % of RAM).

Every stage reports wall seconds, CPU seconds (user + system of the stage's process and its
children: the fair figure on a shared machine) and peak RSS.

Results go to stdout as a table and to ``bench/out/results.json``.

Per-format ingest ratios (each format against bare polars and bare ``json.loads`` of the same
bytes) are ``bench/formats.py``; the ingest stages here split the day by directory.

Run:  .venv/bin/python bench/generate_day.py            # once: bench/out/raw-512n-24h-world
      .venv/bin/python bench/run.py [--raw DIR] [--skip nightly,...]
"""

from __future__ import annotations

import argparse
import io
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
ROOT = BENCH.parent
#: Per-format raw subsets: (stage name, glob patterns relative to the raw dir).
#: The DuckDB memory cap of the capped attribution run and its lag() pass
#: (``$CKPTWATCH_DUCKDB_MEMORY``; issue 18: attribution <= 15 s within 2 GiB).
CAPPED = "2GB"
#: A lookback that reaches every day of any lake: the nightly run over the whole lake.
WHOLE_LAKE = 36500
FORMATS = {
    "ingest checkpoints csv": ["checkpoints/*.csv"],
    "ingest checkpoints jsonl": ["checkpoints/*.jsonl"],
    "ingest pool csv": ["pool/*.csv"],
    "ingest smart envelopes": ["smart/**/*.jsonl"],
    "ingest fabric envelopes": ["fabric/**/*.jsonl"],
    "ingest jobs+topology": ["jobs/*", "topology.csv"],
}


# -- child side: one stage, prints {"rows": n, "ref_rows": m, "seconds": s, "ref_seconds": r}
def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def _cpu_s() -> float:
    """User + system seconds of this process and its (waited-for) children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _subset(raw: Path, patterns: list[str], dest: Path) -> list[Path]:
    """Hard links of the matching files under ``dest`` (same relative paths)."""
    shutil.rmtree(dest, ignore_errors=True)
    files = sorted({p for pat in patterns for p in raw.glob(pat) if p.is_file()})
    for p in files:
        target = dest / p.relative_to(raw)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(p, target)
    return [dest / p.relative_to(raw) for p in files]


def stage_ingest(raw: Path, lake: Path, fresh: bool = True) -> dict[str, Any]:
    from ckptwatch.ingest.run import ingest

    if fresh:
        shutil.rmtree(lake, ignore_errors=True)
    t0 = time.perf_counter()
    report = ingest(raw, lake)
    return {"rows": sum(report.rows.values()), "seconds": time.perf_counter() - t0,
            "quarantined": report.quarantined}


#: A line of tool text as the reference reads it: a name (anything not starting with ``#``),
#: separators (spaces, ``:``, ``.``, ``-``) and a number at the end. It reads ethtool's
#: ``name: value``, perfquery's ``Name:....value``, sysfs's ``path:value``, Prometheus
#: exposition's ``name{labels} value`` and the OCP log's ``Name - ... value`` alike; until
#: session 16 it read the first two only, and made no rows of the others (their reference
#: seconds were a split and a failed regex per line).
_TEXT_COUNTER = r"^\s*([^#\s].*?)[\s:.\-]+(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$"


def stage_reference_ingest(files: list[Path], out: Path) -> dict[str, Any]:
    """Bare polars: each file to its long canonical frame, written as zstd Parquet."""
    import polars as pl

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    rows = 0
    for i, f in enumerate(files):
        if f.suffix == ".csv":
            df = pl.read_csv(f, try_parse_dates=True)
        elif "fabric" in f.parts or "smart" in f.parts:
            # one polars read per output shape: a file of the world mix holds tool text and
            # tool JSON (smartctl next to the OCP log as text), which one schema cannot type
            by_shape: dict[bool, list[bytes]] = {}
            for line in f.read_bytes().splitlines(keepends=True):
                by_shape.setdefault(b'"output":"' in line, []).append(line)
            for j, (is_text, lines) in enumerate(by_shape.items()):
                df = _reference_envelopes(pl.read_ndjson(io.BytesIO(b"".join(lines)),
                                                         infer_schema_length=None), is_text)
                df.write_parquet(out / f"part-{i}-{j}.parquet", compression="zstd")
                rows += df.height
            continue
        else:
            df = pl.read_ndjson(f, infer_schema_length=None)
        df.write_parquet(out / f"part-{i}.parquet", compression="zstd")
        rows += df.height
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def _reference_envelopes(env: Any, is_text: bool) -> Any:
    """Envelopes to the long frame, bare: tool text split into ``name: value`` lines by regex,
    tool JSON unpivoted one level down."""
    import polars as pl

    ts = pl.col("collected_at").str.to_datetime(strict=False)
    if "device" not in env.columns:  # whole-node outputs (sysfs, scrapes) name no device
        env = env.with_columns(pl.lit(None, dtype=pl.String).alias("device"))
    if is_text:  # tool text: one row per "name: value" line
        df = (env.select("node", "device", ts,
                         "source", pl.col("output").str.split("\n").alias("line"))
              .explode("line")
              .with_columns(pl.col("line").str.extract_groups(_TEXT_COUNTER)
                            .struct.rename_fields(["counter", "value"]).alias("kv"))
              .unnest("kv").drop("line").drop_nulls("value")
              .with_columns(pl.col("value").cast(pl.Float64)))
    else:  # tool JSON: numeric leaves one level down, long
        flat = env.select("node", "device", ts,
                          "source", pl.col("output").struct.unnest().name.prefix("output."))
        nested = [c for c, t in flat.schema.items() if isinstance(t, pl.Struct)]
        if nested:
            flat = flat.unnest(nested, separator=".")
        num = [c for c, t in flat.schema.items() if t.is_numeric()]
        df = flat.unpivot(num, index=["node", "device", "collected_at", "source"],
                          variable_name="metric").with_columns(
            pl.col("value").cast(pl.Float64))
    return df


def stage_views(lake: Path) -> dict[str, Any]:
    from ckptwatch.lake.query import connect

    t0 = time.perf_counter()
    con = connect(lake)
    n = con.execute("select count(*) from duckdb_views() where not internal").fetchone()
    seconds = time.perf_counter() - t0
    con.close()
    return {"rows": int(n[0]) if n else 0, "seconds": seconds, "unit": "views"}


def _best(con: Any, sql: str, params: Any, repeat: int = 2) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = len(con.execute(sql, params).fetchall())
        best = min(best, time.perf_counter() - t0)
    return best, n


def stage_marts(lake: Path) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    from bench_marts import REFERENCE_SAME_COLUMNS

    from ckptwatch.lake.query import connect
    from ckptwatch.lake.store import Lake

    con = connect(lake)
    params = {"ckpt_glob": Lake(lake).glob("checkpoint_writes")}
    n_in = con.execute("select count(*) from read_parquet($ckpt_glob)", params).fetchone()
    t_ref, n_ref = _best(con, REFERENCE_SAME_COLUMNS, params)
    t_ours, n_ours = _best(con, "select * from checkpoint_latency", None)
    return {"rows": int(n_in[0]) if n_in else 0, "seconds": t_ours, "ref_seconds": t_ref,
            "rows_out": n_ours, "ref_rows_out": n_ref}


def stage_counters(lake: Path) -> dict[str, Any]:
    sys.path.insert(0, str(BENCH))
    from bench_marts import REFERENCE_LAG

    from ckptwatch.lake.query import connect
    from ckptwatch.lake.store import Lake

    con = connect(lake)
    params = {"fabric_glob": Lake(lake).glob("fabric_counters")}
    n_in = con.execute("select count(*) from read_parquet($fabric_glob)", params).fetchone()
    t_ref, _ = _best(con, REFERENCE_LAG, params, 1)
    t_ours, _ = _best(con, "select count(*), sum(delta), sum(rate_per_s) from stg_counter_deltas "
                      "where source_table = 'fabric_counters'", None, 1)
    return {"rows": int(n_in[0]) if n_in else 0, "seconds": t_ours, "ref_seconds": t_ref}


def stage_attribution(lake: Path) -> dict[str, Any]:
    from ckptwatch.analysis.findings import find_stalls

    t0, c0 = time.perf_counter(), _cpu_s()
    findings = find_stalls(lake)
    return {"rows": len(findings.stalls), "seconds": time.perf_counter() - t0,
            "stage_cpu_s": _cpu_s() - c0, "unit": "stalls"}


def stage_lag(lake: Path) -> dict[str, Any]:
    """One bare ``lag()`` pass over the lake's counter tables (``bench/lag.py``), at the
    DuckDB cap of ``$CKPTWATCH_DUCKDB_MEMORY``: the work attribution cannot avoid."""
    import duckdb

    sys.path.insert(0, str(BENCH))
    from lag import COUNTER_TABLES_LAG

    from ckptwatch.lake.store import Lake
    from ckptwatch.settings import duckdb_memory_limit

    con = duckdb.connect()
    cap = duckdb_memory_limit()
    if cap:
        con.execute(f"set memory_limit = '{cap}'")  # a setting's value, not data
    t0, c0 = time.perf_counter(), _cpu_s()
    got = con.execute(COUNTER_TABLES_LAG, {"fabric_glob": Lake(lake).glob("fabric_counters"),
                                           "smart_glob": Lake(lake).glob("nvme_smart")}).fetchone()
    return {"rows": int(got[0]) if got else 0, "seconds": time.perf_counter() - t0,
            "stage_cpu_s": _cpu_s() - c0, "unit": "samples"}


def stage_refresh(lake: Path) -> dict[str, Any]:
    """The derived counter deltas of every stale day (``ckptwatch.lake.derived.refresh``)."""
    from ckptwatch.lake import derived

    t0, c0 = time.perf_counter(), _cpu_s()
    built = derived.refresh(lake).built
    return {"rows": len(built), "seconds": time.perf_counter() - t0,
            "stage_cpu_s": _cpu_s() - c0, "unit": "days"}


def stage_alerts(lake: Path) -> dict[str, Any]:
    from ckptwatch.alerts.evaluate import run_alerts
    from ckptwatch.settings import load_settings

    t0 = time.perf_counter()
    run = run_alerts(lake, load_settings(None), send=False, sinks=[])
    return {"rows": len(run.alerts), "seconds": time.perf_counter() - t0, "unit": "alerts"}


def stage_nightly(raw: Path, lake: Path, fresh: bool = True,
                  lookback_days: int = 0) -> dict[str, Any]:
    """The nightly flow as ``ckptwatch nightly RAW --lake LAKE --no-send`` runs it
    (``cli/nightly.py``): Prefect's local server launched, the flow imported while it boots,
    the flow run against it. Besides the flow's own seconds and peak RSS per step, each step's
    CPU seconds (``steps_cpu_s``: user + system of this process and of the children reaped
    during the step, such as the ingest's parse workers; the bench times the flow's step clock,
    the flow itself is unchanged)."""
    from contextlib import contextmanager

    from ckptwatch.flows import local_prefect
    from ckptwatch.flows.run import StepClock

    steps_cpu: dict[str, float] = {}
    timed = StepClock.step

    @contextmanager
    def step_with_cpu(clock: StepClock, name: str) -> Any:
        c0 = _cpu_s()
        try:
            with timed(clock, name):
                yield
        finally:
            steps_cpu[name] = round(_cpu_s() - c0, 2)

    setattr(StepClock, "step", step_with_cpu)  # noqa: B010 (a method replaced in this child)
    if fresh:
        shutil.rmtree(lake, ignore_errors=True)
    t0 = time.perf_counter()
    local_prefect.configure()
    server = local_prefect.start_local_server()
    from ckptwatch.flows.nightly import nightly_flow, preload

    preload()  # as the command does, while the server boots
    with local_prefect.local_server(server):
        out = nightly_flow(raw, lake, send=False, lookback_days=lookback_days)
    return {"rows": int(out.get("ingested", 0)), "seconds": time.perf_counter() - t0,
            "unit": "files", "steps_s": out.get("steps_s", {}),
            "steps_peak_rss_mb": out.get("steps_peak_rss_mb", {}), "steps_cpu_s": steps_cpu,
            "stalls": out.get("stalls"), "alerts": out.get("alerts"),
            "views": out.get("views"), "failed": out.get("failed"),
            "report_json": out.get("report_json")}


def stage_nightly_check(lake: Path, report_json: Path) -> dict[str, Any]:
    """The nightly run's stalls and alerts against the same computed the way it was before the
    nightly run attributed once: stalls by a standalone ``find_stalls`` over the report's days,
    alerts by ``run_alerts`` whose cause provider attributes the stalls again."""
    from datetime import date

    from ckptwatch.alerts.evaluate import run_alerts
    from ckptwatch.analysis.findings import find_stalls
    from ckptwatch.settings import load_settings

    facts = json.loads(report_json.read_text())
    day = date.fromisoformat(facts["date"])
    days = (day, day)  # the nightly default: lookback_days=0
    t0 = time.perf_counter()
    standalone = find_stalls(lake, days=days)
    stalls_s = time.perf_counter() - t0

    def attribute_again(window: Any) -> Any:
        return find_stalls(lake, days=days).top_causes(window)

    t0 = time.perf_counter()
    run = run_alerts(lake, load_settings(None), send=False, sinks=[],
                     cause_provider=attribute_again, days=days)
    alerts_s = time.perf_counter() - t0
    report_stalls = [(s["job_id"], s["step"], s["cause"]) for s in facts["stalls"]]
    mine = [(s.job_id, s.step, s.cause) for s in standalone.stalls
            if s.start_ts is not None and s.start_ts[:10] == facts["date"]]

    def alert_key(a: dict[str, Any]) -> tuple[Any, ...]:
        return (a["labels"]["job_id"], a["labels"]["tier"], a["labels"]["severity"],
                a["status"], a["annotations"].get("top_cause"))

    report_alerts = sorted(alert_key(a) for a in facts["alerts"]["alerts"])
    again = sorted(alert_key(dict(a)) for a in run.alerts)
    return {"rows": len(report_stalls), "seconds": stalls_s + alerts_s, "unit": "stalls",
            "stalls_equal": sorted(report_stalls) == sorted(mine),
            "alerts_equal": report_alerts == again, "n_alerts": len(again),
            "old_alerts_s": round(alerts_s, 1)}


def child(argv: list[str]) -> None:
    name, args = argv[0], [Path(a) for a in argv[1:]]
    if name == "nightly-check":
        res = stage_nightly_check(args[0], args[1])
    elif name in ("ingest", "ingest-into"):
        res = stage_ingest(args[0], args[1], fresh=name == "ingest")
    elif name == "ref-ingest":
        files = sorted(p for p in args[0].rglob("*") if p.is_file())
        res = stage_reference_ingest(files, args[1])
    else:
        res = {"views": stage_views, "marts": stage_marts, "counters": stage_counters,
               "attribution": stage_attribution, "lag": stage_lag, "refresh": stage_refresh,
               "alerts": stage_alerts}[name](args[0]) \
            if not name.startswith("nightly") \
            else stage_nightly(args[0], args[1], fresh=name == "nightly",
                               lookback_days=WHOLE_LAKE if name == "nightly-whole" else 0)
    res["rss_mb"] = _peak_mb()
    res["cpu_s"] = _cpu_s()
    print("RESULT " + json.dumps(res))


# -- parent side ----------------------------------------------------------------------------
def run_child(*args: str | Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
           "PREFECT_HOME": str(OUT / ".prefect"), **(extra_env or {})}
    proc = subprocess.run([sys.executable, __file__, "--child", *map(str, args)],
                          capture_output=True, text=True, env=env, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--raw", type=Path, default=OUT / "raw-512n-24h-world",
                    help="raw cluster-day (bench/generate_day.py writes it; the world format "
                         "mix by default, bench/out/raw-512n-24h for the simulator's own "
                         "formats)")
    ap.add_argument("--skip", default="", help="comma-separated stage groups to skip: "
                    "ingest,marts,attribution,alerts,nightly,nightly-uncapped")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if not args.raw.is_dir():
        print(f"no raw day at {args.raw}: run bench/generate_day.py first", file=sys.stderr)
        return 2
    work = OUT / "work"
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []

    def record(stage: str, res: dict[str, Any], ref: dict[str, Any] | None = None,
               by: str = "seconds") -> None:
        """One row of the table; its ratio is ours / ref in ``by`` (wall ``seconds``, or the
        stages' own CPU seconds ``stage_cpu_s``)."""
        row = {"stage": stage, **res}
        if ref is not None:
            row["ref_seconds"] = ref.get("seconds")
            row["ref_rss_mb"] = ref.get("rss_mb")
            row["ref_rows"] = ref.get("rows")
            if by != "seconds" and row.get(by) and ref.get(by):
                row["ratio_by"] = by
                row["ratio"] = row[by] / ref[by]
        if row.get("ref_seconds") and "ratio" not in row:
            row["ratio"] = row["seconds"] / row["ref_seconds"]
        results.append(row)
        print(_line(row), flush=True)

    print(_header(), flush=True)
    lake = work / "lake"
    from ckptwatch.lake.store import MANIFEST_DIR, Lake

    if "ingest" not in skip:  # skipped: the later stages read the lake an earlier run left
        shutil.rmtree(lake, ignore_errors=True)
        Lake(lake).init()  # once, as a deployment does: not a cost of the first format's stage
    elif not (lake / MANIFEST_DIR).is_dir():
        print(f"--skip ingest: no lake at {lake} from an earlier run", file=sys.stderr)
        return 2
    total: dict[str, Any] = {"rows": 0, "seconds": 0.0, "rss_mb": 0.0, "ref_seconds": 0.0}
    for stage, patterns in FORMATS.items() if "ingest" not in skip else ():
        # one format after the other into one lake
        sub = work / stage.replace(" ", "-").replace("+", "-")
        _subset(args.raw, patterns, sub)
        ours = run_child("ingest-into", sub, lake)
        ref = run_child("ref-ingest", sub, work / "ref-out")
        record(stage, ours, ref)
        total["rows"] += ours.get("rows", 0)
        total["seconds"] += ours.get("seconds", 0.0)
        total["ref_seconds"] += ref.get("seconds", 0.0)
        total["rss_mb"] = max(total["rss_mb"], ours.get("rss_mb", 0.0))
    if "ingest" not in skip:
        record("ingest whole day (sum)", total)
        record("view build", run_child("views", lake))
    if "marts" not in skip:
        record("mart checkpoint_latency", run_child("marts", lake))
        record("stg_counter_deltas", run_child("counters", lake))
    lag: dict[str, Any] | None = None
    if "attribution" not in skip:
        # As the nightly run does: the counter deltas stored first (ckptwatch.lake.derived),
        # then attribution reads them instead of computing them.
        capped = {"CKPTWATCH_DUCKDB_MEMORY": CAPPED}
        lag = run_child("lag", lake, extra_env=capped)
        record(f"bare lag() pass, DuckDB {CAPPED}", lag)
        record(f"derived deltas refresh, DuckDB {CAPPED}",
               run_child("refresh", lake, extra_env=capped), lag, by="stage_cpu_s")
        record("attribution (find_stalls)", run_child("attribution", lake))
        record(f"attribution, DuckDB {CAPPED}",
               run_child("attribution", lake, extra_env=capped), lag, by="stage_cpu_s")
        print("  (attribution's ratio: its CPU seconds / the bare lag() pass's CPU seconds)")
    if "alerts" not in skip:
        record("alerts (run_alerts)", run_child("alerts", lake))
    if "nightly" not in skip:
        nightly = run_child("nightly", args.raw, work / "lake-nightly")
        # Beside this run's bare lag() pass (when it ran): the machine's speed drifts ~30 %
        # within a session, and the flow's seconds with it; its ratio to the pass does not.
        record("nightly flow (whole, DuckDB 3GB)", nightly, lag)
        if lag is not None:
            print("  (the nightly flow's ratio: its wall seconds / the bare lag() pass's)")
        _nightly_steps(nightly, work / "lake-nightly", record)
    if "nightly-uncapped" not in skip:
        record("nightly flow, DuckDB uncapped", run_child(
            "nightly", args.raw, work / "lake-nightly",
            extra_env={"CKPTWATCH_DUCKDB_MEMORY": "none"}))
    _save(results, args.raw)
    print(f"wrote {OUT / 'results.json'}")
    return 0


def _save(results: list[dict[str, Any]], raw: Path) -> None:
    """``bench/out/results.json``: this run's rows, and the rows of the stages it skipped as
    an earlier run of the same raw day left them (each row says when it was measured)."""
    path = OUT / "results.json"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = [{**r, "measured_at": now} for r in results]
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        before = {}
    if before.get("raw") == str(raw):
        ran = {r["stage"] for r in rows}
        rows = [r for r in before.get("results", []) if r.get("stage") not in ran] + rows
    path.write_text(json.dumps({"raw": str(raw), "cpus": os.cpu_count(), "results": rows},
                               indent=1) + "\n")


def _nightly_steps(nightly: dict[str, Any], lake: Path,
                   record: Any) -> None:
    """Print the nightly run's seconds per step (the alerts step's target: < 5 s) and whether
    its stalls and alerts equal those of a standalone run (attribution done again)."""
    steps = nightly.get("steps_s") or {}
    if steps:
        held = "held" if steps.get("alerts", 99.0) < 5.0 else "MISSED"
        print("  nightly steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in steps.items())
              + f"   alerts step target < 5 s: {held}", flush=True)
    peaks = nightly.get("steps_peak_rss_mb") or {}
    if peaks:  # running maxima: the step where a figure rises set it
        print("  nightly peak RSS (MB) after each step, flow process / largest child: "
              + ", ".join(f"{k} {v['flow']}/{v['workers']}" for k, v in peaks.items()),
              flush=True)
    if not nightly.get("report_json"):
        return
    check = run_child("nightly-check", lake, nightly["report_json"])
    record("standalone stalls + alerts", check)
    if "error" not in check:
        print(f"  same stalls as standalone find_stalls: {check['stalls_equal']} "
              f"({check['rows']}); same alerts as run_alerts attributing again: "
              f"{check['alerts_equal']} ({check['n_alerts']}; that alerts step "
              f"{check['old_alerts_s']:.1f} s)", flush=True)


def _header() -> str:
    return (f"{'stage':30} {'rows':>12} {'s':>8} {'rows/s':>11} {'RSS MB':>7} "
            f"{'ref s':>8} {'ratio':>6}")


def _line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{r['stage']:30} FAILED: {r['error']}"
    rate = r["rows"] / r["seconds"] if r.get("seconds") else 0.0
    ref = f"{r['ref_seconds']:8.2f}" if r.get("ref_seconds") else f"{'-':>8}"
    ratio = f"{r['ratio']:6.2f}" if r.get("ratio") else f"{'-':>6}"
    return (f"{r['stage']:30} {r['rows']:>12,} {r['seconds']:8.2f} {rate:11,.0f} "
            f"{r['rss_mb']:7.0f} {ref} {ratio}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        raise SystemExit(0)
    raise SystemExit(main())
