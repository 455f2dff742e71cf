"""Benchmark of ``ckptwatch watch``: alert delay, CPU and peak RSS at 512 nodes, 4096 ranks.

Replays, in real time, a 512-node job of 4096 ranks (8 per node) writing checkpoints at full
rate the way the recorder writes them: one JSON Lines file per node and job,
``<job>-<node>-<date>.jsonl`` under ``RAW/checkpoints/``; every rank appends its start marker
when its checkpoint starts and its finished record when it finishes (lognormal durations,
median ``--median`` s). Every checkpoint has ``--hang`` ranks on one node (as
``ckptwatch.simulate.hang`` places them) that never finish: the checkpoint crosses the warning
and the critical level, the job's watchdog kills the job at its timeout (``--timeout``, 45 s),
and the job restarts ``--restart`` s later as a new run (job id ``<job>-r<N>``) whose next
checkpoint hangs again. A new id per run because the alert is one per job and tier: once a
run's checkpoint has passed its timeout the run's tail is critical, and a later crossing of the
same run would send nothing new (``--healthy N`` adds N healthy checkpoints, ``--period`` s
apart, before each run's hung one). The lake holds the previous run (``-r0``): ``--history``
healthy checkpoints in the hour before, ingested with ``ckptwatch ingest``; the watcher reads
them too on its first scan (it has no state yet), which is timed apart.

The watcher (``ckptwatch watch RAW --lake LAKE --config FILE --interval S --metrics-file``)
runs as a subprocess with a webhook sink to a loopback receiver in this process. The writer
is kept cheap (it shares the cores with the watcher): every line is rendered before the replay,
and each second one locked append per node file that has lines due (``append_lines``, the
recorder's append, without fsync).

Printed: for every level crossing (earliest start in the data + warning / critical fraction x
timeout) the delay to the matching firing alert's arrival (same job, step and severity): p50,
max, count, how many arrived before their crossing ("early") and how many never arrived; the
watcher's CPU seconds per minute of replay (utime+stime from /proc/PID/stat at the start and the
end of the replay) and its peak RSS (VmHWM from /proc/PID/status); what was written. Beside them
the targets: delay <= interval + 1 s; CPU < 5 % of one core (3 s a minute) and RSS < 300 MB at
4096 ranks with a 10 s interval. Results also go to ``bench/out/live.json``.

Run:  .venv/bin/python bench/live.py [--minutes 6] [--interval 10] [--nodes 512]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from ckptwatch.collect.recorder import append_lines, dumps_record, iso_time
from ckptwatch.settings import JobAlertSettings

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
CLI = str(Path(sys.executable).with_name("ckptwatch"))
RANKS_PER_NODE = 8
NODES_PER_LEAF = 16
TARGETS = 64
TIER = "pool"
#: Bytes per rank: a ~1 TB checkpoint over 4096 ranks.
RANK_BYTES = 1 << 28
#: Ranks of one checkpoint start within this many seconds of each other.
START_SPREAD_S = 0.3
#: Targets of the issue (item 5).
CPU_TARGET_S_PER_MIN = 3.0
RSS_TARGET_MB = 300.0


# -- the job's checkpoints -------------------------------------------------------------------
@dataclass(frozen=True)
class Crossing:
    """One level crossing of a hung checkpoint, from the data written."""

    job_id: str
    step: int
    severity: str
    at: float
    node: str


@dataclass
class Replay:
    """Every line to write, by the second it is due, and the crossings it produces."""

    #: second (from t0) -> file -> lines
    due: dict[int, dict[Path, list[str]]]
    crossings: list[Crossing]
    jobs: list[str]
    checkpoints: int = 0
    records: int = 0
    markers: int = 0
    files: int = 0


def _node(i: int) -> str:
    return f"node{i:03d}"


def _file(raw: Path, job_id: str, node: str, start_s: float) -> Path:
    day = datetime.fromtimestamp(start_s, UTC).date().isoformat()
    return raw / "checkpoints" / f"{job_id}-{node}-{day}.jsonl"


def _checkpoint(rng: np.random.Generator, raw: Path, job_id: str, step: int, start_s: float,
                n_ranks: int, median_s: float, cap_s: float, hung: set[int],
                ) -> list[tuple[float, Path, str]]:
    """(write time, file, line) of every start marker and finished record of one checkpoint;
    the ``hung`` ranks write their marker only."""
    starts = start_s + rng.uniform(0.0, START_SPREAD_S, n_ranks)
    starts[0] = start_s  # the earliest start is the checkpoint's start, exactly
    durations = np.minimum(median_s * rng.lognormal(0.0, 0.08, n_ranks), cap_s)
    out = []
    for rank in range(n_ranks):
        node = _node(rank // RANKS_PER_NODE)
        path = _file(raw, job_id, node, float(starts[rank]))
        t, d = float(starts[rank]), float(durations[rank])
        start = iso_time(t)
        ident = {"job_id": job_id, "step": step, "rank": rank, "node": node, "tier": TIER,
                 "start_time": start}
        target = f"pool0-tgt{rank % TARGETS:02d}"
        out.append((t, path, dumps_record({**ident, "target": target, "status": "started"})))
        if rank in hung:
            continue
        fsync = round(0.15 * d, 3)
        out.append((t + d, path, dumps_record({
            **ident, "end_time": iso_time(t + d), "bytes": RANK_BYTES, "target": target,
            "open_s": 0.02, "write_s": round(d - fsync - 0.03, 3), "fsync_s": fsync,
            "close_s": 0.01, "status": "ok"})))
    return out


def n_runs(args: argparse.Namespace) -> int:
    """Runs whose hung checkpoint reaches its timeout within ``--minutes``."""
    run_s = args.healthy * args.period + args.timeout + args.restart
    last = args.healthy * args.period + args.timeout  # from a run's start to its kill
    return max(0, math.floor((args.minutes * 60.0 - last) / run_s) + 1)


def plan(args: argparse.Namespace, raw: Path, t0: float) -> Replay:
    """The replay from ``t0``: runs ``-r1``, ``-r2``, ... each with ``--healthy`` healthy
    checkpoints and then one whose ``--hang`` ranks never finish, as many as fit in
    ``--minutes``."""
    rng = np.random.default_rng(args.seed)
    levels = JobAlertSettings()
    n_ranks = args.nodes * RANKS_PER_NODE
    cap = 0.6 * args.timeout  # healthy checkpoints stay below the warning level
    lines: list[tuple[float, Path, str]] = []
    crossings: list[Crossing] = []
    jobs: list[str] = []
    run_s = args.healthy * args.period + args.timeout + args.restart
    replay = Replay(due={}, crossings=crossings, jobs=jobs)
    step = (args.history + 1) * 1000
    for n in range(n_runs(args)):
        job_id = f"{args.job}-r{n + 1}"
        jobs.append(job_id)
        begin = t0 + n * run_s
        for k in range(args.healthy):
            lines += _checkpoint(rng, raw, job_id, step, begin + k * args.period, n_ranks,
                                 args.median, cap, set())
            step += 1000
            replay.checkpoints += 1
        first = int(rng.integers(0, args.nodes)) * RANKS_PER_NODE
        hung = set(range(first, first + args.hang))
        start = begin + args.healthy * args.period
        lines += _checkpoint(rng, raw, job_id, step, start, n_ranks, args.median, cap, hung)
        replay.checkpoints += 1
        node = _node(first // RANKS_PER_NODE)
        crossings += [Crossing(job_id, step, "warning", start + levels.warning * args.timeout,
                               node),
                      Crossing(job_id, step, "critical", start + levels.critical * args.timeout,
                               node)]
    files: set[Path] = set()
    for at, path, line in lines:
        second = max(0, math.ceil(at - t0))
        replay.due.setdefault(second, {}).setdefault(path, []).append(line)
        files.add(path)
    replay.markers = replay.checkpoints * n_ranks
    replay.records = len(lines)
    replay.files = len(files)
    return replay


def write_history(args: argparse.Namespace, raw: Path, now: float) -> int:
    """Run ``-r0``: ``--history`` healthy checkpoints, 3 min apart, ending before ``now``."""
    rng = np.random.default_rng(args.seed + 1)
    n_ranks = args.nodes * RANKS_PER_NODE
    by_file: dict[Path, list[str]] = defaultdict(list)
    for k in range(args.history):
        start = now - 120.0 - (args.history - k) * 180.0
        for _, path, line in _checkpoint(rng, raw, f"{args.job}-r0", (k + 1) * 1000, start,
                                         n_ranks, args.median, 0.6 * args.timeout, set()):
            by_file[path].append(line)
    for path, lines in by_file.items():
        append_lines(path, lines, fsync=False)
    return sum(len(v) for v in by_file.values())


def write_context(args: argparse.Namespace, raw: Path, jobs: list[str], hook_url: str,
                  config: Path) -> None:
    """jobs/jobs.csv (every run, with its timeout), topology.csv, the watcher's config."""
    (raw / "checkpoints").mkdir(parents=True, exist_ok=True)
    (raw / "jobs").mkdir(exist_ok=True)
    n_ranks = args.nodes * RANKS_PER_NODE
    (raw / "jobs" / "jobs.csv").write_text(
        "job_id,n_ranks,checkpoint_timeout_s\n"
        + "".join(f"{j},{n_ranks},{args.timeout:g}\n" for j in jobs))
    (raw / "topology.csv").write_text(
        "node,leaf_switch\n"
        + "".join(f"{_node(i)},leaf{i // NODES_PER_LEAF:02d}\n" for i in range(args.nodes)))
    config.write_text(f'[sinks]\nstdout = false\nwebhook_url = "{hook_url}/hook"\n')


# -- the loopback webhook ----------------------------------------------------------------------
class Receiver:
    """A webhook on 127.0.0.1 that records every alert with the time its POST arrived."""

    def __init__(self) -> None:
        self.alerts: list[tuple[float, dict[str, Any]]] = []
        lock = threading.Lock()
        alerts = self.alerts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                at = time.time()
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with lock:
                    alerts.extend((at, a) for a in body)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)


# -- the watcher process -----------------------------------------------------------------------
def cpu_split(pid: int) -> tuple[float, float]:
    """(utime + stime of ``pid``, cutime + cstime of its waited-for children), seconds: the
    watcher's own scans, and its child processes (the lake read every refresh, the live
    evidence)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return ((int(fields[11]) + int(fields[12])) / tick,
            (int(fields[13]) + int(fields[14])) / tick)


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and of its waited-for children, seconds."""
    return sum(cpu_split(pid))


def status_mb(pid: int, key: str) -> float:
    """A ``kB`` line of /proc/PID/status (VmHWM, VmRSS) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024.0
    raise KeyError(key)


def metric(path: Path, name: str) -> float | None:
    """One unlabelled sample of the watcher's metrics file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def wait_ready(watcher: subprocess.Popen[bytes], metrics: Path, log: Path,
               timeout_s: float = 300.0) -> None:
    """Until the watcher's first scan has written its metrics file."""
    deadline = time.time() + timeout_s
    while metric(metrics, "ckptwatch_watch_scans_total") is None:
        if watcher.poll() is not None:
            sys.exit(f"the watcher exited ({watcher.returncode}) before its first scan:\n"
                     f"{log.read_text()[-3000:]}")
        if time.time() > deadline:
            sys.exit(f"the watcher did not finish its first scan in {timeout_s:.0f} s")
        time.sleep(0.2)


# -- figures -----------------------------------------------------------------------------------
def match(crossings: list[Crossing], alerts: list[tuple[float, dict[str, Any]]]
          ) -> tuple[list[float], list[Crossing], int, int]:
    """(delays of the matched crossings, crossings no alert matched, firing alerts that match
    no crossing, matched alerts that name the hung node)."""
    firing: dict[tuple[str, str, str], tuple[float, dict[str, Any]]] = {}
    others = 0
    for at, a in sorted(alerts, key=lambda x: x[0]):
        if a.get("status") != "firing":
            continue
        key = (a["labels"].get("job_id", ""), a["annotations"].get("step", ""),
               a["labels"].get("severity", ""))
        firing.setdefault(key, (at, a))
    delays, missed, named = [], [], 0
    used = set()
    for c in crossings:
        key = (c.job_id, str(c.step), c.severity)
        if key not in firing:
            missed.append(c)
            continue
        used.add(key)
        at, a = firing[key]
        delays.append(at - c.at)
        named += c.node in a["annotations"].get("summary", "")
    others = sum(1 for k in firing if k not in used)
    return delays, missed, others, named


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=6.0, help="replay length (default 6)")
    ap.add_argument("--interval", type=float, default=10.0, help="the watcher's --interval")
    ap.add_argument("--nodes", type=int, default=512, help="nodes, 8 ranks each (default 512)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="checkpoint_timeout_s of the job (default 60: its warning and "
                    "critical levels, 42 and 54 s, are more than one 10 s interval apart, so "
                    "each is seen on its own)")
    ap.add_argument("--median", type=float, default=20.0,
                    help="median rank duration, s (default 20; capped at 0.6 x timeout)")
    ap.add_argument("--hang", type=int, default=3,
                    help="ranks of each hung checkpoint that never finish (default 3)")
    ap.add_argument("--healthy", type=int, default=0,
                    help="healthy checkpoints before each run's hung one (default 0)")
    ap.add_argument("--period", type=float, default=30.0,
                    help="seconds between the starts of a run's checkpoints (default 30)")
    ap.add_argument("--restart", type=float, default=5.0,
                    help="seconds from a kill to the restarted run's checkpoint (default 5)")
    ap.add_argument("--history", type=int, default=20,
                    help="healthy checkpoints of the previous run in the lake (default 20)")
    ap.add_argument("--job", default="llm-4096", help="job id prefix (default llm-4096)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--out", type=Path, default=OUT / "live",
                    help="work directory, emptied first (default bench/out/live)")
    args = ap.parse_args()
    if not 1 <= args.hang <= RANKS_PER_NODE:
        ap.error(f"--hang must be 1..{RANKS_PER_NODE} (the ranks of one node)")
    if args.healthy and 0.6 * args.timeout >= args.period:
        ap.error("--period must exceed 0.6 x --timeout (the longest healthy checkpoint)")

    work: Path = args.out
    shutil.rmtree(work, ignore_errors=True)
    raw, lake, config = work / "raw", work / "lake", work / "ckptwatch.toml"
    metrics, log = work / "metrics.prom", work / "watch.log"
    n_ranks = args.nodes * RANKS_PER_NODE
    receiver = Receiver()
    receiver.thread.start()
    env = {**os.environ, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    for var in ("http_proxy", "HTTP_PROXY"):
        env.pop(var, None)

    # The runs are known in advance: the jobs file lists them all before the watcher starts.
    runs = [f"{args.job}-r{n}" for n in range(n_runs(args) + 1)]
    if len(runs) < 2:
        sys.exit("no hung checkpoint fits in --minutes; give more minutes")
    write_context(args, raw, runs, receiver.url, config)
    t = time.perf_counter()
    n_history = write_history(args, raw, time.time())
    done = subprocess.run([CLI, "ingest", str(raw), "--lake", str(lake)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"ckptwatch ingest failed:\n{done.stderr}")
    print(f"history: {n_history:,} records of {args.job}-r0 ingested in "
          f"{time.perf_counter() - t:.1f} s", flush=True)

    with log.open("w") as log_fh:
        watcher = subprocess.Popen(
            [CLI, "watch", str(raw), "--lake", str(lake), "--config", str(config),
             "--interval", f"{args.interval:g}", "--metrics-file", str(metrics)],
            stdout=log_fh, stderr=subprocess.STDOUT, env=env)
    try:
        t_start = time.time()
        wait_ready(watcher, metrics, log)
        startup = {"seconds": time.time() - t_start, "cpu_s": cpu_s(watcher.pid),
                   "rss_mb": status_mb(watcher.pid, "VmHWM")}
        print(f"watcher ready: first scan over the history {startup['seconds']:.1f} s, "
              f"CPU {startup['cpu_s']:.1f} s, peak RSS {startup['rss_mb']:.0f} MB", flush=True)

        t0 = time.time() + 2.0
        replay = plan(args, raw, t0)
        bytes_written = sum(len(ln) + 1 for files in replay.due.values()
                            for lines in files.values() for ln in lines)
        print(f"replay: {len(replay.jobs)} runs, {replay.checkpoints} checkpoints of "
              f"{n_ranks} ranks, {len(replay.crossings)} crossings to come, "
              f"{args.minutes:g} min", flush=True)
        while time.time() < t0:
            time.sleep(0.01)
        split0 = cpu_split(watcher.pid)
        cpu0, scans0 = sum(split0), metric(metrics, "ckptwatch_watch_scans_total")
        end_s = args.minutes * 60.0
        second = 0
        while second <= end_s:
            for path, lines in replay.due.get(second, {}).items():
                append_lines(path, lines, fsync=False)
            second += 1
            time.sleep(max(0.0, t0 + second - time.time()))
        split1 = cpu_split(watcher.pid)
        cpu1, scans1 = sum(split1), metric(metrics, "ckptwatch_watch_scans_total")
        replay_s = time.time() - t0
        time.sleep(args.interval + 3.0)  # the last crossing's alert may still be on its way
        rss_peak = status_mb(watcher.pid, "VmHWM")
        rss_now = status_mb(watcher.pid, "VmRSS")
        scan_s = metric(metrics, "ckptwatch_watch_scan_duration_seconds")
    finally:
        watcher.send_signal(signal.SIGTERM)
        try:
            watcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()
        receiver.server.shutdown()
        receiver.server.server_close()

    delays, missed, others, named = match(replay.crossings, receiver.alerts)
    early = sum(1 for d in delays if d < 0)
    cpu_per_min = (cpu1 - cpu0) / (replay_s / 60.0)
    d_target = args.interval + 1.0
    at_scale = n_ranks >= 4096 and args.interval >= 10.0
    p50 = float(np.median(delays)) if delays else float("nan")
    worst = max(delays) if delays else float("nan")

    def verdict(ok: bool, applies: bool = True) -> str:
        return ("holds" if ok else "MISSED") if applies else "n/a (not 4096 ranks at 10 s)"

    print()
    print(f"watcher: {args.nodes} nodes, {n_ranks} ranks, --interval {args.interval:g} s, "
          f"timeout {args.timeout:g} s, {replay_s / 60:.1f} min of replay, "
          f"{int((scans1 or 0) - (scans0 or 0))} scans")
    print(f"written: {replay.records:,} lines ({replay.markers:,} start markers), "
          f"{bytes_written / 1e6:.1f} MB, {replay.files:,} files "
          f"(+ {n_history:,} lines of history)")
    print(f"crossings: {len(replay.crossings)} ({len(delays)} alerted, missed {len(missed)}), "
          f"early: {early}; alerts naming the hung node: {named}/{len(delays)}; "
          f"other firing alerts: {others}")
    print(f"delay crossing -> webhook: p50 {p50:.2f} s, max {worst:.2f} s "
          f"(target <= interval + 1 = {d_target:g} s: {verdict(worst <= d_target)})")
    print(f"watcher CPU: {cpu1 - cpu0:.1f} s over {replay_s / 60:.1f} min = "
          f"{cpu_per_min:.2f} s/min, {100 * cpu_per_min / 60:.1f} % of one core "
          f"(target < {CPU_TARGET_S_PER_MIN:g} s/min: "
          f"{verdict(cpu_per_min < CPU_TARGET_S_PER_MIN, at_scale)})")
    own, kids = split1[0] - split0[0], split1[1] - split0[1]
    n_evidence = log.read_text(errors="replace").count("live evidence for step")
    print(f"  of which its own scans {own / (replay_s / 60.0):.2f} s/min, its child processes "
          f"{kids / (replay_s / 60.0):.2f} s/min (the lake read every refresh, and the live "
          f"evidence: {n_evidence} found, at most 2 attributions a hung checkpoint)")
    print(f"watcher RSS: peak {rss_peak:.0f} MB (VmHWM), {rss_now:.0f} MB at the end "
          f"(target < {RSS_TARGET_MB:g} MB: {verdict(rss_peak < RSS_TARGET_MB, at_scale)}); "
          f"last scan {scan_s or 0:.2f} s")
    for c in missed:
        print(f"  missed: {c.severity} of {c.job_id} step {c.step}")
    results = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(), "ranks": n_ranks, "replay_s": replay_s,
        "written": {"lines": replay.records, "markers": replay.markers,
                    "bytes": bytes_written, "files": replay.files, "history": n_history},
        "startup": startup,
        "delays_s": delays, "delay_p50_s": p50, "delay_max_s": worst, "early": early,
        "missed": [asdict(c) for c in missed], "other_alerts": others, "named_node": named,
        "cpu_s": cpu1 - cpu0, "cpu_s_per_min": cpu_per_min,
        "cpu_own_s": split1[0] - split0[0], "cpu_children_s": split1[1] - split0[1],
        "rss_peak_mb": rss_peak, "rss_end_mb": rss_now, "last_scan_s": scan_s,
        "watcher_exit": watcher.returncode}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "live.json").write_text(json.dumps(results, indent=1) + "\n")
    if watcher.returncode:
        print(f"the watcher exited {watcher.returncode}; its log: {log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
