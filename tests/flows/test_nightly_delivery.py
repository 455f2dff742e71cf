"""`ckptwatch nightly` against a webhook that refuses the connection (issue 41, item 6): the
failed delivery is one line, counted per sink in the summary and report.json, the exit code is
1, no traceback; `--no-send` says nothing was sent and where the alerts would go, and writes
nothing; the next run with the webhook back delivers what it missed.

The small raw directory of tests/conftest.py with low alert levels: job j1 raises one alert.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from tests.conftest import without_progress
from tests.loopback import free_port, running_receiver

# Imported at collection: the first `from prefect import flow` sets up Prefect's logging, whose
# console handler keeps the stderr of that moment; inside a test's capfd it would be a file
# that closes when the test ends, and every later test's Prefect log line would fail on it.
import ckptwatch.flows.nightly  # noqa: F401
from ckptwatch.alerts import sinks as alert_sinks
from ckptwatch.alerts.state import load_state
from ckptwatch.cli.main import main
from ckptwatch.lake.store import Lake

#: A line of Prefect's console log: "03:04:02.201 | INFO    | Flow run '…' - …".
PREFECT_LOG = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \| [A-Z]+ +\| ")


def _config(path: Path, webhook: str) -> Path:
    # low levels: j1's 20 s barrier alerts; no staleness: its checkpoints are of 2026-11-28
    path.write_text('[alerts]\nwarning = 0.01\ncritical = 0.02\nstale_after_s = 1e9\n'
                    f'[sinks]\nwebhook_url = "{webhook}"\ntimeout_s = 2\n')
    return path


@pytest.mark.prefect
def test_nightly_against_a_refusing_webhook_counts_the_failure_and_exits_1(
        prefect_harness: None, raw_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
    monkeypatch.delenv("CKPTWATCH_CONFIG", raising=False)
    monkeypatch.setattr(alert_sinks, "RETRY_BACKOFF_S", 0.01)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    port = free_port()  # nobody listens: the connection is refused
    config = _config(tmp_path / "ckptwatch.toml", f"http://127.0.0.1:{port}/hook")
    lake = tmp_path / "lake"
    jsonl = lake / "reports" / "alerts.jsonl"
    args = ["nightly", str(raw_dir), "--lake", str(lake), "--config", str(config)]
    capfd.readouterr()

    # --no-send: nothing sent, nothing written, and the summary says so and where they'd go
    assert main([*args, "--no-send"]) == 0
    out, err = capfd.readouterr()
    assert (f"  alerts: 1 due, nothing sent (dry run); a sending run delivers them to stdout, "
            f"jsonl, webhook; JSON Lines file (written when sent): {jsonl}\n") in out
    assert "[FIRING" not in out and not jsonl.exists()
    assert load_state(lake).firing == {}

    # the webhook refuses: stdout and jsonl took the alert, the webhook did not
    assert main(args) == 1
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert out.count("[FIRING:critical] CheckpointTailNearTimeout job_id=j1") == 1  # stdout sink
    assert ("  alerts: 1 due: 1 delivered to stdout, 1 to jsonl, 0 of 1 to webhook (connection "
            f"refused; kept for the next run); JSON Lines: {jsonl}\n") in out
    # Prefect's own log lines (INFO under the test harness; the command shows only warnings)
    # hold no warning or error; the command's own lines are its progress and the one failure
    assert not re.search(r"\| (WARNING|ERROR|CRITICAL) ", err)
    lines = [line for line in without_progress(err) if not PREFECT_LOG.match(line)]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ckptwatch nightly: alerts not delivered: webhook: POST "
                               f"http://127.0.0.1:{port}/hook failed (2 attempts): ")
    assert "Connection refused" in lines[0] and "the report is written" in lines[0]
    assert len(jsonl.read_text().splitlines()) == 1
    state = load_state(lake)
    (fp,) = state.firing
    assert {s: list(a) for s, a in state.pending.items()} == {"webhook": [fp]}
    report = json.loads((lake / "reports" / "2026-11-28" / "report.json").read_text())
    alerts = report["alerts"]
    assert (alerts["sent"], alerts["dry_run"]) == (False, False)
    assert [(d["sink"], d["attempted"], d["delivered"], d["failed"], d["reason"])
            for d in alerts["delivery"]] == [("stdout", 1, 1, 0, None), ("jsonl", 1, 1, 0, None),
                                             ("webhook", 1, 0, 1, "connection refused")]
    assert alerts["failures"] == [alerts["delivery"][2]["error"]]
    assert alerts["failures"][0].startswith(f"webhook: POST http://127.0.0.1:{port}/hook ")
    page = (lake / "reports" / "2026-11-28" / "report.html").read_text()
    assert "<span>alerts undelivered</span>" in page
    assert "0 of 1 to webhook (connection refused; kept for the next run)" in page

    # the webhook back: it gets the alert it missed, nothing else is sent again
    with running_receiver() as receiver:
        _config(config, f"{receiver.url}/hook")
        assert main(args) == 0
        out, err = capfd.readouterr()
        assert [[a["fingerprint"] for a in body] for body in receiver.bodies()] == [[fp]]
    assert "  alerts: 1 sent to webhook; JSON Lines: " in out and "[FIRING" not in out
    assert "Traceback" not in out + err
    assert not re.search(r"\| (WARNING|ERROR|CRITICAL) ", err)
    assert [line for line in without_progress(err) if not PREFECT_LOG.match(line)] == []
    assert load_state(lake).pending == {}
    assert len(jsonl.read_text().splitlines()) == 1


@pytest.mark.prefect
def test_a_nightly_that_cannot_take_the_lake_lock_is_one_line_without_traceback(
        prefect_harness: None, raw_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A failure raised inside the flow (here the ingest subflow's lock): Prefect would log it
    at ERROR with a traceback, twice (subflow and flow); the command's one line says it."""
    monkeypatch.delenv("CKPTWATCH_CONFIG", raising=False)
    lake = tmp_path / "lake"
    capfd.readouterr()
    with Lake(lake).lock(wait_s=0):  # another run holds the lake
        rc = main(["nightly", str(raw_dir), "--lake", str(lake), "--lock-wait", "0"])
    out, err = capfd.readouterr()
    assert rc == 2 and out == ""
    assert "Traceback" not in err and not re.search(r"\| (WARNING|ERROR|CRITICAL) ", err)
    lines = [line for line in without_progress(err) if not PREFECT_LOG.match(line)]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ckptwatch nightly: error: lake {lake} is locked by another run")


def test_the_pipeline_script_reports_a_failed_sink_in_one_line_and_exits_1(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``python pipelines/nightly.py RAW LAKE`` (``flows.nightly.main``), without Prefect: the
    flow's failure is one line and an exit status, not a traceback."""
    import ckptwatch.flows.nightly as nightly_module
    from ckptwatch.errors import AlertsUndeliveredError, LakeLockedError

    def undelivered(*_args: object, **_kw: object) -> None:
        raise AlertsUndeliveredError("alerts not delivered: webhook: refused", {})

    def locked(*_args: object, **_kw: object) -> None:
        raise LakeLockedError("lake L is locked by another run")

    for flow, code, line in ((undelivered, 1, "alerts not delivered: webhook: refused"),
                             (locked, 2, "lake L is locked by another run")):
        monkeypatch.setattr(nightly_module, "nightly_flow", flow)
        with pytest.raises(SystemExit) as exit_:
            nightly_module.main(["raw", "lake"])
        assert exit_.value.code == code
        assert capsys.readouterr().err == f"nightly: {line}\n"


@pytest.mark.prefect
def test_the_watch_flow_counts_alerts_no_sink_took_as_undelivered(
        prefect_harness: None, tmp_path: Path) -> None:
    """The watcher's Prefect flow: an open checkpoint at 500 s of its 600 s timeout alerts; the
    only sink (a JSON Lines file where a directory is) fails, so nothing counts as sent."""
    from ckptwatch.collect.recorder import dumps_record, iso_time
    from ckptwatch.flows.watch import watch_flow

    raw = tmp_path / "raw"
    (raw / "checkpoints").mkdir(parents=True)
    (raw / "jobs").mkdir()
    (raw / "jobs" / "jobs.csv").write_text("job_id,n_ranks,checkpoint_timeout_s\nw,2,600\n")
    opened = time.time() - 500
    (raw / "checkpoints" / "a.jsonl").write_text("".join(
        dumps_record({"job_id": "w", "step": 1, "rank": r, "node": "n1", "tier": "pool",
                      "start_time": iso_time(opened), "status": "started"}) + "\n"
        for r in range(2)))
    (tmp_path / "blocked").mkdir()
    config = tmp_path / "c.toml"
    config.write_text(f'[sinks]\nstdout = false\njsonl = "{tmp_path / "blocked"}"\n')
    counts = watch_flow(str(raw), str(tmp_path / "lake"), minutes=0.05, interval_s=0.5,
                        config=str(config))
    assert counts["scans"] >= 1 and counts["sink_failures"] >= 1
    assert counts["alerts_sent"] == 0 and counts["alerts_undelivered"] >= 1
