"""What the telemetry generators share: sample clocks, timestamps, the GC dip, envelopes."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from ckptwatch.simulate.cluster import Incident

Progress = Callable[[str], None]


def iso_seconds(ts: np.ndarray) -> np.ndarray:
    """ISO-8601 UTC strings (``2026-11-28T00:00:05Z``) for epoch seconds."""
    secs = np.floor(ts).astype("int64").astype("datetime64[s]")
    return np.char.add(np.datetime_as_string(secs, unit="s"), "Z")


def sample_times(rng: np.random.Generator, n: int, t0: float, t1: float, interval: float,
                 jitter: float = 1.0, first: float | None = None) -> np.ndarray:
    """``n`` rows of whole-second sample times in [t0, t1] every ``interval`` s.

    Each row starts at its own phase, within ``first`` seconds of t0 (default: one interval).
    """
    first = interval if first is None else min(first, interval)
    count = max(1, int((t1 - t0 - jitter - first) // interval) + 1)
    phase = rng.uniform(jitter, first, (n, 1))
    noise = rng.uniform(-jitter, jitter, (n, count))
    return np.floor(t0 + phase + np.arange(count) * interval + noise)


def gc_dip(ts: np.ndarray, baseline: np.ndarray, inc: Incident) -> np.ndarray:
    """Free-blocks percentage around a GC episode: falls before it, low during, recovers after.

    The drop is measured from the baseline's median, so the low plateau keeps the baseline's
    sample noise and drift (each drive or target sits a little apart around the incident's
    ``free_blocks_pct``), never below 0.
    """
    low = inc.signal["free_blocks_pct"]
    lead, rec = inc.signal["lead_s"], inc.signal["recovery_s"]
    falling = np.clip((ts - (inc.start - lead)) / lead, 0.0, 1.0)
    rising = np.clip((ts - inc.end) / rec, 0.0, 1.0)
    frac = np.where(ts <= inc.end, falling, 1.0 - rising)
    level = float(np.median(baseline))
    return np.maximum(baseline - (level - low) * frac, 0.0)


def envelope_line(host: str, device: str | None, ts: str, source: str, output: object,
                  port: str | None = None) -> str:
    """One JSON Lines envelope (docs/formats.md), without its newline.

    Keys in the collector's order: node, device (when given: a whole-node output such as a
    scrape names its devices itself), port (when given), collected_at, source, output.
    """
    head = {"node": host}
    if device is not None:
        head["device"] = device
    if port is not None:
        head["port"] = port
    body = json.dumps(output, separators=(",", ":"))
    return json.dumps(head, separators=(",", ":"))[:-1] + (
        f',"collected_at":"{ts}","source":"{source}","output":{body}}}')
