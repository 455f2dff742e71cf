"""Fixtures of the report tests: the sample lake's (``sample_lake``, tests/conftest.py) stalls,
its daily report and its gc stall, all with rules-only attribution (no trained model, no config
file)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.alerts.evaluate import run_alerts
from ckptwatch.analysis.findings import StallFindings, find_stalls
from ckptwatch.lake.query import connect
from ckptwatch.report.daily import ReportFiles, daily_report, nightly_settings
from ckptwatch.report.postmortem import StallCase, open_stall
from ckptwatch.settings import Settings

SAMPLE = PROJECT_ROOT / "data" / "sample"
#: The end of the sample's day: alerts evaluated as of then (later, its jobs are history).
SAMPLE_NOW = datetime(2026, 11, 28, 23, tzinfo=UTC)


@contextmanager
def rules_only_env() -> Iterator[None]:
    """No trained model and no config file from the environment, inside the block."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
        mp.delenv("CKPTWATCH_CONFIG", raising=False)
        yield


@pytest.fixture(scope="module", autouse=True)
def rules_only() -> Iterator[None]:
    """No trained model and no config file from the environment: deterministic attribution
    (for every test module here: the post-mortem's command line and kernel read it too)."""
    with rules_only_env():
        yield


@pytest.fixture(scope="session")
def findings(sample_lake: Path) -> StallFindings:
    """The sample's stalls and causes."""
    with rules_only_env():
        return find_stalls(sample_lake)


@pytest.fixture(scope="session")
def written(sample_lake: Path, findings: StallFindings) -> tuple[dict[str, Any], ReportFiles]:
    """The sample's report (alerts evaluated as a dry run), written into the lake."""
    with rules_only_env():
        settings = nightly_settings(Settings(), sample_lake)
        run = run_alerts(sample_lake, settings, send=False, cause_provider=findings.top_causes,
                         now=SAMPLE_NOW)
        return daily_report(sample_lake, day=None, findings=findings, settings=settings,
                            alert_run=run)


@pytest.fixture(scope="session")
def lake_con(sample_lake: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection with the views built, shared by the post-mortem tests' stalls."""
    con = connect(sample_lake)
    yield con
    con.close()


@pytest.fixture(scope="session")
def gc_case(sample_lake: Path, lake_con: duckdb.DuckDBPyConnection) -> StallCase:
    """The sample's gc stall of job-98372: 4 of 16 ranks slow, all writing to pool0-tgt03."""
    with rules_only_env():
        return open_stall(sample_lake, "job-98372", 33117, con=lake_con)
