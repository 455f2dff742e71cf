"""The settings tree, loaded once at a command's or a flow's entry and passed down.

- :mod:`~ckptwatch.settings.models`: the typed tree (:class:`Settings` and a dataclass per
  concern: alerts, sinks, Prometheus, ingest, watch, nightly, detection, paths, Prefect);
- :mod:`~ckptwatch.settings.loading`: config file + environment (+ flags) -> the tree, with
  each value's source (``ckptwatch config show``);
- :mod:`~ckptwatch.settings.secrets`: :class:`Secret` and redaction;
- :mod:`~ckptwatch.settings.paths`: the package's SQL and notebook, the default lake and model;
- :mod:`~ckptwatch.settings.prefect_env`: the variables handed to Prefect;
- :mod:`~ckptwatch.settings.detection`: the detection thresholds (``sql/session.sql``);
- :mod:`~ckptwatch.settings.pool`: ``[pool.prometheus]``, the pool's Prometheus series ->
  pool_metrics rules, and :mod:`~ckptwatch.settings.pool_presets`, the shipped presets.

Every public name is importable from here (``from ckptwatch.settings import load_settings``).
"""

from ckptwatch.errors import ConfigError
from ckptwatch.settings.detection import DetectionSettings
from ckptwatch.settings.loading import (
    CONFIG_ENV,
    DUCKDB_MEMORY_ENV,
    INGEST_LIMIT_ENV,
    UNCAPPED,
    WORKERS_ENV,
    config_path,
    duckdb_memory_limit,
    duckdb_memory_setting,
    ingest_settings,
    load_settings,
    metrics_file_path,
    parse_workers,
    prometheus_settings,
    settings_from_dict,
)
from ckptwatch.settings.models import (
    DASHBOARD_URL,
    INGEST,
    JOB_KEYS,
    PROMETHEUS_BASIC_AUTH_ENV,
    PROMETHEUS_TOKEN_ENV,
    RUNBOOK_URL,
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
    PACKAGE_DIR,
    default_lake,
    model_path,
    notebook_path,
    sql_dir,
)
from ckptwatch.settings.pool import PoolPrometheusSettings, PoolSettings
from ckptwatch.settings.prefect_env import (
    PREFECT_STARTUP_TIMEOUT_S,
    prefect_environment,
    prefect_home,
)
from ckptwatch.settings.secrets import REDACTED, Secret, display_url, redact, url_secrets

__all__ = [
    "CONFIG_ENV", "DASHBOARD_URL", "DUCKDB_MEMORY_ENV", "INGEST", "INGEST_LIMIT_ENV",
    "JOB_KEYS", "PACKAGE_DIR", "PREFECT_STARTUP_TIMEOUT_S", "PROMETHEUS_BASIC_AUTH_ENV",
    "PROMETHEUS_TOKEN_ENV", "REDACTED", "RUNBOOK_URL", "TAIL_STATS", "UNCAPPED", "URL_FIELDS",
    "WORKERS_ENV", "AlertSettings", "ConfigError", "DetectionSettings", "IngestSettings",
    "JobAlertSettings", "NightlySettings", "PathSettings", "PoolPrometheusSettings",
    "PoolSettings", "PrefectSettings",
    "PrometheusSettings", "Secret", "Settings", "SinkSettings", "WatchSettings", "config_path",
    "default_lake", "display_url", "duckdb_memory_limit", "duckdb_memory_setting",
    "ingest_settings", "load_settings", "metrics_file_path", "model_path", "notebook_path",
    "parse_workers",
    "prefect_environment", "prefect_home", "prometheus_settings", "redact",
    "settings_from_dict", "sql_dir", "url_secrets",
]
