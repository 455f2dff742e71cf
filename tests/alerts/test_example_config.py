"""The example config, used as it is, still watches the bundled sample's jobs."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import PROJECT_ROOT

from ckptwatch.alerts.evaluate import run_alerts
from ckptwatch.ingest.run import ingest
from ckptwatch.settings import load_settings


def test_example_config_evaluates_every_job_of_the_sample(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(PROJECT_ROOT / "data" / "sample", lake)
    settings = load_settings(PROJECT_ROOT / "examples" / "ckptwatch.toml", environ={})
    run = run_alerts(lake, settings, send=False, sinks=[])
    assert len(run.evaluation.jobs) == 4  # the sample's four jobs, none dropped as stale
