"""The nightly settings, and the nightly flow that writes the daily report (the report's own
files: test_facts.py, over the shared sample report)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.report.daily import nightly_settings
from ckptwatch.settings import Settings, settings_from_dict

SAMPLE = PROJECT_ROOT / "data" / "sample"


def test_nightly_settings_send_alerts_to_the_lake_unless_configured(tmp_path: Path) -> None:
    assert nightly_settings(Settings(), tmp_path).sinks.jsonl == (
        tmp_path / "reports" / "alerts.jsonl")
    own = settings_from_dict({"sinks": {"jsonl": "mine.jsonl"}}, base_dir=tmp_path)
    assert nightly_settings(own, tmp_path / "lake").sinks.jsonl == tmp_path / "mine.jsonl"


# -- the nightly flow under Prefect's test harness --------------------------------------------


def _alertmanager_alert(a: dict[str, Any]) -> None:
    assert set(a["labels"]) == {"alertname", "job_id", "tier", "severity"}
    assert a["labels"]["alertname"] == "CheckpointTailNearTimeout"
    assert a["labels"]["severity"] in ("warning", "critical")
    assert {"summary", "p50_s", "p99_s", "timeout_s", "headroom_s"} <= set(a["annotations"])
    assert a["status"] == "firing" and a["startsAt"].endswith("Z") and a["endsAt"].endswith("Z")


@pytest.mark.prefect
def test_nightly_flow_on_the_sample_writes_report_and_alert_file(
        prefect_harness: None, rules_only: None, tmp_path: Path) -> None:
    from ckptwatch.flows.nightly import nightly_flow

    raw = tmp_path / "raw"
    shutil.copytree(SAMPLE, raw)
    lake = tmp_path / "lake"
    out = nightly_flow(raw, lake)
    assert (out["ingested"], out["failed"], out["stalls"]) == (27, 0, 8)
    assert out["alerts_sent"] and out["alerts"] == 3
    report = Path(out["report"])
    assert report == lake / "reports" / "2026-11-28" / "report.html"
    facts = json.loads(Path(out["report_json"]).read_text())
    assert facts["summary"]["stalls"] == 8 and facts["alerts"]["sent"]
    assert facts["data"]["ingest"]["ingested"] == 27
    assert "job-98372" in report.read_text()
    assert Path(out["latest"]).read_bytes() == report.read_bytes()
    lines = (lake / "reports" / "alerts.jsonl").read_text().splitlines()
    alerts = [json.loads(line) for line in lines]
    assert len(alerts) == 3 and {a["labels"]["job_id"] for a in alerts} == {
        "job-45972", "job-82866", "job-98372"}
    for a in alerts:
        _alertmanager_alert(a)


@pytest.mark.prefect
def test_nightly_flow_writes_the_report_then_fails_on_a_sink(
        prefect_harness: None, rules_only: None, raw_dir: Path, tmp_path: Path) -> None:
    from ckptwatch.errors import AlertsUndeliveredError
    from ckptwatch.flows.nightly import nightly_flow

    (tmp_path / "blocked").mkdir()  # a directory where the JSON Lines file should be
    config = tmp_path / "ckptwatch.toml"  # low levels: the small raw dir's jobs alert
    config.write_text(f'[alerts]\nwarning = 0.01\ncritical = 0.02\n[sinks]\nstdout = false\n'
                      f'jsonl = "{tmp_path / "blocked"}"\n')
    with pytest.raises(AlertsUndeliveredError, match=r"alerts not delivered: jsonl: cannot "
                       r"append alerts .* the report is written \(.*report.html\)") as err:
        nightly_flow(raw_dir, tmp_path / "lake", config=config)
    # j1 alerts; j2's checkpoints are a year older (epoch 1764288000 = 2025-11-28), outside the
    # days the nightly run reads (the report day; lookback_days=0)
    assert err.value.result["alerts"] == 1 and err.value.result["ingested"] == 6
    report = Path(err.value.result["report"])
    assert "Sink failed:</b> jsonl: cannot append alerts" in report.read_text()
