"""Fixtures of the live tests: a real Prometheus, once a session, scraping two targets: a
``MetricsServer`` the metric tests fill by hand (``metrics_target``), and the real
``ckptwatch watch --metrics-port`` process following a raw directory with a checkpoint in
flight (``watcher_target``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest_prometheus import MetricsTarget, Prometheus, free_port, start_prometheus

from ckptwatch.collect.recorder import dumps_record, iso_time
from ckptwatch.live.metrics import MetricsServer, WatchMetrics


@pytest.fixture(scope="session")
def metrics_target() -> Iterator[MetricsTarget]:
    """A MetricsServer on an ephemeral loopback port serving a WatchMetrics the tests fill."""
    metrics = WatchMetrics(interval_s=2)
    with MetricsServer(metrics, "127.0.0.1", 0) as server:
        yield MetricsTarget(f"127.0.0.1:{server.port}", metrics)


@dataclass(frozen=True)
class WatcherTarget:
    """A running ``ckptwatch watch``: its metrics address and the job it sees in flight."""

    address: str
    job_id: str
    open_ranks: int
    timeout_s: float
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="session")
def watcher_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WatcherTarget]:
    """``ckptwatch watch --metrics-port`` over a raw dir where 2 of 4 ranks are still open."""
    root = tmp_path_factory.mktemp("watcher")
    raw = root / "raw"
    (raw / "checkpoints").mkdir(parents=True)
    (raw / "jobs").mkdir()
    (raw / "jobs" / "jobs.csv").write_text(
        "job_id,n_ranks,checkpoint_timeout_s\nlive-job,4,86400\n")
    now = time.time()
    lines = []
    for rank in range(4):
        base = {"job_id": "live-job", "step": 10, "rank": rank, "node": f"n{rank // 2}",
                "tier": "pool", "start_time": iso_time(now)}
        lines.append(dumps_record({**base, "status": "started"}))
        if rank < 2:
            lines.append(dumps_record({**base, "end_time": iso_time(now + 3), "bytes": 1}))
    (raw / "checkpoints" / "live.jsonl").write_text("".join(f"{ln}\n" for ln in lines))
    config = root / "c.toml"
    config.write_text("[sinks]\nstdout = false\n")
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("ckptwatch")), "watch", str(raw), "--lake",
         str(root / "lake"), "--config", str(config), "--interval", "1", "--metrics-port",
         str(port), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "HOME": str(root)})
    try:
        yield WatcherTarget(f"127.0.0.1:{port}", "live-job", 2, 86400.0, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory, metrics_target: MetricsTarget,
               watcher_target: WatcherTarget) -> Iterator[Prometheus]:
    """Debian's Prometheus on a free loopback port, scraping both targets every second."""
    with start_prometheus(tmp_path_factory.mktemp("prometheus"),
                          [metrics_target.address, watcher_target.address]) as p:
        yield p
