"""What the telemetry generators share: sample clocks, timestamps, the GC dip, envelopes."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Clocks:
    """When the tools sample and how each host stamps what it collects.

    ``apart``: each tool is its own command on its own cadence (``SimulationConfig.tool_clocks``;
    ``rng`` draws what only that needs, so an aligned day keeps its bytes). ``shift``: seconds
    added to every sample instant of a tool, its values read at the moved instants. ``offset``:
    a host's clock error, s, added to the times it stamps; the values stay those of the true
    instants, as a host whose clock is off still reads its counters when it reads them.
    """

    apart: bool = False
    shift: Mapping[str, float] = field(default_factory=dict)
    offset: Mapping[str, float] = field(default_factory=dict)
    rng: np.random.Generator | None = None

    def sampled(self, tool: str, ts: np.ndarray, t0: float, span: float) -> np.ndarray:
        """``ts`` (rows of sample instants) moved by ``tool``'s shift.

        An instant moved before ``t0`` comes round ``span`` s later instead (the next cycle's
        sample, past the end): the rows keep their count, so every later random draw is the
        unshifted day's, and the rows stay sorted.
        """
        delta = self.shift.get(tool, 0.0)
        if not delta:
            return ts
        moved = ts + delta
        return np.sort(np.where(moved < t0, moved + span, moved), axis=-1)

    def stamp(self, host: str, ts: np.ndarray) -> np.ndarray:
        """The times ``host`` writes for the true instants ``ts``: off by its clock error."""
        off = self.offset.get(host, 0.0)
        return ts + off if off else ts

    def draws(self) -> np.random.Generator:
        """The generator of the apart clocks' own draws."""
        if self.rng is None:
            raise ValueError("Clocks.apart needs its rng")
        return self.rng


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


def envelope_line(host: str, device: str | None, ts: str, source: str | None, output: object,
                  port: str | None = None) -> str:
    """One JSON Lines envelope (docs/formats.md), without its newline.

    Keys in the collector's order: node, device (when given: a whole-node output such as a
    scrape names its devices itself), port (when given), collected_at, source (None: left
    out, the reader recognises the output by its content), output.
    """
    head = {"node": host}
    if device is not None:
        head["device"] = device
    if port is not None:
        head["port"] = port
    body = json.dumps(output, separators=(",", ":"))
    named = "" if source is None else f',"source":"{source}"'
    return json.dumps(head, separators=(",", ":"))[:-1] + (
        f',"collected_at":"{ts}"{named},"output":{body}}}')
