"""deploy/alertmanager/ckptwatch-inhibit.yml in a real Alertmanager (Debian's
prometheus-alertmanager, on a free loopback port, that file as its whole config): ckptwatch's
own in-flight alert and the Prometheus backup of the same job and tier page once; a tail alert
inhibits nothing. amtool cannot test inhibition; it checks the config and the routing of both
alert names."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest
from tests.conftest_prometheus import require_binary, start_alertmanager
from tests.deploy.promql_names import DEPLOY, rules

from ckptwatch.alerts.evaluate import evaluate
from ckptwatch.alerts.inflight import InFlight, OpenRank
from ckptwatch.alerts.names import INFLIGHT_ALERT, TAIL_ALERT
from ckptwatch.settings import AlertSettings

INHIBIT = DEPLOY / "alertmanager" / "ckptwatch-inhibit.yml"
NOW = datetime.now(UTC).replace(microsecond=0)


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("amtool"), *args], capture_output=True, text=True,
                          timeout=60)


def test_amtool_checks_the_config_and_routes_both_alert_names() -> None:
    done = amtool("check-config", str(INHIBIT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 inhibit rules" in done.stdout
    for name in (INFLIGHT_ALERT, TAIL_ALERT):
        done = amtool("config", "routes", "test", f"--config.file={INHIBIT}",
                      "--verify.receivers=oncall", f"alertname={name}", "job_id=j", "tier=pool")
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_backup_rule_has_the_in_flight_alerts_name_and_the_origin_label() -> None:
    backups = [r for r in rules() if r.get("alert") == INFLIGHT_ALERT]
    assert len(backups) == 2
    assert all(r["labels"]["origin"] == "prometheus" for r in backups)  # type: ignore[index]
    assert not [r for r in rules() if r.get("alert") == TAIL_ALERT]


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Alertmanager with the inhibit example as its config; yields its base URL."""
    with start_alertmanager(tmp_path_factory.mktemp("am-inhibit"), INHIBIT) as url:
        yield url


def _post(url: str, alerts: list[dict[str, Any]]) -> None:
    body = json.dumps([{k: a[k] for k in ("labels", "annotations", "startsAt", "endsAt")}
                       for a in alerts]).encode()
    req = urllib.request.Request(url + "/api/v2/alerts", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).close()


def _state(url: str) -> dict[tuple[str, str, str], str]:
    """(alertname, job_id, origin) -> Alertmanager's state of that alert."""
    with urllib.request.urlopen(url + "/api/v2/alerts", timeout=5) as resp:
        got = json.loads(resp.read())
    return {(a["labels"]["alertname"], a["labels"]["job_id"], a["labels"].get("origin", "")):
            a["status"]["state"] for a in got}


def _ckptwatch_alerts() -> list[dict[str, Any]]:
    """What the watcher sends: job "hang" has an open checkpoint past 0.9 of its timeout (an
    in-flight alert), job "slow" a tail at 0.95 of it (a tail alert)."""
    frame = pl.DataFrame({"job_id": ["hang"] * 3 + ["slow"] * 3, "tier": ["pool"] * 6,
                          "step": [1, 2, 3] * 2,
                          "end_ts": [NOW - timedelta(minutes=30 - 10 * i) for i in range(3)] * 2,
                          "barrier_s": [5.0] * 3 + [5.0, 57.0, 5.0]})
    jobs = pl.DataFrame({"job_id": ["hang", "slow"], "checkpoint_timeout_s": [60.0, 60.0]})
    f = InFlight(job_id="hang", tier="pool", step=4, started_at=NOW - timedelta(seconds=56),
                 age_s=56.0, timeout_s=60.0, warning_s=42.0, critical_s=54.0, n_started=2,
                 n_finished=1, n_expected=2, open_ranks=(OpenRank(1, "node-b"),))
    due = evaluate(frame, jobs, AlertSettings(), now=NOW, inflight={f.key: f}).due
    assert sorted((a["labels"]["alertname"], a["labels"]["job_id"]) for a in due) == [
        (INFLIGHT_ALERT, "hang"), (TAIL_ALERT, "slow")]
    return due


def _backup(job_id: str) -> dict[str, Any]:
    """The Prometheus backup rule's alert, labels as Prometheus sends them."""
    return {"labels": {"alertname": INFLIGHT_ALERT, "job_id": job_id, "tier": "pool",
                       "severity": "critical", "origin": "prometheus", "job": "ckptwatch",
                       "instance": "w1:9464"},
            "annotations": {"summary": "backup"}, "startsAt": NOW.isoformat(),
            "endsAt": (NOW + timedelta(hours=1)).isoformat()}


def test_one_page_for_the_in_flight_pair_and_a_tail_alert_mutes_nothing(
        alertmanager: str) -> None:
    _post(alertmanager, [*_ckptwatch_alerts(), _backup("hang"), _backup("slow")])
    want = {(INFLIGHT_ALERT, "hang", ""): "active",
            (INFLIGHT_ALERT, "hang", "prometheus"): "suppressed",  # one page: ckptwatch's
            (TAIL_ALERT, "slow", ""): "active",
            (INFLIGHT_ALERT, "slow", "prometheus"): "active"}  # the tail does not mute it
    deadline = time.monotonic() + 15
    while (got := _state(alertmanager)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    assert got == want
