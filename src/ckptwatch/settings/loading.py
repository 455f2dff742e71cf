"""Loading the settings tree (:class:`~ckptwatch.settings.models.Settings`): the
``ckptwatch.toml`` config file, then the environment (``CKPTWATCH_*``), then a command's flags.
A command or a flow loads it once, at its entry, and passes it down; no other module of the
package reads ``os.environ`` for ckptwatch's own settings (a test holds every module to that).

Which file: ``--config FILE`` (passed here as ``path``), else ``$CKPTWATCH_CONFIG``, else none
(built-in defaults). The file is TOML; every table and key is optional::

    [alerts]                      # timeout headroom: levels are fractions of the job's timeout
    warning = 0.7
    critical = 0.9
    window = 20                   # trailing checkpoints per job
    horizon_s = 21600             # forecast horizon
    stale_after_s = 86400         # a job is history after max(this, stale_intervals x its
    stale_intervals = 3           # checkpoint interval) without a record

    [alerts.jobs."llama-70b"]     # per-job overrides: warning, critical, window, horizon_s,
    critical = 0.85               # tail, enabled, stale_after_s, stale_intervals

    [sinks]
    stdout = true
    jsonl = "alerts.jsonl"        # relative paths are relative to the config file
    webhook_url = "https://hooks.example.com/ckptwatch"
    webhook_token_env = "CKPTWATCH_WEBHOOK_TOKEN"
    alertmanager_url = "http://127.0.0.1:9093"
    alertmanager_basic_auth_env = "CKPTWATCH_AM_BASIC_AUTH"   # "user:password"

    [prometheus]                  # `ckptwatch pull prometheus`, and the nightly flow's pull
    url = "http://prometheus:9090"
    token_env = "CKPTWATCH_PROMETHEUS_TOKEN"    # or basic_auth_env ("user:password")
    step_s = 15
    node_map = "nodes.csv"        # instance,node (default: the instance without its :port)

    [pool.prometheus]             # the pool's own exporter series (ckptwatch.settings.pool)
    preset = "lustrefs-exporter"  # lustrefs-exporter, daos, gpfs_exporter, weka, vast

    [nightly]                     # the nightly run's metrics for node_exporter's textfile collector
    metrics_file = "/var/lib/prometheus/node-exporter/ckptwatch_nightly.prom"

Secrets (tokens, basic auth, a secret-bearing webhook URL) are read from the environment
variable a ``*_env`` key names — or, discouraged, from a literal key in the file — and are held
as :class:`Secret`, whose ``repr``/``str`` never show the value. :meth:`Settings.secrets`
lists every secret value so that output and errors can be passed through :func:`redact`.
See ``examples/ckptwatch.toml`` for every key with its meaning.
"""

from __future__ import annotations

import logging
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ckptwatch.errors import ConfigError
from ckptwatch.settings.models import (
    INGEST,
    JOB_KEYS,
    PROMETHEUS_BASIC_AUTH_ENV,
    PROMETHEUS_TOKEN_ENV,
    TAIL_STATS,
    URL_FIELDS,
    AlertSettings,
    IngestSettings,
    JobAlertSettings,
    NightlySettings,
    PathSettings,
    PrefectSettings,
    PrometheusSettings,
    Settings,
    SinkSettings,
    WatchSettings,
)
from ckptwatch.settings.paths import (
    LAKE_ENV,
    MODEL_ENV,
    SQL_DIR_ENV,
    default_lake,
    model_path,
    sql_dir,
)
from ckptwatch.settings.pool import pool_settings
from ckptwatch.settings.prefect_env import PREFECT_STARTUP_TIMEOUT_S, prefect_home
from ckptwatch.settings.secrets import Secret

CONFIG_ENV = "CKPTWATCH_CONFIG"

log = logging.getLogger(__name__)

# -- loading ----------------------------------------------------------------------------------

_ALERT_KEYS = {"min_forecast_points", "resolve_margin", "resolve_after", "resend_after_s",
               "firing_ttl_s", "runbook_url", "dashboard_url", "jobs", *JOB_KEYS} - {"enabled"}
_SINK_KEYS = {"stdout", "jsonl", "webhook_url", "webhook_url_env", "webhook_token",
              "webhook_token_env", "alertmanager_url", "alertmanager_basic_auth",
              "alertmanager_basic_auth_env", "alertmanager_token", "alertmanager_token_env",
              "timeout_s"}


def config_path(path: Path | str | None = None,
                environ: Mapping[str, str] | None = None) -> Path | None:
    """The config file to read: ``path``, else ``$CKPTWATCH_CONFIG``, else None."""
    env = os.environ if environ is None else environ
    if path is not None:
        return Path(path)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    return None


def load_settings(path: Path | str | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings: ``path`` or ``$CKPTWATCH_CONFIG``, or no file (the defaults), then
    the environment.

    ``environ`` (default ``os.environ``) supplies ``CKPTWATCH_CONFIG``, the secrets the file
    names and the ``CKPTWATCH_*`` variables. Raises :class:`ConfigError` naming the file, the
    key and what to do.
    """
    env = os.environ if environ is None else environ
    file = config_path(path, env)
    if file is None:
        return settings_from_dict({}, environ=env)
    origin = f" (from ${CONFIG_ENV})" if path is None else ""
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config file {file}{origin} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    out = settings_from_dict(data, base_dir=file.parent, environ=env, source=file)
    source_origin = "flag (--config)" if path is not None else f"environment (${CONFIG_ENV})"
    return replace(out, origins={**out.origins, "config_file": source_origin})


def settings_from_dict(data: Mapping[str, Any], *, base_dir: Path | None = None,
                       environ: Mapping[str, str] | None = None,
                       source: Path | None = None) -> Settings:
    """Settings from parsed TOML (``base_dir`` resolves relative paths; default: cwd) and the
    environment (``environ``, default ``os.environ``)."""
    env = os.environ if environ is None else environ
    where = str(source) if source else "settings"
    _check_keys(where, "", data, {"alerts", "sinks", "prometheus", "pool", "nightly"})
    alerts = _alert_settings(where, _table(where, "alerts", data.get("alerts", {})))
    sinks = _sink_settings(where, _table(where, "sinks", data.get("sinks", {})),
                           base_dir or Path.cwd(), env)
    prometheus = prometheus_settings(
        where, _table(where, "prometheus", data.get("prometheus", {})), base_dir or Path.cwd(),
        env)
    origins = _file_origins(data)
    ingest, ingest_origins = _ingest(env, {})
    origins.update(ingest_origins)
    for table, holder in (("sinks", sinks), ("prometheus", prometheus)):
        for key in _SECRET_KEYS[table]:
            secret = getattr(holder, key)
            if isinstance(secret, Secret) and secret.origin.startswith("$"):
                origins.setdefault(f"{table}.{key}", f"environment ({secret.origin})")
    watch = WatchSettings(max_record_bytes=ingest.max_record_bytes)
    if "ingest.max_record_bytes" in origins:
        origins["watch.max_record_bytes"] = origins["ingest.max_record_bytes"]
    paths = PathSettings(lake=default_lake(env), model=model_path(env), sql_dir=sql_dir(env))
    pool = pool_settings(where, _table(where, "pool", data.get("pool", {})), paths.sql_dir)
    for key, var in (("lake", LAKE_ENV), ("model", MODEL_ENV), ("sql_dir", SQL_DIR_ENV)):
        if var in env:
            origins[f"paths.{key}"] = f"environment (${var})"
    memory = env.get(DUCKDB_MEMORY_ENV) or None
    nightly = _nightly(where, _table(where, "nightly", data.get("nightly", {})),
                       base_dir or Path.cwd())
    if memory:
        origins["duckdb_memory"] = origins["nightly.duckdb_memory"] = \
            f"environment (${DUCKDB_MEMORY_ENV})"
        nightly = replace(nightly, duckdb_memory=memory)
    return Settings(alerts=alerts, sinks=sinks, prometheus=prometheus, source=source,
                    ingest=ingest, watch=watch, nightly=nightly, paths=paths,
                    duckdb_memory=_memory_cap(memory or ""),
                    prefect=_prefect(env, origins), pool=pool, origins=origins)


#: The settings that hold a secret (from ``<key>_env``, a literal ``<key>``, or a default
#: variable), by table.
_SECRET_KEYS = {"sinks": ("webhook_token", "alertmanager_basic_auth", "alertmanager_token"),
                "prometheus": ("token", "basic_auth")}


def _file_origins(data: Mapping[str, Any]) -> dict[str, str]:
    """Dotted names of the tree the file sets (``[alerts] warning`` is
    ``alerts.defaults.warning``; a ``*_env`` key names the secret it reads)."""
    out: dict[str, str] = {}
    for table in ("alerts", "sinks", "prometheus", "nightly"):
        values = data.get(table, {})
        for key in values:
            if table == "alerts" and key == "jobs":
                for job_id, over in values["jobs"].items():
                    for k in over:
                        out[f'alerts.jobs."{job_id}".{k}'] = "file"
                continue
            if key.endswith("_env"):
                name = key[:-len("_env")]
                out[f"{table}.{name}"] = f"environment (${values[key]}, named in the file)"
                if name == "webhook_url":
                    out["sinks.webhook_url_secret"] = "file"
                continue
            if table == "alerts" and key in JOB_KEYS:
                out[f"alerts.defaults.{key}"] = "file"
            else:
                out[f"{table}.{key}"] = "file"
    pool = data.get("pool")
    pool = pool.get("prometheus") if isinstance(pool, Mapping) else None
    for key, name in (("preset", "presets"), ("rules", "rules")):
        if isinstance(pool, Mapping) and key in pool:
            out[f"pool.prometheus.{name}"] = "file"
    return out


#: What node_exporter's textfile collector reads: ``*.prom`` files only.
METRICS_FILE_SUFFIX = ".prom"


def metrics_file_path(text: str, base_dir: Path) -> Path:
    """A metrics file path (relative: to ``base_dir``); ValueError unless it names a
    ``*.prom`` file, the only files node_exporter's textfile collector reads."""
    p = Path(text).expanduser()
    if not text or p.suffix != METRICS_FILE_SUFFIX or p.name == METRICS_FILE_SUFFIX:
        raise ValueError(f"must be a file whose name ends in {METRICS_FILE_SUFFIX} "
                         f"(node_exporter's textfile collector reads only those), got {text!r}")
    return p if p.is_absolute() else base_dir / p


def _nightly(where: str, data: Mapping[str, Any], base_dir: Path) -> NightlySettings:
    """``[nightly]``: ``metrics_file`` (relative to the config file's directory)."""
    _check_keys(where, "nightly", data, {"metrics_file"})
    if "metrics_file" not in data:
        return NightlySettings()
    value = data["metrics_file"]
    try:
        if not isinstance(value, str):
            raise ValueError(f"must be a file path, got {value!r}")
        path = metrics_file_path(value, base_dir)
    except ValueError as exc:
        raise ConfigError(f"{where}: [nightly] metrics_file {exc}") from None
    return NightlySettings(metrics_file=path)


def _prefect(env: Mapping[str, str], origins: dict[str, str]) -> PrefectSettings:
    """Prefect's home and startup timeout (``prefect_env``), and where they came from."""
    for var in ("PREFECT_HOME", "XDG_CACHE_HOME"):
        if env.get(var):
            origins["prefect.home"] = f"environment (${var})"
            break
    timeout = PREFECT_STARTUP_TIMEOUT_S
    text = env.get(PREFECT_TIMEOUT_ENV, "").strip()
    if text.isdigit():  # Prefect itself reads the variable and says what is wrong with it
        timeout = int(text)
        origins["prefect.startup_timeout_s"] = f"environment (${PREFECT_TIMEOUT_ENV})"
    return PrefectSettings(home=prefect_home(env), startup_timeout_s=timeout)


#: The variable Prefect reads for its local server's startup timeout.
PREFECT_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"


def _table(where: str, name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table (got {type(value).__name__})")
    return value


def _check_keys(where: str, table: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        label = f"[{table}] " if table else ""
        raise ConfigError(f"{where}: unknown key {label}{unknown[0]!r} "
                          f"(known: {', '.join(sorted(known))})")


def _number(where: str, table: str, key: str, value: Any, *, lo: float, hi: float = math.inf,
            lo_open: bool = False, integer: bool = False) -> float:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{where}: [{table}] {key} must be {kind} (got {value!r})")
    low_bad = value <= lo if lo_open else value < lo
    if low_bad or value > hi or math.isnan(value):
        rng = f"{'>' if lo_open else '>='} {lo:g}" + (f" and <= {hi:g}" if hi < math.inf else "")
        raise ConfigError(f"{where}: [{table}] {key} must be {rng} (got {value!r})")
    return value


def _job_settings(where: str, table: str, data: Mapping[str, Any],
                  base: JobAlertSettings) -> JobAlertSettings:
    _check_keys(where, table, data, set(JOB_KEYS))
    values: dict[str, Any] = {}
    for key in ("warning", "critical"):
        if key in data:
            values[key] = float(_number(where, table, key, data[key], lo=0, hi=1, lo_open=True))
    if "window" in data:
        values["window"] = int(_number(where, table, "window", data["window"], lo=1,
                                       integer=True))
    if "horizon_s" in data:
        values["horizon_s"] = float(_number(where, table, "horizon_s", data["horizon_s"], lo=0))
    if "stale_after_s" in data:
        values["stale_after_s"] = float(_number(where, table, "stale_after_s",
                                                data["stale_after_s"], lo=0, lo_open=True))
    if "stale_intervals" in data:
        values["stale_intervals"] = float(_number(where, table, "stale_intervals",
                                                  data["stale_intervals"], lo=0))
    if "tail" in data:
        if data["tail"] not in TAIL_STATS:
            raise ConfigError(f"{where}: [{table}] tail must be one of {', '.join(TAIL_STATS)} "
                              f"(got {data['tail']!r})")
        values["tail"] = data["tail"]
    if "enabled" in data:
        if not isinstance(data["enabled"], bool):
            raise ConfigError(f"{where}: [{table}] enabled must be true or false")
        values["enabled"] = data["enabled"]
    merged = replace(base, **values)
    if merged.warning >= merged.critical:
        raise ConfigError(f"{where}: [{table}] warning ({merged.warning:g}) must be below "
                          f"critical ({merged.critical:g})")
    return merged


def _alert_settings(where: str, data: Mapping[str, Any]) -> AlertSettings:
    _check_keys(where, "alerts", data, _ALERT_KEYS)
    defaults = _job_settings(where, "alerts", {k: v for k, v in data.items() if k in JOB_KEYS},
                             JobAlertSettings())
    jobs_table = _table(where, "alerts.jobs", data.get("jobs", {}))
    jobs = {str(job_id): _job_settings(where, f'alerts.jobs."{job_id}"',
                                       _table(where, f'alerts.jobs."{job_id}"', over), defaults)
            for job_id, over in jobs_table.items()}
    values: dict[str, Any] = {}
    if "min_forecast_points" in data:
        values["min_forecast_points"] = int(_number(where, "alerts", "min_forecast_points",
                                                    data["min_forecast_points"], lo=3,
                                                    integer=True))
    if "resolve_margin" in data:
        values["resolve_margin"] = float(_number(where, "alerts", "resolve_margin",
                                                 data["resolve_margin"], lo=0, hi=0.5))
    if "resolve_after" in data:
        values["resolve_after"] = int(_number(where, "alerts", "resolve_after",
                                              data["resolve_after"], lo=1, integer=True))
    for key in ("resend_after_s", "firing_ttl_s"):
        if key in data:
            values[key] = float(_number(where, "alerts", key, data[key], lo=0, lo_open=True))
    for key in ("runbook_url", "dashboard_url"):
        if key in data:
            values[key] = _url_template(where, key, data[key])
    out = AlertSettings(defaults=defaults, jobs=jobs, **values)
    if out.resend_after_s >= out.firing_ttl_s:
        raise ConfigError(f"{where}: [alerts] resend_after_s ({out.resend_after_s:g}) must be "
                          f"below firing_ttl_s ({out.firing_ttl_s:g}), or Alertmanager expires "
                          "firing alerts before they are refreshed")
    return out


def _url_template(where: str, key: str, value: Any) -> str:
    """An annotation URL template: only the placeholders of ``URL_FIELDS``."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: [alerts] {key} must be a string (got {value!r})")
    try:
        value.format(**dict.fromkeys(URL_FIELDS, ""))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{where}: [alerts] {key} {value!r}: bad placeholder {exc} (known: "
                          + ", ".join("{" + f + "}" for f in URL_FIELDS) + ")") from None
    return value


def _secret(where: str, data: Mapping[str, Any], key: str,
            env: Mapping[str, str], table: str = "sinks") -> Secret | None:
    """A secret from ``<key>_env`` (name of an environment variable) or literal ``<key>``."""
    env_key = f"{key}_env"
    if key in data and env_key in data:
        raise ConfigError(f"{where}: [{table}] set {key} or {env_key}, not both")
    if env_key in data:
        name = data[env_key]
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: [{table}] {env_key} must name an environment variable")
        value = env.get(name)
        if not value:
            raise ConfigError(f"{where}: [{table}] {env_key} names ${name}, which is not set "
                              "(export it, or remove the key)")
        return Secret(value, f"${name}")
    if key in data:
        value = data[key]
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: [{table}] {key} must be a non-empty string")
        log.warning("%s: [%s] %s is a literal secret in the config file; prefer %s "
                    "naming an environment variable", where, table, key, env_key)
        return Secret(value, f"{where} [{table}] {key}")
    return None


def _url(where: str, key: str, value: Any, table: str = "sinks") -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: [{table}] {key} must be a string URL")
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{where}: [{table}] {key} has an invalid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        got = f"scheme {parts.scheme!r}" if parts.hostname else "no host"
        raise ConfigError(f"{where}: [{table}] {key} must be an http:// or https:// URL "
                          f"(got {got})")
    return value


def _sink_settings(where: str, data: Mapping[str, Any], base_dir: Path,
                   env: Mapping[str, str]) -> SinkSettings:
    _check_keys(where, "sinks", data, _SINK_KEYS)
    values: dict[str, Any] = {}
    if "stdout" in data:
        if not isinstance(data["stdout"], bool):
            raise ConfigError(f"{where}: [sinks] stdout must be true or false")
        values["stdout"] = data["stdout"]
    if "jsonl" in data:
        if not isinstance(data["jsonl"], str) or not data["jsonl"]:
            raise ConfigError(f"{where}: [sinks] jsonl must be a file path")
        p = Path(data["jsonl"]).expanduser()
        values["jsonl"] = p if p.is_absolute() else base_dir / p
    if "webhook_url" in data and "webhook_url_env" in data:
        raise ConfigError(f"{where}: [sinks] set webhook_url or webhook_url_env, not both")
    if "webhook_url" in data:
        values["webhook_url"] = _url(where, "webhook_url", data["webhook_url"])
    elif "webhook_url_env" in data:  # a URL that is itself a secret (e.g. a token in its path)
        url_secret = _secret(where, {"webhook_url_env": data["webhook_url_env"]},
                             "webhook_url", env)
        assert url_secret is not None
        values["webhook_url"] = _url(where, "webhook_url_env", url_secret.reveal())
        values["webhook_url_secret"] = True
    values["webhook_token"] = _secret(where, data, "webhook_token", env)
    if "alertmanager_url" in data:
        values["alertmanager_url"] = _url(where, "alertmanager_url", data["alertmanager_url"])
    auth = _secret(where, data, "alertmanager_basic_auth", env)
    if auth is not None and ":" not in auth.reveal():
        raise ConfigError(f"{where}: [sinks] alertmanager_basic_auth ({auth.origin}) must be "
                          "user:password")
    values["alertmanager_basic_auth"] = auth
    values["alertmanager_token"] = _secret(where, data, "alertmanager_token", env)
    if "timeout_s" in data:
        values["timeout_s"] = float(_number(where, "sinks", "timeout_s", data["timeout_s"],
                                            lo=0, lo_open=True))
    return SinkSettings(**values)


_PROMETHEUS_KEYS = {"url", "basic_auth", "basic_auth_env", "token", "token_env", "timeout_s",
                    "retries", "step_s", "max_points_per_query", "max_points", "node_label",
                    "node_map", "around_margin_s", "nightly_since_s"}


def prometheus_settings(where: str, data: Mapping[str, Any], base_dir: Path,
                        environ: Mapping[str, str] | None = None) -> PrometheusSettings:
    """The ``[prometheus]`` table (``base_dir`` resolves ``node_map``). Without ``token*`` or
    ``basic_auth*`` keys, ``$CKPTWATCH_PROMETHEUS_TOKEN`` / ``$CKPTWATCH_PROMETHEUS_BASIC_AUTH``
    are used when set."""
    env = os.environ if environ is None else environ
    table = "prometheus"
    _check_keys(where, table, data, _PROMETHEUS_KEYS)
    values: dict[str, Any] = {}
    if "url" in data:
        values["url"] = _url(where, "url", data["url"], table)
    token = _secret(where, data, "token", env, table)
    auth = _secret(where, data, "basic_auth", env, table)
    if token is None and auth is None:
        if env.get(PROMETHEUS_TOKEN_ENV):
            token = Secret(env[PROMETHEUS_TOKEN_ENV], f"${PROMETHEUS_TOKEN_ENV}")
        elif env.get(PROMETHEUS_BASIC_AUTH_ENV):
            auth = Secret(env[PROMETHEUS_BASIC_AUTH_ENV], f"${PROMETHEUS_BASIC_AUTH_ENV}")
    if token is not None and auth is not None:
        raise ConfigError(f"{where}: [prometheus] set a bearer token or basic auth, not both")
    if auth is not None and ":" not in auth.reveal():
        raise ConfigError(f"{where}: [prometheus] basic_auth ({auth.origin}) must be "
                          "user:password")
    values["token"], values["basic_auth"] = token, auth
    for key in ("timeout_s", "step_s"):
        if key in data:
            values[key] = float(_number(where, table, key, data[key], lo=0, lo_open=True))
    for key in ("around_margin_s", "nightly_since_s"):
        if key in data:
            values[key] = float(_number(where, table, key, data[key], lo=0))
    if "retries" in data:
        values["retries"] = int(_number(where, table, "retries", data["retries"], lo=0, hi=10,
                                        integer=True))
    for key in ("max_points_per_query", "max_points"):
        if key in data:
            values[key] = int(_number(where, table, key, data[key], lo=1, integer=True))
    if "node_label" in data:
        label = data["node_label"]
        if not isinstance(label, str) or not label.replace("_", "a").isalnum():
            raise ConfigError(f"{where}: [prometheus] node_label must be a label name "
                              f"(got {label!r})")
        values["node_label"] = label
    if "node_map" in data:
        if not isinstance(data["node_map"], str) or not data["node_map"]:
            raise ConfigError(f"{where}: [prometheus] node_map must be a file path")
        p = Path(data["node_map"]).expanduser()
        values["node_map"] = p if p.is_absolute() else base_dir / p
    return PrometheusSettings(**values)


# -- the ingest: limits, batches, workers -----------------------------------------------------

#: The environment variable of each limit (the ``--max-*`` flags of ``ingest`` win over it).
INGEST_LIMIT_ENV = {
    "max_record_bytes": "CKPTWATCH_MAX_RECORD_BYTES",
    "max_field_chars": "CKPTWATCH_MAX_FIELD_CHARS",
    "max_decompressed_ratio": "CKPTWATCH_MAX_DECOMPRESSED_RATIO",
    "max_file_bytes": "CKPTWATCH_MAX_FILE_BYTES",
    "max_quarantine_rows": "CKPTWATCH_MAX_QUARANTINE_ROWS",
}
#: The environment variable of the number of parse workers (``auto`` or a positive integer).
WORKERS_ENV = "CKPTWATCH_INGEST_WORKERS"


def ingest_settings(environ: Mapping[str, str] | None = None,
                    **overrides: int | str | None) -> IngestSettings:
    """The ingest settings: the defaults, then the ``CKPTWATCH_MAX_*`` and
    ``CKPTWATCH_INGEST_WORKERS`` variables, then ``overrides`` (a limit's name, or
    ``workers``, -> value; None: not given). Raises :class:`ConfigError` for a value that is not
    a positive integer (``workers``: nor ``auto``)."""
    return _ingest(os.environ if environ is None else environ, overrides)[0]


def _ingest(env: Mapping[str, str], overrides: Mapping[str, int | str | None]
            ) -> tuple[IngestSettings, dict[str, str]]:
    """``ingest_settings``, and where each value not the default came from."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, var in INGEST_LIMIT_ENV.items():
        text = env.get(var, "").strip()
        if text:
            try:
                values[name] = int(text.replace("_", ""))
            except ValueError:
                raise ConfigError(f"${var} must be a positive integer (got {text!r})") from None
            if values[name] < 1:
                raise ConfigError(f"${var} must be a positive integer (got {text!r})")
            origins[f"ingest.{name}"] = f"environment (${var})"
    text = env.get(WORKERS_ENV, "").strip()
    if text:
        values["workers"] = parse_workers(text)
        origins["ingest.workers"] = f"environment (${WORKERS_ENV})"
    for name, value in overrides.items():
        if name == "workers":
            if value is not None:
                values["workers"] = parse_workers(value)
                origins["ingest.workers"] = "flag (--workers)"
            continue
        if name not in INGEST_LIMIT_ENV:
            raise TypeError(f"not an ingest limit: {name}")
        if value is not None:
            flag = f"--{name.replace('_', '-')}"
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{flag} must be a positive integer (got {value})")
            values[name] = value
            origins[f"ingest.{name}"] = f"flag ({flag})"
    return replace(INGEST, **values), origins


def parse_workers(value: int | str) -> int | None:
    """The number of parse workers ``value`` asks for: None for ``auto``. Raises
    ``ConfigError`` for anything but ``auto`` or a positive integer."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "auto":
            return None
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"ingest workers (--workers, {WORKERS_ENV}) must be 'auto' or a "
                              f"positive integer (got {text[:40]!r})") from None
    if value < 1:
        raise ConfigError(f"ingest workers (--workers, {WORKERS_ENV}) must be 'auto' or a "
                          f"positive integer (got {value})")
    return value


# -- DuckDB -------------------------------------------------------------------------------------

#: The environment variable of DuckDB's memory cap.
DUCKDB_MEMORY_ENV = "CKPTWATCH_DUCKDB_MEMORY"
#: ``memory_limit`` value that lifts the cap (DuckDB's own default: 80 % of RAM).
UNCAPPED = "none"


def duckdb_memory_limit(value: str | None = None) -> str | None:
    """DuckDB's memory cap (e.g. ``3GB``; it spills to disk beyond it): ``value`` when given,
    else ``$CKPTWATCH_DUCKDB_MEMORY``; ``None`` when unset or ``none`` (DuckDB's default, 80 %
    of RAM)."""
    return _memory_cap(duckdb_memory_setting(value, ""))


def _memory_cap(value: str) -> str | None:
    value = value.strip()
    return None if not value or value.lower() == UNCAPPED else value


def duckdb_memory_setting(value: str | None, default: str) -> str:
    """The memory cap as asked for: ``value``, else ``$CKPTWATCH_DUCKDB_MEMORY``, else
    ``default`` (``none`` stays ``none``: it lifts the cap where the connection is made)."""
    return value or os.environ.get(DUCKDB_MEMORY_ENV) or default
