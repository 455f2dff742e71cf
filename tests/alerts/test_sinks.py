"""Alert sinks against real receivers: an HTTP server on loopback and a real Alertmanager.

The Alertmanager tests start Debian's ``prometheus-alertmanager`` on a free loopback port with
a throwaway config (no clustering, basic auth on) and read alerts back from its v2 API. They
skip only when the binary is absent (``apt-get install -y prometheus-alertmanager``).
"""

from __future__ import annotations

import base64
import json
import logging
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.conftest import hot_lake
from tests.conftest_prometheus import start_alertmanager
from tests.loopback import Receiver, free_port, running_receiver

from ckptwatch.alerts import sinks as alert_sinks
from ckptwatch.alerts.evaluate import evaluate
from ckptwatch.alerts.sinks import (
    AlertmanagerSink,
    JsonlSink,
    SinkError,
    SinkResult,
    StdoutSink,
    WebhookSink,
    deliver,
    delivery_summary,
)
from ckptwatch.alerts.state import AlertState, load_state
from ckptwatch.cli.main import main
from ckptwatch.settings import AlertSettings, JobAlertSettings, Secret

TOKEN = "hook-tok-5e3a9c71d2"
AM_USER, AM_PASSWORD = "ckpt", "am-pass-4c1e"
#: bcrypt of AM_PASSWORD (cost 4), for Alertmanager's --web.config.file basic_auth_users.
AM_PASSWORD_BCRYPT = "$2b$04$27f5E07jEYe4bq2F0yxiOeRc32LVEVBv1Cjf8NU20tyxmkX4Qvqy."
AM_BINARY = next((p for p in (shutil.which("prometheus-alertmanager"),
                              shutil.which("alertmanager")) if p), None)


@pytest.fixture(autouse=True)
def _fast_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alert_sinks, "RETRY_BACKOFF_S", 0.01)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)  # loopback, never through a proxy


def alert_for(job: str, barrier_s: float = 100.0, *,
              state: AlertState | None = None) -> tuple[dict[str, Any], AlertState]:
    """A real alert (and the state after it) from one evaluation of a 120 s-timeout job."""
    now = datetime.now(UTC)  # checkpoints of the last half hour: a live job, not history
    frame = pl.DataFrame({"job_id": [job] * 3, "tier": ["pool"] * 3, "step": [1, 2, 3],
                          "end_ts": [now - timedelta(minutes=10 * (3 - i)) for i in range(3)],
                          "barrier_s": [barrier_s] * 3})
    jobs = pl.DataFrame({"job_id": [job], "checkpoint_timeout_s": [120.0]})
    settings = AlertSettings(defaults=JobAlertSettings(window=1), resolve_after=1)
    ev = evaluate(frame, jobs, settings, state, now=now)
    (alert,) = ev.due
    return alert, ev.state


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A running loopback receiver (tests/loopback.py)."""
    with running_receiver() as r:
        yield r


def test_webhook_delivers_the_alerts_with_a_bearer_token(receiver: Receiver) -> None:
    alert, _ = alert_for("j-web")
    WebhookSink(f"{receiver.url}/hook", Secret(TOKEN, "test")).send([alert])
    (req,) = receiver.requests
    assert req["path"] == "/hook"
    assert req["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["headers"]["User-Agent"].startswith("ckptwatch/")
    assert req["body"] == [alert]


def test_webhook_retries_once_on_a_5xx(receiver: Receiver) -> None:
    receiver.script = [(503, b"busy")]
    alert, _ = alert_for("j-retry")
    WebhookSink(f"{receiver.url}/hook").send([alert])
    assert receiver.bodies() == [[alert], [alert]]


def test_webhook_rejection_is_not_retried_and_leaks_no_secret(receiver: Receiver) -> None:
    receiver.script = [("echo-auth", None)]
    alert, _ = alert_for("j-401")
    url = f"http://user:url-pass@{receiver.url.removeprefix('http://')}/hook?key=query-secret"
    with pytest.raises(SinkError) as exc:
        WebhookSink(url, Secret(TOKEN, "test"), secrets=["url-pass", "query-secret"]).send(
            [alert])
    assert len(receiver.requests) == 1
    # credentials in the URL become basic auth only when no token is given; the token wins
    assert receiver.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert str(exc.value) == (f"webhook: POST {receiver.url}/hook?… failed (1 attempt): "
                              "HTTP 401 Unauthorized: bad token Bearer ***")


def test_unreachable_webhook_names_the_url_without_credentials() -> None:
    port = free_port()
    sink = WebhookSink(f"http://u:pw-x1@127.0.0.1:{port}/hook?token=qs-secret", timeout_s=1,
                       secrets=["pw-x1", "qs-secret"])
    with pytest.raises(SinkError) as exc:
        sink.send([alert_for("j-down")[0]])
    msg = str(exc.value)
    assert msg.startswith(f"webhook: POST http://127.0.0.1:{port}/hook?… failed (2 attempts): ")
    assert "Connection refused" in msg
    assert "pw-x1" not in msg and "qs-secret" not in msg
    assert exc.value.reason == "connection refused"


def test_slow_webhook_times_out(receiver: Receiver) -> None:
    receiver.script = [("sleep", 0.6), ("sleep", 0.6)]
    with pytest.raises(SinkError, match=r"failed \(2 attempts\): timed out") as exc:
        WebhookSink(f"{receiver.url}/hook", timeout_s=0.2).send([alert_for("j-slow")[0]])
    assert exc.value.reason == "timed out"


def test_a_5xx_twice_gives_its_status_as_the_reason_without_the_body(
        receiver: Receiver) -> None:
    receiver.script = [(500, b"stack trace here"), (500, b"stack trace here")]
    with pytest.raises(SinkError) as exc:
        WebhookSink(f"{receiver.url}/hook").send([alert_for("j-500")[0]])
    assert str(exc.value).endswith("failed (2 attempts): HTTP 500 Internal Server Error: "
                                   "stack trace here")
    assert exc.value.reason == "HTTP 500 Internal Server Error"


# -- local sinks and delivery -----------------------------------------------------------------


def test_jsonl_appends_one_alert_a_line(tmp_path: Path) -> None:
    a1, a2 = alert_for("j-a")[0], alert_for("j-b")[0]
    sink = JsonlSink(tmp_path / "sub" / "alerts.jsonl")
    sink.send([a1])
    sink.send([a2])
    lines = (tmp_path / "sub" / "alerts.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [a1, a2]
    (tmp_path / "file").write_text("")
    with pytest.raises(SinkError, match=r"^jsonl: cannot append alerts to JSON Lines file "
                       r".*file/x: File exists$") as exc:
        JsonlSink(tmp_path / "file" / "x").send([a1])
    assert (exc.value.sink, exc.value.reason) == ("jsonl", "File exists")


def test_stdout_to_a_closed_stream_is_a_sink_failure(tmp_path: Path) -> None:
    stream = open(tmp_path / "out.txt", "w")  # noqa: SIM115 - closed on purpose
    stream.close()
    with pytest.raises(SinkError, match=r"^stdout: cannot write alerts: I/O operation on "
                       r"closed file") as exc:
        StdoutSink(stream).send([alert_for("j-closed")[0]])
    assert exc.value.sink == "stdout"


def test_stdout_shows_the_alert_as_a_person_reads_it(capsys: pytest.CaptureFixture[str]) -> None:
    alert, _ = alert_for("j-out")
    StdoutSink().send([alert])
    out = capsys.readouterr().out
    assert out.startswith("[FIRING:warning] CheckpointTailNearTimeout job_id=j-out tier=pool\n"
                          "  Checkpoint tail of job j-out (pool) is 100.0 s")
    assert "p50 100.0 s | p99 100.0 s | max 100.0 s | timeout 120.0 s | headroom 20.0 s" in out


class FakeSink:
    def __init__(self, name: str, fail: bool = False) -> None:
        self.name, self.fail, self.got = name, fail, []  # type: ignore[var-annotated]

    def send(self, alerts: Sequence[dict[str, Any]]) -> None:
        if self.fail:
            raise SinkError(self.name, f"{self.name}: down")
        self.got.append(list(alerts))


def test_a_failing_sink_keeps_its_alerts_pending_and_others_go_on() -> None:
    a, b = alert_for("j-1")[0], alert_for("j-2")[0]
    ok, bad = FakeSink("ok"), FakeSink("bad", fail=True)
    first = deliver([a], [bad, ok])
    assert ok.got == [[a]] and [str(f) for f in first.failures] == ["bad: down"]
    assert first.pending == {"bad": {a["fingerprint"]: a}}
    bad.fail = False
    second = deliver([b], [bad, ok], first.pending)
    assert bad.got == [[a, b]] and ok.got == [[a], [b]]
    assert second.pending == {} and second.failures == []
    assert second.alerts == [b, a]


def test_each_sink_is_counted_and_a_refusing_webhook_keeps_its_alerts_pending() -> None:
    a, b = alert_for("j-c1")[0], alert_for("j-c2")[0]
    ok = FakeSink("ok")
    refused = WebhookSink(f"http://127.0.0.1:{free_port()}/hook", timeout_s=1)
    got = deliver([a, b], [ok, refused])
    assert got.results == [
        SinkResult("ok", 2, 2),
        SinkResult("webhook", 2, 0, "connection refused", str(got.failures[0]))]
    assert [r.failed for r in got.results] == [0, 2]
    assert str(got.failures[0]).startswith("webhook: POST http://127.0.0.1:")
    assert got.pending == {"webhook": {a["fingerprint"]: a, b["fingerprint"]: b}}
    assert got.summary() == ("2 due: 2 delivered to ok, 0 of 2 to webhook (connection refused; "
                             "kept for the next run)")
    assert got.results[1].to_dict() == {
        "sink": "webhook", "attempted": 2, "delivered": 0, "failed": 2,
        "reason": "connection refused", "error": str(got.failures[0])}
    # the next run: the webhook still down, one new alert; the pending two are retried
    c = alert_for("j-c3")[0]
    again = deliver([c], [ok, refused], got.pending)
    assert [(r.attempted, r.delivered) for r in again.results] == [(1, 1), (3, 0)]
    assert again.summary() == ("3 due: 1 delivered to ok, 0 of 3 to webhook (connection "
                               "refused; kept for the next run)")
    assert set(again.pending["webhook"]) == {a["fingerprint"], b["fingerprint"],
                                             c["fingerprint"]}


def test_the_delivery_summary_says_sent_only_when_every_sink_took_its_alerts() -> None:
    assert delivery_summary(3, [SinkResult("stdout", 3, 3), SinkResult("jsonl", 3, 3)]) == (
        "3 sent to stdout, jsonl")
    # a sink that also took alerts it missed before: counted on its own
    assert delivery_summary(3, [SinkResult("jsonl", 1, 1), SinkResult("webhook", 3, 3)],
                            noun=" alert(s)") == "3 alert(s) sent: 1 to jsonl, 3 to webhook"
    assert delivery_summary(0, [SinkResult("jsonl", 0, 0)]) == "0 due"
    assert delivery_summary(2, []) == "2 due, no sink to send them to"
    assert delivery_summary(2, [], sent=False, sinks=["stdout", "jsonl"]) == (
        "2 due, nothing sent (dry run); a sending run delivers them to stdout, jsonl")
    assert delivery_summary(0, [], sent=False) == "0 due (dry run: nothing sent)"


def test_a_resolution_supersedes_a_firing_alert_that_never_arrived() -> None:
    firing, state = alert_for("j-r", 100.0)
    resolved, _ = alert_for("j-r", 30.0, state=state)
    sink = FakeSink("s")
    deliver([resolved], [sink], {"s": {firing["fingerprint"]: firing}})
    assert sink.got == [[resolved]]


# -- through the CLI, on a lake ---------------------------------------------------------------


def test_sink_failure_keeps_state_and_the_next_run_delivers(
        tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    lake = hot_lake(tmp_path)
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    config = tmp_path / "ckptwatch.toml"
    config.write_text(f'[sinks]\njsonl = "alerts.jsonl"\nwebhook_url = "{receiver.url}/hook"\n'
                      'webhook_token_env = "HOOK_TOKEN"\n')
    args = ["alerts", "--lake", str(lake), "--config", str(config), "--send", "--now"]
    receiver.script = [("echo-auth", None)]
    caplog.set_level(logging.DEBUG)
    capsys.readouterr()

    assert main([*args, "2026-11-28T02:00:00Z"]) == 1  # the webhook refused it
    out, err = capsys.readouterr()
    assert ("1 alert(s) due: 1 delivered to jsonl, 0 of 1 to webhook (HTTP 401 Unauthorized; "
            "kept for the next run)\n") in out
    assert f"webhook: POST {receiver.url}/hook failed (1 attempt): HTTP 401 Unauthorized: bad " \
           "token Bearer *** (kept for the next run)" in err
    state = load_state(lake)
    (fp,) = state.firing
    assert list(state.pending) == ["webhook"] and list(state.pending["webhook"]) == [fp]
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 1

    assert main([*args, "2026-11-28T03:00:00Z"]) == 0  # webhook back: gets what it missed
    out2, err2 = capsys.readouterr()
    assert "1 alert(s) sent to webhook\n" in out2 and err2 == ""  # the retry, jsonl had it
    assert [b[0]["fingerprint"] for b in receiver.bodies()] == [fp, fp]
    assert len((tmp_path / "alerts.jsonl").read_text().splitlines()) == 1  # no duplicate
    assert load_state(lake).pending == {}

    b64 = base64.b64encode(TOKEN.encode()).decode()
    for text in (out, err, out2, err2, caplog.text, (lake / "_state" / "alerts.json").read_text(),
                 (tmp_path / "alerts.jsonl").read_text()):
        assert TOKEN not in text and b64 not in text


# -- a real Alertmanager ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Alertmanager on a loopback port with basic auth; yields its base URL."""
    if AM_BINARY is None:
        pytest.skip("Alertmanager not installed: no prometheus-alertmanager or alertmanager on "
                    "PATH (apt-get install -y prometheus-alertmanager)")
    d = tmp_path_factory.mktemp("alertmanager")
    (d / "am.yml").write_text('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    (d / "web.yml").write_text(f"basic_auth_users:\n  {AM_USER}: {AM_PASSWORD_BCRYPT}\n")
    with start_alertmanager(d, d / "am.yml", f"--web.config.file={d / 'web.yml'}",
                            ready=lambda url: am_get(url, "/-/ready")) as url:
        yield url


def am_get(base: str, path: str) -> Any:
    req = urllib.request.Request(base + path, headers={
        "Authorization": "Basic " + base64.b64encode(f"{AM_USER}:{AM_PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(req, timeout=5) as resp:
        body = resp.read()
    return json.loads(body) if path.startswith("/api/") else body


def am_alerts(base: str, job: str) -> list[dict[str, Any]]:
    return [a for a in am_get(base, "/api/v2/alerts") if a["labels"].get("job_id") == job]


def same_instant(a: str, b: str) -> bool:
    return datetime.fromisoformat(a) == datetime.fromisoformat(b)


def test_alertmanager_receives_the_alert_and_its_resolution(alertmanager: str) -> None:
    sink = AlertmanagerSink(alertmanager, basic_auth=Secret(f"{AM_USER}:{AM_PASSWORD}", "test"))
    firing, state = alert_for("j-am")
    sink.send([firing])
    (got,) = am_alerts(alertmanager, "j-am")
    assert got["labels"] == firing["labels"]
    assert got["annotations"] == firing["annotations"]
    assert got["status"]["state"] == "active"
    assert same_instant(got["startsAt"], firing["startsAt"])
    assert same_instant(got["endsAt"], firing["endsAt"])

    resolved, _ = alert_for("j-am", 30.0, state=state)
    assert resolved["status"] == "resolved"
    sink.send([resolved])
    assert am_alerts(alertmanager, "j-am") == []  # resolved: no longer listed


def test_alertmanager_without_credentials_is_refused_without_leaking(alertmanager: str) -> None:
    with pytest.raises(SinkError) as exc:
        AlertmanagerSink(alertmanager,
                         basic_auth=Secret(f"{AM_USER}:wrong-pass-77", "test")).send(
            [alert_for("j-am-401")[0]])
    assert str(exc.value).startswith(
        f"alertmanager: POST {alertmanager}/api/v2/alerts failed (1 attempt): HTTP 401")
    assert "wrong-pass-77" not in str(exc.value)
    assert am_alerts(alertmanager, "j-am-401") == []


def test_cli_sends_to_alertmanager(alertmanager: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    lake = hot_lake(tmp_path)
    monkeypatch.setenv("CKPTWATCH_AM_BASIC_AUTH", f"{AM_USER}:{AM_PASSWORD}")
    config = tmp_path / "ckptwatch.toml"
    # evaluated now (Alertmanager drops an alert whose endsAt is past): the lake's checkpoints
    # of 2026-11-28 are not history under a horizon this long
    config.write_text(f'[alerts]\nstale_after_s = 1e9\n'
                      f'[sinks]\nalertmanager_url = "{alertmanager}"\n'
                      'alertmanager_basic_auth_env = "CKPTWATCH_AM_BASIC_AUTH"\n')
    now = datetime.now(UTC).replace(microsecond=0)
    capsys.readouterr()
    assert main(["alerts", "--lake", str(lake), "--config", str(config), "--send",
                 "--format", "json", "--now", now.isoformat()]) == 0
    out, err = capsys.readouterr()
    (sent,) = json.loads(out)
    (got,) = am_alerts(alertmanager, "hot")
    assert got["labels"] == {"alertname": "CheckpointTailNearTimeout", "job_id": "hot",
                             "tier": "pool", "severity": "warning"}
    assert got["annotations"]["headroom_s"] == "20.0"
    assert got["annotations"] == sent["annotations"]
    assert AM_PASSWORD not in out + err


def test_an_open_checkpoint_renders_its_time_left_or_past_and_its_evidence() -> None:
    from ckptwatch.alerts.sinks import render_alert

    base = {"labels": {"severity": "critical", "alertname": "CheckpointTailNearTimeout",
                       "job_id": "j", "tier": "pool"},
            "annotations": {"summary": "s", "inflight_s": "63.2", "timeout_s": "60.0",
                            "remaining_s": "-3.2", "ranks_started": "8", "ranks_finished": "6",
                            "ranks_open": "2", "evidence": "fabric_pause (score 0.75): x"}}
    text = render_alert(base)
    assert "3.2 s past it" in text and "-3.2" not in text
    assert "live evidence: fabric_pause (score 0.75): x" in text
    base["annotations"] = {**base["annotations"], "remaining_s": "5.0"}
    base["annotations"].pop("evidence")
    text = render_alert(base)
    assert "5.0 s left" in text and "live evidence" not in text


def test_the_delivery_summary_says_how_many_are_resolutions() -> None:
    from ckptwatch.alerts.sinks import delivery_summary

    assert delivery_summary(3, [], sent=False, sinks=["stdout"], n_resolved=3) == (
        "3 (0 firing, 3 resolved) due, nothing sent (dry run); a sending run delivers them to "
        "stdout")
    assert delivery_summary(2, [], sent=False) == "2 due, nothing sent (dry run)"
