"""The watcher at start (issue 41): a checkpoint already past its timeout when the watcher
first sees it is reported once, as timed out, naming its open ranks; one older than the job's
staleness horizon is history (no alert, no live state); the metrics file agrees."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.alerts.names import INFLIGHT_ALERT
from ckptwatch.cli.main import main
from ckptwatch.collect.recorder import dumps_record, iso_time

TIMEOUT_S = 600.0
NODES = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}


def _raw(root: Path, job: str, opened_ago_s: float) -> Path:
    """A raw directory: three healthy checkpoints, then step 40 opened ``opened_ago_s`` ago
    whose ranks 2 and 3 (node-b) never finished."""
    (root / "checkpoints").mkdir(parents=True)
    (root / "jobs").mkdir()
    (root / "jobs" / "jobs.csv").write_text(
        f"job_id,n_ranks,checkpoint_timeout_s,checkpoint_interval_s\n{job},4,{TIMEOUT_S},1800\n")
    (root / "topology.csv").write_text("node,leaf_switch\nnode-a,leaf01\nnode-b,leaf02\n")
    opened = time.time() - opened_ago_s
    lines = []
    for i, step in enumerate((10, 20, 30)):
        start = opened - (3 - i) * 1800
        lines += [dumps_record({"job_id": job, "step": step, "rank": r, "node": n, "tier": "pool",
                                "start_time": iso_time(start),
                                "end_time": iso_time(start + 5 + r), "bytes": 1})
                  for r, n in NODES.items()]
    for r, n in NODES.items():
        rec: dict[str, Any] = {"job_id": job, "step": 40, "rank": r, "node": n, "tier": "pool",
                               "target": f"pool0-tgt{r:02d}", "start_time": iso_time(opened)}
        lines.append(dumps_record({**rec, "status": "started"}))
        if r < 2:
            lines.append(dumps_record({**rec, "end_time": iso_time(opened + 6), "bytes": 1}))
    (root / "checkpoints" / "ckpt.jsonl").write_text("".join(f"{ln}\n" for ln in lines))
    return root


def _watch_once(tmp_path: Path, raw: Path, name: str) -> tuple[list[dict[str, Any]], str]:
    """``watch --once``: (the alerts the JSON Lines sink received, the metrics file)."""
    config = tmp_path / f"{name}.toml"
    config.write_text(f'[sinks]\nstdout = false\njsonl = "{name}-alerts.jsonl"\n')
    metrics = tmp_path / f"{name}.prom"
    assert main(["watch", str(raw), "--lake", str(tmp_path / f"{name}-lake"), "--config",
                 str(config), "--once", "--no-evidence", "--quiet",
                 "--metrics-file", str(metrics)]) == 0
    sent = tmp_path / f"{name}-alerts.jsonl"
    alerts = [json.loads(x) for x in sent.read_text().splitlines()] if sent.exists() else []
    return alerts, metrics.read_text()


def _samples(text: str, name: str, job: str) -> list[float]:
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name + "{") and f'job_id="{job}"' in line]


def test_a_checkpoint_past_its_timeout_at_start_is_reported_once_as_timed_out(
        tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw", "stuck", 759.0)  # the hand-made case
    alerts, metrics = _watch_once(tmp_path, raw, "a")
    (alert,) = alerts  # one alert: no tail alert beside it
    ann = alert["annotations"]
    assert alert["status"] == "firing"
    assert alert["labels"] == {"alertname": INFLIGHT_ALERT, "job_id": "stuck", "tier": "pool",
                               "severity": "critical"}
    assert ann["summary"].startswith("Checkpoint step 40 of job stuck (pool) timed out: open ")
    assert "past its 600.0 s timeout by 1" in ann["summary"]
    assert "2 of 4 ranks still open (ranks 2, 3 on node-b (leaf02), target" in ann["summary"]
    assert (ann["timed_out"], ann["ranks_open"], ann["step"]) == ("true", "2", "40")
    assert 755 <= float(ann["inflight_s"]) <= 800
    assert "Last checkpoint ended " in ann["summary"] and float(ann["data_age_s"]) >= 750
    # the tail of the three completed checkpoints (7-8 s) is no alert, and it is not mixed
    # with the open checkpoint's age
    assert ann["tail"].startswith("8.0 s (max of the last 3 completed checkpoints)")
    (inflight,) = _samples(metrics, "ckptwatch_checkpoint_inflight_seconds", "stuck")
    assert 755 <= inflight <= 800
    assert _samples(metrics, "ckptwatch_checkpoint_unfinished_ranks", "stuck") == [2.0]
    assert _samples(metrics, "ckptwatch_checkpoint_timeout_seconds", "stuck") == [TIMEOUT_S]
    # the next scan: still timed out, nothing sent again
    again, metrics = _watch_once(tmp_path, raw, "a")
    assert again == alerts
    assert _samples(metrics, "ckptwatch_checkpoint_unfinished_ranks", "stuck") == [2.0]


def test_a_nine_day_old_checkpoint_is_history(tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw", "old", 9 * 86400.0)
    alerts, metrics = _watch_once(tmp_path, raw, "b")
    assert alerts == []
    assert _samples(metrics, "ckptwatch_checkpoint_inflight_seconds", "old") == []
    assert _samples(metrics, "ckptwatch_checkpoint_unfinished_ranks", "old") == []
    assert 'job_id="old"' not in metrics
    state = json.loads((tmp_path / "b-lake" / "_state" / "watch.json").read_text())
    assert state["tracker"]["tracked"] == [] and state["live"] == []


def test_a_round_no_sink_took_is_never_logged_as_sent_and_fails_the_scan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _raw(tmp_path / "raw", "stuck", 759.0)
    (tmp_path / "blocked").mkdir()  # a directory where the JSON Lines file should be
    config = tmp_path / "c.toml"
    config.write_text(f'[sinks]\nstdout = false\njsonl = "{tmp_path / "blocked"}"\n')
    assert main(["watch", str(raw), "--lake", str(tmp_path / "lake"), "--config", str(config),
                 "--once", "--no-evidence"]) == 1
    err = capsys.readouterr().err
    assert "alerts: 1 alert(s) due: 0 of 1 delivered to jsonl" in err
    assert "sent" not in err


def test_alerts_that_could_not_be_evaluated_fail_the_scan(tmp_path: Path) -> None:
    from ckptwatch.alerts.state import state_lock

    raw = _raw(tmp_path / "raw", "stuck", 759.0)
    config = tmp_path / "c.toml"
    config.write_text(f'[sinks]\nstdout = false\njsonl = "{tmp_path / "a.jsonl"}"\n')
    lake = tmp_path / "lake"
    assert main(["watch", str(raw), "--lake", str(lake), "--config", str(config), "--once",
                 "--no-evidence", "--quiet"]) == 0
    with state_lock(lake, 1.0):  # another evaluation holds the alert state past the interval
        assert main(["watch", str(raw), "--lake", str(lake), "--config", str(config),
                     "--once", "--no-evidence", "--quiet", "--interval", "0.5"]) == 1
