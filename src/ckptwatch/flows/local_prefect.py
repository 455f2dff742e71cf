"""Prefect set up by the commands that start it (``nightly``, ``demo``, ``ingest --flow``).

Prefect reads its settings once, when it is imported, so :func:`configure` runs first: it sets
the ``PREFECT_*`` variables :func:`ckptwatch.settings.prefect_environment` chooses (home in a
ckptwatch cache directory, telemetry and analytics off, warnings only unless ``--verbose``, a
longer startup timeout) and creates the home directory. :func:`start_local_server` then starts
Prefect's local (ephemeral) API server before the flow does, so that a server that does not
come up is one :class:`~ckptwatch.errors.PrefectStartError` line instead of a traceback.

This module imports nothing of Prefect at import time (the CLI imports it before Prefect).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Protocol

from ckptwatch.errors import PrefectStartError
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


def start_local_server() -> None:
    """Start Prefect's local API server now, unless a server is configured (``PREFECT_API_URL``,
    e.g. a test harness) or ephemeral mode is off (then Prefect says what to set)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return
    from prefect.server.api.server import SubprocessASGIServer

    start_server(SubprocessASGIServer(), settings.home,
                 settings.server.ephemeral.startup_timeout_seconds)


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
