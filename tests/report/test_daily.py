"""The nightly settings, and the nightly flow that writes the daily report (the report's own
files: test_facts.py, over the shared sample report)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PROJECT_ROOT
from tests.report.conftest import SAMPLE_NOW

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
    config = tmp_path / "ckptwatch.toml"  # the sample's jobs ended on 2026-11-28: not history
    config.write_text("[alerts]\nstale_after_s = 1e9\n")
    out = nightly_flow(raw, lake, config=config)
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
    # low levels: the small raw dir's jobs alert; no staleness: their checkpoints are of 2026-11-28
    config = tmp_path / "ckptwatch.toml"
    config.write_text(f'[alerts]\nwarning = 0.01\ncritical = 0.02\nstale_after_s = 1e9\n'
                      f'[sinks]\nstdout = false\njsonl = "{tmp_path / "blocked"}"\n')
    with pytest.raises(AlertsUndeliveredError, match=r"alerts not delivered: jsonl: cannot "
                       r"append alerts .* the report is written \(.*report.html\)") as err:
        nightly_flow(raw_dir, tmp_path / "lake", config=config)
    # j1 alerts; j2's checkpoints are a year older (epoch 1764288000 = 2025-11-28), outside the
    # days the nightly run reads (the report day; lookback_days=0)
    assert err.value.result["alerts"] == 1 and err.value.result["ingested"] == 6
    assert err.value.result["alerts_delivery"] == [{
        "sink": "jsonl", "attempted": 1, "delivered": 0, "failed": 1, "reason": "Is a directory",
        "error": err.value.result["alerts_delivery"][0]["error"]}]
    assert not err.value.result["alerts_sent"]
    report = Path(err.value.result["report"])
    assert "Sink failed:</b> jsonl: cannot append alerts" in report.read_text()


def test_steps_given_one_open_connection_give_what_their_own_connections_give(
        sample_lake: Path, findings: Any, written: Any, tmp_path: Path) -> None:
    """The nightly run's stalls, alerts and report read the lake through one connection with
    every view built (``build_views``'); each gives what it gives connecting on its own (only
    the views it needs), and leaves the connection open for the next."""
    from tests.report.conftest import rules_only_env

    from ckptwatch.alerts.evaluate import run_alerts
    from ckptwatch.analysis.findings import find_stalls
    from ckptwatch.lake.query import connect
    from ckptwatch.report.daily import daily_report

    lake = tmp_path / "lake"  # a copy: the report is written into it
    shutil.copytree(sample_lake, lake)
    con = connect(lake)
    try:
        with rules_only_env():
            shared = find_stalls(lake, con=con)
            assert _alike(shared, findings) and len(shared.stalls) == 8
            settings = nightly_settings(Settings(), lake)
            now = SAMPLE_NOW  # one time for both (the alerts carry it), on the sample's day
            run = run_alerts(lake, settings, send=False, cause_provider=shared.top_causes,
                             con=con, now=now)
            alone = run_alerts(lake, settings, send=False,
                               cause_provider=findings.top_causes, now=now)
            assert run.alerts == alone.alerts and len(run.alerts) == 3
            facts, files = daily_report(lake, day=None, findings=shared, settings=settings,
                                        alert_run=run, con=con)
        assert con.execute("select count(*) from checkpoint_latency").fetchall()[0][0] > 0
    finally:
        con.close()
    expected = dict(written[0])
    assert files.json == lake / written[1].json.relative_to(sample_lake)
    assert _alike(_as_of_sample(facts, lake, sample_lake), _as_of_sample(expected, None, None))


#: Keys of report facts that hold the time the report or its alerts were made.
_MADE_AT = frozenset(("generated_at", "since", "startsAt", "endsAt"))


def _as_of_sample(facts: dict[str, Any], lake: Path | None, sample: Path | None) -> Any:
    """``facts`` as JSON values, ``lake`` named as ``sample`` (the commands it prints), with
    no time of making (``_MADE_AT``)."""
    text = json.dumps(facts, default=str)
    if lake is not None and sample is not None:
        text = text.replace(str(lake), str(sample))

    def drop(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k not in _MADE_AT}
        return [drop(v) for v in value] if isinstance(value, list) else value

    return drop(json.loads(text))


def _alike(a: Any, b: Any) -> bool:
    """``a == b``, floats within 1e-9 relative (or both NaN): DuckDB's parallel sums differ in
    the last bits from run to run, one connection or two."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and _alike(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _alike(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(
            _alike(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
    return bool(a == b)
