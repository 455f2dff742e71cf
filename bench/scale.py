"""The nightly run's cost curve over cluster sizes (issue 47, item 2): ``make bench-scale``.

For each size of ``--sizes`` (default 128,512,2048 nodes) a world-mix day of ``--hours`` (24)
from ``bench/generate_day.py``'s ``generate()`` (seed ``--seed``, 9; fabric every 40 s, SMART
every 2-4 min), generated once under ``bench/out/`` (``raw_dir_for()``: the 512-node day is
``make bench``'s) and kept; then, each in a fresh subprocess (``bench/run.py``'s ``run_child``):

- the nightly flow, as ``ckptwatch nightly RAW --lake LAKE --no-send`` runs it, at its default
  DuckDB cap (3GB) on a fresh lake: wall, CPU and peak RSS of the whole run and per step (the
  flow's ``steps_s`` and ``steps_peak_rss_mb``, and ``run.py``'s CPU per step);
- one bare ``lag()`` pass over that lake's counter tables (``bench/lag.py``) at 2GB, as
  ``make bench`` runs it: the yardstick of the machine's speed, so each row's ratio to it
  compares across runs and machines;
- ``find_stalls`` alone on the finished lake at the nightly's cap: the stall step's own peak
  RSS (the flow's per-step RSS is a running maximum).

Rows per step: the rows ingested (the lake's tables, quarantine apart), the stored counter
delta rows, the views built, the stalls found, the alerts; the lag() pass counts its samples.
CPU seconds are user + system of the process and of the children it reaped (the ingest's parse
workers within the ingest step); the nightly's "start and rest" row is the run's wall and CPU
outside its steps (Prefect's local server, the imports, the Python start-up in CPU).

NICs per node: by default 1 (``generate_day``'s default), sampled every 40 s: ~36 M fabric rows
a day at 512 nodes, the volume ``make bench`` and docs/scale.md measure (the one
``generate_day``'s docstring takes for a 512-node cluster of 8 NICs per node), so the sizes
compare with those figures and the 2,048-node day stays generable here. ``--nics-per-node 8``
writes every rail as its own rows, in days of their own (``-8nic``): 8x the fabric rows (~290 M
at 512 nodes, over a billion at 2,048) and of their raw text (3.3 GB a day at 512 nodes with one
NIC: ~26 GB with 8, ~100 GB at 2,048), and hours of generation here.

It prints a table per size and per step (rows, wall s, CPU s, peak RSS, the ratio to the size's
lag() pass in wall and CPU seconds), the growth exponents (least squares of log seconds on log
nodes over the sizes run; two sizes: the slope between them), the peak RSS across sizes, and
issue 47's targets, held or MISSED with the figure and the reason (not measured: why). Results
go to ``bench/out/scale.json``; ``--table`` prints the last saved ones without running
anything.

Run:  .venv/bin/python bench/scale.py [--sizes 128,512,2048] [--hours 24] [--seed 9]
      [--nics-per-node 1] [--table]
Exit status: 0 when every measured target holds, 1 otherwise (2: nothing measured).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
if str(BENCH) not in sys.path:  # run as a script or loaded by the tests: bench's modules
    sys.path.insert(0, str(BENCH))
from targets import Row  # noqa: E402  (bench/targets.py: the same verdicts as make bench's)

RESULTS = "scale.json"
DEFAULT_SIZES = (128, 512, 2048)
#: ``bench/generate_day.py``'s defaults: a day of another seed goes to a directory of its own.
SEED = 9
FABRIC_INTERVAL_S = 40.0
#: The bare lag() pass's DuckDB cap: ``bench/run.py``'s (``make bench``'s yardstick).
LAG_CAP = "2GB"

# Issue 47, item 2.
EXPONENT_LIMIT = 1.1
EXPONENT_FROM, EXPONENT_TO = 128, 2048
RSS_LIMIT_MB = 2048.0
RSS_SIZES = (128, 512, 2048)
NIGHTLY_NODES = 512
NIGHTLY_LIMIT_S = 60.0
NIGHTLY_LAG_LIMIT = 3.0
STALLS_LIMIT_S = 5.0
HOURLY_LIMIT_S = 30.0

#: The table's rows that are not a nightly step.
WHOLE, REST, LAG, ALONE = "nightly flow", "start and rest", "bare lag() pass", "stalls alone"

# -- measuring ------------------------------------------------------------------------------
def day_dir(nodes: int, hours: float, seed: int, nics: int) -> Path:
    """Where the world-mix day of ``nodes`` goes (``generate_day.raw_dir_for``; another seed:
    a directory of its own, so ``make bench``'s day is never overwritten)."""
    from generate_day import raw_dir_for

    raw = raw_dir_for(nodes, hours, "world", nics)
    return raw if seed == SEED else raw.with_name(f"{raw.name}-seed{seed}")


def ensure_day(raw: Path, nodes: int, hours: float, seed: int, nics: int) -> float | None:
    """Generate the day into ``raw`` unless a complete one of the same size and seed is there
    (``labels.json`` is written last); returns the seconds it took, None when kept."""
    try:
        labels = json.loads((raw / "labels.json").read_text())
        if (labels.get("nodes"), labels.get("hours"), labels.get("seed")) == (
                nodes, hours, seed):
            return None
    except (OSError, ValueError):
        pass
    from generate_day import generate

    print(f"generating {raw} ({nodes} nodes x {hours:g} h, world mix, {nics} NIC(s) per "
          "node)...", flush=True)
    t0 = time.perf_counter()
    generate(raw, nodes=nodes, hours=hours, seed=seed, fabric_interval_s=FABRIC_INTERVAL_S,
             mix="world", nics=nics)
    return time.perf_counter() - t0


def lake_rows(lake: Path) -> dict[str, int]:
    """Rows in the lake's tables (from the Parquet footers), and ``derived``: the stored
    counter delta rows."""
    import pyarrow.parquet as pq

    from ckptwatch.lake.schema import DERIVED_DIR, TABLES

    def rows(pattern: str) -> int:
        return sum(pq.read_metadata(p).num_rows for p in lake.glob(pattern))

    out = {t: rows(f"{t}/date=*/*.parquet") for t in TABLES}
    out["derived"] = rows(f"{DERIVED_DIR}/counter_deltas/date=*/*.parquet")
    return out


def measure(nodes: int, hours: float, seed: int, nics: int, cap: str) -> dict[str, Any]:
    """One size: the day (generated when missing), the nightly flow at DuckDB ``cap`` on a
    fresh lake, the bare lag() pass and ``find_stalls`` alone on that lake."""
    from run import run_child

    raw = day_dir(nodes, hours, seed, nics)
    generated_s = ensure_day(raw, nodes, hours, seed, nics)
    lake = OUT / "work" / f"scale-{nodes}n" / "lake"
    print(f"{nodes} nodes: the nightly flow on {raw.relative_to(BENCH.parent)}...", flush=True)
    nightly = run_child("nightly", raw, lake, extra_env={"CKPTWATCH_DUCKDB_MEMORY": cap})
    rec: dict[str, Any] = {"nodes": nodes, "raw": str(raw), "generated_s": generated_s}
    if "error" in nightly:
        return {**rec, "error": f"nightly flow: {nightly['error']}"}
    # The same nightly again over the same raw directory and lake: every file is in the lake
    # and every day's deltas and statistics stored, as the hourly ingest-on-demand deployment
    # (ingest_flow(derive=True)) leaves a day by the time the nightly runs.
    print(f"{nodes} nodes: the nightly again, the day already ingested and derived...",
          flush=True)
    again = run_child("nightly-again", raw, lake, extra_env={"CKPTWATCH_DUCKDB_MEMORY": cap})
    print(f"{nodes} nodes: the bare lag() pass and find_stalls alone...", flush=True)
    lag = run_child("lag", lake, extra_env={"CKPTWATCH_DUCKDB_MEMORY": LAG_CAP})
    alone = run_child("attribution", lake, extra_env={"CKPTWATCH_DUCKDB_MEMORY": cap})
    return {**rec, **size_record(nightly, lake_rows(lake), lag, alone),
            "ingested_day": ingested_day_record(again)}


def ingested_day_record(again: dict[str, Any]) -> dict[str, Any]:
    """The nightly over a day already ingested and derived: its wall and CPU seconds, its
    steps' seconds, and Prefect's start (the run's seconds outside its steps)."""
    if "error" in again:
        return {"error": again["error"]}
    steps_s: dict[str, float] = again.get("steps_s") or {}
    seconds = again.get("seconds")
    return {"wall_s": seconds, "cpu_s": again.get("cpu_s"), "rss_mb": again.get("rss_mb"),
            "steps_s": steps_s, "steps_sum_s": round(sum(steps_s.values()), 2),
            "start_s": (round(seconds - sum(steps_s.values()), 2) if seconds is not None
                        and steps_s else None), "ingested_files": again.get("rows")}


def size_record(nightly: dict[str, Any], rows: dict[str, int], lag: dict[str, Any],
                alone: dict[str, Any]) -> dict[str, Any]:
    """One size's table rows (``steps``) from what the child processes reported."""
    steps_s: dict[str, float] = nightly.get("steps_s") or {}
    steps_cpu: dict[str, float] = nightly.get("steps_cpu_s") or {}
    peaks: dict[str, dict[str, int]] = nightly.get("steps_peak_rss_mb") or {}
    ingested = sum(n for t, n in rows.items() if t not in ("quarantine", "derived"))
    counts = {"ingest": (ingested, "rows"), "deltas": (rows.get("derived"), "delta rows"),
              "views": (nightly.get("views"), "views"),
              "stalls": (nightly.get("stalls"), "stalls"),
              "alerts": (nightly.get("alerts"), "alerts")}
    steps: list[dict[str, Any]] = [{
        "step": WHOLE, "rows": ingested, "unit": "rows", "wall_s": nightly.get("seconds"),
        "cpu_s": nightly.get("cpu_s"), "rss_mb": nightly.get("rss_mb")}]
    if steps_s and nightly.get("seconds") is not None:
        steps.append({"step": REST, "rows": None, "unit": "",
                      "wall_s": nightly["seconds"] - sum(steps_s.values()),
                      "cpu_s": (nightly["cpu_s"] - sum(steps_cpu.values())
                                if steps_cpu and nightly.get("cpu_s") is not None else None),
                      "rss_mb": None})
    for name, wall in steps_s.items():
        n, unit = counts.get(name, (None, ""))
        peak = peaks.get(name, {})
        steps.append({"step": name, "rows": n, "unit": unit, "wall_s": wall,
                      "cpu_s": steps_cpu.get(name), "rss_mb": peak.get("flow"),
                      "child_rss_mb": peak.get("workers")})
    for name, res, unit in ((LAG, lag, "samples"), (ALONE, alone, "stalls")):
        steps.append({"step": name, "rows": res.get("rows"), "unit": unit,
                      "wall_s": res.get("seconds"), "cpu_s": res.get("stage_cpu_s"),
                      "rss_mb": res.get("rss_mb"), "error": res.get("error")})
    return {"steps": steps, "quarantined": rows.get("quarantine", 0),
            "files": nightly.get("rows"), "files_failed": nightly.get("failed")}


# -- figures --------------------------------------------------------------------------------
def fit_exponent(points: Iterable[tuple[float, float | None]]) -> float | None:
    """The least-squares slope of log(y) on log(x) (y ~ x^k); two sizes: the slope between
    them. None with fewer than two distinct sizes measured."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y is not None and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return (sum((x - mx) * (y - my) for x, y in pts)
            / sum((x - mx) ** 2 for x, _ in pts))


def sizes_of(doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The sizes measured without an error, by node count, smallest first."""
    recs = {int(k): v for k, v in (doc.get("sizes") or {}).items() if "error" not in v}
    return dict(sorted(recs.items()))


def step(rec: dict[str, Any], name: str) -> dict[str, Any]:
    """The row ``name`` of a size (empty when absent or failed)."""
    for row in rec.get("steps", []):
        if row.get("step") == name and not row.get("error"):
            return dict(row)
    return {}


def nightly_steps(rec: dict[str, Any]) -> list[str]:
    """The nightly's own steps, in the order they ran."""
    return [r["step"] for r in rec.get("steps", [])
            if r["step"] not in (WHOLE, REST, LAG, ALONE)]


def exponents(doc: dict[str, Any], key: str) -> dict[str, float | None]:
    """The growth exponent of ``key`` (``wall_s`` or ``cpu_s``) of the whole nightly and of each
    of its steps, over the sizes measured."""
    sizes = sizes_of(doc)
    names = [WHOLE] + (nightly_steps(next(iter(sizes.values()))) if sizes else [])
    return {name: fit_exponent((n, step(rec, name).get(key)) for n, rec in sizes.items())
            for name in names}


def rss_rises(rec: dict[str, Any]) -> dict[str, float]:
    """How much each nightly step raised the flow process's peak RSS (MB; its running
    maximum at the step's end minus the one before: the first step from 0)."""
    out: dict[str, float] = {}
    before = 0.0
    for name in nightly_steps(rec):
        peak = step(rec, name).get("rss_mb")
        if peak is None:
            continue
        out[name] = max(0.0, peak - before)
        before = max(before, peak)
    return out


def rss_growth(doc: dict[str, Any]) -> tuple[str, float] | None:
    """The nightly step whose rise of the flow's peak RSS grew most from the smallest size to
    the largest, and by how much (MB); None with fewer than two sizes."""
    sizes = list(sizes_of(doc).values())
    if len(sizes) < 2:
        return None
    small, large = rss_rises(sizes[0]), rss_rises(sizes[-1])
    grown = {k: large[k] - small.get(k, 0.0) for k in large}
    if not grown:
        return None
    name = max(grown, key=lambda k: grown[k])
    return name, grown[name]


def _rss_setter(rec: dict[str, Any]) -> str:
    """What set a size's peak RSS: the step that raised the flow's maximum last, or the
    largest child (a parse worker, Prefect's server) when it is above the flow."""
    whole = step(rec, WHOLE).get("rss_mb") or 0.0
    flow, child, setter = 0.0, 0.0, ""
    for name in nightly_steps(rec):
        row = step(rec, name)
        if (row.get("rss_mb") or 0.0) > flow:
            flow, setter = row["rss_mb"], name
        child = max(child, row.get("child_rss_mb") or 0.0)
    if child > flow:
        return f"a child process (parse worker or Prefect's server) {child:,.0f} MB; " \
               f"the flow process {flow:,.0f} MB"
    return (f"the flow process in its {setter} step ({flow:,.0f} MB; largest child "
            f"{child:,.0f} MB)" if setter else f"{whole:,.0f} MB, per step not recorded")


def _largest(rec: dict[str, Any]) -> str:
    """The nightly's largest step and its share of the run's wall seconds."""
    whole = step(rec, WHOLE).get("wall_s")
    walls = {n: step(rec, n).get("wall_s") or 0.0 for n in nightly_steps(rec)}
    if not whole or not walls:
        return ""
    name = max(walls, key=lambda n: walls[n])
    return f" (the largest: {name}, {walls[name] / whole:.0%} of the run)"


def _steps_s(rec: dict[str, Any]) -> str:
    return ", ".join(f"{n} {step(rec, n)['wall_s']:.1f} s" for n in nightly_steps(rec)
                     if step(rec, n).get("wall_s") is not None)


# -- targets --------------------------------------------------------------------------------
def targets(doc: dict[str, Any]) -> list[Row]:
    """Issue 47's targets from the figures of ``doc`` (as ``scale.json`` holds them)."""
    sizes = sizes_of(doc)
    src = f"{RESULTS}, {doc.get('measured_at', '?')}"
    day = float(doc.get("hours", 24)) == 24.0
    ran = ", ".join(f"{n:,}" for n in sizes) or "none"
    out: list[Row] = []

    def not_run(n: int) -> str:
        if not day:
            return f"the run's days are {doc.get('hours'):g} h, not 24"
        failed = (doc.get("sizes") or {}).get(str(n), {}).get("error")
        return f"{n:,} nodes failed: {failed}" if failed else f"{n:,} nodes not run"

    wall, cpu = exponents(doc, "wall_s"), exponents(doc, "cpu_s")
    whole_k = wall.get(WHOLE)
    over = f"{EXPONENT_FROM:,} to {EXPONENT_TO:,} nodes"
    both = day and EXPONENT_FROM in sizes and EXPONENT_TO in sizes
    by_step = ", ".join(f"{n} {k:.2f}" for n, k in wall.items() if n != WHOLE and k is not None)
    fastest = max(((k, n) for n, k in wall.items() if n != WHOLE and k is not None),
                  default=None)
    context = (f"CPU {cpu[WHOLE]:.2f}" if cpu.get(WHOLE) is not None else "") + \
        (f"; per step (wall): {by_step}" if by_step else "")
    if both:
        exp_src = src
    elif whole_k is not None:
        exp_src = (f"needs {EXPONENT_FROM:,} and {EXPONENT_TO:,} nodes; ran {ran}: wall "
                   f"exponent {whole_k:.2f} over those, {context}")
    else:
        exp_src = f"needs {EXPONENT_FROM:,} and {EXPONENT_TO:,} nodes; ran {ran}"
    out.append(Row(f"nightly wall ~ nodes^k, k <= {EXPONENT_LIMIT:g} ({over})",
                   whole_k if both else None, EXPONENT_LIMIT, "",
                   (f"the fastest-growing step is {fastest[1]} (exponent {fastest[0]:.2f})"
                    if fastest else "per-step seconds not recorded"),
                   exp_src, context=context))
    for n in RSS_SIZES:
        rec = sizes.get(n) if day else None
        out.append(Row(f"{n:,}-node nightly peak RSS <= 2 GiB (default cap)",
                       step(rec, WHOLE).get("rss_mb") if rec else None, RSS_LIMIT_MB, " MB",
                       f"{n:,} nodes: the peak was set by " + _rss_setter(rec) if rec else "",
                       src if rec else not_run(n)))

    rec = sizes.get(NIGHTLY_NODES) if day else None
    whole, lag = (step(rec, WHOLE), step(rec, LAG)) if rec else ({}, {})
    n_src = src if rec else not_run(NIGHTLY_NODES)
    lag_ctx = (f"the same run's bare lag() pass {lag['wall_s']:.1f} s: how fast the machine is"
               if lag.get("wall_s") else "")
    why = f"its steps: {_steps_s(rec)}{_largest(rec)}" if rec else ""
    out.append(Row(f"{NIGHTLY_NODES}-node nightly <= {NIGHTLY_LIMIT_S:g} s wall",
                   whole.get("wall_s"), NIGHTLY_LIMIT_S, " s", why, n_src, context=lag_ctx))
    ratio = (whole["wall_s"] / lag["wall_s"] if whole.get("wall_s") and lag.get("wall_s")
             else None)
    out.append(Row(f"{NIGHTLY_NODES}-node nightly <= {NIGHTLY_LAG_LIMIT:g}x the bare lag() "
                   "pass (wall)", ratio if rec else None, NIGHTLY_LAG_LIMIT, "x", why,
                   n_src if rec is None or ratio is not None else "no lag() pass recorded"))
    stalls = step(rec, "stalls") if rec else {}
    alone = step(rec, ALONE) if rec else {}
    alone_ctx = (f"find_stalls alone: {alone['wall_s']:.1f} s, {alone['cpu_s']:.1f} CPU s, "
                 f"{alone['rss_mb']:,.0f} MB" if alone.get("wall_s") and alone.get("cpu_s")
                 and alone.get("rss_mb") else "")
    out.append(Row(f"{NIGHTLY_NODES}-node nightly's stall step <= {STALLS_LIMIT_S:g} s",
                   stalls.get("wall_s"), STALLS_LIMIT_S, " s",
                   "attribution over the day's checkpoints and every host's counter deltas "
                   "and SMART samples (bench/attribution.py --phases: where its time goes)",
                   n_src if rec is None or stalls else "the stall step not recorded",
                   context=alone_ctx))
    day_in = (rec or {}).get("ingested_day") or {}
    if rec is None or not day_in or day_in.get("error"):
        hourly_src = (n_src if rec is None else
                      f"the second nightly failed: {day_in['error']}" if day_in.get("error")
                      else "not recorded by this run (an older scale.json)")
        hourly_fig = None
        hourly_ctx = ""
    else:
        hourly_src = src
        hourly_fig = day_in.get("steps_sum_s")
        steps = ", ".join(f"{k} {v:.1f}" for k, v in (day_in.get("steps_s") or {}).items())
        hourly_ctx = (f"its steps: {steps}; plus Prefect's start and the imports "
                      f"{day_in.get('start_s') or 0:.1f} s (whole run {day_in['wall_s']:.1f} s: "
                      "a deployment's worker has its server up)")
    out.append(Row(f"nightly over an hourly-ingested {NIGHTLY_NODES}-node day <= "
                   f"{HOURLY_LIMIT_S:g} s", hourly_fig, HOURLY_LIMIT_S, " s",
                   "the steps of a nightly whose day is ingested and derived already: the "
                   "ingest's pass over the day's files to find them in the lake, the stall "
                   "step, the report", hourly_src, context=hourly_ctx))
    return out


# -- printing -------------------------------------------------------------------------------
def _num(v: float | None, fmt: str, width: int) -> str:
    return f"{v:{width}{fmt}}" if v is not None else f"{'-':>{width}}"


def table_lines(doc: dict[str, Any]) -> list[str]:
    """The table per size and per step."""
    lines = [
        f"issue 47 cost curve: world-mix days of {doc.get('hours', 24):g} h, "
        f"{doc.get('nics_per_node', 1)} NIC(s) per node (fabric every "
        f"{doc.get('fabric_interval_s', FABRIC_INTERVAL_S):g} s), seed {doc.get('seed', SEED)}; "
        f"measured {doc.get('measured_at', '?')} on {doc.get('cpus', '?')} CPUs"
        + (f", load (1 min) {doc['load']}" if doc.get("load") else ""),
        f"nightly at DuckDB {doc.get('cap', '?')} (its default), find_stalls alone at the same "
        f"cap, the bare lag() pass at {doc.get('lag_cap', LAG_CAP)}; x lag: wall / the size's "
        "lag() wall (CPU: CPU / its CPU)",
        "peak RSS of a nightly step: the flow process's peak so far / its largest finished "
        "child (parse worker)",
        f"{'nodes':>6}  {'step':16} {'rows':>13} {'':10} {'wall s':>8} {'CPU s':>8} "
        f"{'peak RSS MB':>13} {'x lag':>6} {'x lag CPU':>9}",
    ]
    for n, rec in sorted(((int(k), v) for k, v in (doc.get("sizes") or {}).items())):
        if "error" in rec:
            lines.append(f"{n:>6,}  FAILED: {rec['error']}")
            continue
        lag = step(rec, LAG)
        for row in rec.get("steps", []):
            name = row["step"] if row["step"] in (WHOLE, LAG, ALONE) else f"  {row['step']}"
            if row.get("error"):
                lines.append(f"{n:>6,}  {name:16} FAILED: {row['error']}")
                continue
            rss = "-" if row.get("rss_mb") is None else f"{row['rss_mb']:,.0f}"
            if row.get("child_rss_mb") is not None:
                rss += f"/{row['child_rss_mb']:,.0f}"
            ratio = (row["wall_s"] / lag["wall_s"] if row.get("wall_s") is not None
                     and lag.get("wall_s") and row["step"] != LAG else None)
            cratio = (row["cpu_s"] / lag["cpu_s"] if row.get("cpu_s") is not None
                      and lag.get("cpu_s") and row["step"] != LAG else None)
            rows = f"{row['rows']:>13,}" if row.get("rows") is not None else f"{'':>13}"
            lines.append(f"{n:>6,}  {name:16} {rows} {row.get('unit') or '':10} "
                         f"{_num(row.get('wall_s'), '.1f', 8)} {_num(row.get('cpu_s'), '.1f', 8)} "
                         f"{rss:>13} {_num(ratio, '.2f', 6)} {_num(cratio, '.2f', 9)}")
        again = rec.get("ingested_day") or {}
        if again.get("error"):
            lines.append(f"{n:>6,}  {'nightly again':16} FAILED: {again['error']}")
        elif again:
            steps = ", ".join(f"{k} {v:.1f}" for k, v in (again.get("steps_s") or {}).items())
            lines.append(f"{n:>6,}  {'nightly again':16} {'':13} {'(ingested)':10} "
                         f"{_num(again.get('wall_s'), '.1f', 8)} "
                         f"{_num(again.get('cpu_s'), '.1f', 8)} "
                         f"{_num(again.get('rss_mb'), ',.0f', 13)}   steps {steps}")
    return lines


def growth_lines(doc: dict[str, Any]) -> list[str]:
    """The growth exponents and the peak RSS across sizes."""
    sizes = sizes_of(doc)
    if not sizes:
        return ["growth: no size measured"]
    ns = ", ".join(f"{n:,}" for n in sizes)
    lines = [f"growth with nodes over {ns} (least-squares slope of log seconds on log nodes):"]
    for key, label in (("wall_s", "wall"), ("cpu_s", "CPU")):
        k = exponents(doc, key)
        figs = ", ".join(_num(step(r, WHOLE).get(key), ".1f", 0) for r in sizes.values())
        whole = "-" if k.get(WHOLE) is None else f"{k[WHOLE]:.2f}"
        steps = ", ".join(f"{n} {v:.2f}" for n, v in k.items() if n != WHOLE and v is not None)
        lines.append(f"  nightly {label:4} exponent {whole}  ({figs} s)"
                     + (f"; steps: {steps}" if steps else ""))
    peaks = " | ".join(f"{n:,}: {_num(step(r, WHOLE).get('rss_mb'), ',.0f', 0)}"
                       for n, r in sizes.items())
    lines.append(f"  peak RSS (MB) of the nightly by size: {peaks}")
    for n, rec in sizes.items():
        rises = ", ".join(f"{k} +{v:,.0f}" for k, v in rss_rises(rec).items())
        if rises:
            lines.append(f"    {n:,} nodes: the flow's peak raised by step (MB): {rises}")
    grown = rss_growth(doc)
    if grown:
        first, last = list(sizes)[0], list(sizes)[-1]
        lines.append(f"  the step whose memory grows most from {first:,} to {last:,} nodes: "
                     f"{grown[0]} (+{grown[1]:,.0f} MB more)")
    return lines


def target_lines(rows: Sequence[Row]) -> tuple[list[str], int]:
    """The targets' lines (as ``bench/targets.py`` prints them) and the exit status."""
    lines = ["issue 47 targets (the cost curve; reasons in docs/scale.md)"]
    width = max(len(r.target) for r in rows)
    notes: list[str] = []
    for r in rows:
        mark = ""
        if r.held is False and r.why:
            if r.why not in notes:
                notes.append(r.why)
            mark = f"  [{notes.index(r.why) + 1}]"
        lines.append(f"  {r.target:<{width}}  {r.verdict()}{mark}")
    lines += [f"  [{i}] why: {why}" for i, why in enumerate(notes, 1)]
    measured = [r for r in rows if r.held is not None]
    held = sum(1 for r in measured if r.held)
    lines.append(f"{held} of {len(measured)} measured targets held; "
                 f"{len(rows) - len(measured)} not measured")
    return lines, (2 if not measured else 0 if held == len(measured) else 1)


def report(doc: dict[str, Any]) -> int:
    """Print the table, the growth and the targets; returns the exit status."""
    print("\n".join(table_lines(doc)))
    print()
    print("\n".join(growth_lines(doc)))
    print()
    lines, status = target_lines(targets(doc))
    print("\n".join(lines))
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="node counts, comma-separated (default: %(default)s)")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--nics-per-node", type=int, default=1,
                    help="NICs per node, 1-8 (default: %(default)s; see the module's doc)")
    ap.add_argument("--table", action="store_true",
                    help="print the last saved table (bench/out/scale.json) and run nothing")
    args = ap.parse_args()
    path = OUT / RESULTS
    if args.table:
        try:
            return report(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"no saved table at {path}: {exc}", file=sys.stderr)
            return 2
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        ap.error(f"--sizes: node counts, comma-separated: {args.sizes!r}")
    if not sizes or min(sizes) < 1:
        ap.error("--sizes: at least one node count, each >= 1")
    from ckptwatch.settings import NightlySettings

    cap = NightlySettings().duckdb_memory
    doc: dict[str, Any] = {
        "hours": args.hours, "seed": args.seed, "nics_per_node": args.nics_per_node,
        "fabric_interval_s": FABRIC_INTERVAL_S, "cap": cap, "lag_cap": LAG_CAP,
        "cpus": os.cpu_count(), "sizes": {}}
    OUT.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()[0]
    for n in sizes:
        t0 = time.perf_counter()
        doc["sizes"][str(n)] = measure(n, args.hours, args.seed, args.nics_per_node, cap)
        print(f"{n} nodes done in {time.perf_counter() - t0:.0f} s", flush=True)
    doc["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["load"] = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}\n", flush=True)
    return report(doc)


if __name__ == "__main__":
    raise SystemExit(main())
