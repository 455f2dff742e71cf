"""A real Prometheus scrapes the real watcher and reads its in-flight series back (issue 16)."""

from __future__ import annotations

from tests.conftest_prometheus import Prometheus
from tests.live.conftest import WatcherTarget


def test_prometheus_reads_the_watchers_in_flight_checkpoint(
        prometheus: Prometheus, watcher_target: WatcherTarget) -> None:
    w = watcher_target
    sel = f'{{instance="{w.address}",job_id="{w.job_id}",tier="pool"}}'
    (age,) = prometheus.wait_for(f"ckptwatch_checkpoint_inflight_seconds{sel}",
                                 lambda r: len(r) == 1 and float(r[0]["value"][1]) > 0)
    # the session's watcher started with the first test that needed Prometheus: its open
    # checkpoint is as old as the session, well inside the day-long timeout
    assert 0 < float(age["value"][1]) < 3600
    (unfinished,) = prometheus.query(f"ckptwatch_checkpoint_unfinished_ranks{sel}")
    assert float(unfinished["value"][1]) == w.open_ranks
    (timeout,) = prometheus.query(f"ckptwatch_checkpoint_timeout_seconds{sel}")
    assert float(timeout["value"][1]) == w.timeout_s
    (scan,) = prometheus.query(
        f'ckptwatch_watch_last_scan_timestamp_seconds{{instance="{w.address}"}}')
    assert float(scan["value"][1]) > 1.7e9
    # two ranks finished: the duration histogram counts them
    (count,) = prometheus.query(f"ckptwatch_checkpoint_duration_seconds_count{sel}")
    assert float(count["value"][1]) == 2
    assert w.process.poll() is None
