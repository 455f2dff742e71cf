"""deploy/grafana: each dashboard (the watcher's, the nightly's) reads only metrics and recording
rules that exist, shows what the on-call engineer needs, picks its datasource by variable, and
each query parses in a real Prometheus (the nightly's also returns data there, from a metrics
file loaded into its TSDB); the provisioning file points Grafana at their directory."""

from __future__ import annotations

import json
import re
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest_prometheus import Prometheus, backfill, free_port, start_prometheus
from tests.deploy.promql_names import DEPLOY, exported_names, metric_names, recorded_names
from tests.flows.test_nightly_metrics import facts

from ckptwatch.flows.nightly_metrics import render

DASHBOARDS_DIR = DEPLOY / "grafana" / "dashboards"
#: uid -> the dashboard file.
DASHBOARDS = {"ckptwatch-live": DASHBOARDS_DIR / "ckptwatch.json",
              "ckptwatch-nightly": DASHBOARDS_DIR / "ckptwatch-nightly.json"}
DASHBOARD = DASHBOARDS["ckptwatch-live"]
PROVISIONING = DEPLOY / "grafana" / "provisioning" / "dashboards.yml"
#: Grafana's variables, as Grafana would expand them for a query.
EXPANSIONS = {"$job_id": ".*", "$tier": ".*", "$__rate_interval": "1m", "$__interval": "15s",
              "$__range": "1h"}

each_dashboard = pytest.mark.parametrize("uid", list(DASHBOARDS))


def dashboard(uid: str = "ckptwatch-live") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARDS[uid].read_text())
    return data


def panels(uid: str = "ckptwatch-live") -> list[dict[str, Any]]:
    out = []
    for p in dashboard(uid)["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # panels inside collapsed rows
    return out


def expressions(uid: str = "ckptwatch-live") -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    exprs = [(f"panel {p['title']!r} {t['refId']}", t["expr"])
             for p in panels(uid) for t in p.get("targets", [])]
    for v in dashboard(uid)["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            exprs.append((f"variable {v['name']}", q))
    return exprs


@each_dashboard
def test_every_expression_reads_only_exported_metrics_or_recording_rules(uid: str) -> None:
    known = exported_names() | recorded_names()
    for where, expr in expressions(uid):
        names = metric_names(expr)
        assert names, f"{where}: reads no metric: {expr}"
        assert names <= known, f"{where}: unknown {sorted(names - known)} in {expr}"


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    read = set().union(*(metric_names(e) for _, e in expressions()))
    assert {"ckptwatch_checkpoint_inflight_seconds", "ckptwatch_checkpoint_timeout_seconds",
            "ckptwatch_checkpoint_unfinished_ranks",
            "job_id_tier:ckptwatch_checkpoint_duration_seconds:p50_1h",
            "job_id_tier:ckptwatch_checkpoint_duration_seconds:p99_1h",
            "ckptwatch_checkpoint_last_barrier_seconds",
            "ckptwatch_watch_last_scan_timestamp_seconds"} <= read
    scan_age = [e for _, e in expressions() if "last_scan_timestamp" in e]
    assert any(e.startswith("time() - ") for e in scan_age)  # an age, not a timestamp


def test_the_nightly_dashboard_shows_what_the_issue_asks_for() -> None:
    """Stall causes over time, headroom per job, p50 vs p99 per tier, the last success."""
    exprs = expressions("ckptwatch-nightly")
    read = set().union(*(metric_names(e) for _, e in exprs))
    assert {"ckptwatch_nightly_stalls", "ckptwatch_nightly_headroom_seconds",
            "ckptwatch_nightly_barrier_p50_seconds", "ckptwatch_nightly_barrier_p99_seconds",
            "ckptwatch_nightly_last_success_timestamp_seconds",
            "ckptwatch_nightly_last_run_exit_code"} <= read
    assert any("sum by (cause)" in e for _, e in exprs)  # causes, not one line per tier
    success = [e for _, e in exprs if "last_success_timestamp" in e]
    assert success and all(e.startswith("time() - ") for e in success)  # an age


@each_dashboard
def test_the_datasource_is_a_variable_everywhere(uid: str) -> None:
    (ds,) = [v for v in dashboard(uid)["templating"]["list"] if v["type"] == "datasource"]
    assert ds["query"] == "prometheus"
    ref = {"type": "prometheus", "uid": f"${{{ds['name']}}}"}
    for p in panels(uid):
        assert p["datasource"] == ref, p["title"]
        assert all(t["datasource"] == ref for t in p["targets"]), p["title"]
    for v in dashboard(uid)["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == ref, v["name"]
    # no datasource uid or name of one installation baked in
    assert not re.search(r'"uid": "(?!\$\{)', json.dumps([p["datasource"] for p in panels(uid)]))


@each_dashboard
def test_panels_have_unique_ids_and_do_not_overlap(uid: str) -> None:
    ps = panels(uid)
    assert len({p["id"] for p in ps}) == len(ps)
    cells: set[tuple[int, int]] = set()
    for p in ps:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine
    assert dashboard(uid)["uid"] == uid


def test_the_provisioning_file_loads_the_dashboard_directory() -> None:
    config = yaml.safe_load(PROVISIONING.read_text())
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert Path(provider["options"]["path"]).is_absolute()
    # the provider loads every file of one directory: the dashboards, each under its own uid
    assert sorted(DASHBOARDS_DIR.glob("*.json")) == sorted(DASHBOARDS.values())
    text = PROVISIONING.read_text()
    assert all(path.name in text for path in DASHBOARDS.values())


def openmetrics(text: str, ts: float) -> str:
    """Exposition text as OpenMetrics with every sample at ``ts`` (what ``backfill`` reads)."""
    lines = [line if line.startswith("#") else f"{line} {ts:.3f}"
             for line in text.splitlines() if line]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def bare_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A Prometheus with ckptwatch's rules and nothing to scrape: it parses every dashboard's
    queries. Its TSDB holds the nightly's metrics file of a minute ago (literal report facts,
    tests/flows/test_nightly_metrics.py), loaded before it starts: no wait for a scrape."""
    workdir = tmp_path_factory.mktemp("prometheus-bare")
    now = time.time() - 60
    text = render(facts(), exit_code=0, files_failed=0, now=now, last_success=None)
    backfill(openmetrics(text, now), workdir / "tsdb")
    target = f"127.0.0.1:{free_port()}"  # nothing listens: the scrape fails, harmlessly
    with start_prometheus(workdir, target) as p:
        yield p


def _query(prometheus: Prometheus, where: str, expr: str) -> list[dict[str, Any]]:
    """``expr`` as Grafana sends it (its variables expanded) evaluated now; fail saying
    where when Prometheus refuses it."""
    if expr.startswith("label_values("):  # Grafana's own function: its argument is PromQL
        expr = expr[len("label_values("):].rsplit(",", 1)[0]
    for var, value in EXPANSIONS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"{where}: unexpanded variable in {expr}"
    try:
        return prometheus.query(expr)
    except urllib.error.HTTPError as exc:
        pytest.fail(f"{where}: Prometheus refused {expr}: {exc.read().decode()}")


@each_dashboard
def test_every_query_parses_in_prometheus(bare_prometheus: Prometheus, uid: str) -> None:
    for where, expr in expressions(uid):
        _query(bare_prometheus, where, expr)


def test_every_nightly_query_answers_from_the_scraped_metrics_file(
        bare_prometheus: Prometheus) -> None:
    for where, expr in expressions("ckptwatch-nightly"):
        assert _query(bare_prometheus, where, expr), f"{where}: no series for {expr}"
    [stalls] = _query(bare_prometheus, "stalls", 'sum(ckptwatch_nightly_stalls{cause="gc"})')
    assert stalls["value"][1] == "2"

