"""The pull's failures, each one line that names the server and what to do: unreachable, an
HTTP error with the server's own text (escaped), credentials (sent, and never shown), retries;
and the ``[prometheus]`` settings and node map."""

from __future__ import annotations

import contextlib
import threading
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import without_progress
from tests.loopback import free_port
from tests.pull.conftest import CliRun

from ckptwatch.errors import ConfigError
from ckptwatch.pull.prometheus import PullError, load_node_map, pull_prometheus, strip_port
from ckptwatch.settings import PrometheusSettings, Secret, settings_from_dict

SINCE = datetime(2026, 11, 28, tzinfo=UTC)
UNTIL = datetime(2026, 11, 28, 1, tzinfo=UTC)


class FakePrometheus:
    """A loopback server answering each request from a script of (status, body); records the
    requests (path, headers, form)."""

    def __init__(self, script: list[tuple[int, bytes]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                      "form": urllib.parse.parse_qs(body.decode())})
                status, answer = fake.script.pop(0) if fake.script else (500, b"no script")
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:  # noqa: N802 - /api/v1/label/<name>/values is GET only
                self.do_POST()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextlib.contextmanager
def fake_prometheus(script: list[tuple[int, bytes]]) -> Iterator[FakePrometheus]:
    fake = FakePrometheus(script)
    thread = threading.Thread(target=fake.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def _pull(url: str, tmp_path: Path, settings: PrometheusSettings | None = None) -> None:
    pull_prometheus(url, tmp_path / "lake", settings or PrometheusSettings(retries=0),
                    since=SINCE, until=UNTIL)


def test_unreachable_server_is_one_line_after_the_retries(tmp_path: Path,
                                                          run_cli: CliRun) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run_cli(["pull", "prometheus", url, "--lake", str(tmp_path / "lake"),
                              "--since", SINCE.isoformat(), "--until", UNTIL.isoformat()])
    assert code == 2 and out == ""
    (err,) = without_progress(err)
    assert err.startswith(f"ckptwatch pull: error: Prometheus {url}/api/v1/series (2 attempts): "
                          "cannot reach the server: ")
    assert err.strip().endswith("check the URL and that Prometheus is running")
    assert not (tmp_path / "lake").exists()


def test_http_error_shows_the_servers_text_escaped(tmp_path: Path) -> None:
    body = (b'{"status":"error","errorType":"bad_data","error":"invalid parameter '
            b'\\"query\\": 1:2: parse error\\u001b[31m\\nsecond line"}')
    with fake_prometheus([(400, body)]) as fake, pytest.raises(PullError) as info:
        _pull(fake.url, tmp_path)
    assert str(info.value) == (
        f"Prometheus {fake.url}/api/v1/series: HTTP 400 Bad Request: bad_data: invalid "
        'parameter "query": 1:2: parse error\\x1b[31m second line')
    assert fake.requests[0]["form"]["match[]"] == [
        '{__name__=~"node_infiniband_.+|node_ethtool_.+|smartctl_device(_.+)?"}']


def test_bearer_token_is_sent_and_never_shown(tmp_path: Path) -> None:
    token = "s3cr3t-token-value"
    settings = PrometheusSettings(token=Secret(token, "$T"), retries=0)
    echo = f'{{"status":"error","error":"token {token} expired"}}'.encode()
    with fake_prometheus([(401, echo)]) as fake, pytest.raises(PullError) as info:
        _pull(fake.url, tmp_path, settings)
    assert fake.requests[0]["headers"]["Authorization"] == f"Bearer {token}"
    assert token not in str(info.value)
    assert "HTTP 401 Unauthorized: error: token *** expired; check the credentials" in str(
        info.value)


def test_basic_auth_from_the_url_and_5xx_retried(tmp_path: Path) -> None:
    with fake_prometheus([(503, b"overloaded"), (503, b"overloaded")]) as fake:
        url = fake.url.replace("http://", "http://ops:pa55word@")
        with pytest.raises(PullError) as info:
            _pull(url, tmp_path, PrometheusSettings(retries=1))
    assert len(fake.requests) == 2
    assert fake.requests[0]["headers"]["Authorization"] == "Basic b3BzOnBhNTV3b3Jk"
    assert str(info.value) == (f"Prometheus {fake.url}/api/v1/series (2 attempts): HTTP 503 "
                               "Service Unavailable: overloaded")


def test_an_answer_that_is_not_prometheus(tmp_path: Path) -> None:
    with fake_prometheus([(200, b"<html>login</html>")]) as fake, \
            pytest.raises(PullError, match=r"/api/v1/series: the answer is not JSON: "
                                           r"<html>login</html>; is this the Prometheus"):
        _pull(fake.url, tmp_path)


def test_no_series_pulls_nothing(tmp_path: Path) -> None:
    empty = (200, b'{"status":"success","data":[]}')
    with fake_prometheus([empty, empty]) as fake:  # no SMART/fabric series, no pool names
        report = pull_prometheus(fake.url, tmp_path / "lake", PrometheusSettings(),
                                 since=SINCE, until=UNTIL)
    assert report.rows == {} and report.series == 0 and report.pool_series == 0
    assert "nothing to pull" in report.notes[0]
    assert fake.requests[1]["path"].startswith("/api/v1/label/__name__/values?match%5B%5D=")


# -- settings and the node rule ----------------------------------------------------------------


def test_prometheus_settings_from_the_config_file(tmp_path: Path) -> None:
    s = settings_from_dict({"prometheus": {
        "url": "http://prom:9090", "token_env": "PROM_T", "step_s": 30, "node_map": "m.csv",
        "max_points_per_query": 5000}}, base_dir=tmp_path, environ={"PROM_T": "tok-123456"})
    p = s.prometheus
    assert (p.url, p.step_s, p.node_map, p.max_points_per_query) == (
        "http://prom:9090", 30.0, tmp_path / "m.csv", 5000)
    assert p.token == Secret("tok-123456", "$PROM_T")
    assert "tok-123456" in s.secrets() and "tok-123456" not in repr(p)
    # without a key naming one, the default variables
    env = {"CKPTWATCH_PROMETHEUS_BASIC_AUTH": "u:pw-98765"}
    assert settings_from_dict({}, environ=env).prometheus.basic_auth == Secret("u:pw-98765",
                                                                                "$x")


@pytest.mark.parametrize(("table", "message"), [
    ({"urll": "x"}, "unknown key [prometheus] 'urll'"),
    ({"url": "ftp://x"}, "[prometheus] url must be an http:// or https:// URL"),
    ({"token_env": "NOPE"}, "[prometheus] token_env names $NOPE, which is not set"),
    ({"step_s": 0}, "[prometheus] step_s must be > 0"),
    ({"basic_auth_env": "B"}, "[prometheus] basic_auth ($B) must be user:password"),
])
def test_bad_prometheus_settings_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"prometheus": table}, environ={"B": "nocolon"})
    assert message in str(info.value)


@pytest.mark.parametrize(("instance", "node"), [
    ("gpu-node-01:9100", "gpu-node-01"), ("10.0.0.7:9633", "10.0.0.7"),
    ("[fe80::1]:9100", "fe80::1"), ("gpu-node-01", "gpu-node-01"), ("fe80::1", "fe80::1"),
])
def test_instance_without_its_port(instance: str, node: str) -> None:
    assert strip_port(instance) == node


def test_bad_node_map_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("instance,node\na:9100,n1\nb:9100\n")
    with pytest.raises(ConfigError, match=rf"node map {path} line 3: expected 'instance,node', "
                                          "got 'b:9100'"):
        load_node_map(path)
    path.write_text("host,name\n")
    with pytest.raises(ConfigError, match="line 1: the header must be 'instance,node'"):
        load_node_map(path)


def test_example_config_documents_the_prometheus_defaults() -> None:
    from tests.conftest import PROJECT_ROOT

    from ckptwatch.settings import load_settings

    s = load_settings(PROJECT_ROOT / "examples" / "ckptwatch.toml", environ={})
    assert s.prometheus == PrometheusSettings()  # url unset: the demo's nightly pulls nothing
