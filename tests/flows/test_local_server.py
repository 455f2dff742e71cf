"""Prefect's local server as the flow commands start it: launched early, waited for around the
flow, pointed at, stopped (``ckptwatch.flows.local_prefect``). The real boot is exercised by
every command test that runs a flow in a subprocess (tests/cli/test_quiet_prefect.py,
tests/test_wheel.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ckptwatch.errors import PrefectStartError
from ckptwatch.flows import local_prefect
from ckptwatch.flows.local_prefect import LocalServer, local_server


def _fake_python(tmp_path: Path, body: str) -> Path:
    """An executable standing in for ``sys.executable``: the server's child process."""
    exe = tmp_path / "python"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_a_server_whose_process_exits_names_the_code_and_its_last_log_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _fake_python(tmp_path, 'echo "starting"; echo "ImportError: no module named uvicorn"'
                       '; exit 3')
    monkeypatch.setattr(local_prefect.sys, "executable", str(exe))
    server = LocalServer(tmp_path)
    with pytest.raises(PrefectStartError) as err, local_server(server):
        raise AssertionError("the block must not run without a server")
    text = str(err.value)
    assert text.startswith("Prefect's local server did not start (its process exited with "
                           "code 3: ImportError: no module named uvicorn (log: "
                           f"{tmp_path / 'server.log'}))")
    assert server.process is None  # stopped


def test_the_child_gets_a_bound_loopback_socket_and_is_stopped_after_the_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child inherits the listening socket (``--fd``); while the block runs Prefect and
    the environment point at it; after it the child is gone and the variable restored."""
    # A stand-in that answers /health on the inherited socket as uvicorn would.
    script = tmp_path / "serve.py"
    script.write_text(
        "import socket, sys\n"
        "fd = int(sys.argv[sys.argv.index('--fd') + 1])\n"
        "sock = socket.socket(fileno=fd)\n"
        "while True:\n"
        "    conn, _ = sock.accept()\n"
        "    conn.recv(4096)\n"
        "    conn.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 4\\r\\n"
        "Connection: close\\r\\n\\r\\ntrue')\n"
        "    conn.close()\n")
    import sys

    exe = _fake_python(tmp_path, f'exec "{sys.executable}" "{script}" "$@"')
    monkeypatch.setattr(local_prefect.sys, "executable", str(exe))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    from prefect.settings import get_current_settings

    before = get_current_settings().api.url
    heartbeat = get_current_settings().flows.heartbeat_frequency
    server = LocalServer(tmp_path)
    server.launch()
    process = server.process
    assert process is not None and server.port > 0
    with local_server(server):
        assert os.environ["PREFECT_API_URL"] == f"http://127.0.0.1:{server.port}/api"
        assert get_current_settings().api.url == server.api_url
        # no flow-run heartbeats to a server that stops with the command
        assert get_current_settings().flows.heartbeat_frequency is None
    assert process.poll() is not None and server.process is None
    assert "PREFECT_API_URL" not in os.environ
    assert get_current_settings().api.url == before
    assert get_current_settings().flows.heartbeat_frequency == heartbeat


def test_no_server_leaves_prefect_as_configured() -> None:
    url = os.environ.get("PREFECT_API_URL")
    with local_server(None):
        assert os.environ.get("PREFECT_API_URL") == url
