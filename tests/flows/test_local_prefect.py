"""Prefect set up by the commands that start it: environment, home, startup failures, the
stdout sink inside a flow, and which report ``reports/latest`` holds."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

# Prefect imported at collection (as the other flow tests do), never first inside a test that
# captures stderr: its console log handler keeps the stream it finds at import.
import ckptwatch.flows.nightly as nightly_module
from ckptwatch.alerts.sinks import StdoutSink, render_alert
from ckptwatch.cli.main import main
from ckptwatch.errors import PrefectStartError
from ckptwatch.flows import local_prefect
from ckptwatch.report.daily import write_report
from ckptwatch.settings import PREFECT_STARTUP_TIMEOUT_S, prefect_environment, prefect_home

ALERT: dict[str, Any] = {
    "labels": {"alertname": "CheckpointTailNearTimeout", "job_id": "j1", "tier": "pool",
               "severity": "critical"},
    "annotations": {"summary": "tail at 95% of the timeout", "max_s": 114.0},
    "status": "firing", "startsAt": "2026-11-28T00:00:00Z", "fingerprint": "abc",
}


# -- the environment ------------------------------------------------------------------------


def test_home_is_a_ckptwatch_cache_dir_never_dot_prefect(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert prefect_home(home) == tmp_path / ".cache" / "ckptwatch" / "prefect"
    xdg = {**home, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert prefect_home(xdg) == tmp_path / "xdg" / "ckptwatch" / "prefect"
    relative = {**home, "XDG_CACHE_HOME": "rel"}  # the XDG spec: only absolute paths count
    assert prefect_home(relative) == tmp_path / ".cache" / "ckptwatch" / "prefect"
    assert prefect_home({**home, "PREFECT_HOME": str(tmp_path / "mine")}) == tmp_path / "mine"


def test_environment_is_quiet_and_telemetry_free_unless_told(tmp_path: Path) -> None:
    env = prefect_environment(environ={"HOME": str(tmp_path)})
    assert env == {
        "PREFECT_HOME": str(tmp_path / ".cache" / "ckptwatch" / "prefect"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
        "PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(PREFECT_STARTUP_TIMEOUT_S),
    }
    verbose = prefect_environment(True, {"HOME": str(tmp_path)})
    assert (verbose["PREFECT_LOGGING_LEVEL"], verbose["PREFECT_SERVER_LOGGING_LEVEL"]) == (
        "INFO", "WARNING")
    # What the user set wins, except the levels --verbose asks for.
    user = {"HOME": str(tmp_path), "PREFECT_LOGGING_LEVEL": "ERROR",
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    assert prefect_environment(False, user)["PREFECT_LOGGING_LEVEL"] == "ERROR"
    assert prefect_environment(True, user)["PREFECT_LOGGING_LEVEL"] == "INFO"
    assert prefect_environment(False, user)[
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] == "300"


def test_configure_sets_the_environment_and_creates_the_home(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h")}
    home = local_prefect.configure(environ=env, modules={})
    assert home == tmp_path / "h" / ".cache" / "ckptwatch" / "prefect" and home.is_dir()
    assert env["PREFECT_HOME"] == str(home) and env["PREFECT_LOGGING_LEVEL"] == "WARNING"
    assert not (tmp_path / "h" / ".prefect").exists()
    # Prefect already imported: its settings are fixed, nothing is changed.
    other = {"HOME": str(tmp_path / "h2")}
    assert local_prefect.configure(environ=other, modules={"prefect": object()}) is None
    assert other == {"HOME": str(tmp_path / "h2")}


def test_an_unusable_home_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(PrefectStartError) as err:
        local_prefect.configure(environ={"PREFECT_HOME": str(tmp_path / "file" / "p")},
                                modules={})
    assert str(err.value) == (
        f"cannot create Prefect's home directory {tmp_path / 'file' / 'p'}: Not a directory; "
        "set PREFECT_HOME (or XDG_CACHE_HOME) to a writable directory")


# -- a server that does not start -----------------------------------------------------------


class _DeadServer:
    """Fails as Prefect's ``SubprocessASGIServer.start`` does when the server never answers."""

    def start(self, timeout: int | None = None) -> None:
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API "
                           "server. Ephemeral server process exited with code 3.\nstderr: …")


def test_server_startup_failure_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(PrefectStartError) as err:
        local_prefect.start_server(_DeadServer(), tmp_path, 120)
    assert str(err.value) == (
        "Prefect's local server did not start (Timed out while attempting to connect to "
        "ephemeral Prefect API server. Ephemeral server process exited with code 3.); its home "
        f"is {tmp_path}. Run again with --verbose to see its log; on a slow machine raise "
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS (now 120 s)")


def test_nightly_with_a_dead_server_prints_one_line_and_exits_2(
        raw_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the flow must not run without a server")

    monkeypatch.setattr(nightly_module, "nightly_flow", never)
    monkeypatch.setattr(local_prefect, "start_local_server", lambda verbose=False: _DeadServer())
    rc = main(["nightly", str(raw_dir), "--lake", str(tmp_path / "lake")])
    err = capsys.readouterr().err
    assert rc == 2
    *progress, last = err.splitlines()
    assert "Traceback" not in err
    assert [line.split("] ", 1)[1] for line in progress] == [
        "starting the local flow server: ~15 s the first time",
        "waiting for the local flow server…"]
    assert last.startswith("ckptwatch nightly: error: Prefect's local server did not start "
                           "(Timed out while attempting to connect")


class _RecordingServer:
    """A server that starts at once and records its stop."""

    api_url = "http://127.0.0.1:9/api"

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def start(self, timeout: int | None = None) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")


@pytest.mark.parametrize("fails", [False, True])
def test_the_clients_are_drained_before_the_server_stops(
        monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    """Prefect's log and event clients send what they hold while the server still answers,
    whether the block ends or raises: drained at exit instead, they retry a stopped server
    for about a minute and print "Error logging to API" (issue 46, bug 8)."""
    calls: list[str] = []
    monkeypatch.setattr(local_prefect, "drain_clients", lambda: calls.append("drain"))
    expected = pytest.raises(RuntimeError) if fails else contextlib.nullcontext()
    with expected, local_prefect.local_server(_RecordingServer(calls)):
        calls.append("flow")
        if fails:
            raise RuntimeError("the flow failed")
    assert calls == ["start", "flow", "drain", "stop"]


def test_drain_clients_returns_when_no_client_started() -> None:
    local_prefect.drain_clients(timeout_s=1)  # nothing queued: returns at once, raises nothing


def test_verbose_flag_on_every_command_that_starts_prefect() -> None:
    from ckptwatch.cli.main import build_parser

    parser = build_parser()
    for argv in (["nightly", "raw"], ["demo"], ["ingest", "raw", "--flow"]):
        assert parser.parse_args(argv).verbose is False
        assert parser.parse_args([*argv, "--verbose"]).verbose is True


# -- the stdout sink inside a flow ----------------------------------------------------------


def test_preload_imports_what_the_later_steps_import_on_first_use() -> None:
    """``preload`` (run while the local server boots) names modules the package imports
    lazily, inside a function, and imports them."""
    import re
    import sys

    import ckptwatch

    text = "\n".join(p.read_text() for p in Path(ckptwatch.__file__).parent.rglob("*.py"))
    for name in nightly_module.PRELOADED_MODULES:
        lazily = rf"^[ \t]+(?:from {re.escape(name)} import |import {re.escape(name)}\b)"
        assert re.search(lazily, text, re.M), f"{name} is not imported lazily anywhere"
    nightly_module.preload()
    assert set(nightly_module.PRELOADED_MODULES) <= set(sys.modules)


@pytest.mark.prefect
def test_stdout_sink_prints_to_stdout_inside_a_log_prints_flow(
        prefect_harness: None, capsys: pytest.CaptureFixture[str]) -> None:
    from prefect import flow

    @flow(log_prints=True)  # as the nightly flow: ``print`` would go to the run's log
    def send_alerts() -> None:
        StdoutSink().send([ALERT, {**ALERT, "status": "resolved"}])

    send_alerts()
    out = capsys.readouterr().out
    assert out == render_alert(ALERT) + "\n" + render_alert({**ALERT, "status": "resolved"}) + "\n"
    assert out.startswith("[FIRING:critical] CheckpointTailNearTimeout job_id=j1")


# -- reports/latest -------------------------------------------------------------------------


def _report(day: str, checkpoints: int) -> dict[str, Any]:
    return {"date": day, "summary": {"checkpoints": checkpoints}}


def _latest_day(lake: Path) -> str:
    return str(json.loads((lake / "reports" / "latest" / "report.json").read_text())["date"])


def test_latest_holds_the_newest_day_with_checkpoints(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert write_report(lake, _report("2026-11-28", 0), "empty").latest_kept == (
        "2026-11-28 has no checkpoints")
    assert not (lake / "reports" / "latest").exists()  # an empty day never becomes latest
    assert write_report(lake, _report("2026-11-28", 5), "28").latest_kept is None
    older = write_report(lake, _report("2026-11-27", 9), "27")
    assert older.latest_kept == "it holds 2026-11-28, newer than 2026-11-27"
    assert older.html.read_text() == "27"  # its own folder is written all the same
    assert write_report(lake, _report("2026-11-29", 0), "29 empty").latest_kept == (
        "2026-11-29 has no checkpoints")
    assert _latest_day(lake) == "2026-11-28"
    assert (lake / "reports" / "latest" / "report.html").read_text() == "28"
    assert write_report(lake, _report("2026-11-28", 6), "28 again").latest_kept is None
    assert write_report(lake, _report("2026-11-29", 1), "29").latest_kept is None
    assert _latest_day(lake) == "2026-11-29"
    assert (lake / "reports" / "latest" / "report.html").read_text() == "29"


@pytest.mark.prefect
def test_nightly_date_of_an_older_day_keeps_latest(
        prefect_harness: None, raw_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CKPTWATCH_CONFIG", raising=False)
    lake = tmp_path / "lake"
    # The first run, the flow itself (what it returns; the command runs the later two): it
    # ingests, builds the views, finds nothing to send in two healthy jobs, writes the report
    # of the newest day and makes it latest/.
    out = nightly_module.nightly_flow(raw_dir, lake)
    assert out["ingested"] == 6
    assert out["views"] >= 10
    assert (out["stalls"], out["alerts"]) == (0, 0)  # two healthy jobs: nothing to send
    assert Path(out["report"]) == lake / "reports" / "2026-11-28" / "report.html"
    assert "j1" in Path(out["report"]).read_text()
    assert list(out["steps_s"]) == ["ingest", "deltas", "views", "stalls", "alerts", "report"]
    assert out["delta_days_built"] == 1  # the day of the fixture's counters, stored once
    assert all(s >= 0.0 for s in out["steps_s"].values())
    peaks = out["steps_peak_rss_mb"]  # running maxima of this process, per step
    assert list(peaks) == list(out["steps_s"])
    flow_mb = [peaks[step]["flow"] for step in peaks]
    assert flow_mb == sorted(flow_mb) and flow_mb[0] > 10
    latest = (lake / "reports" / "latest" / "report.html").read_bytes()
    assert latest == Path(out["report"]).read_bytes()
    capsys.readouterr()
    assert main(["nightly", str(raw_dir), "--lake", str(lake), "--no-send",
                 "--date", "2026-11-27"]) == 0
    out = capsys.readouterr().out
    assert "(latest/ not replaced: 2026-11-27 has no checkpoints)" in out
    assert (lake / "reports" / "2026-11-27" / "report.html").is_file()
    assert (lake / "reports" / "latest" / "report.html").read_bytes() == latest
    assert _latest_day(lake) == "2026-11-28"
    # An older day with checkpoints (j2's, a year earlier) is written, latest/ kept.
    assert main(["nightly", str(raw_dir), "--lake", str(lake), "--no-send",
                 "--date", "2025-11-28"]) == 0
    out = capsys.readouterr().out
    assert "(latest/ not replaced: it holds 2026-11-28, newer than 2025-11-28)" in out
    assert (lake / "reports" / "latest" / "report.html").read_bytes() == latest
