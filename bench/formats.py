"""Ingest of every raw format against a bare read of the same bytes, side by side in one run.

A simulated day in the ``world`` format mix (``bench/generate_day.py --format-mix world``; by
default 64 nodes, 8 hours, SMART every ~2 min per drive, fabric every 30 s per NIC: the shape of
the foreign day in issue 18) is split by format: the envelope lines of each ``source`` (the OCP
log as JSON and as text apart, node_exporter scrapes with infiniband and with ethtool apart) go
to their own per-host files, the CSV and JSON Lines tables are hard-linked. Then, per format and
in one child process each (``ru_maxrss`` is the child's own):

- ours: ``ckptwatch.ingest.run.ingest`` of those files into an empty lake (discover, parse,
  validate, write Parquet: the whole cost of getting the bytes into the lake);
- bare polars: ``pl.read_ndjson`` / ``pl.read_csv`` of each file (no interpretation at all);
- bare ``json.loads`` of each line (CSV: ``csv.reader`` over the lines, as the row-wise bare
  read of a CSV; a JSON document such as DLIO's stats: ``json.loads`` of the file);
- the floor (column ``floor``): bare polars plus encoding the rows the lake got as its
  Parquet parts (``store.encode_part``), over bare polars. No ingest can go below it: a
  format whose floor is above 2x cannot meet the 2x target by a faster parse alone;
- hand-written (columns ``hand`` and ``/hand``): ``bench/run.py``'s reference ingest of the
  same files, bare polars to the long frame (tool text split into ``name: value`` rows by one
  regex, tool JSON unpivoted one level down) written as zstd Parquet, and ours over it: what
  our validation, quarantine, aliases, provenance and transaction cost beyond a pipeline that
  makes rows of the same kind by hand ("-": a format that reference cannot read or makes no
  rows of: DLIO's JSON documents). It makes fewer rows than ours where ours adds the
  cross-driver aliases (ethtool: about half) or keeps text values; more where it keeps every
  numeric JSON leaf or a line ours does not read as a counter (HELP-less exposition samples of
  families ckptwatch skips, the OCP log's version fields).

DLIO / MLPerf Storage stats are not in the simulated day (their ranks name no node): the bench
renders the day's largest JSON Lines job as a DLIO run (one ``<rank>_per_epoch_stats.json`` per
rank and a ``summary.json``) for its own row.

The pool formats (rows ``pool …``; the world day's pool is the long CSV, row ``pool metrics
CSV``): a day of their own per ``ckptwatch simulate --pool-format`` (``lustre``: each OSS's and
the MDS's ``lctl get_param`` dump; ``daos``: ``daos_metrics -C`` and ``dmg pool query``
envelopes; ``spdk``: ``bdev_get_iostat`` JSON envelopes; ``gpfs``: each node's ``mmpmon``
text, ``mmlsqos -Y`` text and ``mmdiag --waiters`` envelopes), of ``--pool-nodes`` x
``--pool-hours`` (default ``--nodes`` x ``--hours``: 64 nodes, so 32 pool targets, 8 h; SMART
and fabric left out, which these rows do not read) generated once into
``bench/out/raw-<n>n-<h>h-pool-<format>``, its ``pool/`` tree hard-linked into its own raw
directory and measured as the rows above. Their bare polars read of a tool's bare text
(``.txt``) is ``pl.read_csv`` of its lines as one text column (its bare ``json.loads``: its
lines); their hand-written pipeline (``hand``) is ``bench/pool_hand.py``'s: plain polars from
the files to exactly the rows the lake's ``pool_metrics`` gets (checked row for row: ``python
bench/pool_hand.py --check FORMAT RAW LAKE``; its docstring says where a pipeline by hand
would differ: the forms and checks it leaves out), written as one zstd Parquet file. Each pool
row prints whether ours is within 2x it and both row counts (``rows ours/hand``).

Targets (issue 18): every format <= 2x bare polars; the whole mixed day <= 3x bare
``json.loads`` of its lines in <= 1 GiB peak RSS (a fresh child ingesting the unsplit day; its
bare polars is the sum over the split files, since one polars read of a file mixing smartctl
objects with OCP text cannot type ``output``). Issue 44: each pool format <= 2x its
hand-written pipeline (column ``<= 2x hand (pool)``; ``formats.json``: ``hand_ratio``,
``hand_held``, ``hand_rows_equal``). Against bare polars the pool formats of tool text
(Lustre, DAOS, GPFS) come nowhere near 2x: a bare read only splits their lines, several rows
to a line, and encoding those rows alone (the floor) costs more than the read.

Results go to stdout as a table and to ``bench/out/formats.json``.

``--baseline SRC`` runs each format first with ckptwatch imported from another source tree (a
checkout of HEAD), then from this one, one after the other: before/after under the same load.

Run:  .venv/bin/python bench/formats.py [--nodes 64] [--hours 8] [--raw DIR] [--only smartctl,...]
          [--pool-nodes 64] [--pool-hours 8] [--baseline /tmp/head/src]
      (``--only pool-lustre-lctl-text,pool-daos-daos-metrics-dmg,pool-spdk-iostat-json,
      pool-gpfs-mm-text``: the pool rows alone, no world day generated)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
#: Ingest / bare polars read, per format; ingest / bare json.loads of the lines, whole day.
POLARS_TARGET = 2.0
JSON_TARGET = 3.0
RSS_TARGET_MB = 1024.0
#: Format name -> (how the lines are picked). Envelope formats by ``source`` (and the output's
#: shape); tables by path pattern.
ENVELOPE_FORMATS = {
    "smartctl JSON": ("smartctl", None),
    "nvme-cli smart-log JSON": ("nvme-smart-log", None),
    "OCP log JSON": ("nvme-ocp-smart", "json"),
    "OCP log text": ("nvme-ocp-smart", "text"),
    "ethtool -S text": ("ethtool", None),
    "perfquery -x text": ("perfquery", None),
    "sysfs snapshot text": ("sysfs-ib", None),
    "node_exporter infiniband": ("prometheus", "node_infiniband_"),
    "node_exporter ethtool": ("prometheus", "node_ethtool_"),
}
TABLE_FORMATS = {
    "checkpoints JSONL": ["checkpoints/*.jsonl"],
    "checkpoints CSV": ["checkpoints/*.csv"],
    "pool metrics CSV": ["pool/*.csv"],
}
#: The DLIO/MLPerf Storage run made from the day's largest JSON Lines job (the day itself
#: carries none: its ranks name no node, so the day's stalls would change).
DLIO_FORMAT = "DLIO per-rank stats JSON"
#: The pool as each ``--pool-format`` of the simulator writes it (the world day's pool is the
#: long CSV): a day of its own per format, ``pool/`` hard-linked (``pool_day``), its hand-written
#: pipeline ``bench/pool_hand.py``'s. Name -> the ``--pool-format``.
POOL_FORMATS = {
    "pool Lustre lctl text": "lustre",
    "pool DAOS daos_metrics+dmg": "daos",
    "pool SPDK iostat JSON": "spdk",
    "pool GPFS mm* text": "gpfs",
}
#: The pool days leave out what the pool rows do not read (the simulator's slowest files).
POOL_OMIT = ("smart", "fabric", "ocp")
#: Ingest of a pool format / its hand-written pipeline to the same rows (issue 44).
HAND_TARGET = 2.0
_SOURCE = re.compile(rb'"source":"([^"]*)"')


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _envelope_format(line: bytes) -> str | None:
    """The ``ENVELOPE_FORMATS`` name of one envelope line (None: no format here)."""
    m = _SOURCE.search(line)
    if not m:
        return None
    source = m.group(1).decode()
    for name, (src, shape) in ENVELOPE_FORMATS.items():
        if src != source:
            continue
        if shape is None:
            return name
        if shape == "json" and b'"output":{' in line:
            return name
        if shape == "text" and b'"output":"' in line:
            return name
        if shape.startswith("node_") and shape.encode() in line:
            return name
    return None


def pool_day(fmt: str, nodes: int, hours: float, seed: int) -> Path:
    """The raw directory of a simulated day whose pool reports itself in ``fmt``
    (``ckptwatch simulate --pool-format fmt``, without SMART and fabric), generated when
    missing: ``bench/out/raw-<nodes>n-<hours>h-pool-<fmt>``."""
    raw = OUT / f"raw-{nodes}n-{hours:g}h-pool-{fmt}"
    if not (raw / "pool").is_dir():
        from ckptwatch.simulate.scenario import simulate

        t0 = time.perf_counter()
        simulate(raw, seed, nodes, hours, overwrite=True, pool_format=fmt, omit=POOL_OMIT)
        print(f"generated {raw} in {time.perf_counter() - t0:.0f} s", flush=True)
    return raw


def split_pool(raws: dict[str, Path], work: Path) -> dict[str, Path]:
    """Per pool format, its day's ``pool/`` tree hard-linked into a raw directory of its own
    under ``work``."""
    dirs = {}
    for name, raw in raws.items():
        d = dirs[name] = work / _slug(name)
        shutil.rmtree(d, ignore_errors=True)
        for p in sorted((raw / "pool").rglob("*")):
            if p.is_file():
                dest = d / p.relative_to(raw)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.link(p, dest)
    return dirs


def split(raw: Path, work: Path) -> dict[str, Path]:
    """Per-format raw directories under ``work`` (lines copied, tables hard-linked)."""
    dirs = {name: work / _slug(name) for name in (*ENVELOPE_FORMATS, *TABLE_FORMATS)}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
    for kind in ("smart", "fabric"):
        for path in sorted((raw / kind).glob("*.jsonl")):
            parts: dict[str, list[bytes]] = {}
            with path.open("rb") as fh:
                for line in fh:
                    name = _envelope_format(line)
                    if name is not None:
                        parts.setdefault(name, []).append(line)
            for name, lines in parts.items():
                dest = dirs[name] / kind / path.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(b"".join(lines))
    for name, patterns in TABLE_FORMATS.items():
        for pat in patterns:
            for p in sorted(raw.glob(pat)):
                dest = dirs[name] / p.relative_to(raw)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.link(p, dest)
    dlio = work / _slug(DLIO_FORMAT)
    shutil.rmtree(dlio, ignore_errors=True)
    jobs = sorted(raw.glob("checkpoints/*.jsonl"), key=lambda p: p.stat().st_size)
    if jobs:
        dlio_run(jobs[-1], dlio / "checkpoints" / jobs[-1].stem)
        dirs[DLIO_FORMAT] = dlio
    return {name: d for name, d in dirs.items() if d.is_dir()}


def dlio_run(job_file: Path, run_dir: Path) -> None:
    """The job's finished rank records as a DLIO run: ``<rank>_per_epoch_stats.json`` per rank
    plus ``summary.json`` (``ckptwatch.simulate.telemetry.render``)."""
    import polars as pl

    from ckptwatch.simulate.telemetry.render import (
        render_dlio_per_epoch_stats,
        render_dlio_summary,
    )

    df = (pl.read_ndjson(job_file, infer_schema_length=None)
          .filter(pl.col("status") != "started").sort("rank", "step"))
    if df.schema["start_time"] == pl.String:  # ISO-8601 with an offset: to epoch seconds
        df = df.with_columns(pl.col(c).str.to_datetime(time_zone="UTC").dt.epoch("us") / 1e6
                             for c in ("start_time", "end_time"))
    gib = float(df["bytes"].sum()) / df["step"].n_unique() / 2**30
    run_dir.mkdir(parents=True, exist_ok=True)
    for (rank,), part in df.partition_by("rank", as_dict=True, maintain_order=True).items():
        saves = list(zip(part["start_time"].to_list(), part["end_time"].to_list(), strict=True))
        (run_dir / f"{rank}_per_epoch_stats.json").write_text(
            json.dumps(render_dlio_per_epoch_stats(saves, gib), indent=4))
    first = df["start_time"].min()
    assert isinstance(first, float | int)
    (run_dir / "summary.json").write_text(json.dumps(render_dlio_summary(
        float(first), df["rank"].n_unique(), df["node"].n_unique(),
        str(df["node"][0]), gib), indent=4))


# -- child side ------------------------------------------------------------------------------
def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and p.suffix in (".jsonl", ".csv", ".json", ".txt"))


def bare_polars(files: list[Path]) -> tuple[float, int]:
    """Seconds and rows of ``pl.read_ndjson`` / ``pl.read_csv`` over ``files`` (a tool's bare
    text, ``.txt``: ``pl.read_csv`` of its lines as one text column)."""
    import polars as pl

    t0 = time.perf_counter()
    rows = 0
    for f in files:
        df = (pl.read_csv(f, infer_schema_length=10_000) if f.suffix == ".csv"
              else pl.read_csv(f, has_header=False, separator="\x1f", quote_char=None,
                               new_columns=["line"], infer_schema=False) if f.suffix == ".txt"
              else pl.read_json(f, infer_schema_length=None) if f.suffix == ".json"
              else pl.read_ndjson(f, infer_schema_length=None))
        rows += df.height
    return time.perf_counter() - t0, rows


def bare_lines(files: list[Path]) -> tuple[float, int]:
    """Seconds and records of ``json.loads`` per line (``csv.reader`` for CSV, the lines of a
    tool's bare text) over ``files``."""
    t0 = time.perf_counter()
    rows = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        if f.suffix == ".csv":
            rows += sum(1 for _ in csv.reader(text.splitlines()))
        elif f.suffix == ".txt":  # a tool's bare text: its lines are its records
            rows += len(text.splitlines())
        elif f.suffix == ".json":  # one document per file (DLIO)
            json.loads(text)
            rows += 1
        else:
            loads = json.loads
            for line in text.splitlines():
                if line:
                    loads(line)
                    rows += 1
    return time.perf_counter() - t0, rows


def ours(raw: Path, lake: Path) -> dict[str, Any]:
    """``ingest`` of ``raw`` into an empty ``lake``: seconds, rows, rejects, bad files. The
    modules ingest imports on first use (every parser, the lake's writers) are imported before
    the clock starts, as the bare reads' polars is: a day's ingest pays them once, not per
    format (about 0.8 CPU s, half of a small format's figure). So is the lake's creation (its
    empty tables: ``Lake.init``, 30-50 ms of fsyncs here): the ingest writes into a lake that
    exists, as every nightly run after the first does; the lake's transaction for the files
    (journal, parts, manifest, fsyncs) is timed."""
    import importlib
    import pkgutil

    import ckptwatch.ingest
    import ckptwatch.lake
    import ckptwatch.sources
    from ckptwatch.ingest.run import ingest
    from ckptwatch.lake.store import Lake

    for pkg in (ckptwatch.sources, ckptwatch.ingest, ckptwatch.lake):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(mod.name)
    shutil.rmtree(lake, ignore_errors=True)
    Lake(lake).init()
    t0, c0 = time.perf_counter(), _cpu_s()
    report = ingest(raw, lake)
    seconds, cpu = time.perf_counter() - t0, _cpu_s() - c0
    failed = [f.rel for f in report.files if f.status not in ("ingested", "ignored")]
    return {"seconds": seconds, "cpu_s": cpu, "rows": sum(report.rows.values()),
            "tables": report.rows,
            "quarantined": report.quarantined, "not_ingested": failed[:5]}


def _cpu_s() -> float:
    """CPU seconds of this process and its ended children (an ingest's parse workers) so far,
    all threads (user and system): the work done, which other processes on the machine do not
    inflate as they do the wall-clock seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _peak_mb() -> float:
    """Peak RSS: this process's, plus, when an ingest ran parse workers beside it, as many
    times the largest worker's as it may start (``ingest.parallel``): they ran at the same
    time, so an upper bound of what the ingest held at once."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if kids:
        from ckptwatch.ingest.parallel import MAX_AUTO_WORKERS, usable_cpus

        own += kids * min(usable_cpus(), MAX_AUTO_WORKERS)
    return own / 1024.0


def encode_floor(lake: Path) -> float:
    """Seconds to encode the rows ``ours`` wrote as the lake's Parquet parts
    (``store.encode_part``, part by part, the rows read back first, untimed): work any ingest
    of these bytes does besides reading them. The floor of the ratio to bare polars is
    ``(polars_s + this) / polars_s``."""
    import polars as pl

    from ckptwatch.lake.schema import TABLES
    from ckptwatch.lake.store import encode_part

    parts = [(TABLES[p.parent.parent.name], pl.read_parquet(p))
             for p in sorted(lake.glob("*/date=*/part-*.parquet"))
             if p.parent.parent.name in TABLES and p.parent.parent.name != "quarantine"
             and not p.parent.name.endswith("1970-01-01")]
    t0 = time.perf_counter()
    for table, rows in parts:
        encode_part(table, rows)
    return time.perf_counter() - t0


def hand_written(files: list[Path], out: Path) -> tuple[float | None, int | None]:
    """Seconds and rows of ``bench/run.py``'s reference ingest of ``files``: bare polars to the
    long frame (tool text split into ``name: value`` rows by one regex, tool JSON unpivoted one
    level down), written as zstd Parquet. No validation, quarantine, aliases, provenance or
    transaction: what a hand-written pipeline to rows of the same kind costs. (None, None)
    where it cannot read the format (DLIO's JSON documents, a mixed JSON shape) or makes no
    rows of it, so that its seconds are never set beside rows it did not make."""
    from run import stage_reference_ingest  # bench/run.py: this script's directory is on the path

    try:
        r = stage_reference_ingest(files, out)
    except Exception:  # noqa: BLE001 - polars raises many types; the column then says "-"
        return None, None
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if not r["rows"]:
        return None, None
    return float(r["seconds"]), int(r["rows"])


def pool_hand_written(fmt: str, raw: Path, out: Path) -> tuple[float, int, float]:
    """Seconds, rows and CPU seconds of ``bench/pool_hand.py``'s pipeline for pool format
    ``fmt``: the files under ``raw`` to the rows the lake's ``pool_metrics`` gets, written as
    zstd Parquet."""
    from pool_hand import hand_ingest  # bench/pool_hand.py: this script's directory

    shutil.rmtree(out, ignore_errors=True)
    try:
        t0, c0 = time.perf_counter(), _cpu_s()
        rows = hand_ingest(fmt, raw, out)
        return time.perf_counter() - t0, rows, _cpu_s() - c0
    finally:
        shutil.rmtree(out, ignore_errors=True)


def child(mode: str, raw: Path, lake: Path, pool: str = "") -> dict[str, Any]:
    files = _files(raw)
    for f in files:  # the same warm page cache for all three reads
        f.read_bytes()
    if mode == "format":
        res = ours(raw, lake)
        res["encode_s"] = encode_floor(lake)
        res["polars_s"], res["polars_rows"] = bare_polars(files)
        res["json_s"], res["json_rows"] = bare_lines(files)
        if pool:
            res["hand_s"], res["hand_rows"], res["hand_cpu_s"] = pool_hand_written(
                pool, raw, lake.parent / "hand")
        else:
            res["hand_s"], res["hand_rows"] = hand_written(files, lake.parent / "hand")
    elif mode == "day":
        res = ours(raw, lake)
    else:  # day-bare: json.loads of the unsplit day's lines
        res = {}
        res["json_s"], res["json_rows"] = bare_lines(files)
    res["bytes"] = sum(f.stat().st_size for f in files)
    res["files"] = len(files)
    res["rss_mb"] = _peak_mb()
    return res


def run_child(mode: str, raw: Path, lake: Path, src: Path | None = None,
              pool: str = "") -> dict[str, Any]:
    """One child run; ``src``: import ckptwatch from that source tree instead (``--baseline``);
    ``pool``: a pool format, whose hand-written pipeline is ``bench/pool_hand.py``'s."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(raw), str(lake),
                           *([pool] if pool else [])],
                          capture_output=True, text=True, check=False, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}


# -- parent side -----------------------------------------------------------------------------
def _held(ratio: float | None, target: float) -> str:
    if ratio is None:
        return "-"
    return "held" if ratio <= target else f"MISSED by {ratio / target:.1f}x"


def _row(name: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{name:26} FAILED: {r['error']}"
    pr = r["seconds"] / r["polars_s"] if r.get("polars_s") else None
    jr = r["seconds"] / r["json_s"] if r.get("json_s") else None
    bad = r.get("quarantined", 0) or len(r.get("not_ingested", []))
    floor = ((r["polars_s"] + r["encode_s"]) / r["polars_s"]
             if r.get("polars_s") and "encode_s" in r else None)
    return (f"{name:26} {r['bytes'] / 1e6:7.1f} {r['rows']:>10,} {r['seconds']:7.2f} "
            f"{r.get('polars_s', 0):7.2f} {pr or 0:6.2f}  {_held(pr, POLARS_TARGET):17} "
            + (f"{floor:5.2f} " if floor else f"{'-':>5} ")
            + (f"{r['json_s']:7.2f} {jr:6.2f}" if jr else f"{'-':>7} {'-':>6}")
            + f" {r['rss_mb']:7.0f} {r.get('cpu_s', 0):6.2f}"
            + (f" {r['hand_s']:6.2f} {r['seconds'] / r['hand_s']:5.2f}" if r.get("hand_s")
               else f" {'-':>6} {'-':>5}")
            + (f"  {_held(r['hand_ratio'], HAND_TARGET):17} rows ours/hand "
               f"{r['rows']:,}/{r.get('hand_rows') or 0:,}"
               + (f", CPU s ours/hand {r['cpu_s'] / r['hand_cpu_s']:.2f}"
                  if r.get("hand_cpu_s") and "cpu_s" in r else "")
               if "hand_ratio" in r else "")
            + (f"  rejects/bad files: {bad}" if bad else ""))


HEADER = (f"{'format':26} {'MB':>7} {'rows':>10} {'ours s':>7} {'polars':>7} {'ratio':>6}  "
          f"{'<= 2x polars':17} {'floor':>5} {'json.ld':>7} {'ratio':>6} {'RSS MB':>7} "
          f"{'cpu s':>6} {'hand':>6} {'/hand':>5}  {'<= 2x hand (pool)':17}")


def _hand_target(r: dict[str, Any]) -> None:
    """A pool format's result with issue 44's target: ours / the hand-written pipeline to the
    same rows (``hand_ratio``, wall seconds as every ratio here; ``hand_held``), whether it
    made as many rows (``hand_rows_equal``), and the same ratio in CPU seconds
    (``hand_cpu_ratio``: what a machine shared with other work inflates least)."""
    if "error" in r or not r.get("hand_s"):
        return
    r["hand_ratio"] = r["seconds"] / r["hand_s"]
    r["hand_target"] = HAND_TARGET
    r["hand_held"] = r["hand_ratio"] <= HAND_TARGET
    r["hand_rows_equal"] = r.get("hand_rows") == r["rows"]
    if r.get("hand_cpu_s") and "cpu_s" in r:
        r["hand_cpu_ratio"] = r["cpu_s"] / r["hand_cpu_s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--raw", type=Path, default=None,
                    help="a world-mix day (default: bench/out/raw-<nodes>n-<hours>h-world, "
                         "generated when missing)")
    ap.add_argument("--only", default="", help="comma-separated format names (slugs) to run")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a source tree to compare with, side by side: each format is ingested "
                         "with ckptwatch imported from it, then from this tree (e.g. "
                         "`git archive HEAD src | tar -x -C /tmp/head`, then --baseline "
                         "/tmp/head/src)")
    ap.add_argument("--pool-nodes", type=int, default=None,
                    help="nodes of the pool formats' days (default: --nodes; the pool has "
                         "nodes/2 targets, 2-64)")
    ap.add_argument("--pool-hours", type=float, default=None,
                    help="hours of the pool formats' days (default: --hours)")
    args = ap.parse_args()
    sys.path.insert(0, str(BENCH))
    from generate_day import generate, raw_dir_for

    only = set(filter(None, args.only.split(",")))
    pools = {name: fmt for name, fmt in POOL_FORMATS.items() if not only or _slug(name) in only}
    world = not only or bool(only - {_slug(name) for name in POOL_FORMATS})
    raw = args.raw or raw_dir_for(args.nodes, args.hours, "world")
    if world and not raw.is_dir():
        t0 = time.perf_counter()
        generate(raw, nodes=args.nodes, hours=args.hours, seed=args.seed,
                 fabric_interval_s=30.0, smart_interval_s=120.0, mix="world")
        print(f"generated {raw} in {time.perf_counter() - t0:.0f} s", flush=True)
    pool_raws = {name: pool_day(fmt, args.pool_nodes or args.nodes,
                                args.pool_hours or args.hours, args.seed)
                 for name, fmt in pools.items()}
    work = OUT / "work-formats"
    dirs = split(raw, work) if world else {}
    dirs.update(split_pool(pool_raws, work))
    if world:
        print(f"raw day: {raw}", flush=True)
    for name, pool_raw in pool_raws.items():
        print(f"{name}: {pool_raw}", flush=True)
    print(HEADER, flush=True)
    results: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    polars_sum = 0.0
    for name, d in dirs.items():
        if only and _slug(name) not in only:
            continue
        pool = POOL_FORMATS.get(name, "")
        if args.baseline:
            baseline[name] = run_child("format", d, work / "lake", args.baseline, pool)
            if pool:
                _hand_target(baseline[name])
            print(_row(f"{name[:15]} (baseline)", baseline[name]), flush=True)
        r = run_child("format", d, work / "lake", pool=pool)
        results[name] = r
        if pool:  # not in the world day, whose pool is the long CSV
            _hand_target(r)
        else:
            polars_sum += r.get("polars_s", 0.0)
        print(_row(name, r), flush=True)
    if not only:
        if args.baseline:
            baseline["whole day"] = run_child("day", raw, work / "lake", args.baseline)
        day = run_child("day", raw, work / "lake")
        bare = run_child("day-bare", raw, work / "lake")
        if "error" not in day and "error" not in bare:
            day.update(json_s=bare["json_s"], json_rows=bare["json_rows"], polars_s=polars_sum)
        results["whole day"] = day
        if "whole day" in baseline and "error" not in baseline["whole day"]:
            base_day = baseline["whole day"]
            base_day.update({k: day[k] for k in ("json_s", "json_rows", "polars_s") if k in day})
            print(_row("whole day (baseline)", base_day), flush=True)
        print(_row("whole mixed day", day), flush=True)
        if "error" not in day and day.get("json_s"):
            ratio = day["seconds"] / day["json_s"]
            print(f"  whole day: ingest / bare json.loads {ratio:.2f} (target <= {JSON_TARGET:g}: "
                  f"{_held(ratio, JSON_TARGET)}); peak RSS {day['rss_mb']:.0f} MB (target <= "
                  f"{RSS_TARGET_MB:.0f}: {_held(day['rss_mb'] / RSS_TARGET_MB, 1.0)}); "
                  f"ingest / bare polars (split files) {day['seconds'] / polars_sum:.2f}",
                  flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "formats.json").write_text(json.dumps(
        {"raw": str(raw) if world else None,
         "pool_raw": {name: str(p) for name, p in pool_raws.items()},
         "cpus": os.cpu_count(), "results": results,
         **({"baseline": {"src": str(args.baseline), "results": baseline}}
            if args.baseline else {})}, indent=1) + "\n")
    print(f"wrote {OUT / 'formats.json'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        res = child(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), *sys.argv[5:6])
        print("RESULT " + json.dumps(res))
        raise SystemExit(0)
    raise SystemExit(main())
