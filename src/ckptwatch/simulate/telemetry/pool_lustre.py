"""A simulated Lustre pool as ``lctl get_param`` prints it, on each OSS and on the MDS.

Each server runs ``lctl get_param`` every ``CADENCE_X`` pool intervals (60 s at the default 30 s)
and appends its output to ``pool/<server>/lctl_get_param.txt`` (as a ``while sleep 60; do lctl
get_param … >> file; done`` loop does); the reader takes each block's ``snapshot_time``:

* an OSS: ``obdfilter.<fs>-OSTnnnn.stats`` for each of its OSTs (``write_bytes`` and ``write``
  with their ``[bytes]`` / ``[usecs]`` min, max, sum and sum of squares; ``statfs``; the
  ``snapshot_time``, ``start_time`` and ``elapsed_time`` lines), then ``ost.OSS.ost_io.stats``
  (``req_waittime``, ``req_qdepth``, ``req_active``, ``req_timeout``, ``reqbuf_avail``,
  ``ost_write``), laid out as the genuine samples (``tests/fixtures/real/pool_telemetry/
  lustrefs_exporter_ddn/valid.txt``): the name padded to 25 characters, a counter printed only
  once it has samples.
* the MDS: ``mdt.<fs>-MDT0000.md_stats`` (``open``, ``close``, ``mknod``, ``getattr``,
  ``setattr``, ``statfs`` in ``[usecs]``) and ``mds.MDS.mdt.stats``. The metadata lives there,
  apart from the OSTs.

Lustre has no GC or background-work counter: the OSTs' GC shows only as slower writes.
A stats clear (``lctl set_param *.stats=clear`` on one server) restarts its counters at 0 and
its ``start_time`` at the clear.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.pool_model import Counters, Metadata, PoolModel, server_samples
from ckptwatch.simulate.telemetry.sampling import Clocks, sample_times

#: lctl runs every this many pool intervals.
CADENCE_X = 2.0
FILE = "lctl_get_param.txt"
U64 = 2**64
#: Timeout of every request (s), as req_timeout reports it.
TIMEOUT_S = 15


def _secs(t: float) -> str:
    """Lustre's ``secs.nsecs`` time."""
    ns = int(round(t * 1e9))
    return f"{ns // 10**9}.{ns % 10**9:09d} secs.nsecs"


def _time(name: str, t: float) -> str:
    return f"{name:<25} {_secs(t)}"


def _stat(name: str, n: int, unit: str, lo: int, hi: int, total: int, sumsq: int) -> str:
    return f"{name:<25} {n} samples [{unit}] {lo} {hi} {total} {sumsq % U64}"


def _sumsq(total: int, n: int, spread: float = 1.3) -> int:
    """A sum of squares for ``n`` whole-number samples summing to ``total`` (at least
    total² / n, and at least total)."""
    return max(total, int(total * total * spread // max(n, 1)))


def _steps(ops: np.ndarray) -> np.ndarray:
    """The increase of a cumulative count at each instant (after a drop: the new value)."""
    d = np.diff(ops, prepend=ops[:1])
    return np.where(d < 0, ops, d)


def _cumulative(steps: np.ndarray, started: np.ndarray) -> np.ndarray:
    """The running sum of ``steps``, restarted where ``started`` changes (a clear)."""
    out = np.cumsum(steps)
    moved = np.nonzero(np.diff(started))[0]
    for k in moved + 1:
        out[k:] -= out[k - 1]
    return out


def _ost_block(name: str, c: Counters, i: int, at: float, min_us: int, io: int,
               statfs_rate: float) -> list[str]:
    """One OST's ``obdfilter.<name>.stats`` at instant ``i``."""
    lines = [f"obdfilter.{name}.stats=", _time("snapshot_time", at),
             _time("start_time", c.started[i]), _time("elapsed_time", at - c.started[i])]
    n = int(c.ops[i])
    if n:
        total = int(c.bytes[i])
        lines.append(_stat("write_bytes", n, "bytes", 4096, io, total, n * io * io))
        lat = int(c.latency_us[i])
        lines.append(_stat("write", n, "usecs", min_us, max(min_us, int(c.peak_ms[i] * 1000)),
                           lat, _sumsq(lat, n)))
    k = int((at - c.started[i]) * statfs_rate)
    if k:
        lines.append(_stat("statfs", k, "usecs", 0, 129, 6 * k, 60 * k))
    return lines


def _service(name: str, at: float, requests: int, wait_us: int, depth: int, active: int,
             op: str, op_us: int) -> list[str]:
    """A server's request-service stats (``ost.OSS.ost_io.stats``, ``mds.MDS.mdt.stats``)."""
    lines = [f"{name}=", _time("snapshot_time", at)]
    if requests:
        lines += [
            _stat("req_waittime", requests, "usec", 4, max(5, 40 * wait_us // requests), wait_us,
                  _sumsq(wait_us, requests, 3.0)),
            _stat("req_qdepth", requests, "reqs", 0, max(1, 4 * depth // requests), depth,
                  _sumsq(depth, requests, 2.0)),
            _stat("req_active", requests, "reqs", 1, max(2, 3 * active // requests), active,
                  _sumsq(active, requests, 1.5)),
            _stat("req_timeout", requests, "sec", TIMEOUT_S, TIMEOUT_S, TIMEOUT_S * requests,
                  TIMEOUT_S * TIMEOUT_S * requests),
            _stat("reqbuf_avail", 2 * requests + 1, "bufs", 63, 64, 127 * requests + 64,
                  8065 * requests + 4096),
            _stat(op, requests, "usec", 50, max(51, 20 * op_us // requests), op_us,
                  _sumsq(op_us, requests, 2.0)),
        ]
    return lines


def write_lustre(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
                 rng: np.random.Generator, t0: float, t1: float,
                 interval: float) -> dict[Path, int]:
    """Every server's ``lctl get_param`` outputs, one file per server; the lines written."""
    every = max(5.0, CADENCE_X * interval)
    files: dict[Path, int] = {}
    clear = layout.clear
    for _, server, targets, ts, counters in server_samples(layout, model, clocks, rng, t0, t1,
                                                              every):
        stamped = clocks.stamp(layout.targets[targets[0]], ts)
        # The service's queue: requests in the OSS (Little: I/O rate x latency) on arrival, a
        # third of them waiting (and a fifth of a request on average before the day's
        # counts); each request's wait a third of its latency.
        in_system = np.sum([_cumulative(_steps(c.ops) * c.rate * c.mean_ms / 1000.0,
                                        c.started) for c in counters], axis=0)
        requests = np.sum([c.ops for c in counters], axis=0)
        latency_us = np.sum([c.latency_us for c in counters], axis=0)
        out: list[str] = []
        for i, at in enumerate(stamped):
            for k, (t, c) in enumerate(zip(targets, counters, strict=True)):
                out += _ost_block(layout.targets[t], c, i, at + 2e-5 * k,
                                  max(1, int(model.lat_ms[t] * 30)), model.io, 0.8)
            out += _service("ost.OSS.ost_io.stats", at + 1e-4, int(requests[i]),
                            int(latency_us[i] / 3), int(in_system[i] / 3 + requests[i] / 5),
                            int(in_system[i] + requests[i]), "ost_write",
                            int(1.3 * latency_us[i]))
        files[_write(pool_dir / server, out)] = len(out)
    if layout.metadata and layout.metadata_server:
        ts = clocks.sampled("pool", sample_times(rng, 1, t0, t1, every)[0], t0, t1 - t0)
        cleared = (clear.at if clear is not None and clear.server == len(layout.servers)
                   else None)
        meta = model.metadata(ts, cleared)
        out = []
        for i, at in enumerate(clocks.stamp(layout.metadata_server, ts)):
            out += _md_block(layout.metadata, meta, i, float(at))
        files[_write(pool_dir / layout.metadata_server, out)] = len(out)
    return files


def _md_block(mdt: str, meta: Metadata, i: int, at: float) -> list[str]:
    """The MDS's ``mdt.<mdt>.md_stats`` and ``mds.MDS.mdt.stats`` at instant ``i``."""
    started = float(meta.started[i])
    lines = [f"mdt.{mdt}.md_stats=", _time("snapshot_time", at), _time("start_time", started),
             _time("elapsed_time", at - started)]
    peak = float(meta.peak_ms[i])
    requests = wait_us = 0
    for kind, counts in meta.ops.items():
        n = int(counts[i])
        if not n:
            continue
        total = int(meta.latency_us[kind][i])
        lines.append(_stat(kind, n, "usecs", 1, max(2, int(peak * 4000)), total,
                           _sumsq(total, n, 2.0)))
        requests += n
        wait_us += total // 10
    depth = int(requests * 0.2)
    lines += _service("mds.MDS.mdt.stats", at + 1e-4, requests, wait_us, depth,
                      requests + depth, "mds_reint", int(wait_us * 8))
    return lines


def _write(server_dir: Path, lines: list[str]) -> Path:
    server_dir.mkdir(parents=True, exist_ok=True)
    path = server_dir / FILE
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
