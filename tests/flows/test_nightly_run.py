"""The nightly run without a Prefect server or flow run (``flows.run.run_nightly`` with the plain
steps) and its failure policy: what fails a run, with which one line and exit status, what is
written first; and ``ckptwatch nightly``'s summary and exit status over it.

Each run is the small raw directory of tests/conftest.py through the real steps; a step is
replaced only where the test needs a failure no real input gives (a server that cannot be read,
a lock held, an error inside a step).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import duckdb
import pytest
from tests.conftest import write_raw_dir
from tests.loopback import free_port

# Prefect imported at collection (as the other flow tests do), never first inside a test that
# captures stderr: its console log handler keeps the stream it finds at import.
import ckptwatch.flows.nightly as nightly_module
import ckptwatch.ingest.discover as discover_module
from ckptwatch.cli.main import main
from ckptwatch.cli.nightly import render_result
from ckptwatch.errors import (
    AlertsUndeliveredError,
    LakeError,
    LakeLockedError,
    MetricsFileError,
    PullError,
    RawDirError,
)
from ckptwatch.flows import local_prefect
from ckptwatch.flows.run import (
    PLAIN_STEPS,
    NightlyResult,
    NightlySteps,
    exit_code,
    run_nightly,
)
from ckptwatch.settings import Settings, load_settings

#: The flow's result, key by key, in order: what ``ckptwatch nightly`` prints from and what
#: ``bench/run.py`` reads (a contract: extend, never rename).
RESULT_KEYS = [
    "ingested", "skipped", "failed", "quarantined", "raw_files", "failed_files", "views",
    "delta_days_built", "stalls",
    "stalls_by_cause", "stalls_timed_out", "alerts", "alerts_sent", "alerts_dry_run",
    "alerts_sinks", "alerts_delivery", "alerts_summary", "alerts_file", "report", "report_json",
    "latest", "latest_kept", "steps_s", "steps_peak_rss_mb", "lake_warnings", "unused_metrics",
    "pulled", "pull_error", "metrics_file", "dask",
]
STEPS = ["ingest", "deltas", "views", "stalls", "alerts", "report"]
SECRET = "s3cr3t-token"


def _isolate(mp: pytest.MonkeyPatch) -> None:
    """No trained model, no config file from the environment, the default DuckDB cap."""
    mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
    for var in ("CKPTWATCH_CONFIG", "CKPTWATCH_DUCKDB_MEMORY"):
        mp.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    _isolate(monkeypatch)


def _settings(path: Path, text: str) -> Settings:
    path.write_text(text)
    return load_settings(path)


def _low_levels(tmp_path: Path, sinks: str) -> Settings:
    """Levels low enough for j1's 20 s barrier to alert; no staleness (its checkpoints are of
    2026-11-28)."""
    return _settings(tmp_path / "ckptwatch.toml",
                     "[alerts]\nwarning = 0.01\ncritical = 0.02\nstale_after_s = 1e9\n" + sinks)


def _never(*_args: object) -> NoReturn:
    raise AssertionError("no step may run")


NO_STEPS = NightlySteps(pull=_never, ingest=_never, deltas=_never, views=_never, check=_never,
                        stalls=_never, alerts=_never, report=_never)


# -- a run whose sink fails ------------------------------------------------------------------


@pytest.fixture(scope="module")
def undelivered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NightlyResult]:
    """j1 alerts; the only sink, a JSON Lines file where a directory is, does not take it."""
    base = tmp_path_factory.mktemp("undelivered")
    (base / "blocked").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp)
        settings = _low_levels(base, f'[sinks]\nstdout = false\njsonl = "{base / "blocked"}"\n'
                               '[nightly]\nmetrics_file = "textfile/ckptwatch_nightly.prom"\n')
        yield run_nightly(write_raw_dir(base / "raw"), base / "lake", settings)


def test_the_result_keeps_the_flow_keys_and_each_step_in_order(
        undelivered: NightlyResult) -> None:
    out = undelivered.to_dict()
    assert list(out) == RESULT_KEYS
    assert (out["ingested"], out["skipped"], out["failed"], out["quarantined"]) == (6, 0, 0, 0)
    assert list(out["steps_s"]) == STEPS and list(out["steps_peak_rss_mb"]) == STEPS
    assert out["views"] >= 10 and out["delta_days_built"] == 1
    assert (out["pulled"], out["pull_error"]) == (None, None)
    json.dumps(out)  # a flow's result: plain values only


def test_a_sink_that_fails_fails_the_run_after_the_report_is_written(
        undelivered: NightlyResult) -> None:
    out = undelivered.to_dict()
    assert (out["alerts"], out["alerts_sent"], out["alerts_dry_run"]) == (1, False, False)
    assert [(d["sink"], d["attempted"], d["delivered"], d["failed"], d["reason"])
            for d in out["alerts_delivery"]] == [("jsonl", 1, 0, 1, "Is a directory")]
    failure = undelivered.failure()
    assert isinstance(failure, AlertsUndeliveredError)
    assert str(failure).startswith("alerts not delivered: jsonl: cannot append alerts ")
    assert str(failure).endswith(
        f"— the report is written ({out['report']}); undelivered alerts stay pending and are "
        "retried on the next run")
    assert failure.result == out  # the command prints its summary from it
    assert undelivered.exit_code == exit_code(failure) == 1
    page = Path(out["report"]).read_text()
    assert "Sink failed:</b> jsonl: cannot append alerts" in page
    report = json.loads(Path(out["report_json"]).read_text())
    assert report["alerts"]["sent"] is False and report["alerts"]["failures"]


def test_a_failed_pull_fails_the_run_only_when_the_alerts_did_not(
        undelivered: NightlyResult) -> None:
    """Undelivered alerts are the run's failure even when the pull failed too (exit 1, their
    line); the pull's failure alone is exit 2 with its own line."""
    both = replace(undelivered, pull_error="GET http://prom/api/v1/series: refused")
    assert isinstance(both.failure(), AlertsUndeliveredError) and both.exit_code == 1
    assert both.to_dict()["pull_error"] == "GET http://prom/api/v1/series: refused"
    pull_only = replace(both, alerts_error=None, alert_failures=())
    failure = pull_only.failure()
    assert isinstance(failure, PullError) and pull_only.exit_code == 2
    assert str(failure) == (
        f"GET http://prom/api/v1/series: refused — the ingest ran and the report is written "
        f"({undelivered.files.html}) without it; the next run pulls the range again")
    clean = replace(pull_only, pull_error=None)
    assert clean.failure() is None and clean.exit_code == 0


# -- the metrics file ------------------------------------------------------------------------


def read_metrics(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of a metrics file, parsed by prometheus_client's parser: (name, labels) ->
    value; ``promtool check metrics`` (format and lint) passes on it first."""
    from prometheus_client.parser import text_string_to_metric_families
    from tests.conftest_prometheus import require_binary

    text = path.read_text()
    done = subprocess.run([require_binary("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _by_name(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float],
             name: str) -> dict[tuple[str, ...], float]:
    return {tuple(v for _, v in labels): value for (n, labels), value in samples.items()
            if n == f"ckptwatch_nightly_{name}"}


def test_a_run_that_failed_after_its_report_writes_its_findings_and_exit_1(
        undelivered: NightlyResult) -> None:
    out = undelivered.to_dict()
    path = Path(out["metrics_file"])
    assert path.name == "ckptwatch_nightly.prom" and path.parent.name == "textfile"
    samples = read_metrics(path)
    report = json.loads(Path(out["report_json"]).read_text())
    assert _by_name(samples, "last_run_exit_code") == {(): 1} == {(): undelivered.exit_code}
    assert _by_name(samples, "last_success_timestamp_seconds") == {}  # never succeeded
    [h] = report["headroom"]
    assert _by_name(samples, "headroom_seconds") == {("j1", "pool"): h["headroom_s"]}
    assert not path.with_name(f".{path.name}.tmp").exists()


def test_the_metrics_file_holds_the_reports_facts_and_a_failed_run_keeps_the_last_success(
        tmp_path: Path) -> None:
    metrics = tmp_path / "textfile" / "ckptwatch_nightly.prom"
    settings = _low_levels(tmp_path, f'[sinks]\nstdout = false\njsonl = "{tmp_path / "a.jsonl"}"\n')
    t0 = time.time()
    result = run_nightly(write_raw_dir(tmp_path / "raw"), tmp_path / "lake", settings,
                         metrics_file=metrics)
    t1 = time.time()
    out = result.to_dict()
    assert result.exit_code == 0 and out["metrics_file"] == str(metrics)
    samples = read_metrics(metrics)
    report = json.loads(Path(out["report_json"]).read_text())
    # every value is a fact of the report as report.json holds it
    tiers = {t["tier"]: t for t in report["tiers"]}
    assert _by_name(samples, "checkpoints") == {
        (t,): v["n_checkpoints"] for t, v in tiers.items()} == {("pool",): 1}
    assert _by_name(samples, "barrier_p50_seconds") == {
        (t,): v["barrier_p50_s"] for t, v in tiers.items()}
    assert _by_name(samples, "barrier_p99_seconds") == {
        (t,): v["barrier_p99_s"] for t, v in tiers.items()}
    assert _by_name(samples, "timed_out_checkpoints") == {
        (j["job_id"], j["tier"]): j["n_timed_out"] for j in report["jobs"]}
    assert _by_name(samples, "headroom_seconds") == {
        (h["job_id"], h["tier"]): h["headroom_s"] for h in report["headroom"]}
    assert _by_name(samples, "timeout_seconds") == {
        (h["job_id"], h["tier"]): h["timeout_s"] for h in report["headroom"]}
    stalls = _by_name(samples, "stalls")  # every cause of the day's tiers; none stalled here
    assert sum(stalls.values()) == report["summary"]["stalls"] == 0
    assert {cause for cause, _tier in stalls} >= {"gc", "metadata", "fabric_pause", "unknown"}
    assert _by_name(samples, "report_day_timestamp_seconds") == {
        (): datetime.fromisoformat(f"{report['date']}T00:00:00+00:00").timestamp()}
    assert _by_name(samples, "files_failed") == {(): 0}
    assert _by_name(samples, "last_run_exit_code") == {(): 0}
    [success] = _by_name(samples, "last_success_timestamp_seconds").values()
    assert t0 <= success == _by_name(samples, "last_run_timestamp_seconds")[()] <= t1

    # A run that stops (here, before any step) is exit 2 and keeps the last success.
    with pytest.raises(RawDirError):
        run_nightly(tmp_path / "nope", tmp_path / "lake", settings, metrics_file=metrics,
                    steps=NO_STEPS)
    after = read_metrics(metrics)
    assert _by_name(after, "last_run_exit_code") == {(): 2}
    assert _by_name(after, "last_success_timestamp_seconds") == {(): success}
    assert _by_name(after, "last_run_timestamp_seconds")[()] >= success
    assert {n for n, _ in after} == {"ckptwatch_nightly_last_run_timestamp_seconds",
                                     "ckptwatch_nightly_last_success_timestamp_seconds",
                                     "ckptwatch_nightly_last_run_exit_code"}  # no findings

    # A finished run whose file cannot be written fails after its report: one line, exit 2.
    blocked = tmp_path / "blocked.prom"
    blocked.mkdir()  # a directory where the file should be
    failed = result.with_metrics(blocked)
    failure = failed.failure()
    assert isinstance(failure, MetricsFileError) and failed.exit_code == 2
    assert str(failure) == (
        f"cannot write the nightly's metrics file {blocked}: Is a "
        "directory — make its directory (node_exporter's textfile directory) writable by this "
        f"user, or change --metrics-file / [nightly] metrics_file — the report is written "
        f"({result.files.html})")
    assert read_metrics(metrics) == after  # the old file untouched


# -- files that could not be ingested; a dry run ---------------------------------------------


def test_a_file_that_could_not_be_ingested_is_exit_1_and_the_run_goes_on(
        tmp_path: Path) -> None:
    raw = write_raw_dir(tmp_path / "raw", bad=True)
    (raw / "checkpoints" / "z.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00 not deflate")
    settings = _low_levels(tmp_path, f'[sinks]\njsonl = "{tmp_path / "alerts.jsonl"}"\n')
    result = run_nightly(raw, tmp_path / "lake", settings, send=False)
    out = result.to_dict()
    assert (out["failed"], out["quarantined"]) == (1, 5)
    # named with its reason: the command's summary prints these
    assert [f["file"] for f in out["failed_files"]] == ["checkpoints/z.jsonl.gz"]
    assert out["failed_files"][0]["reason"]
    summary = render_result(out, raw, tmp_path / "lake").splitlines()
    assert [line for line in summary if line.startswith("  FAILED ")] == [
        f"  FAILED checkpoints/z.jsonl.gz: {out['failed_files'][0]['reason']}"]
    assert result.failure() is None and result.exit_code == 1
    assert exit_code(None, {**out, "failed": 0}) == 0
    # a dry run: the alert is due, nothing is sent or written
    assert (out["alerts"], out["alerts_sent"], out["alerts_dry_run"]) == (1, False, True)
    assert not (tmp_path / "alerts.jsonl").exists()
    text = render_result(out, raw, tmp_path / "lake")
    assert f"  ingest: {out['ingested']} file(s) ingested, 0 already in the lake, 1 failed; " \
           "5 record(s) quarantined" in text
    assert "nothing sent (dry run)" in text


# -- failures around the steps ---------------------------------------------------------------


def test_errors_in_the_pull_and_alerts_steps_are_redacted_and_the_report_written(
        raw_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path / "c.toml", f'[sinks]\nstdout = false\nwebhook_url = '
                         f'"http://127.0.0.1:9/hook?token={SECRET}"\n'
                         '[prometheus]\nurl = "http://127.0.0.1:9"\n')
    assert SECRET in settings.secrets()

    def unreadable(*_args: object) -> NoReturn:
        raise PullError(f"GET http://127.0.0.1:9/api/v1/series?token={SECRET}: refused")

    def locked(*_args: object) -> NoReturn:
        raise LakeLockedError(f"lake is locked by a run with token={SECRET}")

    steps = replace(PLAIN_STEPS, pull=unreadable, alerts=locked)
    result = run_nightly(raw_dir, tmp_path / "lake", settings, steps=steps)
    out = result.to_dict()
    assert list(out["steps_s"]) == ["pull", *STEPS]
    assert out["ingested"] == 6  # the pull's failure cost neither the ingest ...
    assert Path(out["report"]).is_file()  # ... nor the report
    assert out["pull_error"] == "GET http://127.0.0.1:9/api/v1/series?token=***: refused"
    assert out["alerts_summary"] == "not evaluated (lake is locked by a run with token=***)"
    assert (out["alerts"], out["alerts_sent"], out["alerts_delivery"]) == (0, False, [])
    failure = result.failure()
    assert isinstance(failure, AlertsUndeliveredError) and result.exit_code == 1
    assert str(failure).startswith("alerts not delivered: lake is locked by a run with "
                                   "token=*** — the report is written")
    assert SECRET not in json.dumps(out) + str(failure) + Path(out["report_json"]).read_text()


def test_an_error_inside_a_step_stops_the_run_and_closes_its_connection(
        raw_dir: Path, tmp_path: Path) -> None:
    opened: list[duckdb.DuckDBPyConnection] = []

    def views(*args: Any) -> duckdb.DuckDBPyConnection:
        opened.append(PLAIN_STEPS.views(*args))
        return opened[0]

    def broken(*_args: object) -> NoReturn:
        raise LakeError("lake L: a part is unreadable")

    steps = replace(PLAIN_STEPS, views=views, stalls=broken, alerts=_never, report=_never)
    metrics = tmp_path / "textfile" / "ckptwatch_nightly.prom"
    with pytest.raises(LakeError, match="a part is unreadable") as err:
        run_nightly(raw_dir, tmp_path / "lake", Settings(), steps=steps, metrics_file=metrics)
    assert exit_code(err.value) == 2
    assert _by_name(read_metrics(metrics), "last_run_exit_code") == {(): 2}
    with pytest.raises(duckdb.ConnectionException):
        opened[0].execute("select 1")  # closed
    assert not (tmp_path / "lake" / "reports").exists()


def test_the_loaded_settings_reach_the_ingest_and_the_duckdb_cap(
        raw_dir: Path, tmp_path: Path) -> None:
    """Passed down, not read again from the environment: the ingest's limits (a 1-character
    field limit quarantines every record) and DuckDB's cap (the call's, else the settings')."""
    from ckptwatch.ingest.run import IngestReport
    from ckptwatch.settings import INGEST, NightlySettings

    seen: dict[str, Any] = {}

    def ingest(*args: Any) -> IngestReport:
        seen["ingest"] = report = PLAIN_STEPS.ingest(*args)
        return report

    def views(_lake: Path, _days: object, memory_limit: str) -> NoReturn:
        seen["memory_limit"] = memory_limit
        raise LakeError("enough")

    settings = replace(Settings(), ingest=replace(INGEST, max_field_chars=1),
                       nightly=NightlySettings(duckdb_memory="1GB"))
    steps = replace(NO_STEPS, ingest=ingest, deltas=lambda *_a: 0, views=views)
    with pytest.raises(LakeError, match="enough"):
        run_nightly(raw_dir, tmp_path / "lake", settings, steps=steps)
    assert seen["ingest"].quarantined == 14 and not any(seen["ingest"].rows.values())
    assert seen["memory_limit"] == "1GB"
    with pytest.raises(LakeError, match="enough"):
        run_nightly(raw_dir, tmp_path / "lake", settings, steps=steps, duckdb_memory="2GB")
    assert seen["memory_limit"] == "2GB"


# -- the raw directory -----------------------------------------------------------------------


def test_a_raw_dir_that_cannot_be_listed_stops_the_run_before_any_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(RawDirError) as err:
        run_nightly(tmp_path / "nope", lake, Settings(), steps=NO_STEPS)
    assert str(err.value) == f"raw directory {tmp_path / 'nope'} does not exist"
    (tmp_path / "file").write_text("x")
    with pytest.raises(RawDirError) as err:
        run_nightly(tmp_path / "file", lake, Settings(), steps=NO_STEPS)
    assert str(err.value) == f"{tmp_path / 'file'} is not a directory"

    # Unreadable (root reads any mode, so the refusal is the system call's): it would list
    # as empty, and the run would succeed on nothing.
    denied = tmp_path / "denied"
    denied.mkdir()

    def scandir(path: Any) -> NoReturn:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(discover_module.os, "scandir", scandir)  # check_raw_dir's
    with pytest.raises(RawDirError) as err:
        run_nightly(denied, lake, Settings(), steps=NO_STEPS)
    assert str(err.value) == f"raw directory {denied} cannot be read: Permission denied"
    assert exit_code(err.value) == 2 and not lake.exists()


def test_an_empty_raw_dir_is_exit_1_and_the_report_is_written(tmp_path: Path) -> None:
    """A raw directory that holds no file at all is a feed that stopped: exit 1, as `ckptwatch
    ingest` on it (issue 46: the two disagreed). Still no failure of the run itself (the flow
    run completes): the report covers the lake's newest day (here, none: the run's own day,
    which never becomes latest/)."""
    (tmp_path / "raw").mkdir()
    result = run_nightly(tmp_path / "raw", tmp_path / "lake", Settings(), send=False)
    out = result.to_dict()
    assert (out["ingested"], out["failed"], out["stalls"], out["alerts"]) == (0, 0, 0, 0)
    assert out["raw_files"] == 0 and out["failed_files"] == []
    assert result.failure() is None and result.exit_code == 1
    assert Path(out["report"]).is_file()
    assert out["latest_kept"] is not None and out["latest_kept"].endswith("has no checkpoints")


# -- the policy and the module ---------------------------------------------------------------


def test_exit_codes() -> None:
    undelivered = AlertsUndeliveredError("alerts not delivered: webhook: refused", {})
    assert exit_code(undelivered) == 1
    assert exit_code(PullError("refused")) == 2
    assert exit_code(LakeLockedError("locked"), {"failed": 0}) == 2
    assert exit_code(None, {"failed": 2}) == 1
    assert exit_code(None, {"failed": 0}) == 0
    assert exit_code(None, {"failed": 0, "raw_files": 0}) == 1
    assert exit_code(None, {"failed": 0, "raw_files": 3}) == 0


def test_the_run_imports_no_prefect() -> None:
    code = ("import sys, ckptwatch.flows.run, ckptwatch.cli.nightly; "
            "sys.exit('prefect' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr or "ckptwatch.flows.run imported prefect"


# -- the command's summary and exit status, the flow replaced by the run ----------------------


def _flow_without_prefect(raw_dir: Path, lake_root: Path, config: Path | None = None,
                          send: bool = True, **kwargs: Any) -> dict[str, Any]:
    """``nightly_flow`` as its caller sees it (the result, or the failure raised), without a
    flow run: the same run, settings and failure."""
    kwargs.pop("dask", None)
    result = run_nightly(raw_dir, lake_root, load_settings(config), send=send, **kwargs)
    failure = result.failure()
    if failure is not None:
        raise failure
    return result.to_dict()


@pytest.fixture
def command(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ckptwatch nightly`` with no Prefect server and no flow run."""
    monkeypatch.setattr(local_prefect, "configure", lambda *_a, **_k: None)
    monkeypatch.setattr(local_prefect, "start_local_server", lambda *_a, **_k: None)
    monkeypatch.setattr(nightly_module, "nightly_flow", _flow_without_prefect)


def test_the_command_prints_the_summary_then_the_sink_failure_and_exits_1(
        command: None, raw_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "blocked").mkdir()
    _low_levels(tmp_path, f'[sinks]\nstdout = false\njsonl = "{tmp_path / "blocked"}"\n')
    lake = tmp_path / "lake"
    rc = main(["nightly", str(raw_dir), "--lake", str(lake),
               "--config", str(tmp_path / "ckptwatch.toml")])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith(f"nightly {raw_dir} -> {lake}\n  ingest: 6 file(s) ingested, 0 "
                          "already in the lake, 0 failed; 0 record(s) quarantined\n")
    assert ("  alerts: 1 due: 0 of 1 delivered to jsonl (Is a directory; kept for the next "
            f"run); JSON Lines: {tmp_path / 'blocked'}\n") in out
    *progress, last = err.splitlines()
    # stderr is not a terminal here: a plain line as each step starts and ends, in order
    assert all(re.fullmatch(r"ckptwatch nightly: \[\d+ s\] .+", line) for line in progress)
    steps = [line.split("] ", 1)[1] for line in progress]
    assert [s for s in steps if s.endswith("…")][-len(STEPS):] == [f"{s}…" for s in STEPS]
    assert all(f"{s}: done in " in err for s in STEPS)
    assert last.startswith("ckptwatch nightly: alerts not delivered: jsonl: cannot append")


def test_the_command_on_an_empty_raw_dir_says_so_and_exits_1_as_ingest_does(
        command: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "raw").mkdir()
    metrics = tmp_path / "ckptwatch_nightly.prom"
    rc = main(["nightly", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"), "--no-send",
               "--metrics-file", str(metrics)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith(f"nightly {tmp_path / 'raw'} -> {tmp_path / 'lake'}\n  ingest: 0 file(s)")
    assert f"\n  metrics: {metrics}\n" in out
    assert _by_name(read_metrics(metrics), "last_run_exit_code") == {(): 1}
    assert err.splitlines()[-1] == (
        f"ckptwatch nightly: no raw files found under {tmp_path / 'raw'} (expected "
        "checkpoints/, jobs/, smart/, fabric/, pool/ or topology.csv; see docs/formats.md)")


def test_the_command_says_a_failed_pull_in_one_line_and_exits_2(
        command: None, raw_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A server that refuses: the ingest and the report happen, then the run fails."""
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens
    config = tmp_path / "c.toml"
    config.write_text(f'[sinks]\nstdout = false\n[prometheus]\nurl = "{url}"\nretries = 0\n'
                      "timeout_s = 2\n")
    lake = tmp_path / "lake"
    rc = main(["nightly", str(raw_dir), "--lake", str(lake), "--config", str(config)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = [line for line in err.splitlines() if not line.startswith("ckptwatch nightly: [")]
    assert len(lines) == 1 and lines[0].startswith("ckptwatch nightly: error: ")
    assert "pull: done in " in err  # the progress, one plain line per step
    assert lines[0].endswith(f"— the ingest ran and the report is written "
                             f"({lake / 'reports' / '2026-11-28' / 'report.html'}) without "
                             "it; the next run pulls the range again")
    assert (lake / "reports" / "2026-11-28" / "report.html").is_file()


def test_the_command_records_a_run_it_refuses_and_checks_the_metrics_file_name(
        command: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A raw directory that does not exist fails before Prefect starts: a failed run all the
    same (exit 2 in the file). A file node_exporter would not read is refused by argparse."""
    metrics = tmp_path / "ckptwatch_nightly.prom"
    config = tmp_path / "c.toml"
    config.write_text(f'[nightly]\nmetrics_file = "{metrics}"\n')
    rc = main(["nightly", str(tmp_path / "nope"), "--lake", str(tmp_path / "lake"),
               "--config", str(config)])
    assert rc == 2
    assert _by_name(read_metrics(metrics), "last_run_exit_code") == {(): 2}
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["nightly", str(tmp_path), "--metrics-file", str(tmp_path / "nightly.txt")])
    assert exc.value.code == 2
    assert ("argument --metrics-file: must be a file whose name ends in .prom (node_exporter's "
            "textfile collector reads only those)") in capsys.readouterr().err


def test_the_flow_runs_the_plain_steps_as_tasks_and_retries_only_io() -> None:
    """The flow's tasks wrap the functions ``PLAIN_STEPS`` holds; the steps that read or write
    through I/O retry, the alerts step never (a failed sink's alerts wait for the next run)."""
    tasks = {"pull": nightly_module.pull_from_prometheus,
             "deltas": nightly_module.materialise_counter_deltas,
             "views": nightly_module.build_views, "check": nightly_module.check_lake,
             "stalls": nightly_module.detect_stalls, "alerts": nightly_module.evaluate_alerts,
             "report": nightly_module.write_daily_report}
    assert {name: t.fn for name, t in tasks.items()} == {
        name: getattr(PLAIN_STEPS, name) for name in tasks}
    assert {name: t.retries for name, t in tasks.items()} == {
        "pull": 2, "deltas": 2, "views": 2, "check": 0, "stalls": 0, "alerts": 0, "report": 2}
