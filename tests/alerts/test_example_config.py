"""The example config, used as it is, watches the bundled sample's jobs while they are current
and none of them once they are history (the sample's day, 2026-11-28, is long past)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.conftest import PROJECT_ROOT

from ckptwatch.alerts.evaluate import run_alerts
from ckptwatch.ingest.run import ingest
from ckptwatch.settings import load_settings


def test_example_config_evaluates_the_sample_on_its_day_and_not_ten_days_on(
        tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(PROJECT_ROOT / "data" / "sample", lake)
    settings = load_settings(PROJECT_ROOT / "examples" / "ckptwatch.toml", environ={})
    that_day = run_alerts(lake, settings, send=False, sinks=[],
                          now=datetime(2026, 11, 28, 23, tzinfo=UTC))
    assert len(that_day.evaluation.jobs) == 4  # the sample's four jobs, none stale
    later = run_alerts(lake, settings, send=False, sinks=[],
                       now=datetime(2026, 12, 8, tzinfo=UTC))
    assert later.evaluation.jobs == [] and later.alerts == []
    assert len(later.evaluation.skipped) == 4
    assert all(why.startswith("stale: no record since 2026-11-28")
               for why in later.evaluation.skipped.values())
