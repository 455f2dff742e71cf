"""Prefect set up by the commands that start it (``nightly``, ``demo``, ``ingest --flow``).

Prefect reads its settings once, when it is imported, so :func:`configure` runs first: it sets
the ``PREFECT_*`` variables :func:`ckptwatch.settings.prefect_environment` chooses (home in a
ckptwatch cache directory, telemetry and analytics off, warnings only unless ``--verbose``, a
longer startup timeout) and creates the home directory. :func:`start_local_server` then launches
Prefect's local (ephemeral) API server before the command imports its flow, and
:func:`local_server` waits for it around the flow's run, so that the server boots while the flow
imports and a server that does not come up is one :class:`~ckptwatch.errors.PrefectStartError`
line instead of a traceback.

This module imports nothing of Prefect at import time (the CLI imports it before Prefect).
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from ckptwatch.errors import CkptwatchError, PrefectStartError
from ckptwatch.settings import PREFECT_STARTUP_TIMEOUT_S, prefect_environment

#: Help of the ``--verbose`` flag of every command that starts Prefect.
VERBOSE_HELP = ("show Prefect's own log (flow and task runs, its local server) on stderr; "
                "without it only warnings and ckptwatch's lines")


class _Server(Protocol):
    """What :func:`start_server` needs of Prefect's ``SubprocessASGIServer``."""

    def start(self, timeout: int | None = None) -> None:
        """Start the server, or raise."""
        ...


def configure(verbose: bool = False, *, environ: MutableMapping[str, str] | None = None,
              modules: Mapping[str, object] | None = None) -> Path | None:
    """Set Prefect's environment and create its home; returns the home (``None``: not done).

    Does nothing when Prefect is already imported (``modules``, default ``sys.modules``): its
    settings are fixed then (a test harness, a Prefect worker running the flow), and changing
    the variables would only reach the processes it starts. ``environ`` (default
    ``os.environ``) is read and updated. Raises :class:`PrefectStartError` when the home
    directory cannot be created.
    """
    env = os.environ if environ is None else environ
    if "prefect" in (sys.modules if modules is None else modules):
        return None
    values = prefect_environment(verbose, env)
    home = Path(values["PREFECT_HOME"])
    try:
        home.mkdir(parents=True, exist_ok=True)  # Prefect itself makes only the last level
    except OSError as exc:
        raise PrefectStartError(
            f"cannot create Prefect's home directory {home}: {exc.strerror or exc}; set "
            "PREFECT_HOME (or XDG_CACHE_HOME) to a writable directory") from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise PrefectStartError(f"Prefect's home directory {home} is not writable; set "
                                "PREFECT_HOME (or XDG_CACHE_HOME) to a writable directory")
    env.update(values)
    return home


class LocalServer:
    """Prefect's local API server in a child process, answering on a loopback socket this
    process binds (so no other process can take the port between choosing and listening).

    What Prefect's own ``SubprocessASGIServer`` runs (uvicorn, ``create_app``, the UI off), but
    started without importing ``prefect.server`` here (~4 s of CPU that the child pays anyway)
    and without waiting: the command imports its flow while the server boots, then
    :func:`local_server` waits. Its output goes to ``server.log`` in Prefect's home
    (``verbose``: to stderr).
    """

    def __init__(self, home: Path, verbose: bool = False) -> None:
        self.home = home
        self.verbose = verbose
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    def launch(self) -> None:
        """Start the child process (raises ``OSError``)."""
        spec = importlib.util.find_spec("prefect")
        app_dir = Path(spec.origin).parent.parent if spec and spec.origin else None
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1"}
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            self.port = sock.getsockname()[1]
            fd = sock.fileno()
            args = [sys.executable, "-m", "uvicorn", "--factory",
                    "prefect.server.api.server:create_app", "--fd", str(fd),
                    "--log-level", "error", "--lifespan", "on"]
            if app_dir is not None:
                args[3:3] = ["--app-dir", str(app_dir)]
            if self.verbose:
                self.process = subprocess.Popen(args, env=env, pass_fds=(fd,),
                                                stdin=subprocess.DEVNULL)
            else:
                with open(self.log_path, "wb") as log:
                    self.process = subprocess.Popen(args, env=env, pass_fds=(fd,),
                                                    stdin=subprocess.DEVNULL, stdout=log,
                                                    stderr=subprocess.STDOUT)
        atexit.register(self.stop)  # whatever fails before local_server() stops it

    def start(self, timeout: int | None = None) -> None:
        """Launch (unless launched) and wait until the server answers ``/health``; raises
        ``RuntimeError`` when it exits or does not answer within ``timeout`` seconds."""
        if self.process is None:
            self.launch()
        assert self.process is not None
        limit = time.monotonic() + (timeout or PREFECT_STARTUP_TIMEOUT_S)
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"its process exited with code {code}{self._last_line()}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > limit:
                raise RuntimeError(f"no answer from {self.api_url}/health within "
                                   f"{timeout or PREFECT_STARTUP_TIMEOUT_S} s")
            time.sleep(0.05)

    def _last_line(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]} (log: {self.log_path})" if lines and not self.verbose else ""

    def stop(self) -> None:
        """Stop the child process (terminate; kill after 5 s)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def start_local_server(verbose: bool = False) -> LocalServer | None:
    """Launch Prefect's local API server now, without waiting for it (:func:`local_server`
    waits), unless a server is configured (``PREFECT_API_URL``, e.g. a test harness) or
    ephemeral mode is off (then Prefect says what to set): ``None`` then."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return None
    server = LocalServer(Path(settings.home), verbose)
    try:
        server.launch()
    except OSError as exc:
        raise PrefectStartError(f"Prefect's local server could not be started: "
                                f"{exc.strerror or exc}; its home is {settings.home}") from None
    return server


@contextmanager
def local_server(server: _Server | None) -> Iterator[None]:
    """Wait for ``server`` (from :func:`start_local_server`) to answer and point Prefect (and
    the processes this one starts: Dask workers) at it for the block; stop it after. ``None``:
    Prefect's configured server, nothing to do.

    Flow-run heartbeats are off against this server: they let a server that outlives a run
    mark it crashed when they stop, and this one stops with the command. Each flow run's end
    otherwise waits up to a second for its heartbeat thread to wake: more than half of a small
    flow's run (a subflow and two tasks)."""
    one_line_failures()
    if server is None:
        yield
        return
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    settings = get_current_settings()
    try:
        start_server(server, settings.home, settings.server.ephemeral.startup_timeout_seconds)
        url = getattr(server, "api_url", None)
        if url is None:  # a server that sets Prefect's settings itself
            yield
            return
        before = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        try:
            with temporary_settings(updates={PREFECT_API_URL: url,
                                             PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
                try:
                    yield
                finally:
                    drain_clients()
        finally:
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before
    finally:
        stop = getattr(server, "stop", None)
        if stop is not None:
            stop()


#: Seconds :func:`drain_clients` waits for each of Prefect's background clients.
DRAIN_TIMEOUT_S = 10.0


def drain_clients(timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    """Send what Prefect's log and event clients still hold, while the local server answers.

    Both are background services that Prefect otherwise drains at interpreter exit: by then
    :func:`local_server` has stopped the server, so the clients retry their connection for
    about a minute and print "Error logging to API" (``--verbose`` logs INFO records to the
    API, so the log client holds some at the end of every run). Waits at most ``timeout_s``
    for each; a client that never started has nothing to send.
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        try:
            service.drain_all(timeout=timeout_s)
        except Exception as exc:  # a client that cannot drain must not fail a finished run
            logging.getLogger(__name__).debug("could not drain %s: %s", service.__name__, exc)


class _OneLineFailures(logging.Filter):
    """Prefect logs an exception raised in a flow or task run at ERROR with its traceback. A
    :class:`~ckptwatch.errors.CkptwatchError` is a failure the command reports itself, in one
    line: its record becomes INFO without the traceback, so it is logged only where INFO is
    (``--verbose``); the flow run's Failed state in Prefect carries its message either way."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, CkptwatchError) or record.levelno <= logging.INFO:
            return True
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)


def one_line_failures() -> None:
    """Put :class:`_OneLineFailures` on Prefect's flow-run and task-run loggers (once)."""
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLineFailures) for f in logger.filters):
            logger.addFilter(_OneLineFailures())


def start_server(server: _Server, home: Path | str,
                 timeout_s: int = PREFECT_STARTUP_TIMEOUT_S) -> None:
    """``server.start()``; any failure becomes one :class:`PrefectStartError` line naming the
    home, the timeout and what to try."""
    try:
        server.start()
    except Exception as exc:  # whatever Prefect raises: one line (the cause is in --verbose)
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        cause = lines[0] if len(lines[0]) <= 200 else lines[0][:199] + "…"
        raise PrefectStartError(
            f"Prefect's local server did not start ({cause}); its home is {home}. Run "
            f"again with --verbose to see its log; on a slow machine raise "
            f"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS (now {timeout_s} s)") from None
