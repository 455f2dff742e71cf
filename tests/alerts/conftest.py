"""Fixtures of the alert tests: a small lake with one job near its timeout and a healthy one."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.alerts.alert_cases import write_raw

from ckptwatch.cli.main import main


@pytest.fixture
def alert_lake(tmp_path: Path) -> Path:
    """A lake with a job at 92 s of a 120 s timeout (warning) and a healthy one."""
    raw = write_raw(tmp_path / "raw", {"hot": [92.0] * 10, "cool": [30.0] * 10})
    assert main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--quiet"]) == 0
    return tmp_path / "lake"
