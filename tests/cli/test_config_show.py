"""`ckptwatch config show`: every effective setting with its source, secrets never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptwatch.cli.main import main
from ckptwatch.settings import load_settings
from ckptwatch.settings.explain import effective

TOKEN = "tok-9f8e7d6c5b4a"
AUTH = "alice:pa55-w0rd-x"


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for var in list(os.environ):
        if var.startswith(("CKPTWATCH_", "PREFECT_")) or var == "XDG_CACHE_HOME":
            monkeypatch.delenv(var)


def _show(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, object]]:
    assert main(["config", "show", "--format", "json", *argv]) == 0
    out = capsys.readouterr().out
    shown: dict[str, dict[str, object]] = json.loads(out)
    return shown


def test_each_value_says_where_it_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    config = tmp_path / "ckptwatch.toml"
    config.write_text('[alerts]\nwarning = 0.6\n[alerts.jobs."llama"]\ncritical = 0.85\n'
                      '[sinks]\nwebhook_token_env = "HOOK_TOKEN"\n')
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    monkeypatch.setenv("CKPTWATCH_MAX_FIELD_CHARS", "64")
    monkeypatch.setenv("CKPTWATCH_DUCKDB_MEMORY", "2GB")
    monkeypatch.setenv("CKPTWATCH_LAKE", str(tmp_path / "lake"))
    shown = _show(capsys, "--config", str(config))
    assert shown["config_file"] == {"value": str(config), "source": "flag (--config)"}
    assert shown["alerts.defaults.warning"] == {"value": 0.6, "source": "file"}
    assert shown["alerts.defaults.critical"] == {"value": 0.9, "source": "default"}
    assert shown['alerts.jobs."llama".critical'] == {"value": 0.85, "source": "file"}
    # a job's value it does not override is [alerts]'s, from where [alerts]'s came
    assert shown['alerts.jobs."llama".warning'] == {"value": 0.6, "source": "file"}
    assert shown["sinks.webhook_token"] == {
        "value": "***", "source": "environment ($HOOK_TOKEN, named in the file)"}
    assert shown["ingest.max_field_chars"] == {
        "value": 64, "source": "environment ($CKPTWATCH_MAX_FIELD_CHARS)"}
    assert shown["ingest.max_record_bytes"] == {"value": 1 << 20, "source": "default"}
    assert shown["nightly.duckdb_memory"]["value"] == "2GB"
    assert shown["duckdb_memory"] == {"value": "2GB",
                                      "source": "environment ($CKPTWATCH_DUCKDB_MEMORY)"}
    assert shown["paths.lake"] == {"value": str(tmp_path / "lake"),
                                   "source": "environment ($CKPTWATCH_LAKE)"}
    assert shown["detection.stall_factor"] == {"value": 2.0,
                                               "source": "default (sql/session.sql)"}
    assert shown["watch.interval_s"] == {"value": 10.0, "source": "default"}


def test_the_file_named_by_the_environment_and_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    assert _show(capsys)["config_file"] == {"value": None, "source": "default"}
    config = tmp_path / "c.toml"
    config.write_text("[prometheus]\nstep_s = 30\n")
    monkeypatch.setenv("CKPTWATCH_CONFIG", str(config))
    shown = _show(capsys)
    assert shown["config_file"] == {"value": str(config),
                                    "source": "environment ($CKPTWATCH_CONFIG)"}
    assert shown["prometheus.step_s"] == {"value": 30.0, "source": "file"}


def test_no_secret_is_printed_in_either_format(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    config = tmp_path / "ckptwatch.toml"
    config.write_text(
        '[sinks]\nwebhook_url_env = "HOOK_URL"\nalertmanager_url = "http://am:9093"\n'
        'alertmanager_basic_auth_env = "AM_AUTH"\n'
        f'[prometheus]\nurl = "https://bob:{TOKEN}@prom.example:9090/?key=abcdef"\n')
    monkeypatch.setenv("HOOK_URL", f"https://hooks.example/services/{TOKEN}")
    monkeypatch.setenv("AM_AUTH", AUTH)
    monkeypatch.setenv("CKPTWATCH_PROMETHEUS_TOKEN", "another-secret-value")
    for fmt in ("table", "json"):
        assert main(["config", "show", "--config", str(config), "--format", fmt]) == 0
        out = capsys.readouterr().out
        for secret in (TOKEN, AUTH, "pa55-w0rd-x", "abcdef", "another-secret-value"):
            assert secret not in out, (fmt, secret)
    shown = _show(capsys, "--config", str(config))
    assert shown["sinks.webhook_url"]["value"] == "***"
    assert shown["sinks.alertmanager_basic_auth"] == {
        "value": "***", "source": "environment ($AM_AUTH, named in the file)"}
    assert shown["prometheus.url"]["value"] == "https://prom.example:9090/?…"
    # the file names a basic auth for Prometheus? no: the default variable's token is used
    assert shown["prometheus.token"] == {
        "value": "***", "source": "environment ($CKPTWATCH_PROMETHEUS_TOKEN)"}


def test_the_table_lists_every_setting_once(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    assert main(["config", "show"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["setting", "value", "source"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == [e.name for e in effective(load_settings(environ={}))]
    assert len(names) == len(set(names))
    row = next(line for line in lines if line.startswith("ingest.max_quarantine_rows "))
    assert row.split() == ["ingest.max_quarantine_rows", "1000", "default"]


def test_a_bad_setting_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    monkeypatch.setenv("CKPTWATCH_MAX_RECORD_BYTES", "lots")
    assert main(["config", "show"]) == 2
    err = capsys.readouterr().err
    assert err == ("ckptwatch config: error: $CKPTWATCH_MAX_RECORD_BYTES must be a positive "
                   "integer (got 'lots')\n")
    monkeypatch.delenv("CKPTWATCH_MAX_RECORD_BYTES")
    config = tmp_path / "bad.toml"
    config.write_text("[alerts]\nwarning = 2\n")
    assert main(["config", "show", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[alerts] warning must be" in err and "Traceback" not in err


def test_a_list_setting_shows_as_json_in_the_table(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    config = tmp_path / "pool.toml"
    config.write_text('[pool.prometheus]\npreset = "daos"\n')
    assert main(["config", "show", "--config", str(config)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("pool.prometheus.presets "))
    assert row.split() == ["pool.prometheus.presets", '["daos"]', "file"]
    assert _show(capsys, "--config", str(config))["pool.prometheus.presets"] == {
        "value": ["daos"], "source": "file"}
