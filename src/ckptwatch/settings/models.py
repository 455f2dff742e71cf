"""The typed settings tree: :class:`Settings` and one dataclass per concern (alerts, sinks,
Prometheus, ingest limits, the live watcher, the nightly run, paths, DuckDB, Prefect, detection).

Every value has its built-in default here; :mod:`ckptwatch.settings.loading` fills the tree from
the config file and the environment, once, at a command's or a flow's entry, and the tree is
passed down from there. ``ckptwatch config show`` prints it with each value's source.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from ckptwatch.settings.detection import DetectionSettings
from ckptwatch.settings.paths import DEFAULT_LAKE, DEFAULT_MODEL, PACKAGE_DIR
from ckptwatch.settings.pool import PoolSettings
from ckptwatch.settings.prefect_env import PREFECT_STARTUP_TIMEOUT_S, prefect_home
from ckptwatch.settings.secrets import Secret, display_url, url_secrets

TAIL_STATS = ("max", "p99")

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
class IngestSettings:
    """Knobs of the ingest path, and the limits on every input (RELIABILITY.md, "Limits").

    Each limit has an environment variable (``loading.INGEST_LIMIT_ENV``) and a ``--max-*`` flag
    of ``ckptwatch ingest``; :func:`~ckptwatch.settings.loading.ingest_settings` applies them
    at the command's entry, and the value is passed down the ingest: ``discover`` puts it on
    each ``RawFile``, from which the readers, parsers and writer take it.
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
    #: A JSON Lines table file over this many bytes is read, typed and written a chunk of
    #: whole lines of about this size at a time, never held whole (``ingest.stream``; held,
    #: ``sources.tabular.read_table`` types it so): a knob, not a limit.
    table_chunk_bytes: int = 32 << 20
    #: Files written as one batch at most (``ingest.write.write_files``: one journal entry and
    #: one round of fsyncs), and the rows they may hold together (memory: the batch's rows are
    #: held until it is written).
    batch_files: int = 64
    batch_rows: int = 200_000
    #: Bytes of files loaded at most before they are parsed together (``read.parse_loaded``:
    #: one bulk-parser call per source for all of them); at most ``batch_files`` files. 8 MiB
    #: takes the least CPU and memory on a simulated 64-node day (bench/formats.py's).
    parse_bytes: int = 8 << 20
    #: Processes that parse beside the ingest (``ingest.parallel``): None is ``auto`` (several
    #: for a large run, none for a small one), 1 parses in the ingest's own process.
    workers: int | None = None

    def decompressed_limit(self, compressed_bytes: int) -> int:
        """Most bytes a compressed file of ``compressed_bytes`` is read to."""
        return min(self.max_decompressed_ratio * max(compressed_bytes, 1), self.max_file_bytes)




#: The built-in ingest settings.
INGEST = IngestSettings()


@dataclass
class WatchSettings:
    """How the live watcher runs (``ckptwatch watch``'s flags; ``live.watch.WatchOptions``)."""

    interval_s: float = 10.0
    metrics_file: Path | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: Re-read the lake's window, jobs and topology this often.
    refresh_s: float = 300.0
    #: A checkpoint with no rank open and nothing new for this long is complete.
    settle_s: float | None = None
    #: Bytes read per file per scan (a backlog is caught up over several scans).
    max_bytes_per_scan: int = 8 << 20
    send: bool = True
    #: Attribute an open checkpoint live (:mod:`ckptwatch.live.evidence`): when its age
    #: reaches ``evidence_at`` x its warning level (so that the warning carries it), and again
    #: at the critical level.
    evidence: bool = True
    evidence_at: float = 0.5
    #: Raw telemetry files read for one evidence, at most (newest first).
    evidence_max_bytes: int = 256 << 20
    #: Longest checkpoint record the watcher reads (the ingest's ``max_record_bytes``).
    max_record_bytes: int = INGEST.max_record_bytes


@dataclass(frozen=True)
class NightlySettings:
    """The nightly run (``ckptwatch nightly``, ``flows/nightly.py``)."""

    #: DuckDB's memory cap in the nightly run unless ``--duckdb-memory`` or
    #: ``$CKPTWATCH_DUCKDB_MEMORY`` says otherwise (the run's peak RSS target is 2 GiB: DuckDB
    #: stays well under the cap on a 512-node day).
    duckdb_memory: str = "3GB"
    #: Where the run writes its findings and status as Prometheus metrics (``[nightly]
    #: metrics_file``, ``--metrics-file``; a ``*.prom`` file in node_exporter's textfile
    #: directory); None: no metrics file.
    metrics_file: Path | None = None


@dataclass(frozen=True)
class PathSettings:
    """Where things are: the default lake, the attribution model, the SQL views."""

    lake: Path = DEFAULT_LAKE
    model: Path = DEFAULT_MODEL
    sql_dir: Path = PACKAGE_DIR / "sql"


@dataclass(frozen=True)
class PrefectSettings:
    """Prefect as the commands that start it set it up (``flows.local_prefect``)."""

    #: Prefect's home (``settings.prefect_env.prefect_home``).
    home: Path = field(default_factory=lambda: prefect_home({}))
    #: Seconds its local server may take to start.
    startup_timeout_s: int = PREFECT_STARTUP_TIMEOUT_S


@dataclass(frozen=True)
class Settings:
    """Every setting, by concern, and the config file they came from (None: no file).
    ``origins``: where each value that is not the built-in default came from (dotted name ->
    ``file``, ``environment ($NAME)``, ``flag (--name)``), for ``ckptwatch config show``."""

    alerts: AlertSettings = field(default_factory=AlertSettings)
    sinks: SinkSettings = field(default_factory=SinkSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    source: Path | None = None
    ingest: IngestSettings = INGEST
    watch: WatchSettings = field(default_factory=WatchSettings)
    nightly: NightlySettings = field(default_factory=NightlySettings)
    detection: DetectionSettings = field(default_factory=DetectionSettings)
    paths: PathSettings = field(default_factory=PathSettings)
    #: DuckDB's memory cap (``3GB``; None: DuckDB's own default, 80 % of RAM).
    duckdb_memory: str | None = None
    prefect: PrefectSettings = field(default_factory=PrefectSettings)
    #: ``[pool.prometheus]``: the pool's own Prometheus series -> pool_metrics.
    pool: PoolSettings = field(default_factory=PoolSettings)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

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

