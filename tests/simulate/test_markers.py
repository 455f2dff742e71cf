"""The simulator's start markers (one per rank per checkpoint) and the ``hang_ranks`` option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.simulate.test_scenario import _digest, _epoch, read_checkpoint_lines

from ckptwatch.errors import SimulationConfigError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.simulate.scenario import simulate

MARKER_KEYS = {"job_id", "step", "rank", "node", "tier", "start_time", "target", "status"}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small scenario without the option."""
    out = tmp_path_factory.mktemp("plain")
    simulate(out, seed=5, nodes=4, hours=2.0)
    return out


@pytest.fixture(scope="module")
def hung(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same scenario with two ranks of one checkpoint that never finish."""
    out = tmp_path_factory.mktemp("hung")
    simulate(out, seed=5, nodes=4, hours=2.0, hang_ranks=2)
    return out


def _labels(root: Path) -> dict[str, Any]:
    return json.loads((root / "labels.json").read_text(encoding="utf-8"))


def test_every_rank_record_follows_its_marker(plain: Path) -> None:
    for path in sorted((plain / "checkpoints").iterdir()):
        lines = read_checkpoint_lines(path)
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        finished = 0
        for r in lines:
            key = (r["job_id"], str(r["step"]), str(r["rank"]))
            if r["status"] == "started":
                assert key not in seen, key
                if path.suffix == ".jsonl":  # no end_time, bytes or phases at all
                    assert set(r) == MARKER_KEYS, r
                else:  # CSV: the same columns, empty
                    assert r["end_time"] == r["bytes"] == r["write_s"] == "", r
                seen[key] = r
            else:
                marker = seen[key]  # the marker came first
                assert (marker["node"], marker["tier"], marker["target"], marker["start_time"]) \
                    == (r["node"], r["tier"], r["target"], r["start_time"])
                finished += 1
        assert finished == len(seen) > 0, path.name


def test_lines_are_in_the_order_a_recorder_appends_them(plain: Path) -> None:
    """A marker is written when its rank starts, a record when it ends."""
    for path in (plain / "checkpoints").iterdir():
        when = [_epoch(r["start_time"] if r["status"] == "started" else r["end_time"])
                for r in read_checkpoint_lines(path)]
        assert when == sorted(when), path.name


def test_markers_are_ingested_into_checkpoint_starts(plain: Path, tmp_path: Path) -> None:
    report = ingest(plain, tmp_path / "lake")
    assert report.count("failed") == 0 and report.quarantined == 0
    assert report.rows["checkpoint_starts"] == report.rows["checkpoint_writes"] > 0
    lake = Lake(tmp_path / "lake")
    starts = lake.read("checkpoint_starts").select("job_id", "step", "rank", "start_ts").sort(
        "job_id", "step", "rank")
    writes = lake.read("checkpoint_writes").select("job_id", "step", "rank", "start_ts").sort(
        "job_id", "step", "rank")
    assert starts.equals(writes)


def test_hang_leaves_markers_without_records_and_changes_nothing_else(
        plain: Path, hung: Path) -> None:
    a, b = _digest(plain), _digest(hung)
    labels = _labels(hung)
    [hang] = labels["hangs"]
    job = next(j for j in labels["jobs"] if j["job_id"] == hang["job_id"])
    assert {k for k in a if a[k] != b[k]} == {"labels.json", job["file"]}
    before, after = _labels(plain), labels
    assert after["incidents"] == before["incidents"]
    extra = [s for s in after["stalls"] if s not in before["stalls"]]
    assert [(s["job_id"], s["step"], s["timed_out"], s["unfinished_ranks"]) for s in extra] == [
        (hang["job_id"], hang["step"], True, 2)]
    assert len(hang["ranks"]) == 2 and len(hang["nodes"]) == 1  # one node's ranks
    assert hang["checkpoint_timeout_s"] == job["checkpoint_timeout_s"]
    assert _epoch(hang["killed_at"]) - _epoch(hang["start"]) == pytest.approx(
        job["checkpoint_timeout_s"])
    lines = read_checkpoint_lines(hung / job["file"])
    mine = [r for r in lines if (r["job_id"], int(r["step"])) == (hang["job_id"], hang["step"])]
    open_ranks = {int(r["rank"]) for r in mine if r["status"] == "started"} - {
        int(r["rank"]) for r in mine if r["status"] != "started"}
    assert sorted(open_ranks) == hang["ranks"]
    assert {r["node"] for r in mine if int(r["rank"]) in open_ranks} == set(hang["nodes"])
    assert max(int(r["step"]) for r in lines) == hang["step"]  # the job's last checkpoint
    # without the hung ranks' records, the file is the plain one
    plain_lines = read_checkpoint_lines(plain / job["file"])
    dropped = [r for r in plain_lines if r["status"] != "started"
               and (r["job_id"], int(r["step"])) == (hang["job_id"], hang["step"])
               and int(r["rank"]) in open_ranks]
    assert len(dropped) == 2 and [r for r in plain_lines if r not in dropped] == lines


def test_hang_ingests_as_unfinished_ranks(hung: Path, tmp_path: Path) -> None:
    report = ingest(hung, tmp_path / "lake")
    assert report.quarantined == 0
    assert report.rows["checkpoint_starts"] == report.rows["checkpoint_writes"] + 2


def test_hang_needs_a_job_big_enough(tmp_path: Path) -> None:
    with pytest.raises(SimulationConfigError, match=r"^--hang-ranks 100000: no job has a "
                       r"checkpoint and 100000 ranks \(the largest job has \d+\)"):
        simulate(tmp_path / "x", seed=5, nodes=4, hours=1.0, hang_ranks=100_000)
    with pytest.raises(SimulationConfigError, match="^--hang-ranks must be >= 0$"):
        simulate(tmp_path / "y", seed=5, nodes=4, hours=1.0, hang_ranks=-1)
