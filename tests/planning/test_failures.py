"""Node MTBF from interruption logs: the Llama 3 and OPT-175B figures, both CSV forms, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.failures import estimate_mtbf, poisson_rate_ci, read_failures

FAILURE_STATS = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "failure_stats"
LLAMA3 = FAILURE_STATS / "llama3_405b_54day_interruptions.csv"
OPT = FAILURE_STATS / "opt175b_restarts.csv"


def test_llama3_mean_time_between_unexpected_interruptions_is_3_09_h() -> None:
    est = read_failures(LLAMA3, gpus_per_node=8, period_days=54, gpus=16_384)
    assert est.interruptions == 419
    assert est.fleet_mtbf_s / 3600 == pytest.approx(54 * 24 / 419)
    assert est.fleet_mtbf_s / 3600 == pytest.approx(3.09, abs=0.005)
    assert est.nodes == 2048
    assert est.node_mtbf_s / 3600 == pytest.approx(54 * 24 * 2048 / 419)
    lo, hi = est.node_mtbf_ci_s
    assert lo < est.node_mtbf_s < hi
    # 419 events: the 95 % interval is about +-10 % (1.96 / sqrt(419))
    assert hi / est.node_mtbf_s == pytest.approx(1.10, abs=0.02)
    assert est.node_mtbf_s / lo == pytest.approx(1.10, abs=0.02)


def test_opt175b_counts_with_period_and_fleet_columns() -> None:
    est = read_failures(OPT, gpus_per_node=8)
    assert (est.interruptions, est.gpus, est.nodes) == (90, 1024, 128)
    assert est.fleet_mtbf_s / 3600 == pytest.approx(56 * 24 / 90)


def test_timestamps_without_a_period_span_first_to_last(tmp_path: Path) -> None:
    log = tmp_path / "interruptions.csv"
    log.write_text("timestamp,cause\n2024-01-01T00:00:00Z,gpu\n2024-01-01T10:00:00Z,nic\n"
                   "2024-01-02T00:00:00Z,gpu\n2024-01-01T20:00:00Z,ssd\n")
    est = read_failures(log, gpus_per_node=8, gpus=64)
    # 4 interruptions in 24 h: 3 intervals
    assert est.interruptions == 3
    assert est.period_s == 86400.0
    assert est.node_mtbf_s == pytest.approx(86400.0 * 8 / 3)


def test_poisson_interval_hand_values() -> None:
    # 1 event in unit exposure: the exact 95 % interval is [0.0253, 5.572]
    lo, hi = poisson_rate_ci(1, 1.0)
    assert lo == pytest.approx(0.02532, rel=1e-3)
    assert hi == pytest.approx(5.5716, rel=1e-3)
    with pytest.raises(PlanInputError, match="at least one"):
        estimate_mtbf(0, 3600.0, 8, 8, source="f.csv")


@pytest.mark.parametrize(("text", "message"), [
    ("cause,interruption_count\ngpu,3\n", r"f\.csv: the fleet size is missing"),
    ("cause,interruption_count,gpus\ngpu,3,64\n", r"f\.csv: the observation period is missing"),
    ("cause,interruption_count,gpus,period_days\ngpu,x,64,1\n",
     r"f\.csv:2: interruption_count must be a whole number \(got 'x'\)"),
    ("cause,when\ngpu,now\n", r"f\.csv: expected a column interruption_count .* found: cause"),
    ("timestamp,gpus\nyesterday,8\n", r"f\.csv:2: timestamp must be ISO 8601"),
])
def test_bad_failure_logs_name_the_file_and_what_is_wrong(tmp_path: Path, text: str,
                                                          message: str) -> None:
    path = tmp_path / "f.csv"
    path.write_text(text)
    with pytest.raises(PlanInputError, match=message):
        read_failures(path, gpus_per_node=8, gpus=None)
