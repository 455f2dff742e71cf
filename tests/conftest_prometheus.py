"""A real Prometheus for the tests (Debian's binary), and the binaries the Makefile installs.

:func:`start_prometheus` runs one on a free loopback port, its TSDB in a temp dir, scraping one
target (``host:port``) every second with ckptwatch's rules loaded; it is killed at the end and
its log, kept in a file, is shown when it fails. The session fixtures are in
tests/live/conftest.py. :func:`start_prometheus_over` serves TSDB blocks that :func:`backfill`
wrote (``promtool``) and scrapes nothing (the ``ckptwatch pull prometheus`` tests).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.loopback import free_port

from ckptwatch.live.metrics import WatchMetrics

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RULES = PROJECT_ROOT / "deploy" / "prometheus" / "ckptwatch-rules.yml"
#: Seconds Prometheus gets to become ready, and a query to show its answer.
READY_TIMEOUT_S = 15.0
SCRAPE_JOB = "ckptwatch"


def require_binary(name: str) -> str:
    """The path of a binary the Makefile's system-deps installs; fail (never skip) without it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run make system-deps (as root; it installs "
                    "Debian's prometheus package, which brings prometheus and promtool)")
    return path


@dataclass
class MetricsTarget:
    """What Prometheus scrapes: ``address`` (host:port) and, here, the metrics behind it."""

    address: str
    metrics: WatchMetrics


@dataclass
class Prometheus:
    """A running Prometheus: its base URL and log file."""

    url: str
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (``/api/v1/query``)."""
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, expr: str, done: Callable[[list[dict[str, Any]]], bool],
                 timeout_s: float = READY_TIMEOUT_S) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``done(result)``; fail with the last result and the log."""
        deadline = time.monotonic() + timeout_s
        result = self.query(expr)
        while not done(result):
            if time.monotonic() > deadline:
                pytest.fail(f"Prometheus: {expr} never gave the expected result; last: "
                            f"{result}\n--- prometheus log ---\n{self.log_tail()}")
            time.sleep(0.2)
            result = self.query(expr)
        return result


def prometheus_config(target: str | Sequence[str], rules: Path | None = None) -> str:
    """A Prometheus config scraping ``target`` (host:port, or several) every second."""
    targets = [target] if isinstance(target, str) else list(target)
    text = (f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: {SCRAPE_JOB}\n"
            f"    static_configs:\n      - targets: {json.dumps(targets)}\n")
    if rules is not None:
        text += f"rule_files:\n  - {json.dumps(str(rules))}\n"
    return text



@contextlib.contextmanager
def start_prometheus(workdir: Path, target: str | Sequence[str],
                     rules: Path | None = RULES) -> Iterator[Prometheus]:
    """Debian's Prometheus on a free loopback port, scraping ``target`` (host:port) every second."""
    (workdir / "prometheus.yml").write_text(prometheus_config(target, rules))
    with _serve(workdir, workdir / "tsdb") as server:
        yield server


@contextlib.contextmanager
def start_prometheus_over(workdir: Path, tsdb: Path) -> Iterator[Prometheus]:
    """Debian's Prometheus on a free loopback port over the TSDB blocks in ``tsdb`` (made by
    :func:`backfill`), scraping nothing. Retention is 100 years: blocks of old timestamps are
    not deleted at start-up."""
    (workdir / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    with _serve(workdir, tsdb, "--storage.tsdb.retention.time=100y") as server:
        yield server


def backfill(openmetrics: str, tsdb: Path) -> None:
    """Write TSDB blocks from OpenMetrics text (``promtool tsdb create-blocks-from
    openmetrics``; samples grouped by family, timestamps in seconds, ending ``# EOF``)."""
    promtool = require_binary("promtool")
    tsdb.mkdir(parents=True, exist_ok=True)
    source = tsdb.parent / f"{tsdb.name}.om"
    source.write_text(openmetrics)
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source),
                           str(tsdb)], capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.fail(f"promtool could not backfill {source}:\n{done.stdout}\n{done.stderr}")


@contextlib.contextmanager
def _serve(workdir: Path, tsdb: Path, *extra: str) -> Iterator[Prometheus]:
    """Run Prometheus with ``workdir/prometheus.yml`` over ``tsdb`` until the block ends."""
    binary = require_binary("prometheus")
    port = free_port()
    log_path = workdir / "prometheus.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed after the process ends
    proc = subprocess.Popen(
        [binary, f"--config.file={workdir / 'prometheus.yml'}",
         f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}", *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = Prometheus(f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Prometheus did not become ready (exit code "
                                f"{proc.poll()}):\n{server.log_tail()}")
                time.sleep(0.1)
        yield server
    finally:
        proc.kill()
        proc.wait()
        log.close()


@contextlib.contextmanager
def start_alertmanager(workdir: Path, config: Path, *extra: str,
                       ready: Callable[[str], object] | None = None) -> Iterator[str]:
    """Run Debian's Alertmanager on a free loopback port with ``config`` (and ``extra`` flags,
    e.g. ``--web.config.file``) until the block ends; yields its base URL. ``ready(url)``
    checks readiness (default: GET /-/ready without credentials)."""
    binary = shutil.which("prometheus-alertmanager") or require_binary("alertmanager")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "alertmanager.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed after the process ends
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    check = ready or (lambda u: urllib.request.urlopen(u + "/-/ready", timeout=5).close())
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                check(url)
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("Alertmanager did not become ready:\n"
                                + log_path.read_text()[-2000:])
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
