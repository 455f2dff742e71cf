"""The settings file: which file, defaults, per-job overrides, pinned errors, secrets."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.settings import (
    AlertSettings,
    ConfigError,
    JobAlertSettings,
    Secret,
    Settings,
    SinkSettings,
    display_url,
    load_settings,
    redact,
)

TOKEN = "tok-9f8e7d6c5b4a"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ckptwatch.toml"
    path.write_text(text)
    return path


def test_no_file_means_defaults() -> None:
    assert load_settings(environ={}) == Settings()
    d = Settings().alerts.defaults
    assert (d.warning, d.critical, d.window, d.tail, d.horizon_s) == (0.7, 0.9, 20, "max", 21600)


def test_file_from_env_and_flag_wins_over_env(tmp_path: Path) -> None:
    env_file = write(tmp_path, "[alerts]\nwarning = 0.6\n")
    flag_file = tmp_path / "other.toml"
    flag_file.write_text("[alerts]\nwarning = 0.5\n")
    env = {"CKPTWATCH_CONFIG": str(env_file)}
    assert load_settings(environ=env).alerts.defaults.warning == 0.6
    assert load_settings(flag_file, environ=env).alerts.defaults.warning == 0.5
    assert load_settings(environ=env).source == env_file


def test_example_file_documents_the_defaults() -> None:
    s = load_settings(PROJECT_ROOT / "examples" / "ckptwatch.toml", environ={})
    assert s.alerts.defaults == JobAlertSettings()
    defaults = AlertSettings()
    for key in ("min_forecast_points", "resolve_margin", "resolve_after", "resend_after_s",
                "firing_ttl_s", "runbook_url", "dashboard_url"):
        assert getattr(s.alerts, key) == getattr(defaults, key), key
    assert s.alerts.for_job("llama-70b").critical == 0.85
    assert s.alerts.for_job("scratch-run").enabled is False
    assert (s.sinks.stdout, s.sinks.timeout_s) == (True, SinkSettings().timeout_s)


def test_job_overrides_inherit_the_global_values(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, """
[alerts]
warning = 0.6
window = 30
[alerts.jobs."gpt.v2"]
critical = 0.8
"""), environ={})
    assert s.alerts.for_job("gpt.v2") == JobAlertSettings(warning=0.6, critical=0.8, window=30)
    assert s.alerts.for_job("other") == JobAlertSettings(warning=0.6, window=30)
    assert s.alerts.max_window() == 30


def test_relative_jsonl_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, '[sinks]\njsonl = "out/alerts.jsonl"\n'), environ={})
    assert s.sinks.jsonl == tmp_path / "out" / "alerts.jsonl"


def test_the_nightly_metrics_file_is_none_unless_set_and_relative_to_the_config_file(
        tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, ""), environ={}).nightly.metrics_file is None
    s = load_settings(write(tmp_path, '[nightly]\nmetrics_file = "tf/ckptwatch_nightly.prom"\n'),
                      environ={})
    assert s.nightly.metrics_file == tmp_path / "tf" / "ckptwatch_nightly.prom"
    assert s.origins["nightly.metrics_file"] == "file"


@pytest.mark.parametrize(("text", "message"), [
    ("[alerts]\nwarnng = 0.7\n", "unknown key [alerts] 'warnng' (known: critical, "),
    ("[alerts]\nwarning = 0.95\n", "[alerts] warning (0.95) must be below critical (0.9)"),
    ("[alerts]\ncritical = 1.5\n", "[alerts] critical must be > 0 and <= 1 (got 1.5)"),
    ("[alerts]\nwindow = 2.5\n", "[alerts] window must be an integer (got 2.5)"),
    ("[alerts]\ntail = 'p95'\n", "[alerts] tail must be one of max, p99 (got 'p95')"),
    ('[alerts.jobs."j1"]\nwarning = "high"\n',
     '[alerts.jobs."j1"] warning must be a number (got \'high\')'),
    ("[alerts]\nresend_after_s = 10\nfiring_ttl_s = 5\n",
     "[alerts] resend_after_s (10) must be below firing_ttl_s (5), or Alertmanager expires "
     "firing alerts before they are refreshed"),
    ("[sinks]\nstdout = 'yes'\n", "[sinks] stdout must be true or false"),
    ("[sinks]\nwebhook_url = 'ftp://x/y'\n",
     "[sinks] webhook_url must be an http:// or https:// URL (got scheme 'ftp')"),
    ("[sinks]\nwebhook_token_env = 'NOPE_UNSET'\n",
     "[sinks] webhook_token_env names $NOPE_UNSET, which is not set (export it, or remove "
     "the key)"),
    ("[sinks]\nalertmanager_basic_auth_env = 'AM_AUTH'\n",
     "[sinks] alertmanager_basic_auth ($AM_AUTH) must be user:password"),
    ("[nosuch]\n", "unknown key 'nosuch' (known: alerts, nightly, pool, prometheus, sinks)"),
    ("[nightly]\nmetrics_file = 'nightly.txt'\n",
     "[nightly] metrics_file must be a file whose name ends in .prom (node_exporter's textfile "
     "collector reads only those), got 'nightly.txt'"),
    ("[nightly]\nmetrics_fil = 'n.prom'\n", "unknown key [nightly] 'metrics_fil' (known: "
     "metrics_file)"),
    ("[alerts\nwarning = 0.7\n", "not valid TOML: "),
])
def test_bad_settings_are_one_actionable_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_settings(path, environ={"AM_AUTH": "no-colon-here"})
    assert str(exc.value).startswith(f"{path}: ")
    assert message in str(exc.value)
    assert "no-colon-here" not in str(exc.value)


def test_missing_file_names_where_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope.toml \(from \$CKPTWATCH_CONFIG\)"
                       " does not exist"):
        load_settings(environ={"CKPTWATCH_CONFIG": str(tmp_path / "nope.toml")})


def test_secrets_come_from_the_environment_and_never_show(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, """
[sinks]
webhook_url = "https://hooks.example.com/ck?key=querysecret"
webhook_token_env = "HOOK_TOKEN"
alertmanager_url = "http://am:pw-in-url@127.0.0.1:9093"
alertmanager_basic_auth_env = "AM_AUTH"
"""), environ={"HOOK_TOKEN": TOKEN, "AM_AUTH": "ckpt:s3cret-pass"})
    assert s.sinks.webhook_token == Secret(TOKEN, "x")
    assert s.sinks.webhook_token is not None and s.sinks.webhook_token.reveal() == TOKEN
    shown = repr(s) + str(s.sinks.webhook_token)
    for secret in (TOKEN, "s3cret-pass", "pw-in-url"):
        assert secret not in shown
    assert "Secret(<from $HOOK_TOKEN>)" in shown
    secrets = s.secrets()
    b64 = base64.b64encode(b"ckpt:s3cret-pass").decode()
    assert {TOKEN, "ckpt:s3cret-pass", b64, "s3cret-pass", "pw-in-url", "querysecret"} <= set(
        secrets)
    line = f"Bearer {TOKEN} Basic {b64} ?key=querysecret http://am:pw-in-url@127.0.0.1"
    assert redact(line, secrets) == "Bearer *** Basic *** ?key=*** http://***@127.0.0.1"


def test_a_literal_secret_works_but_warns_without_showing_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ckptwatch.settings"):
        s = load_settings(write(tmp_path, f'[sinks]\nwebhook_token = "{TOKEN}"\n'), environ={})
    assert s.sinks.webhook_token is not None and s.sinks.webhook_token.reveal() == TOKEN
    assert "literal secret in the config file; prefer webhook_token_env" in caplog.text
    assert TOKEN not in caplog.text


def test_secret_webhook_url_is_never_shown_whole(tmp_path: Path) -> None:
    url = "https://hooks.example.com/services/T000/B000/XXXXsecret"
    s = load_settings(write(tmp_path, '[sinks]\nwebhook_url_env = "HOOK_URL"\n'),
                      environ={"HOOK_URL": url})
    assert s.sinks.webhook_url == url and s.sinks.webhook_url_secret
    assert url in s.secrets()


def test_display_url_drops_credentials_and_query() -> None:
    assert display_url("https://u:p@host.example:8443/hook?token=abc") == (
        "https://host.example:8443/hook?…")
    assert display_url("http://[::1]:9093/") == "http://[::1]:9093/"


def test_staleness_per_job_and_link_templates(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path, """
[alerts]
stale_after_s = 7200
runbook_url = "https://wiki.example/ckptwatch#{anchor}"
[alerts.jobs."slow"]
stale_intervals = 0
"""), environ={})
    assert s.alerts.for_job("other").stale_horizon_s(3600.0) == 3 * 3600.0
    assert s.alerts.for_job("other").stale_horizon_s(None) == 7200.0
    assert s.alerts.for_job("slow").stale_horizon_s(3600.0) == 7200.0
    assert s.alerts.runbook_url == "https://wiki.example/ckptwatch#{anchor}"
    with pytest.raises(ConfigError, match=r"\[alerts\] dashboard_url '/d/\{uid\}': bad "
                       r"placeholder 'uid' \(known: \{alertname\}, \{anchor\}, \{job_id\}, "
                       r"\{tier\}\)"):
        load_settings(write(tmp_path, '[alerts]\ndashboard_url = "/d/{uid}"\n'), environ={})


# -- the settings tree: one package, every concern, each value's origin ----------------------

#: Every public name the one-module ``ckptwatch.settings`` had: still imported from there.
FORMER_NAMES = (
    "AlertSettings", "CONFIG_ENV", "DASHBOARD_URL", "INGEST", "INGEST_LIMIT_ENV",
    "IngestSettings", "JOB_KEYS", "JobAlertSettings", "PACKAGE_DIR",
    "PREFECT_STARTUP_TIMEOUT_S", "PROMETHEUS_BASIC_AUTH_ENV", "PROMETHEUS_TOKEN_ENV",
    "PrometheusSettings", "REDACTED", "RUNBOOK_URL", "Secret", "Settings", "SinkSettings",
    "TAIL_STATS", "UNCAPPED", "URL_FIELDS", "config_path", "default_lake", "display_url",
    "duckdb_memory_limit", "duckdb_memory_setting", "ingest_settings", "load_settings",
    "model_path", "notebook_path", "prefect_environment", "prefect_home",
    "prometheus_settings", "redact", "settings_from_dict", "sql_dir", "url_secrets")


def test_every_former_name_still_imports_from_the_package() -> None:
    import ckptwatch.settings as package

    assert [n for n in FORMER_NAMES if not hasattr(package, n)] == []
    assert set(package.__all__) >= set(FORMER_NAMES)
    assert package.sql_dir(environ={}).joinpath("session.sql").is_file()
    assert package.notebook_path().is_file()


def test_the_tree_holds_every_concern_with_its_defaults() -> None:
    from ckptwatch.analysis.detection import DetectionSettings
    from ckptwatch.live.watch import WatchOptions
    from ckptwatch.settings import INGEST, NightlySettings, PathSettings, WatchSettings

    s = load_settings(environ={"HOME": "/home/u"})
    assert s.ingest == INGEST and (INGEST.batch_files, INGEST.batch_rows) == (64, 200_000)
    assert INGEST.parse_bytes == 8 << 20 and INGEST.workers is None
    assert s.watch == WatchSettings() and WatchOptions is WatchSettings
    assert s.watch.max_record_bytes == INGEST.max_record_bytes
    assert s.nightly == NightlySettings() and s.nightly.duckdb_memory == "3GB"
    assert s.detection == DetectionSettings() and s.detection.stall_factor > 1
    assert s.paths == PathSettings() and s.duckdb_memory is None
    assert s.prefect.home == Path("/home/u/.cache/ckptwatch/prefect")
    assert s.origins == {}


def test_the_environment_fills_the_tree_and_says_so(tmp_path: Path) -> None:
    env = {"CKPTWATCH_MAX_RECORD_BYTES": "2048", "CKPTWATCH_INGEST_WORKERS": "3",
           "CKPTWATCH_DUCKDB_MEMORY": "none", "CKPTWATCH_MODEL": "m.joblib",
           "PREFECT_HOME": str(tmp_path / "p"), "HOME": str(tmp_path)}
    s = load_settings(environ=env)
    assert (s.ingest.max_record_bytes, s.ingest.workers) == (2048, 3)
    assert s.watch.max_record_bytes == 2048  # the watcher reads records as the ingest does
    assert s.duckdb_memory is None and s.nightly.duckdb_memory == "none"
    assert s.paths.model == Path("m.joblib") and s.prefect.home == tmp_path / "p"
    assert s.origins == {
        "ingest.max_record_bytes": "environment ($CKPTWATCH_MAX_RECORD_BYTES)",
        "watch.max_record_bytes": "environment ($CKPTWATCH_MAX_RECORD_BYTES)",
        "ingest.workers": "environment ($CKPTWATCH_INGEST_WORKERS)",
        "duckdb_memory": "environment ($CKPTWATCH_DUCKDB_MEMORY)",
        "nightly.duckdb_memory": "environment ($CKPTWATCH_DUCKDB_MEMORY)",
        "paths.model": "environment ($CKPTWATCH_MODEL)",
        "prefect.home": "environment ($PREFECT_HOME)"}


def test_a_flag_wins_over_the_environment() -> None:
    from ckptwatch.settings import ingest_settings

    env = {"CKPTWATCH_MAX_FIELD_CHARS": "64", "CKPTWATCH_INGEST_WORKERS": "2"}
    s = ingest_settings(env, max_field_chars=32, workers="auto", max_file_bytes=None)
    assert (s.max_field_chars, s.workers) == (32, None)
    assert ingest_settings(env).max_field_chars == 64
    with pytest.raises(ConfigError, match="--max-field-chars must be a positive integer"):
        ingest_settings({}, max_field_chars=0)
