"""The simulator's correlated bursts (``--bursts-per-hour``, family ``burst``): pool jobs'
checkpoints collide, the pool writes at its ceiling, every rank of them is slowed, the incast
pauses every writer; bursts under the capacity slow a little and stall nothing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from ckptwatch.simulate.evaluation import FAMILIES, VARIED, family_options
from ckptwatch.simulate.scenario import simulate


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bursts") / "raw"
    simulate(out, 3103, 8, 2.0, **{**family_options("burst", 3103), "incidents_per_hour": 1.0})
    return out, json.loads((out / "labels.json").read_text())


def test_a_burst_collides_the_pool_jobs_and_stalls_each_of_them(
        day: tuple[Path, dict[str, Any]]) -> None:
    out, labels = day
    bursts = [i for i in labels["incidents"]
              if i["cause"] == "saturation" and i["kind"] == "stall"]
    assert bursts
    pool_jobs = {j["job_id"] for j in labels["jobs"] if j["tier"] == "pool"}
    for inc in bursts:
        jobs = inc["scope"]["jobs"]
        assert len(jobs) >= 2 and set(jobs) <= pool_jobs
        # every job of the burst has a stall of it, labelled saturation
        assert {s["job_id"] for s in inc["stalled"]} == set(jobs)
        m = inc["magnitude"]
        # slowed by demand over capacity: the jobs' and the other tenants' demand
        assert m["slowdown"] == pytest.approx(m["demand_gbs"] / m["capacity_gbs"], rel=1e-3)
        assert m["slowdown"] >= 2.0 and m["jobs_gbs"] + m["tenants_gbs"] == pytest.approx(
            m["demand_gbs"], rel=1e-3)
    stalled = {(s["job_id"], s["step"]): s["causes"] for s in labels["stalls"]}
    assert sum(c[0] == "saturation" for c in stalled.values()) >= 2 * len(bursts) - 1


def test_bursts_under_the_capacity_stall_nothing(day: tuple[Path, dict[str, Any]]) -> None:
    _, labels = day
    under = [i for i in labels["incidents"] if i["variant"] == "under_capacity"]
    assert under
    for inc in under:
        assert inc["kind"] == "confounder" and not inc["stalled"]
        assert 1.0 < inc["magnitude"]["slowdown"] <= 1.6


def test_the_pool_writes_at_its_ceiling_and_the_writers_pause(
        day: tuple[Path, dict[str, Any]]) -> None:
    out, labels = day
    cap = labels["pool"]["bandwidth_gbs"] * 1e9
    pool = (pl.read_csv(out / "pool" / "pool_metrics.csv")
            .filter(pl.col("metric") == "write_bytes")
            .with_columns(pl.col("ts").str.to_datetime(time_zone="UTC").dt.epoch("s").alias("t"),
                          pl.col("value").cast(pl.Float64)))
    # the pool's throughput: each target's counter rate over its interval, summed
    rates = (pool.sort("target", "t")
             .with_columns((pl.col("value").diff() / pl.col("t").diff()).over("target")
                           .alias("bps"), (pl.col("t") - pl.col("t").diff().over("target"))
                           .alias("t0")))
    checked = 0
    for inc in [i for i in labels["incidents"]
                if i["cause"] == "saturation" and i["kind"] == "stall"]:
        a, b = _t(inc["start"]), _t(inc["end"])
        inside = rates.filter((pl.col("t0") >= a) & (pl.col("t") <= b))
        if inside.height:  # intervals wholly inside the burst: the pool at its ceiling
            # (each target samples on its own phase: its mean rate, times the targets)
            per_target = float(np.median(inside["bps"].to_numpy()))
            assert per_target * len(labels["pool"]["targets"]) == pytest.approx(cap, rel=0.2)
            checked += 1
        # the incast: a fabric episode on every writer's node over the burst
        incast = [i for i in labels["incidents"] if i["variant"] == "incast"
                  and i["start"] == inc["start"]]
        assert incast and set(incast[0]["scope"]["nodes"]) == set(inc["scope"]["nodes"])
    assert checked


def test_the_burst_family_is_asked_for_by_name() -> None:
    assert "burst" in FAMILIES and "burst" not in VARIED
    assert family_options("burst", 1)["fabric"] == "roce"
