"""Scenario generator: determinism, truth consistent with the written data, signals per cause."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ckptwatch.cli.main import build_parser, main
from ckptwatch.errors import CkptwatchError
from ckptwatch.simulate.scenario import simulate

SEEDS = (11, 23)
SMART_KEYS = {
    "critical_warning", "temperature", "available_spare", "available_spare_threshold",
    "percentage_used", "data_units_read", "data_units_written", "host_reads", "host_writes",
    "controller_busy_time", "power_cycles", "power_on_hours", "unsafe_shutdowns", "media_errors",
    "num_err_log_entries",
}


# ------------------------------------------------------------------------------ readers


def _epoch(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def read_checkpoint_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of one checkpoint file (start markers and finished records), as written."""
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    return _jsonl(path)


def read_checkpoints(root: Path) -> list[dict[str, Any]]:
    """Every finished rank record of every checkpoint file (start markers left out), times as
    epoch seconds."""
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "checkpoints").iterdir()):
        raw = [r for r in read_checkpoint_lines(path) if r["status"] != "started"]
        for r in raw:
            rows.append({**r, "step": int(r["step"]), "rank": int(r["rank"]),
                         "start": _epoch(r["start_time"]), "end": _epoch(r["end_time"]),
                         **{k: float(r[k]) for k in ("open_s", "write_s", "fsync_s", "close_s")}})
    return rows


def barriers(rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Checkpoint barrier time: the slowest rank's duration."""
    out: dict[tuple[str, int], float] = {}
    for r in rows:
        key = (r["job_id"], r["step"])
        out[key] = max(out.get(key, 0.0), r["end"] - r["start"])
    return out


def stall_ratios(rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    """Barrier over the job's median barrier, per checkpoint."""
    bar = barriers(rows)
    median = {job: float(np.median([v for (j, _), v in bar.items() if j == job]))
              for job, _ in bar}
    return {key: value / median[key[0]] for key, value in bar.items()}


def pool_series(root: Path, target: str | None, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(ts, value) of one pool metric, for one target or all targets."""
    with (root / "pool" / "pool_metrics.csv").open(newline="", encoding="utf-8") as fh:
        pts = [(_epoch(r["ts"]), float(r["value"])) for r in csv.DictReader(fh)
               if r["metric"] == metric and (target is None or r["target"] == target)]
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def fabric_series(root: Path, node: str, traffic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(ts, counter) for a node: congestion (rx_prio3_pause on RoCE, PortXmitWait on IB) or,
    with ``traffic``, transmitted data (tx_bytes_phy, PortXmitData)."""
    ts, values = [], []
    for env in _jsonl(root / "fabric" / f"{node}.jsonl"):
        if env["source"] == "ethtool":
            pattern = r"tx_bytes_phy: (\d+)" if traffic else r"rx_prio3_pause: (\d+)"
        else:
            pattern = r"PortXmitData:\.+(\d+)" if traffic else r"PortXmitWait:\.+(\d+)"
        match = re.search(pattern, env["output"])
        assert match, env["output"][:200]
        ts.append(_epoch(env["collected_at"]))
        values.append(float(match.group(1)))
    return np.array(ts), np.array(values)


def rates_in(ts: np.ndarray, values: np.ndarray, start: float,
             end: float) -> tuple[float, float] | None:
    """(max rate over intervals touching [start, end], median rate overall) of a counter;
    None when every such interval spans a counter reset."""
    dv, dt = np.diff(values), np.diff(ts)
    ok = dv >= 0  # a counter reset starts a new run
    rate = np.where(ok, dv / dt, np.nan)
    touch = (ts[:-1] < end) & (ts[1:] > start) & ok
    if not touch.any():
        return None
    return float(np.nanmax(rate[touch])), float(np.nanmedian(rate))


def drive_wa(root: Path, device: str, start: float, end: float) -> tuple[float, float]:
    """(max write amplification over SMART intervals touching the window, median overall)."""
    host, dev = device.split(":")
    media: dict[float, float] = {}
    units: dict[float, float] = {}
    for env in _jsonl(root / "smart" / f"{host}.jsonl"):
        if env["device"] != dev:
            continue
        t = _epoch(env["collected_at"])
        if env["source"] == "nvme-ocp-smart":
            pmuw = env["output"]["Physical media units written"]
            media[t] = pmuw["hi"] * 2.0**64 + pmuw["lo"]
        else:
            units[t] = env["output"]["nvme_smart_health_information_log"]["data_units_written"]
    ts = np.array(sorted(media))
    m = np.array([media[t] for t in ts])
    h = np.array([units[t] for t in ts]) * 512_000
    wa = np.diff(m) / np.maximum(np.diff(h), 1.0)
    touch = (ts[:-1] < end) & (ts[1:] > start)
    return float(wa[touch].max()), float(np.median(wa))


#: Cumulative counters in the smartctl health log and the OCP extended log (the rest are gauges).
SMART_CUMULATIVE = (
    "data_units_read", "data_units_written", "host_reads", "host_writes", "controller_busy_time",
    "power_cycles", "power_on_hours", "unsafe_shutdowns", "media_errors", "num_err_log_entries",
)
OCP_CUMULATIVE = (
    "Physical media units written", "Physical media units read", "Bad user nand blocks - Raw",
    "Bad system nand blocks - Raw", "XOR recovery count", "Uncorrectable read error count",
    "Soft ecc error count", "End to end detected errors", "End to end corrected errors",
    "Refresh counts", "Max User data erase counts", "Min User data erase counts",
    "Number of Thermal throttling events", "PCIe correctable error count",
    "Incomplete shutdowns", "Unaligned I/O", "PLP start count", "PCIe Link Retraining Count",
    "Power State Change Count",
)
_ETHTOOL_LINE = re.compile(r"^\s+(\w+): (-?\d+)$", re.M)
_PERFQUERY_LINE = re.compile(r"^(\w+):\.+(-?\d+)$", re.M)  # hex CounterSelect lines don't match

Series = dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]]


def cumulative_series(root: Path) -> Series:
    """Every cumulative counter of a scenario as (ts, values), keyed by
    (source, host, device, counter) with source fabric, smart or pool."""
    points: dict[tuple[str, str, str, str], list[tuple[float, float]]] = {}

    def add(key: tuple[str, str, str, str], ts: float, value: float) -> None:
        points.setdefault(key, []).append((ts, value))

    canonical = root / "fabric" / "counters.csv"
    if canonical.exists():
        with canonical.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                add(("fabric", r["node"], r["device"], r["counter"]), _epoch(r["ts"]),
                    float(r["value"]))
    else:
        for path in (root / "fabric").iterdir():
            for env in _jsonl(path):
                pattern = _ETHTOOL_LINE if env["source"] == "ethtool" else _PERFQUERY_LINE
                found = pattern.findall(env["output"])
                assert found, env["output"][:200]
                for name, value in found:
                    if name != "PortSelect":
                        add(("fabric", env["node"], env["device"], name),
                            _epoch(env["collected_at"]), float(value))
    for path in (root / "smart").iterdir():
        for env in _jsonl(path):
            t, out = _epoch(env["collected_at"]), env["output"]
            if env["source"] == "smartctl":
                log = out["nvme_smart_health_information_log"]
                for name in SMART_CUMULATIVE:
                    add(("smart", env["node"], env["device"], name), t, float(log[name]))
            else:
                for name in OCP_CUMULATIVE:
                    v = out[name]
                    value = v["hi"] * 2.0**64 + v["lo"] if isinstance(v, dict) else float(v)
                    add(("smart", env["node"], env["device"], name), t, value)
    with (root / "pool" / "pool_metrics.csv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["metric"] == "write_bytes":
                add(("pool", r["pool"], r["target"], "write_bytes"), _epoch(r["ts"]),
                    float(r["value"]))
    series = {}
    for key, pts in points.items():
        pts.sort(key=lambda p: p[0])
        series[key] = (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
    return series


def check_cumulative(series: Series, resets: list[dict[str, Any]]) -> int:
    """Assert every counter is >= 0 and monotone, except that it restarts from about 0 right
    after a labelled reset of its NIC; returns the number of drops seen."""
    at = {(r["node"], r["device"]): _epoch(r["at"]) for r in resets}
    drops = 0
    for key, (ts, values) in series.items():
        source, host, device, _ = key
        assert (np.diff(ts) > 0).all(), key
        assert values.min() >= 0, (key, values.min())
        steps = np.diff(values)
        for i in np.nonzero(steps < 0)[0]:
            reset = at.get((host, device)) if source == "fabric" else None
            assert reset is not None, f"{key} drops at {ts[i + 1]} without a labelled reset"
            assert ts[i] < reset <= ts[i + 1], (key, ts[i], reset)
            # from ~0: no more than the counter ever gains in one sample interval
            assert values[i + 1] <= max(steps.max(), 0.0), (key, values[i], values[i + 1])
            drops += 1
        assert (steps < 0).sum() <= (source == "fabric" and (host, device) in at), key
    return drops


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module", params=SEEDS)
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A default-size scenario (8 nodes, 4 h) for each seed in SEEDS."""
    out = tmp_path_factory.mktemp(f"sim{request.param}")
    simulate(out, seed=request.param, nodes=8, hours=4.0, jobs=4)
    return out


@pytest.fixture(scope="module")
def labels(scenario: Path) -> dict[str, Any]:
    """The scenario's labels.json."""
    return json.loads((scenario / "labels.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def checkpoints(scenario: Path) -> list[dict[str, Any]]:
    """The scenario's rank records."""
    return read_checkpoints(scenario)


def _incidents(labels: dict[str, Any], cause: str, kind: str) -> list[dict[str, Any]]:
    return [i for i in labels["incidents"] if i["cause"] == cause and i["kind"] == kind]


# ------------------------------------------------------------------------------ determinism


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_identical_bytes(tmp_path: Path) -> None:
    simulate(tmp_path / "a", seed=5, nodes=4, hours=2.0)
    simulate(tmp_path / "b", seed=5, nodes=4, hours=2.0)
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a == b
    assert len(a) > 10


def test_different_seed_differs(tmp_path: Path) -> None:
    simulate(tmp_path / "a", seed=5, nodes=4, hours=1.0)
    simulate(tmp_path / "b", seed=6, nodes=4, hours=1.0)
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a["labels.json"] != b["labels.json"]
    assert a["pool/pool_metrics.csv"] != b["pool/pool_metrics.csv"]


# ------------------------------------------------------------------------------ formats


def test_layout_and_headers(scenario: Path, labels: dict[str, Any]) -> None:
    head = {
        "topology.csv": "node,leaf_switch,nic,port",
        "jobs/jobs.csv": "job_id,n_ranks,checkpoint_timeout_s,checkpoint_interval_s,step_time_s,"
                         "gpus_per_node,tier",
        "pool/pool_metrics.csv": "ts,pool,target,metric,value",
    }
    for rel, header in head.items():
        assert (scenario / rel).read_text(encoding="utf-8").splitlines()[0] == header
    assert {j["file"] for j in labels["jobs"]} == {
        p.relative_to(scenario).as_posix() for p in (scenario / "checkpoints").iterdir()}
    metrics = {line.split(",")[3] for line in
               (scenario / "pool" / "pool_metrics.csv").read_text().splitlines()[1:]}
    assert metrics == {"gc_active", "free_blocks_pct", "metadata_latency_ms", "metadata_ops",
                       "write_bytes"}


def test_time_encodings_vary(scenario: Path) -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in (scenario / "checkpoints").iterdir()}
    assert sum(name.endswith(".csv") for name in texts) == 1
    first = [json.loads(t.splitlines()[0]) for n, t in texts.items() if n.endswith(".jsonl")]
    assert any(isinstance(r["start_time"], float) for r in first)
    joined = "".join(texts.values())
    for suffix in ('+00:00"', 'Z"', '+01:00"', "Z,"):
        assert suffix in joined


def test_rank_records_are_consistent(checkpoints: list[dict[str, Any]]) -> None:
    for r in checkpoints:
        phases = r["open_s"] + r["write_s"] + r["fsync_s"] + r["close_s"]
        gap = (r["end"] - r["start"]) - phases
        assert -1e-5 <= gap < 0.01, r
        assert r["tier"] in ("local", "pool") and r["status"] in ("ok", "timeout", "error")
        assert 0.9e9 <= int(r["bytes"]) <= 22e9
        if r["tier"] == "local":
            assert r["target"].startswith(r["node"] + ":nvme")


def test_envelopes_are_valid(scenario: Path) -> None:
    for path in (scenario / "smart").iterdir():
        for env in _jsonl(path):
            assert env["node"] == path.stem
            assert set(env) >= {"node", "device", "collected_at", "source", "output"}
            out = env["output"]
            if env["source"] == "smartctl":
                assert out["device"]["protocol"] == "NVMe"
                assert out["smartctl"]["exit_status"] == 0
                assert set(out["nvme_smart_health_information_log"]) >= SMART_KEYS
                assert out["local_time"]["time_t"] == int(_epoch(env["collected_at"]))
            else:
                assert env["source"] == "nvme-ocp-smart"
                assert set(out["Physical media units written"]) == {"hi", "lo"}
                assert 0 <= out["Percent free blocks"] <= 100
    for path in (scenario / "fabric").iterdir():
        for env in _jsonl(path)[:5]:
            if env["source"] == "ethtool":
                assert env["output"].startswith("NIC statistics:\n     rx_bytes_phy: ")
                for p in range(8):
                    assert f"     tx_prio{p}_pause: " in env["output"]
            else:
                assert env["source"] == "perfquery" and env["port"] == "1"
                assert env["output"].startswith("# Port extended counters: Lid ")
                assert "\nPortXmitWait:...................." in env["output"]


def test_canonical_fabric_format(tmp_path: Path) -> None:
    simulate(tmp_path, seed=3, nodes=8, hours=0.5, fabric_format="canonical")
    lines = (tmp_path / "fabric" / "counters.csv").read_text().splitlines()
    assert lines[0] == "ts,node,device,port,counter,value"
    counters = {line.split(",")[4] for line in lines[1:]}
    assert {"rx_prio3_pause", "tx_prio3_pause", "port_xmit_wait", "port_xmit_data"} <= counters
    assert [p.name for p in (tmp_path / "fabric").iterdir()] == ["counters.csv"]


# ------------------------------------------------------------------------------ truth


def test_stalls_match_the_data(labels: dict[str, Any],
                               checkpoints: list[dict[str, Any]]) -> None:
    ratios = stall_ratios(checkpoints)
    labelled = {(s["job_id"], s["step"]): s for s in labels["stalls"]}
    assert labelled
    assert set(labelled) == {k for k, r in ratios.items() if r >= 2.0}
    for key, stall in labelled.items():
        assert stall["ratio"] == pytest.approx(ratios[key], rel=1e-3)
        assert stall["causes"] and "unplanned" not in stall
        assert set(stall["causes"]) <= {"gc", "metadata", "fabric_pause", "unknown"}


def test_every_cause_stalls_and_confounders_do_not(labels: dict[str, Any]) -> None:
    causes = {c for s in labels["stalls"] for c in s["causes"]}
    assert causes == {"gc", "metadata", "fabric_pause", "unknown"}
    kinds = {(i["cause"], i["kind"]) for i in labels["incidents"]}
    assert {("gc", "confounder"), ("metadata", "confounder"),
            ("fabric_pause", "confounder")} <= kinds
    blamed = {i for s in labels["stalls"] for i in s["incidents"]}
    for inc in labels["incidents"]:
        if inc["kind"] == "stall":
            assert inc["stalled"], inc["id"]
            assert inc["steps"] == [s["step"] for s in inc["stalled"]
                                    if s["job_id"] == inc["job_id"]]
        else:
            assert inc["steps"] == [] and inc["stalled"] == [] and inc["id"] not in blamed


def test_overlapping_causes_are_ranked(labels: dict[str, Any]) -> None:
    multi = [s for s in labels["stalls"] if len(s["causes"]) > 1]
    assert multi, "the default 4 h scenario injects one two-cause stall"
    by_id = {i["id"]: i for i in labels["incidents"]}
    for s in multi:
        assert [by_id[i]["cause"] for i in s["incidents"]][0] == s["causes"][0]


def test_clean_scenario_has_no_stall(tmp_path: Path) -> None:
    simulate(tmp_path, seed=9, nodes=8, hours=2.0, incidents_per_hour=0)
    found = json.loads((tmp_path / "labels.json").read_text())
    assert found["incidents"] == [] and found["stalls"] == []
    assert max(stall_ratios(read_checkpoints(tmp_path)).values()) < 1.9


# ------------------------------------------------------------------------------ signals


def test_gc_signals(scenario: Path, labels: dict[str, Any]) -> None:
    incidents = _incidents(labels, "gc", "stall") + _incidents(labels, "gc", "confounder")
    assert incidents
    for inc in incidents:
        start, end = _epoch(inc["start"]), _epoch(inc["end"])
        for target in inc["scope"]["targets"]:
            ts, active = pool_series(scenario, target, "gc_active")
            assert active[(ts > start) & (ts < end + 60)].max() == 1, inc["id"]
            ts, free = pool_series(scenario, target, "free_blocks_pct")
            assert free[(ts > start) & (ts < end + 60)].min() < 10, inc["id"]
        assert inc["scope"]["devices"]
        for device in inc["scope"]["devices"]:
            peak, normal = drive_wa(scenario, device, start, end)
            assert normal < 1.2 and peak > 1.4 * normal, (inc["id"], device, peak, normal)


def test_metadata_signals(scenario: Path, labels: dict[str, Any]) -> None:
    ts, lat = pool_series(scenario, None, "metadata_latency_ms")
    normal = float(np.median(lat))
    for inc in _incidents(labels, "metadata", "stall"):
        window = (ts > _epoch(inc["start"])) & (ts < _epoch(inc["end"]) + 60)
        assert lat[window].max() > 4 * normal, inc["id"]
        assert not inc["scope"]["nodes"] and not inc["scope"]["devices"]
    for inc in _incidents(labels, "metadata", "confounder"):
        window = (ts > _epoch(inc["start"])) & (ts < _epoch(inc["end"]) + 60)
        assert lat[window].max() > 1.2 * normal, inc["id"]


def test_fabric_pause_signals(scenario: Path, labels: dict[str, Any]) -> None:
    incidents = (_incidents(labels, "fabric_pause", "stall")
                 + _incidents(labels, "fabric_pause", "confounder"))
    assert incidents
    for inc in incidents:
        assert inc["scope"]["nodes"]
        found = [(node, rates_in(*fabric_series(scenario, node), _epoch(inc["start"]),
                                 _epoch(inc["end"]))) for node in inc["scope"]["nodes"]]
        checked = [(node, r) for node, r in found if r is not None]
        assert checked, inc["id"]
        for node, (peak, normal) in checked:
            assert peak > 10 * normal, (inc["id"], node, peak, normal)


def test_stalled_checkpoints_show_their_cause(scenario: Path, labels: dict[str, Any],
                                              checkpoints: list[dict[str, Any]]) -> None:
    """Each labelled stall's cause is visible in the samples that overlap the stalled checkpoint
    while the incident ran - also when the checkpoint is far shorter than the sample interval."""
    window: dict[tuple[str, int], tuple[float, float]] = {}
    for r in checkpoints:
        a, b = window.get((r["job_id"], r["step"]), (math.inf, -math.inf))
        window[(r["job_id"], r["step"])] = (min(a, r["start"]), max(b, r["end"]))
    by_id = {i["id"]: i for i in labels["incidents"]}
    seen = set()
    for stall in labels["stalls"]:
        ck0, ck1 = window[(stall["job_id"], stall["step"])]
        for iid in stall["incidents"]:
            inc = by_id[iid]
            a, b = max(ck0, _epoch(inc["start"])), min(ck1, _epoch(inc["end"]))
            assert a < b, (iid, stall)
            seen.add(inc["cause"])
            if inc["cause"] == "fabric_pause":
                for node in inc["scope"]["nodes"]:
                    ts, values = fabric_series(scenario, node)
                    rate = np.diff(values) / np.diff(ts)
                    normal = float(np.median(rate[rate >= 0]))
                    touch = (ts[:-1] < b) & (ts[1:] > a) & (rate >= 0)  # not across a reset
                    assert touch.any() and (rate[touch] > 10 * normal).all(), (iid, node)
            elif inc["cause"] == "gc":
                for target in inc["scope"]["targets"]:  # pool gauges average (ts - 30 s, ts]
                    ts, active = pool_series(scenario, target, "gc_active")
                    assert active[(ts > a) & (ts - 30 < b)].min() == 1, (iid, target)
                    ts, free = pool_series(scenario, target, "free_blocks_pct")
                    assert free[(ts > a) & (ts - 30 < b)].max() < 10, (iid, target)
            elif inc["cause"] == "metadata":
                targets = labels["pool"]["targets"]
                ratios = []
                for target in targets:
                    ts, lat = pool_series(scenario, target, "metadata_latency_ms")
                    ratios.append(lat[(ts > a) & (ts - 30 < b)].max() / np.median(lat))
                assert min(ratios) > 3, (iid, ratios)
    assert {"gc", "metadata", "fabric_pause"} <= seen


def test_confounders_miss_the_checkpoints(labels: dict[str, Any],
                                          checkpoints: list[dict[str, Any]]) -> None:
    for inc in labels["incidents"]:
        start, end = _epoch(inc["start"]), _epoch(inc["end"])
        if inc["variant"] == "between_checkpoints":
            hit = [r for r in checkpoints if r["node"] in inc["scope"]["nodes"]
                   and r["start"] < end and r["end"] > start]
        elif inc["variant"] == "idle_target":
            hit = [r for r in checkpoints if r["target"] in inc["scope"]["targets"]
                   and r["start"] < end and r["end"] > start]
        else:
            continue
        assert hit == [], inc["id"]


def test_cumulative_counters_are_monotone_and_non_negative(scenario: Path,
                                                           labels: dict[str, Any]) -> None:
    series = cumulative_series(scenario)
    assert {key[0] for key in series} == {"fabric", "smart", "pool"}
    assert len(series) > 500  # every NIC, drive and pool target, not a few
    drops = check_cumulative(series, labels["counter_resets"])
    assert drops >= 5  # the labelled reset shows on the NIC's counters


@pytest.mark.parametrize("seed", [2, 6])
def test_canonical_counters_are_monotone_and_non_negative(tmp_path: Path, seed: int) -> None:
    simulate(tmp_path, seed=seed, nodes=8, hours=2.0, fabric_format="canonical")
    labels = json.loads((tmp_path / "labels.json").read_text(encoding="utf-8"))
    assert len(labels["counter_resets"]) == 1
    assert check_cumulative(cumulative_series(tmp_path), labels["counter_resets"]) > 0


def test_counter_reset_is_visible(scenario: Path, labels: dict[str, Any]) -> None:
    (reset,) = labels["counter_resets"]
    ts, values = fabric_series(scenario, reset["node"], traffic=True)
    (drop,) = np.nonzero(np.diff(values) < 0)[0]
    assert ts[drop] < _epoch(reset["at"]) <= ts[drop + 1]


# ------------------------------------------------------------------------------ CLI


def test_cli_writes_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    argv = ["simulate", str(out), "--seed", "4", "--nodes", "4", "--hours", "0.5"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "checkpoints/" in text and "labelled stalls" in text
    assert main(argv) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main([*argv, "--force", "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_cli_flags_have_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    simulate_parser = sub.choices["simulate"]  # type: ignore[attr-defined]
    for action in simulate_parser._actions:
        assert action.help, action.dest


@pytest.mark.parametrize(("opts", "message"), [
    ({"nodes": 1}, "--nodes must be at least 2"),
    ({"start": "yesterday"}, "--start 'yesterday' is not ISO-8601"),
    ({"fabric": "ethernet"}, "--fabric must be mixed, roce or ib"),
    ({"colour": "blue"}, "unknown simulate option(s): colour"),
])
def test_bad_options_are_named(tmp_path: Path, opts: dict[str, Any], message: str) -> None:
    with pytest.raises(CkptwatchError, match=re.escape(message)):
        simulate(tmp_path, seed=1, **opts)
