"""deploy/grafana: the dashboard reads only metrics and recording rules that exist, shows what
the on-call engineer needs, picks its datasource by variable, and each query parses in a real
Prometheus; the provisioning file points Grafana at it."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest_prometheus import Prometheus, free_port, start_prometheus
from tests.deploy.promql_names import DEPLOY, exported_names, metric_names, recorded_names

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "ckptwatch.json"
PROVISIONING = DEPLOY / "grafana" / "provisioning" / "dashboards.yml"
#: Grafana's variables, as Grafana would expand them for a query.
EXPANSIONS = {"$job_id": ".*", "$tier": ".*", "$__rate_interval": "1m", "$__interval": "15s",
              "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    out = []
    for p in dashboard()["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # panels inside collapsed rows
    return out


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    exprs = [(f"panel {p['title']!r} {t['refId']}", t["expr"])
             for p in panels() for t in p.get("targets", [])]
    for v in dashboard()["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            exprs.append((f"variable {v['name']}", q))
    return exprs


def test_every_expression_reads_only_exported_metrics_or_recording_rules() -> None:
    known = exported_names() | recorded_names()
    for where, expr in expressions():
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


def test_the_datasource_is_a_variable_everywhere() -> None:
    (ds,) = [v for v in dashboard()["templating"]["list"] if v["type"] == "datasource"]
    assert ds["query"] == "prometheus"
    ref = {"type": "prometheus", "uid": f"${{{ds['name']}}}"}
    for p in panels():
        assert p["datasource"] == ref, p["title"]
        assert all(t["datasource"] == ref for t in p["targets"]), p["title"]
    for v in dashboard()["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == ref, v["name"]
    # no datasource uid or name of one installation baked in
    assert not re.search(r'"uid": "(?!\$\{)', json.dumps([p["datasource"] for p in panels()]))


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    ps = panels()
    assert len({p["id"] for p in ps}) == len(ps)
    cells: set[tuple[int, int]] = set()
    for p in ps:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine
    assert dashboard()["uid"] == "ckptwatch-live"


def test_the_provisioning_file_loads_the_dashboard_directory() -> None:
    config = yaml.safe_load(PROVISIONING.read_text())
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert Path(provider["options"]["path"]).is_absolute()


@pytest.fixture(scope="module")
def bare_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A Prometheus with ckptwatch's rules and nothing to scrape: it parses the queries."""
    target = f"127.0.0.1:{free_port()}"  # nothing listens: the scrape fails, harmlessly
    with start_prometheus(tmp_path_factory.mktemp("prometheus-bare"), target) as p:
        yield p


def test_every_query_parses_in_prometheus(bare_prometheus: Prometheus) -> None:
    for where, expr in expressions():
        if expr.startswith("label_values("):  # Grafana's own function: its argument is PromQL
            expr = expr[len("label_values("):].rsplit(",", 1)[0]
        for var, value in EXPANSIONS.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"{where}: unexpanded variable in {expr}"
        q = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{bare_prometheus.url}/api/v1/query?{q}",
                                        timeout=5) as resp:
                status = json.load(resp)["status"]
        except urllib.error.HTTPError as exc:
            pytest.fail(f"{where}: Prometheus refused {expr}: {exc.read().decode()}")
        assert status == "success", where
