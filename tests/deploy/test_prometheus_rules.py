"""deploy/prometheus and deploy/alertmanager: promtool checks and unit-tests the rules, the
scrape example is a valid config, and the rules agree with ckptwatch's metrics and defaults."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.conftest_prometheus import require_binary
from tests.deploy.promql_names import (
    DEPLOY,
    NIGHTLY_RULES_FILE,
    RULES_FILE,
    RULES_FILES,
    exported_names,
    metric_names,
    recorded_names,
    rules,
)

from ckptwatch.alerts.names import INFLIGHT_ALERT
from ckptwatch.settings import JobAlertSettings

PROM = DEPLOY / "prometheus"
RULES_TEST = PROM / "ckptwatch-rules.test.yml"
NIGHTLY_RULES_TEST = PROM / "ckptwatch-nightly-rules.test.yml"
SCRAPE = PROM / "scrape-ckptwatch.yml"
INHIBIT = DEPLOY / "alertmanager" / "ckptwatch-inhibit.yml"


def promtool(*args: str | Path, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("path", RULES_FILES, ids=lambda p: p.name)
def test_promtool_checks_the_rules(path: Path) -> None:
    done = promtool("check", "rules", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules(path))} rules found" in done.stdout


@pytest.mark.parametrize("path", [RULES_TEST, NIGHTLY_RULES_TEST], ids=lambda p: p.name)
def test_promtool_unit_tests_of_the_rules_pass(path: Path) -> None:
    done = promtool("test", "rules", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_unit_tests_fail_when_a_level_moves(tmp_path: Path) -> None:
    """The unit tests pin the levels: warning at 0.7 moved to 0.75 fails them."""
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    text = RULES_FILE.read_text()
    assert text.count(">= 0.7 * max") == 1
    (tmp_path / RULES_FILE.name).write_text(text.replace(">= 0.7 * max", ">= 0.75 * max"))
    done = promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert done.returncode == 1
    assert "alertname: CheckpointInFlightNearTimeout, time: 42s" in done.stdout + done.stderr


def test_the_levels_are_ckptwatch_defaults() -> None:
    defaults = JobAlertSettings()
    inflight = [r for r in rules() if r.get("alert") == "CheckpointInFlightNearTimeout"]
    levels = {}
    for r in inflight:
        expr = " ".join(str(r["expr"]).split())
        severity = r["labels"]["severity"]  # type: ignore[index]
        levels[severity] = float(re.search(r">= ([\d.]+) \*", expr).group(1))  # type: ignore[union-attr]
        pct = round(levels[severity] * 100)
        assert f"past {pct}% of its timeout" in r["annotations"]["summary"]  # type: ignore[index]
    assert levels == {"warning": defaults.warning, "critical": defaults.critical}
    warning = next(r for r in inflight if r["labels"]["severity"] == "warning")  # type: ignore[index]
    # the warning stops where critical starts: one alert per job at a time
    assert f"< {defaults.critical} * max" in " ".join(str(warning["expr"]).split())


def test_every_rule_reads_only_series_that_exist() -> None:
    known = exported_names() | recorded_names() | {"up"}
    read = set()
    for r in rules(RULES_FILE) + rules(NIGHTLY_RULES_FILE):
        names = metric_names(str(r["expr"]))
        assert names, r
        assert names <= known, (r.get("alert") or r.get("record"), names - known)
        read |= names
    # the rules watch the in-flight age, the timeout and the watcher's dead-man signal, and
    # the nightly's last success and exit status
    assert {"ckptwatch_checkpoint_inflight_seconds", "ckptwatch_checkpoint_timeout_seconds",
            "ckptwatch_watch_last_scan_timestamp_seconds",
            "ckptwatch_checkpoint_duration_seconds_bucket",
            "ckptwatch_nightly_last_success_timestamp_seconds",
            "ckptwatch_nightly_last_run_exit_code"} <= read


def test_the_nightly_is_stale_after_26_hours_without_a_success() -> None:
    """The issue's rule: no success for 26 h, present or absent; the unit tests pin when."""
    stale = [r for r in rules(NIGHTLY_RULES_FILE) if r.get("alert") == "CkptwatchNightlyStale"]
    exprs = {r["labels"]["reason"]: " ".join(str(r["expr"]).split())  # type: ignore[index]
             for r in stale}
    assert exprs == {
        "no_success": "time() - ckptwatch_nightly_last_success_timestamp_seconds > 26 * 3600",
        "never_succeeded": "absent(ckptwatch_nightly_last_success_timestamp_seconds)"}
    assert [r.get("for") for r in stale] == [None, "26h"]


def test_the_nightly_unit_tests_fail_when_the_26_hours_move(tmp_path: Path) -> None:
    shutil.copy(NIGHTLY_RULES_TEST, tmp_path / NIGHTLY_RULES_TEST.name)
    text = NIGHTLY_RULES_FILE.read_text()
    assert text.count("> 26 * 3600") == 1
    (tmp_path / NIGHTLY_RULES_FILE.name).write_text(text.replace("> 26 * 3600", "> 30 * 3600"))
    done = promtool("test", "rules", NIGHTLY_RULES_TEST.name, cwd=tmp_path)
    assert done.returncode == 1
    assert "alertname: CkptwatchNightlyStale, time: 1d3h" in done.stdout + done.stderr


def test_recording_rules_follow_the_naming_convention() -> None:
    for name in recorded_names():
        level, metric, ops = name.split(":")
        assert level == "job_id_tier" and metric.startswith("ckptwatch_") and ops, name


def test_the_scrape_example_is_a_valid_config_whose_job_the_rules_name() -> None:
    done = promtool("check", "config", SCRAPE)
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load(SCRAPE.read_text())
    (job,) = config["scrape_configs"]
    assert job["static_configs"][0]["targets"][0].endswith(":9464")
    up_rules = [r for r in rules() if "up{" in str(r["expr"])]
    assert up_rules and all(f'up{{job="{job["job_name"]}"}}' in str(r["expr"])
                            for r in up_rules)


def test_the_inhibit_example_pairs_ckptwatch_in_flight_alert_with_the_backup() -> None:
    config = yaml.safe_load(INHIBIT.read_text())
    (rule,) = config["inhibit_rules"]
    assert rule["source_matchers"] == [f'alertname="{INFLIGHT_ALERT}"', 'origin!="prometheus"']
    assert rule["target_matchers"] == [f'alertname="{INFLIGHT_ALERT}"', 'origin="prometheus"']
    assert rule["equal"] == ["job_id", "tier"]
    # the behaviour, in a real Alertmanager: tests/deploy/test_alertmanager_inhibit.py
