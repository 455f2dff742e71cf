"""The Prefect deployment of the watcher: a bounded run that resumes where the last one stopped."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ckptwatch.collect.recorder import dumps_record, iso_time
from ckptwatch.flows.watch import watch_flow
from ckptwatch.live.watch import state_path


def test_watch_flow_runs_for_its_minutes_and_saves_its_state(tmp_path: Path,
                                                             prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    (raw / "checkpoints").mkdir(parents=True)
    now = time.time()
    (raw / "checkpoints" / "a.jsonl").write_text("".join(
        dumps_record({"job_id": "j", "step": 1, "rank": r, "node": "n1", "tier": "pool",
                      "start_time": iso_time(now), "status": "started"}) + "\n"
        for r in range(3)))
    config = tmp_path / "c.toml"
    config.write_text("[sinks]\nstdout = false\n")
    began = time.monotonic()
    counts = watch_flow(str(raw), str(lake), minutes=0.15, interval_s=0.5, config=str(config))
    assert counts["scans"] >= 2 and counts["sink_failures"] == 0
    assert time.monotonic() - began < 60
    state = json.loads(state_path(lake).read_text())
    assert state["cursors"]["checkpoints/a.jsonl"]["lines"] == 3
    (tracked,) = state["tracker"]["tracked"]
    assert len(tracked["started"]) == 3 and tracked["finished"] == []
