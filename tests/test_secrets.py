"""Secrets never reach a log, the lake, the alert state or a report.

Every kind of credential the sinks take is set at once (a secret webhook URL with a password,
a token in its path and query, a bearer token, Alertmanager basic auth and a password in its
URL); the receivers first fail and echo every credential back in their error bodies, then
accept. Then every byte the runs produced is searched: stdout, stderr, the log records at
DEBUG, every file under the lake (Parquet decoded, since zstd would hide a plain-text match),
the alert state and the JSON Lines sink file. The receivers did get the credentials: the test
is not passing because nothing was sent.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from tests.conftest import hot_lake

from ckptwatch.alerts import sinks as alert_sinks
from ckptwatch.cli.main import main

T0 = datetime(2026, 11, 28, tzinfo=UTC)
HOOK_USER_PASS = "hookpass-7Qx2"
HOOK_PATH_TOKEN = "T0KEN-in-path-9Vd1"
HOOK_QUERY_SIG = "qsig-4Hn8"
HOOK_BEARER = "bearer-3Kp5"
AM_USER, AM_PASS = "amuser", "ampass-6Wz3"
AM_URL_PASS = "amurlpass-2Rt7"
SECRETS = [HOOK_USER_PASS, HOOK_PATH_TOKEN, HOOK_QUERY_SIG, HOOK_BEARER, AM_PASS, AM_URL_PASS,
           f"{AM_USER}:{AM_PASS}", base64.b64encode(f"{AM_USER}:{AM_PASS}".encode()).decode(),
           base64.b64encode(f"hookuser:{HOOK_USER_PASS}".encode()).decode()]


class EchoReceiver:
    """HTTP on loopback: answers 500 echoing the request line and every header (a careless
    server), until ``accept`` is set; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.accept = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                echo = f"{self.requestline} {dict(self.headers)}"
                outer.seen.append(echo)
                status, body = (200, b"ok") if outer.accept else (500, echo.encode())
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)


@pytest.fixture
def echo() -> Iterator[EchoReceiver]:
    r = EchoReceiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def _texts_under(root: Path) -> Iterator[tuple[Path, str]]:
    """Every file's bytes as text, and for Parquet every value too."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        yield path, path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".parquet":
            table = pl.from_arrow(pq.read_table(path))
            assert isinstance(table, pl.DataFrame)
            yield path, json.dumps(table.rows(), default=str)


def _run_alerts_everywhere(tmp_path: Path, echo: EchoReceiver,
                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                           caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """Ingest, then alerts: a dry run, a send that fails (echoing receivers), a send that
    succeeds, a query. Returns (where, text) for every output and file produced."""
    monkeypatch.setattr(alert_sinks, "RETRY_BACKOFF_S", 0.01)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    lake = hot_lake(tmp_path)
    monkeypatch.setenv("TEST_HOOK_URL", f"http://hookuser:{HOOK_USER_PASS}@127.0.0.1:"
                                        f"{echo.port}/hook/{HOOK_PATH_TOKEN}?sig={HOOK_QUERY_SIG}")
    monkeypatch.setenv("TEST_HOOK_TOKEN", HOOK_BEARER)
    monkeypatch.setenv("TEST_AM_AUTH", f"{AM_USER}:{AM_PASS}")
    config = tmp_path / "conf" / "ckptwatch.toml"
    config.parent.mkdir()
    config.write_text(
        '[sinks]\njsonl = "alerts.jsonl"\nwebhook_url_env = "TEST_HOOK_URL"\n'
        'webhook_token_env = "TEST_HOOK_TOKEN"\n'
        f'alertmanager_url = "http://am:{AM_URL_PASS}@127.0.0.1:{echo.port}"\n'
        'alertmanager_basic_auth_env = "TEST_AM_AUTH"\n')
    caplog.set_level(logging.DEBUG)
    capsys.readouterr()
    base = ["alerts", "--lake", str(lake), "--config", str(config)]
    outputs = []
    assert main([*base, "--now", "2026-11-28T02:00:00Z"]) == 0  # dry run: table
    outputs.append(capsys.readouterr())
    assert main([*base, "--send", "--now", "2026-11-28T02:00:00Z"]) == 1  # both sinks fail
    outputs.append(capsys.readouterr())
    assert "webhook: POST http://127.0.0.1/… (secret URL) failed" in outputs[-1].err
    echo.accept = True
    assert main([*base, "--send", "--format", "json", "--now", "2026-11-28T03:00:00Z"]) == 0
    outputs.append(capsys.readouterr())
    assert main(["sql", "--lake", str(lake), "select * from quarantine"]) == 0
    outputs.append(capsys.readouterr())

    # the credentials were used: the receivers saw every one of them
    seen = " ".join(echo.seen)
    for secret in (HOOK_PATH_TOKEN, HOOK_QUERY_SIG, HOOK_BEARER,
                   base64.b64encode(f"{AM_USER}:{AM_PASS}".encode()).decode()):
        assert secret in seen
    places: list[tuple[str, str]] = []
    for i, out in enumerate(outputs):
        places += [(f"stdout of run {i}", out.out), (f"stderr of run {i}", out.err)]
    places.append(("log records", caplog.text))
    assert (lake / "_state" / "alerts.json").exists()
    assert (config.parent / "alerts.jsonl").exists()
    places += [(str(p), t) for p, t in _texts_under(lake)]
    places += [(str(p), t) for p, t in _texts_under(config.parent) if p != config]
    return places


def test_no_secret_reaches_logs_lake_state_or_reports(
        tmp_path: Path, echo: EchoReceiver, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    places = _run_alerts_everywhere(tmp_path, echo, monkeypatch, capsys, caplog)
    leaks = sorted({(secret, where) for where, text in places for secret in SECRETS
                    if secret in text})
    assert not leaks


def test_a_token_in_a_secret_webhook_urls_path_is_not_echoed(
        tmp_path: Path, echo: EchoReceiver, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    places = _run_alerts_everywhere(tmp_path, echo, monkeypatch, capsys, caplog)
    assert not [where for where, text in places if HOOK_PATH_TOKEN in text]


def test_a_secret_cut_by_the_error_excerpt_is_not_shown_in_part(echo: EchoReceiver,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    from ckptwatch.errors import SinkError
    from ckptwatch.settings import Secret

    monkeypatch.setattr(alert_sinks, "RETRY_BACKOFF_S", 0.01)
    monkeypatch.setattr(alert_sinks, "_excerpt", lambda exc, limit=300: " ".join(
        ("x" * 290 + " " + HOOK_BEARER + " tail").split())[:limit])
    sink = alert_sinks.WebhookSink(f"http://127.0.0.1:{echo.port}/hook",
                                   Secret(HOOK_BEARER, "test"))
    with pytest.raises(SinkError) as err:
        sink.send([{"labels": {}, "status": "firing"}])
    assert HOOK_BEARER[:6] not in str(err.value).split("x" * 290)[-1]


def test_settings_show_no_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """repr/str of the settings (what a log or a traceback would print) hide every secret."""
    from ckptwatch.settings import load_settings

    monkeypatch.setenv("TEST_HOOK_URL", f"https://hooks.example.com/x/{HOOK_PATH_TOKEN}")
    monkeypatch.setenv("TEST_HOOK_TOKEN", HOOK_BEARER)
    monkeypatch.setenv("TEST_AM_AUTH", f"{AM_USER}:{AM_PASS}")
    config = tmp_path / "c.toml"
    config.write_text(
        '[sinks]\nwebhook_url_env = "TEST_HOOK_URL"\nwebhook_token_env = "TEST_HOOK_TOKEN"\n'
        f'alertmanager_url = "http://am:{AM_URL_PASS}@127.0.0.1:9093/?k={HOOK_QUERY_SIG}"\n'
        'alertmanager_basic_auth_env = "TEST_AM_AUTH"\n')
    settings = load_settings(config)
    for shown in (repr(settings), str(settings), repr(settings.sinks), str(settings.sinks)):
        for secret in SECRETS:
            assert secret not in shown
