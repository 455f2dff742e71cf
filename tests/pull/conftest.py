"""Fixtures of the pull tests: a real Prometheus (Debian's) over TSDB blocks that promtool
backfilled from the real exporter scrapes, given timestamps over three hours."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from tests.conftest_prometheus import Prometheus, backfill, start_prometheus_over
from tests.pull.exposition import fixture_history, openmetrics

from ckptwatch.cli.main import main

CliRun = Callable[[list[str]], tuple[int, str, str]]

#: The history: 36 scrapes 5 minutes apart from T0, two hosts, one counter reset.
T0 = datetime(2026, 11, 28, tzinfo=UTC)
EVERY_S = 300
N_SCRAPES = 36
HOSTS = ("gpu-node-01", "gpu-node-02")
RESET_AT = 20
RESET_METRIC = "node_infiniband_legacy_unicast_packets_received_total"
T_END = T0 + timedelta(seconds=EVERY_S * (N_SCRAPES - 1))


@dataclass(frozen=True)
class History:
    """The running server and what it holds."""

    prometheus: Prometheus
    start: datetime
    end: datetime


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """One Prometheus per module over the backfilled fixture history."""
    root = tmp_path_factory.mktemp("prometheus-history")
    samples = fixture_history(HOSTS, T0.timestamp(), N_SCRAPES, EVERY_S, RESET_AT,
                              RESET_METRIC)
    backfill(openmetrics(samples), root / "tsdb")
    with start_prometheus_over(root, root / "tsdb") as server:
        yield History(server, T0, T_END)


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """Run ``ckptwatch ARGS`` in process: (exit code, stdout, stderr)."""
    def run(args: list[str]) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
