"""Prefect's environment for the commands that start it (nightly, demo, ingest --flow/--dask):
its home, telemetry off, its log levels, its startup timeout. Prefect reads these variables
when it is imported; ``flows.local_prefect.configure`` hands them over."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

#: Seconds Prefect's local server may take to start. Its first start on a new home creates and
#: migrates its SQLite database (~15 s; more on a loaded machine); Prefect's default is 20.
PREFECT_STARTUP_TIMEOUT_S = 120


def _user_home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def prefect_home(environ: Mapping[str, str] | None = None) -> Path:
    """Prefect's home for the commands that start it: ``$PREFECT_HOME`` when set, else
    ``$XDG_CACHE_HOME/ckptwatch/prefect`` (an absolute ``XDG_CACHE_HOME``), else
    ``~/.cache/ckptwatch/prefect`` — never ``~/.prefect``.

    A cache directory, because what Prefect keeps there (its local server's database of past
    flow runs, ~20 MB) is disposable, and reusing it spares the next run the database's
    creation. Not the lake: the lake's layout is ckptwatch's data (synced, backed up, read by
    other tools), and several lakes would each carry a database.
    """
    env = os.environ if environ is None else environ
    if env.get("PREFECT_HOME"):
        return Path(env["PREFECT_HOME"]).expanduser()
    return cache_dir(env) / "prefect"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """ckptwatch's cache directory: ``$XDG_CACHE_HOME/ckptwatch`` (an absolute
    ``XDG_CACHE_HOME``), else ``~/.cache/ckptwatch``."""
    env = os.environ if environ is None else environ
    cache = env.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and Path(cache).is_absolute() else _user_home(env) / ".cache"
    return base / "ckptwatch"


#: The variables of the libraries that otherwise keep state in the user's home: matplotlib
#: (``~/.config/matplotlib``, ``~/.cache/matplotlib``: its font cache) and IPython
#: (``~/.ipython``: the profile the postmortem notebook's kernel creates), each to a directory
#: of :func:`cache_dir`.
TOOL_STATE_DIRS = {"MPLCONFIGDIR": "matplotlib", "IPYTHONDIR": "ipython"}


def use_cache_for_tool_state(environ: MutableMapping[str, str] | None = None) -> None:
    """Point matplotlib and IPython at ckptwatch's cache directory (:data:`TOOL_STATE_DIRS`),
    unless their variables are set already: before either is imported, so that a command
    writes nothing in the home beyond that cache. Idempotent; the directories are created by
    the libraries when they first write."""
    env = os.environ if environ is None else environ
    if all(env.get(var) for var in TOOL_STATE_DIRS):
        return
    base = cache_dir(env)
    for var, sub in TOOL_STATE_DIRS.items():
        if not env.get(var):
            env[var] = str(base / sub)


def prefect_environment(verbose: bool = False,
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a Prefect-backed command sets before it imports Prefect.

    Home: :func:`prefect_home`. Analytics and telemetry off: the server's analytics heartbeat
    (``PREFECT_SERVER_ANALYTICS_ENABLED``), the client's usage data (``DO_NOT_TRACK``), run
    telemetry (``PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY``) and resource metrics
    (``PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS``). Log: warnings only, the local server's
    only when critical; ``verbose``: INFO and the server's warnings. Startup timeout:
    :data:`PREFECT_STARTUP_TIMEOUT_S`. A value set in ``environ`` (default ``os.environ``)
    wins, except the two log levels when ``verbose`` is asked for.
    """
    env = os.environ if environ is None else environ
    levels = {"PREFECT_LOGGING_LEVEL": "INFO" if verbose else "WARNING",
              "PREFECT_SERVER_LOGGING_LEVEL": "WARNING" if verbose else "CRITICAL"}
    chosen = {
        "PREFECT_HOME": str(prefect_home(env)),
        **levels,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
        "PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(PREFECT_STARTUP_TIMEOUT_S),
    }
    return {k: v if verbose and k in levels else env.get(k) or v for k, v in chosen.items()}
