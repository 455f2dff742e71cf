"""What the telemetry generators share: sample clocks, timestamps and the envelope line."""

from __future__ import annotations

import json

import numpy as np

from ckptwatch.simulate.telemetry.sampling import envelope_line, iso_seconds, sample_times


def test_iso_seconds_floors_to_whole_seconds() -> None:
    ts = np.array([1_795_824_000.0, 1_795_824_005.9])
    assert iso_seconds(ts).tolist() == ["2026-11-28T00:00:00Z", "2026-11-28T00:00:05Z"]


def test_sample_times_stay_inside_the_window() -> None:
    ts = sample_times(np.random.default_rng(1), 3, 1000.0, 4600.0, 60.0)
    assert ts.shape[0] == 3
    assert (ts >= 1000.0).all() and (ts <= 4600.0).all()
    assert (ts == np.floor(ts)).all()
    assert (np.diff(ts, axis=1) > 0).all()


def test_envelope_line_keeps_the_collector_key_order() -> None:
    line = envelope_line("node001", "mlx5_0", "2026-11-28T00:00:05Z", "perfquery", "# Port",
                         port="1")
    assert list(json.loads(line)) == ["node", "device", "port", "collected_at", "source",
                                      "output"]
    bare = json.loads(envelope_line("node001", "nvme0", "2026-11-28T00:00:05Z", "smartctl", {}))
    assert bare == {"node": "node001", "device": "nvme0", "collected_at": "2026-11-28T00:00:05Z",
                    "source": "smartctl", "output": {}}
