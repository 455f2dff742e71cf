"""A simulated IBM Storage Scale (GPFS) pool as ``mmpmon``, ``mmlsqos`` and ``mmdiag
--waiters`` report it.

* ``mmpmon -p`` with ``fs_io_s``, every two pool intervals on every compute node (mmpmon counts
  the I/O of the node it runs on), appended to ``pool/<node>/mmpmon_fs_io_s.txt``: one
  ``_fs_io_s_`` line per run in the genuine sample's key order (``_n_ _nn_ _rc_ _t_ _tu_ _cl_
  _fs_ _d_ _br_ _bw_ _oc_ _cc_ _rdc_ _wc_ _dir_ _iu_``), counts since mmfsd started; the
  node's checkpoint files are its opens and closes (a metadata storm multiplies them). A stats
  clear is ``mmpmon reset`` on one node.
* ``mmlsqos <fs> -Y --seconds 60``, every two pool intervals on ``nsd01``, appended to
  ``pool/nsd01/<fs>_mmlsqos.txt`` (the file system is the first word of the name, as the
  reader takes it): the ``status``/``config``/``values``/``stats`` HEADER lines, then per
  storage pool (``system``: metadata; ``data``: the checkpoints) and QoS class (``misc``,
  ``other``, and ``maintenance`` when it did I/O: restripe and rebuild run in it) the
  interval's IOPS, ``ioql`` (I/O in flight), ``qsdl`` (held by QoS: none, no limit is set),
  ``et`` and MB/s, numbers with a decimal comma as in the sample.
* ``mmdiag --waiters -Y``, every pool interval on each NSD server, as JSON Lines envelopes
  (``pool/<server>/mmdiag_waiters.jsonl``, no ``source``: the output carries no time): the
  threads waiting at that instant, laid out as the sample: ``NSDThread`` waiters "for I/O
  completion" (the server's I/O in flight, each with how long it has waited so far), and
  while the server's disks do background work (a simulated GC incident on it: the declustered
  array's rebuild and rebalance) ``RebuildWorkThread`` waiters, which the maintenance class of
  mmlsqos counts too.

Storage Scale reports no metadata latency: a metadata stall shows only as more opens and
closes, and in the records' phases.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ckptwatch.simulate.cluster import Cumulative, grouped
from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.pool_model import PoolModel
from ckptwatch.simulate.telemetry.sampling import Clocks, envelope_line, iso_seconds, sample_times

MMPMON_X = 2.0
QOS_X = 2.0
WAITERS_X = 1.0
WAITERS_HEADER = ("mmdiag:waiters:HEADER:version:reserved:reserved:threadId:threadAddr:"
                  "threadName:waitStartTime:waitTime:isMonitored:condVarAddr:condVarName:"
                  "condVarReason:mutexAddr:mutexName:auxReason:delayTime:delayReason:")
QOS_HEADERS = (
    "mmlsqos:status:HEADER:version:reserved:reserved:enabled:throttling:monitoring:"
    "fineStatsSecs:idStats:",
    "mmlsqos:config:HEADER:version:reserved:reserved:config_enc:",
    "mmlsqos:values:HEADER:version:reserved:reserved:values_enc:",
    "mmlsqos:stats:HEADER:version:reserved:reserved:pool:timeEpoch:class:iops:ioql:qsdl:et:MBs:",
)
#: App write size (mmpmon's _wc_ counts write calls).
WRITE_CALL = 1024 * 1024


def _comma(x: float) -> str:
    """A number as mmlsqos -Y prints it in a decimal-comma locale (``0,85256``)."""
    return f"{x:.5g}".replace(".", ",")


def _restarted(values: np.ndarray, k: int | None) -> np.ndarray:
    out = values.copy()
    if k is not None:
        out[k:] -= values[k - 1] if k > 0 else 0.0
    return out


def write_gpfs(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
               rng: np.random.Generator, t0: float, t1: float,
               interval: float) -> dict[Path, int]:
    """mmpmon on every node, mmlsqos on nsd01, mmdiag waiters on every NSD server."""
    files = _mmpmon(pool_dir, layout, model, clocks, rng, t0, t1, interval)
    files.update(_mmlsqos(pool_dir, layout, model, rng, t0, t1, interval))
    files.update(_waiters(pool_dir, layout, model, clocks, rng, t0, t1, interval))
    return files


def _mmpmon(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
            rng: np.random.Generator, t0: float, t1: float,
            interval: float) -> dict[Path, int]:
    cluster, load = model.cluster, model.load
    nodes = cluster.nodes
    sel = load.target >= 0
    written = grouped(load.node[sel], len(nodes), load.write_start[sel], load.write_end[sel],
                      load.nbytes[sel])
    files_by_node = grouped(load.node[sel], len(nodes), load.open_start[sel],
                            load.close_end[sel], load.meta_ops[sel] / 3.0)
    every = max(5.0, MMPMON_X * interval)
    files: dict[Path, int] = {}
    cleared = layout.clear
    n_disks = 2 * len(layout.servers)
    for n, node in enumerate(nodes):
        ts = clocks.sampled("pool", sample_times(rng, 1, t0, t1, every)[0], t0, t1 - t0)
        k = None
        if cleared is not None and cleared.server == n and ts[0] < cleared.at < ts[-1]:
            k = int(np.searchsorted(ts, cleared.at))
        opened: Cumulative = files_by_node[n]
        up = ts - t0
        storm = np.ones(ts.shape)
        prev = np.concatenate([[t0], ts[:-1]])
        for inc in model.meta_inc:
            frac = np.clip(np.minimum(ts, inc.end) - np.maximum(prev, inc.start), 0.0, None)
            storm += (inc.signal["metadata_ops_factor"] - 1.0) * frac / np.maximum(ts - prev, 1)
        base = rng.uniform(1e9, 1e12, 4)
        counts = {
            "_br_": base[0] + up * rng.uniform(2e6, 2e7),
            "_bw_": base[1] + written[n](ts) + up * rng.uniform(1e6, 5e6),
            "_oc_": base[2] / 1e5 + np.cumsum(np.diff(opened(ts) + up * 0.5, prepend=0.0)
                                              * storm),
            "_rdc_": base[3] / 1e6 + up * 20.0,
        }
        counts["_cc_"] = counts["_oc_"] - rng.integers(0, 3)
        counts["_wc_"] = counts["_bw_"] / WRITE_CALL
        counts["_dir_"] = base[2] / 1e7 + up * 0.1
        counts["_iu_"] = counts["_cc_"] * 1.2
        stamped = clocks.stamp(node, ts)
        ip = f"10.22.{n // 250}.{n % 250 + 1}"
        lines = []
        counts = {key: np.maximum(_restarted(vals, k), 0.0) for key, vals in counts.items()}
        for i, at in enumerate(stamped):
            sec, usec = int(at), int(round((at - int(at)) * 1e6)) % 1_000_000
            v = {key: int(vals[i]) for key, vals in counts.items()}
            lines.append(f"_fs_io_s_ _n_ {ip} _nn_ {node} _rc_ 0 _t_ {sec} _tu_ {usec} "
                         f"_cl_ gpfs.{layout.pool}.cluster _fs_ {layout.pool} _d_ {n_disks} "
                         f"_br_ {v['_br_']} _bw_ {v['_bw_']} _oc_ {v['_oc_']} "
                         f"_cc_ {v['_cc_']} _rdc_ {v['_rdc_']} _wc_ {v['_wc_']} "
                         f"_dir_ {v['_dir_']} _iu_ {v['_iu_']}")
        path = pool_dir / node / "mmpmon_fs_io_s.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        files[path] = len(lines)
    return files


def _mmlsqos(pool_dir: Path, layout: PoolLayout, model: PoolModel, rng: np.random.Generator,
             t0: float, t1: float, interval: float) -> dict[Path, int]:
    every = max(5.0, QOS_X * interval)
    et = int(round(every))
    ts = sample_times(rng, 1, t0 + every, t1, every)[0]
    start = ts - et
    io = model.io
    other_iops = np.zeros(ts.shape)
    in_flight = np.zeros(ts.shape)
    mbs = np.zeros(ts.shape)
    maintenance = np.zeros(ts.shape)
    for t in range(len(layout.targets)):
        c = model.writes(t, np.concatenate([[start[0]], ts]))
        ops = np.diff(c.ops)
        other_iops += np.maximum(ops, 0) / et
        in_flight += c.rate[1:] * c.mean_ms[1:] / 1000.0
        mbs += np.maximum(np.diff(c.bytes), 0) / et / 1e6
        maintenance += model.gc_share(t, start, ts) * model.cluster.target_bw * 0.5 / io
    meta = model.metadata(ts)
    lines = []
    for i in range(ts.size):
        lines += [*QOS_HEADERS, "mmlsqos:status:0:1:::Yes:No:Yes:0:No:",
                  "mmlsqos:config:0:1:::pool=*,other=inf,maintenance/all_local=inf:",
                  "mmlsqos:values:0:1:::pool=system,other=inf,maintenance/all_local=inf%3A"
                  "pool=data,other=inf,maintenance/all_local=inf:"]
        epoch = int(start[i])
        md = float(meta.rate[i])
        rows = [("system", "misc", md * 0.3, md * 0.3 * 0.002, 0.06 * md * 0.3 * 4096 / 1e6),
                ("system", "other", md * 0.7, md * 0.7 * float(meta.mean_ms[i]) / 1000.0,
                 md * 0.7 * 4096 / 1e6),
                ("data", "misc", 2.0 + rng.uniform(0, 30), rng.uniform(0, 0.02),
                 rng.uniform(0, 2)),
                ("data", "other", other_iops[i], in_flight[i], mbs[i])]
        if maintenance[i] > 0:
            rows.append(("data", "maintenance", maintenance[i], maintenance[i] * 0.01,
                         maintenance[i] * io / 1e6))
        for pool, cls, iops, ioql, rate in rows:
            lines.append(f"mmlsqos:stats:0:1:::{pool}:{epoch}:{cls}:{_comma(iops)}:"
                         f"{_comma(ioql)}:{_comma(ioql * 1e-5)}:{et}:{rate:.5g}:")
    server = layout.servers[0]
    path = pool_dir / server / f"{layout.pool}_mmlsqos.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return {path: len(lines)}


def _waiters(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
             rng: np.random.Generator, t0: float, t1: float,
             interval: float) -> dict[Path, int]:
    every = max(5.0, WAITERS_X * interval)
    files: dict[Path, int] = {}
    for s, server in enumerate(layout.servers):
        t = layout.served_by(s)[0]
        ts = clocks.sampled("pool", sample_times(rng, 1, t0, t1, every)[0], t0, t1 - t0)
        c = model.writes(t, ts)
        gc = model.gc_share(t, ts - 1.0, ts) > 0
        stamped = clocks.stamp(server, ts)
        iso = iso_seconds(stamped)
        lines = []
        for i, at in enumerate(stamped):
            lat_s = max(float(c.mean_ms[i]), float(model.lat_ms[t])) / 1000.0
            waits = [("NSDThread", w) for w in rng.uniform(0.0, 2 * lat_s,
                                                         rng.poisson(c.rate[i] * lat_s))]
            if gc[i]:
                waits += [("RebuildWorkThread", w) for w in rng.exponential(
                    0.15, int(rng.integers(4, 21)))]
            out = [WAITERS_HEADER]
            for name, wait in sorted(waits, key=lambda x: -x[1]):
                began = float(at - wait)
                stamp = np.datetime_as_string(np.datetime64(int(began), "s"), unit="s")
                when = stamp.replace("T", "_").replace(":", "%3A") + "+0000"
                tid = int(rng.integers(40_000, 150_000))
                out.append(f"mmdiag:waiters:0:1:::{tid}:{int(rng.integers(2**40)):016X}:"
                           f"{name}:{when}:{wait:.4f}:monitored::::::for I/O completion:::")
            lines.append(envelope_line(server, None, str(iso[i]), None, "\n".join(out) + "\n"))
        path = pool_dir / server / "mmdiag_waiters.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        files[path] = len(lines)
    return files
