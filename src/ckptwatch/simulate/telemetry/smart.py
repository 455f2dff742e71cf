"""NVMe SMART of a simulated scenario: ``smartctl -j -a`` and OCP documents in envelopes.

One JSON Lines file per host (node-local drives under the node, pool drives under their target);
counters are cumulative, 1 data unit = 512,000 bytes, OCP physical media units in bytes. GC
multiplies media writes over host writes and keeps the controller busy even with no host I/O
(busy time never outruns the clock).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ckptwatch.simulate.cluster import (
    Background,
    Cluster,
    Cumulative,
    Incident,
    WriteLoad,
    grouped,
    overlap,
)
from ckptwatch.simulate.telemetry.mix import smart_encoding
from ckptwatch.simulate.telemetry.render import render_nvme_smart_log_json, render_ocp_smart_text
from ckptwatch.simulate.telemetry.sampling import (
    Clocks,
    Progress,
    envelope_line,
    gc_dip,
    iso_seconds,
    sample_times,
)
from ckptwatch.sources.nvme_cli import render_ocp_smart_json
from ckptwatch.sources.smartctl import HEALTH_LOG_METRICS, render_smartctl_json

DATA_UNIT_BYTES = 512_000

_LOCAL_MODELS = (
    ("SAMSUNG MZQL23T8HCLS-00A07", "GDC5902Q", 3_840_755_982_336),
    ("Micron_7450_MTFDKCC3T8TFR", "E2MU200", 3_840_755_982_336),
    ("INTEL SSDPF2KX038TZ", "JCV10100", 3_840_755_982_336),
)
_TARGET_MODELS = (
    ("SAMSUNG MZPLJ6T4HALA-00007", "EPK9AB5Q", 6_401_252_745_216),
    ("Micron_7400_MTFDKCB3T2TFC", "E1MU23BC", 3_200_631_791_616),
)


#: Cadence of the OCP log against the health log's, when the tools run apart: the same cadence
#: (a collector runs the two commands one after the other, seconds apart), 10x denser, 2x
#: sparser; drawn per drive.
OCP_CADENCES = (1.0, 1.0, 0.1, 2.0)
#: Spellings of a drive in the OCP log's envelope when the tools run apart (the health log's
#: is ``/dev/nvme0``): what ``nvme ocp smart-add-log`` was given.
OCP_SPELLINGS = ("/dev/{}n1", "{}n1", "/dev/{}", "{}")


def ocp_times(rng: np.random.Generator, ts: np.ndarray, every: float, t0: float, t1: float,
              dev: str) -> tuple[np.ndarray, str]:
    """When a drive's OCP log is read, with the health log read at ``ts`` every ``every`` s,
    and how its device is spelled, for tools that run apart.

    At the health log's cadence it is read 3-20 s after each health read (its own jitter of
    ±2 s, so never at the same second); else on a grid of its own (``OCP_CADENCES``), kept
    within 30 s to 15 min (or the health log's cadence when that is longer).
    """
    factor = float(rng.choice(OCP_CADENCES))
    spelling = str(rng.choice(OCP_SPELLINGS)).format(dev)
    if factor == 1.0:
        lag = float(rng.uniform(3.0, 20.0))
        return np.floor(ts + lag + rng.uniform(-2.0, 2.0, ts.shape)), spelling
    own = float(np.clip(every * factor, 30.0, max(900.0, every)))
    return sample_times(rng, 1, t0, t1, own, jitter=min(5.0, own / 10), first=90.0)[0], spelling


def _media_and_free(at: np.ndarray, host_bytes: Callable[[np.ndarray], np.ndarray],
                    base_wa: float, wa_k: np.ndarray, free_base: np.ndarray,
                    gcs: Sequence[Incident]) -> tuple[np.ndarray, np.ndarray]:
    """The OCP log's cumulative media bytes written and free blocks % at instants ``at``.

    Media bytes are the host bytes of each interval times the drive's write amplification
    (``wa_k``: each interval's noise around it); GC adds its own amplification of the host
    bytes written during it and its relocation traffic, and dips the free blocks (unless it is
    ``wa_only``).
    """
    media = np.cumsum(np.diff(host_bytes(at), prepend=0.0) * base_wa * wa_k)
    free = free_base.copy()
    for inc in gcs:
        sig = inc.signal
        gc_s = overlap(np.full(at.shape, -np.inf), at, inc.start, inc.end)
        host_in = np.where(at > inc.start, host_bytes(np.minimum(at, inc.end))
                           - host_bytes(np.array([inc.start])), 0.0)
        media = (media + (sig["write_amplification"] - base_wa) * host_in
                 + sig["relocation_gbs"] * 1e9 * gc_s)
        if not sig.get("wa_only"):
            free = np.minimum(free, gc_dip(at, free_base, inc))
    return np.maximum.accumulate(media), free


def _smartctl_doc(device: str, model: str, serial: str, firmware: str, ts: float,
                  health: Mapping[str, int]) -> dict[str, object]:
    """``smartctl -j -a`` for one sample: the shared renderer plus the sample's local_time."""
    values = {metric: health[key] * scale for key, (metric, scale) in HEALTH_LOG_METRICS.items()
              if key in health}
    doc = render_smartctl_json(model, serial, firmware, device, values, version=(7, 4))
    asctime = datetime.fromtimestamp(ts, UTC).strftime("%a %b %d %H:%M:%S %Y UTC")
    doc["local_time"] = {"time_t": int(ts), "asctime": asctime}
    return doc


def write_smart(smart_dir: Path, cluster: Cluster, load: WriteLoad,
                incidents: Sequence[Incident], bg: Background, t0: float, t1: float,
                interval: float, rng: np.random.Generator,
                progress: Progress | None = None, *, mix: str = "default",
                wa_noise: float = 0.01, with_ocp: bool = True,
                clocks: Clocks | None = None, pool_drives: bool = True) -> dict[Path, int]:
    """SMART envelopes (smartctl + OCP) for every drive, one JSON Lines file per host.

    ``mix`` (``telemetry.mix.smart_encoding``) chooses each drive's encoding of the same
    values. ``wa_noise``: log-normal sigma of each interval's write amplification around the
    drive's own. ``with_ocp`` False: no OCP documents (no media bytes written, no free blocks).
    ``clocks``: when the health and OCP logs are read (``ocp_times``) and how each host stamps
    them. ``pool_drives`` False: none for the pool targets' drives (a pool whose drives sit
    behind controllers that show none, as a Lustre appliance's). A host name with a ``/`` (a
    DAOS or SPDK target, ``nvmf01/Nvme0n1``) is written ``_`` in the file name; the
    envelopes keep it. Returns the lines written per file.
    """
    clocks = clocks or Clocks()
    smart_dir.mkdir(parents=True, exist_ok=True)
    n_loc = cluster.n_local_drives
    drive_of = np.where(load.drive >= 0, load.drive, -1)
    local_host = grouped(np.where(drive_of >= 0, drive_of, n_loc), n_loc + 1, load.write_start,
                         load.write_end, load.nbytes)
    tsel = load.target >= 0
    target_host = grouped(load.target[tsel], len(cluster.targets), load.write_start[tsel],
                          load.write_end[tsel], load.nbytes[tsel] / cluster.drives_per_target)
    tenant_bw = cluster.target_bw / cluster.drives_per_target
    other = bg.load_bytes(tenant_bw)
    other0 = other(np.array([t0]))
    gc_by_drive: dict[int, list[Incident]] = {}
    for inc in incidents:
        if inc.cause == "gc":
            drives = list(inc.drives) + [d for t in inc.targets for d in cluster.target_drives(t)]
            for d in drives:
                gc_by_drive.setdefault(d, []).append(inc)
    lines: dict[str, list[tuple[float, str, str]]] = {}
    for d in range(cluster.n_drives if pool_drives else n_loc):
        host, dev = cluster.drive_name(d)
        encoding = smart_encoding(mix, d)
        is_local = d < n_loc
        models = _LOCAL_MODELS if is_local else _TARGET_MODELS
        model, fw, cap = models[int(rng.integers(len(models)))]
        serial = f"S{int(rng.integers(10**9, 10**10))}"
        every = float(rng.uniform(0.67, 1.33)) * interval
        ts = sample_times(rng, 1, t0, t1, every, jitter=5.0, first=90.0)[0]
        ts = clocks.sampled("smart", ts, t0, ts.size * every)
        if is_local:
            ckpt, bw = local_host[d], float(cluster.local_drive_bw[d])
            other_rate = float(rng.uniform(1e6, 2e7))  # logs, caches, scratch
        else:
            ckpt, bw = target_host[(d - n_loc) // cluster.drives_per_target], tenant_bw
            other_rate = 0.0

        def host_bytes(at: np.ndarray, ckpt: Cumulative = ckpt, rate: float = other_rate,
                 tenants: bool = not is_local) -> np.ndarray:
            """Cumulative host bytes written to this drive since t0."""
            return ckpt(at) + rate * (at - t0) + (other(at) - other0 if tenants else 0.0)

        written = host_bytes(ts)
        base_wa = float(rng.uniform(1.02, 1.09))
        # The draws keep the order of the aligned generator, so an aligned day keeps its bytes.
        wa_k = rng.lognormal(0.0, wa_noise, ts.shape)
        busy_s = written / bw * float(rng.uniform(1.1, 1.4))
        free_level = float(rng.uniform(15.0, 38.0))
        free_noise = rng.normal(0.0, 0.5, ts.shape)
        temp = float(rng.uniform(33.0, 42.0)) + rng.normal(0.0, 0.6, ts.shape)
        gcs = gc_by_drive.get(d, [])
        for inc in gcs:
            if inc.signal.get("wa_only"):
                continue  # only write amplification shows it
            gc_s = overlap(np.full(ts.shape, -np.inf), ts, inc.start, inc.end)
            busy_s = busy_s + inc.signal["busy_share"] * gc_s
            temp = temp + 4.0 * (overlap(ts - every, ts, inc.start, inc.end) > 0)
        t_ocp, ocp_dev = ts, dev
        if clocks.apart:
            t_ocp, ocp_dev = ocp_times(clocks.draws(), ts, every, t0, t1, dev)
            wa_k = clocks.draws().lognormal(0.0, wa_noise, t_ocp.shape)
            free_noise = clocks.draws().normal(0.0, 0.5, t_ocp.shape)
        t_ocp = clocks.sampled("ocp", t_ocp, t0, t_ocp.size * every)
        media, free = _media_and_free(t_ocp, host_bytes, base_wa, wa_k, free_level + free_noise,
                                      gcs)
        # Controller busy time counts wall-clock time with I/O outstanding: it cannot grow faster
        # than the clock, whatever host writes and GC add up to.
        span = np.diff(ts, prepend=t0)
        busy_s = np.cumsum(np.minimum(np.diff(busy_s, prepend=0.0), 0.97 * span))
        dw0 = int(rng.integers(2 * 10**7, 6 * 10**8))
        poh0 = int(rng.integers(2000, 30000))
        media0 = int(dw0 * DATA_UNIT_BYTES * rng.uniform(1.05, 1.25))
        health_dev = f"/dev/{dev}" if clocks.apart else dev
        stamped = clocks.stamp(host, ts)
        iso = iso_seconds(stamped)
        for i, t_i in enumerate(ts):
            dw = dw0 + int(np.ceil(written[i] / DATA_UNIT_BYTES))
            health = {
                "critical_warning": 0, "temperature": int(round(temp[i])),
                "available_spare": 100, "available_spare_threshold": 10,
                "percentage_used": min(100, media0 // cap // 30),
                "data_units_read": dw0 // 3 + int((t_i - t0) * 40), "data_units_written": dw,
                "host_reads": dw0 * 2 + int((t_i - t0) * 300),
                "host_writes": dw0 * 4 + int(written[i] // 131_072),
                "controller_busy_time": 9000 + poh0 // 3 + int(busy_s[i] // 60),
                "power_cycles": 40 + poh0 // 2000, "power_on_hours": poh0 + int((t_i - t0) // 3600),
                "unsafe_shutdowns": 3, "media_errors": 0, "num_err_log_entries": 0,
            }
            if encoding == "nvme-cli+ocp-text":
                health_env = envelope_line(host, health_dev, str(iso[i]), "nvme-smart-log",
                                           render_nvme_smart_log_json(health))
            else:
                health_env = envelope_line(host, health_dev, str(iso[i]), "smartctl",
                                           _smartctl_doc(dev, model, serial, fw,
                                                         float(stamped[i]), health))
            lines.setdefault(host, []).append((float(stamped[i]), dev + "0", health_env))
        if with_ocp:
            ocp_stamped = clocks.stamp(host, t_ocp)
            ocp_iso = iso_seconds(ocp_stamped)
            for i in range(t_ocp.size):
                mw = media0 + int(media[i])
                ocp = {
                    "media_written": mw, "media_read": dw0 * DATA_UNIT_BYTES // 3,
                    "soft_ecc": 0, "system_used": 0, "refresh": 1000 + poh0,
                    "erase_max": int(mw * 1.15 // cap) + 3, "erase_min": int(mw * 0.85 // cap),
                    "free_blocks": int(round(free[i])), "nuse": cap // 4096 // 2,
                    "plp": 40 + poh0 // 2000, "endurance": cap * 3500,
                    "power_changes": 40 + poh0 // 2000,
                }
                ocp_doc = (render_ocp_smart_json(ocp) if encoding == "smartctl+ocp-json"
                           else render_ocp_smart_text(ocp))
                lines[host].append((float(ocp_stamped[i]), dev + "1", envelope_line(
                    host, ocp_dev, str(ocp_iso[i]), "nvme-ocp-smart", ocp_doc)))
        if progress and d % 256 == 255:
            progress(f"smart: {d + 1}/{cluster.n_drives} drives")
    files = {}
    for host, entries in lines.items():
        entries.sort(key=lambda e: (e[0], e[1]))
        path = smart_dir / f"{host.replace('/', '_')}.jsonl"
        path.write_text("".join(e[2] + "\n" for e in entries), encoding="utf-8")
        files[path] = len(entries)
    return files
