"""A simulated DAOS pool as its engines' telemetry reports it: ``daos_metrics -C`` per server
and ``dmg pool query`` from an admin node.

Each server runs ``daos_metrics -C -S 0`` every pool interval; the outputs carry no time, so
they arrive as JSON Lines envelopes (``pool/<server>/daos_metrics.jsonl``: node, device
``engine0``, ``collected_at``, the text as ``output``, no ``source``: the reader recognises
the content), as ``ckptwatch collect`` writes them. The text is the CSV of the genuine samples
(``tests/fixtures/real/pool_telemetry/daos/``): the header ``name,value,min,max,mean,
sample_size,sum,std_dev``, counters and plain gauges as ``ID: 0/<path>,<value>``, stats gauges
with ``min,max,mean,sample_size,sum,std_dev`` (std_dev empty below 3 samples):

* ``io/latency/update/1MB/tgt_<n>`` (µs since the engine started: every DFS chunk write);
* ``pool/<uuid>/ops/update/tgt_<n>``, ``pool/<uuid>/xferred/update/tgt_<n>``;
* ``pool/<uuid>/ops/{pool_connect,pool_query,cont_open,cont_close,cont_query}`` (the pool
  service's operations: DFS creates and opens files inside an open container, so these move
  slowly and a metadata incident does not show here);
* ``io/ops/<op>/latency/tgt_<n>`` (µs, stats gauges): the object RPCs DFS's file operations
  become (``METADATA_RPCS``: lookups and stats are key queries, a checkpoint's truncating
  create punches the old file's data, its close syncs it), their count and summed latency the
  pool's metadata service model's (``PoolModel.metadata``), spread over the engine's targets
  (a file's directory entry lives on one target; a day's many files spread evenly);
* ``sched/cycle_duration/xs_<n>`` (ms), ``sched/cycle_size/xs_<n>`` (ULTs), per execution
  stream; ``net/ofi+tcp;ofi_rxm/hg/active_rpcs/ctx_<n>``.

``dmg pool query`` every ten pool intervals on ``daos-admin`` (``pool/daos-admin/
dmg_pool_query.jsonl``): the pool's rebuild state (idle all day: no simulated rebuild).

DAOS's background work (VOS aggregation) is not read by ckptwatch (docs/formats.md): a target's
GC shows as slower updates and, as on every pool but Lustre, in its drives' SMART. A stats
clear is an engine restart on one server: every counter restarts at 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.pool_model import (
    Counters,
    Metadata,
    PoolModel,
    server_samples,
)
from ckptwatch.simulate.telemetry.sampling import Clocks, envelope_line, iso_seconds, sample_times

CADENCE_X = 1.0
QUERY_CADENCE_X = 10.0
PROVIDER = "ofi+tcp;ofi_rxm"
HEADER = "name,value,min,max,mean,sample_size,sum,std_dev"
ADMIN = "daos-admin"
#: Pool-service operations per second of an engine (connections, queries, container opens).
SERVICE_OPS = {"pool_connect": 0.002, "pool_query": 0.2, "cont_open": 0.01, "cont_close": 0.01,
               "cont_query": 0.05}
#: The object RPC each metadata operation kind of ``pool_model.META_KINDS`` becomes in DFS.
METADATA_RPCS = {"open": "key_query", "getattr": "key_query", "setattr": "key_query",
                 "statfs": "key_query", "mknod": "obj_punch", "close": "obj_sync"}


def _stats(path: str, value: int, lo: int, hi: int, n: int, total: int, std: float) -> str:
    """A stats gauge row: value, min, max, mean, sample_size, sum, std_dev."""
    mean = total / n if n else 0.0
    spread = f"{std:.6f}" if n > 2 else ""
    return f"ID: 0/{path},{value},{lo},{hi},{mean:.6f},{n},{total},{spread}"


def _latency_row(local: str, c: Counters, i: int, min_us: int) -> str | None:
    n = int(c.ops[i])
    if not n:
        return None
    total = int(c.latency_us[i])
    hi = max(min_us, int(c.peak_ms[i] * 1000))
    last = int(c.mean_ms[i] * 1000) or total // n
    return _stats(f"io/latency/update/1MB/{local}", max(min_us, last), min_us, hi, n, total,
                  0.2 * total / n + 0.02 * hi)


def _metadata_rows(local: str, meta: Metadata, share: float, i: int) -> list[str]:
    """A target's ``io/ops/<op>/latency/tgt_<n>`` stats gauges at instant ``i``: its
    ``share`` of the pool's metadata operations of each kind (``METADATA_RPCS``) and of their
    latency."""
    ops: dict[str, float] = {}
    us: dict[str, float] = {}
    for kind, rpc in METADATA_RPCS.items():
        ops[rpc] = ops.get(rpc, 0.0) + float(meta.ops[kind][i]) * share
        us[rpc] = us.get(rpc, 0.0) + float(meta.latency_us[kind][i]) * share
    rows = []
    last = max(1, int(meta.mean_ms[i] * 1000))
    hi = max(last, int(meta.peak_ms[i] * 1000 * 4))
    for rpc, n in ops.items():
        if int(n):
            rows.append(_stats(f"io/ops/{rpc}/latency/{local}", last, 1, hi, int(n),
                               int(us[rpc]), 0.3 * us[rpc] / n))
    return rows


def write_daos(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
               rng: np.random.Generator, t0: float, t1: float,
               interval: float) -> dict[Path, int]:
    """Every server's ``daos_metrics -C`` envelopes and the admin node's ``dmg pool query``."""
    every = max(5.0, CADENCE_X * interval)
    files: dict[Path, int] = {}
    uuid = layout.pool
    n_targets = len(layout.targets)
    for s, server, targets, ts, counters in server_samples(layout, model, clocks, rng, t0, t1,
                                                              every):
        started = counters[0].started
        clear = layout.clear
        meta = model.metadata(ts, clear.at if clear is not None and clear.server == s else None)
        stamped = clocks.stamp(layout.targets[targets[0]], ts)
        iso = iso_seconds(stamped)
        noise = rng.lognormal(0.0, 0.3, (ts.size, len(targets) + 2))
        lines = []
        for i in range(ts.size):
            up = float(stamped[i] - started[i])
            rows = [HEADER]
            for t, c in zip(targets, counters, strict=True):
                row = _latency_row(layout.local[t].split("/")[1], c, i,
                                   max(1, int(model.lat_ms[t] * 750)))
                if row:
                    rows.append(row)
            for t, c in zip(targets, counters, strict=True):
                tgt = layout.local[t].split("/")[1]
                rows.append(f"ID: 0/pool/{uuid}/ops/update/{tgt},{int(c.ops[i])}")
                rows.append(f"ID: 0/pool/{uuid}/xferred/update/{tgt},{int(c.bytes[i])}")
            for t in targets:
                rows += _metadata_rows(layout.local[t].split("/")[1], meta, 1.0 / n_targets, i)
            for op, rate in SERVICE_OPS.items():
                rows.append(f"ID: 0/pool/{uuid}/ops/{op},{int(up * rate)}")
            in_flight = [c.rate[i] * c.mean_ms[i] / 1000.0 for c in counters]
            for xs in range(len(targets) + 2):
                busy = in_flight[xs - 2] if xs >= 2 else 0.0
                cycles = int(up * 20_000)
                dur = int(up * 1000 * 0.98)
                rows.append(_stats(f"sched/cycle_duration/xs_{xs}", int(noise[i, xs] * 0.6), 0,
                                   700 + xs, cycles, dur, 0.9))
                size = 1 + int(busy * noise[i, xs])
                rows.append(_stats(f"sched/cycle_size/xs_{xs}", size, 1, 300 + xs, cycles,
                                   int(cycles * (1.0 + 0.01 * busy)), 0.3))
            for ctx in range(2):
                rows.append(f"ID: 0/net/{PROVIDER}/hg/active_rpcs/ctx_{ctx},"
                            f"{int(sum(in_flight) / 2 * noise[i, ctx])}")
            lines.append(envelope_line(server, "engine0", str(iso[i]), None,
                                       "\n".join(rows) + "\n"))
        files[_write(pool_dir / server / "daos_metrics.jsonl", lines)] = len(lines)
    ts = sample_times(rng, 1, t0, t1, max(5.0, QUERY_CADENCE_X * interval))[0]
    query = [envelope_line(ADMIN, None, str(at), None, _pool_query(uuid, len(layout.targets)))
             for at in iso_seconds(ts)]
    files[_write(pool_dir / ADMIN / "dmg_pool_query.jsonl", query)] = len(query)
    return files


def _pool_query(uuid: str, n_targets: int) -> str:
    """``dmg pool query`` as the DAOS admin guide prints it (rebuild idle)."""
    return (f"Pool {uuid}, ntarget={n_targets}, disabled=0, leader=1, version=1, state=Ready\n"
            "Pool health info:\n- Rebuild idle, 0 objs, 0 recs\nPool space info:\n"
            f"- Target count:{n_targets}\n- Total memory-file size: 151 GB\n"
            "- Metadata storage:\n  Total size: 151 GB\n"
            "  Free: 118 GB, min:2.5 GB, max:2.5 GB, mean:2.5 GB\n- Data storage:\n"
            "  Total size: 600 GB\n  Free: 598 GB, min:12 GB, max:12 GB, mean:12 GB\n")


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
