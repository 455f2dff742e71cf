"""Settings and paths in one place: the ``ckptwatch.toml`` config file, the environment variables
(``CKPTWATCH_*``), the default lake and model paths, the package's own SQL and notebook, the
ingest limits. No other module reads ``os.environ`` for ckptwatch's own settings.

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

Secrets (tokens, basic auth, a secret-bearing webhook URL) are read from the environment
variable a ``*_env`` key names — or, discouraged, from a literal key in the file — and are held
as :class:`Secret`, whose ``repr``/``str`` never show the value. :meth:`Settings.secrets`
lists every secret value so that output and errors can be passed through :func:`redact`.
See ``examples/ckptwatch.toml`` for every key with its meaning.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import math
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ckptwatch.errors import ConfigError

CONFIG_ENV = "CKPTWATCH_CONFIG"
REDACTED = "***"
TAIL_STATS = ("max", "p99")

log = logging.getLogger(__name__)


class Secret:
    """A secret string. ``repr`` and ``str`` name where it came from, never its value."""

    __slots__ = ("_value", "origin")

    def __init__(self, value: str, origin: str) -> None:
        self._value = value
        self.origin = origin

    def reveal(self) -> str:
        """The secret value: only for building a request header, never for output."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(<from {self.origin}>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def url_secrets(url: str) -> list[str]:
    """Secret parts of a URL: the userinfo password (and user:password) and query values."""
    parts = urlsplit(url)
    out: list[str] = []
    if parts.password:
        out += [parts.password, f"{parts.username}:{parts.password}"]
    out += [v for _, v in parse_qsl(parts.query, keep_blank_values=False) if len(v) >= 4]
    return out


def display_url(url: str) -> str:
    """A URL fit for logs: no user:password, query string replaced by ``?…``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = "?…" if parts.query else ""
    return f"{parts.scheme}://{netloc}{parts.path}{query}"


# -- alert settings ---------------------------------------------------------------------------


#: The runbook of each alert: its section of docs/alerts.md in the ckptwatch source tree (set
#: ``[alerts] runbook_url`` to where your copy of the docs is served).
RUNBOOK_URL = "docs/alerts.md#{anchor}"
#: The watcher's Grafana dashboard (deploy/grafana, uid ckptwatch-live) for the alert's job,
#: relative to Grafana's root (set ``[alerts] dashboard_url`` to the full URL).
DASHBOARD_URL = "/d/ckptwatch-live/ckptwatch?var-job_id={job_id}&var-tier={tier}"
URL_FIELDS = ("alertname", "anchor", "job_id", "tier")


@dataclass(frozen=True)
class JobAlertSettings:
    """The alert knobs that apply to one job (global values merged with its overrides)."""

    #: Warning level as a fraction of the job's ``checkpoint_timeout_s``.
    warning: float = 0.7
    #: Critical level as a fraction of the timeout.
    critical: float = 0.9
    #: Trailing window: how many of the job's latest checkpoints make up its tail.
    window: int = 20
    #: Which statistic of the window's barrier times is "the tail": ``max`` or ``p99``.
    tail: str = "max"
    #: How far ahead of the last checkpoint the forecast may predict a crossing (seconds).
    horizon_s: float = 6 * 3600.0
    #: False: never alert on this job (a firing alert is resolved).
    enabled: bool = True
    #: Staleness: a job whose newest record is older than its horizon, the larger of this and
    #: ``stale_intervals`` x its ``checkpoint_interval_s``, is history: its alerts resolve and
    #: the watcher forgets it. ``stale_intervals = 0``: exactly ``stale_after_s``.
    stale_after_s: float = 86400.0
    stale_intervals: float = 3.0

    def stale_horizon_s(self, interval_s: float | None) -> float:
        """Seconds after its newest record that a job becomes history (see ``stale_after_s``)."""
        if interval_s is None or not interval_s > 0:
            return self.stale_after_s
        return max(self.stale_after_s, self.stale_intervals * interval_s)


JOB_KEYS = tuple(f.name for f in fields(JobAlertSettings))


@dataclass(frozen=True)
class AlertSettings:
    """Timeout-headroom alerting: levels, window, forecast, hysteresis and re-send policy."""

    defaults: JobAlertSettings = field(default_factory=JobAlertSettings)
    #: Per-job overrides, job_id -> the settings of that job.
    jobs: Mapping[str, JobAlertSettings] = field(default_factory=dict)
    #: No forecast from fewer checkpoints than this.
    min_forecast_points: int = 6
    #: Hysteresis: an alert clears only when the tail is below its level minus this fraction
    #: of the timeout ...
    resolve_margin: float = 0.05
    #: ... for this many consecutive evaluations.
    resolve_after: int = 3
    #: A still-firing alert is re-sent (to refresh Alertmanager's ``endsAt``) this long after
    #: it was last sent; it is not re-sent on the runs in between.
    resend_after_s: float = 2 * 86400.0
    #: ``endsAt`` of a firing alert = time sent + this (Alertmanager expires it then unless
    #: re-sent); must exceed ``resend_after_s`` by more than the interval between runs.
    firing_ttl_s: float = 4 * 86400.0
    #: Where an alert's ``runbook_url`` and ``dashboard_url`` annotations point: templates with
    #: ``{alertname}``, ``{anchor}`` (the alert's section of docs/alerts.md), ``{job_id}`` and
    #: ``{tier}`` (URL-quoted); an empty string leaves the annotation out.
    runbook_url: str = RUNBOOK_URL
    dashboard_url: str = DASHBOARD_URL

    def for_job(self, job_id: str) -> JobAlertSettings:
        """The settings that apply to ``job_id``."""
        return self.jobs.get(job_id, self.defaults)

    def max_window(self) -> int:
        """The largest trailing window over all jobs (how many checkpoints to read per job)."""
        return max([self.defaults.window, *(j.window for j in self.jobs.values())])


# -- sink settings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkSettings:
    """Where alerts go. Secrets are :class:`Secret`; URLs may carry none of their own."""

    #: Print each alert, human-readable, to stdout (the nightly flow's log).
    stdout: bool = True
    #: Append each alert as one JSON object a line to this file.
    jsonl: Path | None = None
    #: POST the JSON array of alerts to this URL.
    webhook_url: str | None = None
    #: True when the webhook URL itself came from a secret (then it is never shown whole).
    webhook_url_secret: bool = False
    #: Sent as ``Authorization: Bearer <token>`` to the webhook.
    webhook_token: Secret | None = None
    #: Alertmanager base URL; alerts are POSTed to ``<url>/api/v2/alerts``.
    alertmanager_url: str | None = None
    #: ``user:password`` for HTTP basic auth to Alertmanager.
    alertmanager_basic_auth: Secret | None = None
    #: Sent as ``Authorization: Bearer <token>`` to Alertmanager (e.g. behind a proxy).
    alertmanager_token: Secret | None = None
    #: HTTP timeout per attempt, seconds.
    timeout_s: float = 10.0

    def __repr__(self) -> str:  # URLs may carry credentials: show them as logs would
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_url") and isinstance(value, str):
                value = ("<secret URL>" if f.name == "webhook_url" and self.webhook_url_secret
                         else display_url(value))
            shown.append(f"{f.name}={value!r}")
        return f"SinkSettings({', '.join(shown)})"


# -- Prometheus as a source (`ckptwatch pull prometheus`) -------------------------------------

#: Environment variables read for the Prometheus server's credentials when the config file
#: names none (``[prometheus] token_env`` / ``basic_auth_env`` name others).
PROMETHEUS_TOKEN_ENV = "CKPTWATCH_PROMETHEUS_TOKEN"
PROMETHEUS_BASIC_AUTH_ENV = "CKPTWATCH_PROMETHEUS_BASIC_AUTH"


@dataclass(frozen=True)
class PrometheusSettings:
    """Reading SMART and fabric history from a Prometheus server's HTTP API."""

    #: Base URL of the server (``http://prometheus:9090``); None: the nightly flow pulls nothing.
    url: str | None = None
    #: ``user:password`` for HTTP basic auth.
    basic_auth: Secret | None = None
    #: Sent as ``Authorization: Bearer <token>``.
    token: Secret | None = None
    #: HTTP timeout per attempt, seconds.
    timeout_s: float = 30.0
    #: Retries after a connection error, a timeout, a 5xx or a 429 (as the alert sinks do).
    retries: int = 1
    #: Query resolution, seconds. At or below the scrape interval every stored sample is read.
    step_s: float = 15.0
    #: Most points (series x steps) one ``query_range`` request may return: the pull's memory
    #: bound. Prometheus itself refuses more than 11,000 steps per series.
    max_points_per_query: int = 200_000
    #: Most points a whole pull may read; a larger pull is refused before any query runs.
    max_points: int = 50_000_000
    #: The label that names the host (instance -> node: the value without its ``:port``).
    node_label: str = "instance"
    #: CSV file ``instance,node`` mapping label values to node names (a value it does not
    #: list falls back to the rule above).
    node_map: Path | None = None
    #: ``--around-checkpoints``: seconds read before each checkpoint's start and after its end
    #: (the samples that bracket the window, for counter deltas).
    around_margin_s: float = 300.0
    #: The nightly flow pulls the last this many seconds before it ingests.
    nightly_since_s: float = 26 * 3600.0

    def __repr__(self) -> str:  # the URL may carry credentials: show it as logs would
        url = display_url(self.url) if self.url else None
        return (f"PrometheusSettings(url={url!r}, basic_auth={self.basic_auth!r}, "
                f"token={self.token!r}, step_s={self.step_s!r}, node_map={self.node_map!r})")


@dataclass(frozen=True)
class Settings:
    """Every user setting: alerting and sinks, and the file they came from (None: defaults)."""

    alerts: AlertSettings = field(default_factory=AlertSettings)
    sinks: SinkSettings = field(default_factory=SinkSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    source: Path | None = None

    def secrets(self) -> list[str]:
        """Every secret value these settings hold, with the encodings a server may echo."""
        s = self.sinks
        out: list[str] = []
        for secret in (s.webhook_token, s.alertmanager_token):
            if secret is not None:
                out.append(secret.reveal())
        if s.alertmanager_basic_auth is not None:
            pair = s.alertmanager_basic_auth.reveal()
            out += [pair, base64.b64encode(pair.encode()).decode(), pair.partition(":")[2]]
        for url in (s.webhook_url, s.alertmanager_url):
            if url:
                out += url_secrets(url)
        if s.webhook_url and s.webhook_url_secret:
            out.append(s.webhook_url)
        p = self.prometheus
        if p.token is not None:
            out.append(p.token.reveal())
        if p.basic_auth is not None:
            pair = p.basic_auth.reveal()
            out += [pair, base64.b64encode(pair.encode()).decode(), pair.partition(":")[2]]
        if p.url:
            out += url_secrets(p.url)
        return [v for v in out if v]


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
    """Read the settings: ``path`` or ``$CKPTWATCH_CONFIG``, or the defaults when neither.

    ``environ`` (default ``os.environ``) supplies ``CKPTWATCH_CONFIG`` and the secrets the file
    names. Raises :class:`ConfigError` naming the file, the key and what to do.
    """
    env = os.environ if environ is None else environ
    file = config_path(path, env)
    if file is None:
        return Settings()
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
    return settings_from_dict(data, base_dir=file.parent, environ=env, source=file)


def settings_from_dict(data: Mapping[str, Any], *, base_dir: Path | None = None,
                       environ: Mapping[str, str] | None = None,
                       source: Path | None = None) -> Settings:
    """Settings from parsed TOML (``base_dir`` resolves relative paths; default: cwd)."""
    env = os.environ if environ is None else environ
    where = str(source) if source else "settings"
    _check_keys(where, "", data, {"alerts", "sinks", "prometheus"})
    alerts = _alert_settings(where, _table(where, "alerts", data.get("alerts", {})))
    sinks = _sink_settings(where, _table(where, "sinks", data.get("sinks", {})),
                           base_dir or Path.cwd(), env)
    prometheus = prometheus_settings(
        where, _table(where, "prometheus", data.get("prometheus", {})), base_dir or Path.cwd(),
        env)
    return Settings(alerts=alerts, sinks=sinks, prometheus=prometheus, source=source)


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


# -- paths and environment ---------------------------------------------------------------

#: The package's own data: the SQL views and the post-mortem notebook ship inside it (package
#: data of the wheel; in a checkout ``src/ckptwatch/sql`` and ``src/ckptwatch/notebooks`` are
#: links to the top-level ``sql/`` and ``notebooks/``, the one copy of each).
PACKAGE_DIR = Path(__file__).resolve().parent


def sql_dir() -> Path:
    """Directory of the layered SQL views (``CKPTWATCH_SQL_DIR`` overrides)."""
    env = os.environ.get("CKPTWATCH_SQL_DIR")
    if env:
        return Path(env)
    return PACKAGE_DIR / "sql"


def notebook_path() -> Path:
    """The post-mortem notebook shipped with the package."""
    return PACKAGE_DIR / "notebooks" / "stall_postmortem.ipynb"


def model_path() -> Path:
    """The attribution model file (``CKPTWATCH_MODEL`` overrides); built by `train-model`."""
    return Path(os.environ.get("CKPTWATCH_MODEL", "data/models/attribution.joblib"))


def default_lake() -> Path:
    """Default lake location (``CKPTWATCH_LAKE`` overrides): ``data/lake`` under the working dir."""
    return Path(os.environ.get("CKPTWATCH_LAKE", "data/lake"))


@dataclass(frozen=True)
class IngestSettings:
    """Knobs of the ingest path, and the limits on every input (RELIABILITY.md, "Limits").

    Each limit has an environment variable (``INGEST_LIMIT_ENV``) and a ``--max-*`` flag of
    ``ckptwatch ingest``; :func:`ingest_settings` applies them, :func:`active_ingest` is what
    the readers use.
    """

    #: Longest raw text kept with a quarantined record (bytes of UTF-8).
    quarantine_raw_max: int = 4096
    #: Timestamp columns earlier than this year are rejected as implausible.
    min_year: int = 2000
    #: ... and later than this one.
    max_year: int = 2100
    #: Longest record: a line of a JSON Lines, CSV or envelope file, or a bare tool output
    #: (bytes). A longer one is quarantined unread; the rest of the file goes on.
    max_record_bytes: int = 1 << 20
    #: Longest text value (job_id, node, device, target, port, pool, counter and metric
    #: names, …) in characters; a record with a longer one is quarantined.
    max_field_chars: int = 256
    #: A compressed file is read up to this many times its size ...
    max_decompressed_ratio: int = 64
    #: ... and no file beyond this many (decompressed) bytes; a file cut off is ``failed``.
    max_file_bytes: int = 4 << 30
    #: Quarantine rows kept per file; the rest are counted in one summary row, and the file
    #: is ``failed``.
    max_quarantine_rows: int = 1000
    #: A JSON Lines table file over this many bytes is read and typed a chunk of whole lines
    #: of about this size at a time (``sources.tabular.read_table``): a knob, not a limit.
    table_chunk_bytes: int = 32 << 20

    def decompressed_limit(self, compressed_bytes: int) -> int:
        """Most bytes a compressed file of ``compressed_bytes`` is read to."""
        return min(self.max_decompressed_ratio * max(compressed_bytes, 1), self.max_file_bytes)


#: The environment variable of each limit (the ``--max-*`` flags of ``ingest`` win over it).
INGEST_LIMIT_ENV = {
    "max_record_bytes": "CKPTWATCH_MAX_RECORD_BYTES",
    "max_field_chars": "CKPTWATCH_MAX_FIELD_CHARS",
    "max_decompressed_ratio": "CKPTWATCH_MAX_DECOMPRESSED_RATIO",
    "max_file_bytes": "CKPTWATCH_MAX_FILE_BYTES",
    "max_quarantine_rows": "CKPTWATCH_MAX_QUARANTINE_ROWS",
}

#: The built-in defaults (``active_ingest()`` is what applies to a run).
INGEST = IngestSettings()

_ACTIVE_INGEST: ContextVar[IngestSettings | None] = ContextVar("ckptwatch_ingest",
                                                               default=None)


def ingest_settings(environ: Mapping[str, str] | None = None,
                    **overrides: int | None) -> IngestSettings:
    """The ingest settings: the defaults, then the ``CKPTWATCH_MAX_*`` variables, then
    ``overrides`` (a limit's name -> value; None: not given). Raises :class:`ConfigError`
    for a value that is not a positive integer."""
    env = os.environ if environ is None else environ
    values: dict[str, int] = {}
    for name, var in INGEST_LIMIT_ENV.items():
        text = env.get(var, "").strip()
        if text:
            try:
                values[name] = int(text.replace("_", ""))
            except ValueError:
                raise ConfigError(f"${var} must be a positive integer (got {text!r})") from None
            if values[name] < 1:
                raise ConfigError(f"${var} must be a positive integer (got {text!r})")
    for name, value in overrides.items():
        if name not in INGEST_LIMIT_ENV:
            raise TypeError(f"not an ingest limit: {name}")
        if value is not None:
            if value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer "
                                  f"(got {value})")
            values[name] = value
    return replace(INGEST, **values)


def active_ingest() -> IngestSettings:
    """The settings of the ingest running now: those :func:`using_ingest` set, else
    :func:`ingest_settings` (defaults and environment)."""
    current = _ACTIVE_INGEST.get()
    return current if current is not None else ingest_settings()


@contextlib.contextmanager
def using_ingest(value: IngestSettings) -> Iterator[IngestSettings]:
    """Make ``value`` the active ingest settings inside the ``with`` block."""
    token = _ACTIVE_INGEST.set(value)
    try:
        yield value
    finally:
        _ACTIVE_INGEST.reset(token)


#: ``memory_limit`` value that lifts the cap (DuckDB's own default: 80 % of RAM).
UNCAPPED = "none"


def duckdb_memory_limit(value: str | None = None) -> str | None:
    """DuckDB's memory cap (e.g. ``3GB``; it spills to disk beyond it): ``value`` when given,
    else ``$CKPTWATCH_DUCKDB_MEMORY``; ``None`` when unset or ``none`` (DuckDB's default, 80 %
    of RAM). Attribution of a 512-node day takes ~35 s at 3GB instead of ~27 s and 8 GB."""
    value = duckdb_memory_setting(value, "").strip()
    return None if not value or value.lower() == UNCAPPED else value


def duckdb_memory_setting(value: str | None, default: str) -> str:
    """The memory cap as asked for: ``value``, else ``$CKPTWATCH_DUCKDB_MEMORY``, else
    ``default`` (``none`` stays ``none``: it lifts the cap where the connection is made)."""
    return value or os.environ.get("CKPTWATCH_DUCKDB_MEMORY") or default


# -- Prefect (the commands that start it: nightly, demo, ingest --flow/--dask) ---------------

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
    cache = env.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and Path(cache).is_absolute() else _user_home(env) / ".cache"
    return base / "ckptwatch" / "prefect"


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
