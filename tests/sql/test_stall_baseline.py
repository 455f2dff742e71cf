"""The stalls mart's baseline is the job's healthy level: dense stalls do not hide each other.

On a held-out day where a third of a pool job's checkpoints stalled within two hours, the two
stalls right after a run of stalls were not detected: the median of the previous 10 checkpoints
had become a stall level. The baseline is now the median of the healthy checkpoints among the
previous 10 (healthy: under stall_factor x the lower quartile of the previous 10).

Literal rows in (one rank per checkpoint: its duration is the barrier), exact values out."""

from __future__ import annotations

from pathlib import Path

from tests.sql.test_marts import query, write
from tests.sql_seed import seed

INTERVAL = 300.0


def _job(lake: Path, barriers: list[float], job: str = "j1") -> dict[int, dict[str, object]]:
    seed(lake, "checkpoint_writes", [write(job, step, 0, b, start=INTERVAL * step)
                                     for step, b in enumerate(barriers)])
    rows = query(lake, "select step, baseline_s, is_stall from stalls where job_id = $job "
                       "order by step", {"job": job})
    return {r["step"]: r for r in rows}


def test_a_run_of_stalls_does_not_become_the_baseline(lake: Path) -> None:
    # 10 healthy checkpoints of 10-11 s, then 9 stalls of 60 s in a row (with two healthy ones
    # among them), then 2 more stalls: every one is a stall against the healthy 10 s level.
    healthy = [10.0, 10.5, 11.0, 10.0, 10.2, 10.8, 10.1, 10.4, 10.6, 10.3]
    dense = [60.0, 60.0, 61.0, 10.2, 60.0, 62.0, 60.0, 10.4, 60.0, 60.0, 63.0]
    got = _job(lake, healthy + dense)
    stalls = [s for s, r in got.items() if r["is_stall"]]
    assert stalls == [10 + i for i, b in enumerate(dense) if b > 50]
    # The last stalls of the run are judged against the healthy level, not the run's.
    last = got[len(healthy) + len(dense) - 1]
    assert 10.0 <= float(last["baseline_s"]) <= 10.6  # type: ignore[arg-type]


def test_the_old_rolling_median_would_have_missed_them(lake: Path) -> None:
    # What the previous 10 checkpoints' plain median was for the last stall of the run above: a
    # stall level, under which a 63 s barrier is no stall (3 x 60 s). The new baseline is not.
    healthy = [10.0, 10.5, 11.0, 10.0, 10.2, 10.8, 10.1, 10.4, 10.6, 10.3]
    dense = [60.0, 60.0, 61.0, 10.2, 60.0, 62.0, 60.0, 10.4, 60.0, 60.0, 63.0]
    barriers = healthy + dense
    previous = sorted(barriers[-11:-1])
    assert (previous[4] + previous[5]) / 2 == 60.0
    got = _job(lake, barriers)
    assert got[len(barriers) - 1]["is_stall"]


def test_a_small_change_of_level_becomes_the_baseline_at_once(lake: Path) -> None:
    # A job whose checkpoints grow from 10 s to 15 s (a bigger model): under stall_factor (2) x
    # the old level, so healthy, and the baseline follows; no stall is reported.
    got = _job(lake, [10.0] * 12 + [15.0] * 12)
    assert not [s for s, r in got.items() if r["is_stall"]]
    assert got[23]["baseline_s"] == 15.0


def test_a_lasting_large_change_of_level_is_the_baseline_once_it_is_most_of_the_last_10(
        lake: Path) -> None:
    # From 10 s to 40 s for good: each is a stall until 40 s is the lower quartile of the last
    # 10 checkpoints (8 of them) and 3 of the last 10 are healthy; then stalls stop.
    got = _job(lake, [10.0] * 20 + [40.0] * 20)
    stalls = [s for s, r in got.items() if r["is_stall"]]
    assert stalls == list(range(20, 31))  # 11 (the plain median of the last 10 took 6)
    assert got[39]["baseline_s"] == 40.0


def test_a_lone_stall_is_judged_as_before(lake: Path) -> None:
    # One 60 s checkpoint among 10 s ones: a stall, and the next is judged against 10 s.
    got = _job(lake, [10.0] * 12 + [60.0] + [10.0] * 3)
    assert [s for s, r in got.items() if r["is_stall"]] == [12]
    assert got[13]["baseline_s"] == 10.0
