"""`ckptwatch check RAW`: every family per host and day on the sample and on a simulated day;
the failed join named (with the near name) when a node is spelled differently; a missing
family and an unreadable file make exit 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptwatch.cli.main import main

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
NODES = [f"node00{i}" for i in range(1, 9)]
TARGETS = [f"pool0-tgt0{i}" for i in range(1, 5)]


def _check(capsys: pytest.CaptureFixture[str], raw: Path, *argv: str) -> tuple[int, dict]:
    code = main(["check", str(raw), "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_sample_every_family_for_every_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _check(capsys, SAMPLE)
    assert code == 0 and report["ok"] and report["problems"] == []
    assert {f for f, rows in report["families"].items() if rows} == {
        "checkpoints", "jobs", "smart", "fabric", "pool", "topology"}
    assert report["families"]["jobs"] == 4 and report["families"]["topology"] == 8
    hosts = {h["host"]: h for h in report["hosts"]}
    assert sorted(hosts) == NODES + TARGETS
    assert all(h["day"] == "2026-11-28" for h in hosts.values())
    for node in NODES:  # rank hosts: checkpoints, SMART, fabric, a leaf switch
        assert hosts[node]["checkpoints"] and hosts[node]["smart"] and hosts[node]["fabric"]
        assert hosts[node]["leaf_switch"] in ("leaf01", "leaf02")
    for target in TARGETS:  # pool targets: telemetry and their drives' SMART
        assert hosts[target]["pool"] and hosts[target]["smart"]
    assert hosts["node001"]["fabric"] == 6360 and hosts["pool0-tgt01"]["pool"] == 2395
    assert report["jobs"]["without_metadata"] == []


def test_sample_table_ends_with_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(SAMPLE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == ("check: 27 file(s), 12 host(s) over 1 day(s): every expected family "
                         "arrived and every name joins")
    assert any(line.split()[:2] == ["node005", "2026-11-28"] for line in lines)


def test_simulated_day(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "sim"
    assert main(["simulate", str(raw), "--seed", "7", "--nodes", "4", "--hours", "2",
                 "--start", "2026-12-01T06:00:00Z", "--quiet"]) == 0
    capsys.readouterr()
    code, report = _check(capsys, raw)
    assert code == 0, report["problems"]
    rank_hosts = [h for h in report["hosts"] if h["checkpoints"]]
    assert [h["host"] for h in rank_hosts] == ["node001", "node002", "node003", "node004"]
    assert all(h["day"] == "2026-12-01" and h["smart"] and h["fabric"] and h["leaf_switch"]
               for h in rank_hosts)
    assert any(h["pool"] for h in report["hosts"])


def _sample_copy(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(SAMPLE, raw)
    return raw


def test_misnamed_nodes_name_the_failed_join(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    raw = _sample_copy(tmp_path)
    topo = raw / "topology.csv"
    topo.write_text(topo.read_text().replace("node003,", "Node003,"))
    smart = raw / "smart" / "node005.jsonl"
    smart.write_text(smart.read_text().replace('"node":"node005"',
                                               '"node":"node005.cluster.local"'))
    code, report = _check(capsys, raw)
    assert code == 1 and not report["ok"]
    assert [(p["kind"], p["family"], p["host"], p["message"]) for p in report["problems"]] == [
        ("join", "smart", "node005", "rank host 'node005' has no SMART on any day (did you "
                                     "mean 'node005.cluster.local'?)"),
        ("join", "topology", "node003", "node 'node003' of the checkpoint records is not in "
                                        "topology.csv (did you mean 'Node003'?)"),
    ]
    assert main(["check", str(raw)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "check: 2 problem(s): 2 failed join(s)"


def test_a_job_without_metadata_and_a_local_device_spelled_differently(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _sample_copy(tmp_path)
    jobs = raw / "jobs" / "jobs.csv"
    jobs.write_text("\n".join(line for line in jobs.read_text().splitlines()
                              if not line.startswith("job-56099")) + "\n")
    ckpt = raw / "checkpoints" / "job-82866.csv"
    ckpt.write_text(ckpt.read_text().replace("node005:nvme0", "node005:nvme0n1"))
    code, report = _check(capsys, raw)
    assert code == 1
    messages = [p["message"] for p in report["problems"]]
    assert "job 'job-56099' of the checkpoint records has no row in jobs/" in messages
    assert any(m.startswith("local target 'node005:nvme0n1': node005's SMART has no device "
                            "'nvme0n1'") for m in messages)
    assert report["jobs"]["without_metadata"] == ["job-56099"]


def test_a_missing_family_and_ignoring_it(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "sim"
    assert main(["simulate", str(raw), "--seed", "7", "--nodes", "4", "--hours", "1",
                 "--omit", "fabric", "--quiet"]) == 0
    capsys.readouterr()
    code, report = _check(capsys, raw)
    assert code == 1
    assert [(p["kind"], p["family"]) for p in report["problems"]] == [("missing", "fabric")]
    code, report = _check(capsys, raw, "--ignore", "fabric")
    assert code == 0 and report["families"]["fabric"] == 0


def test_a_missing_day_of_smart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _sample_copy(tmp_path)
    # node002's checkpoints move to the next day; its SMART stays on 2026-11-28.
    ckpt = raw / "checkpoints" / "job-98372.jsonl"
    rows = [json.loads(line) for line in ckpt.read_text().splitlines()]
    for row in rows:
        if row["node"] == "node002":
            for key in ("start_time", "end_time"):
                if isinstance(row.get(key), (int, float)):
                    row[key] += 86400
                elif isinstance(row.get(key), str):
                    row[key] = row[key].replace("2026-11-28", "2026-11-29")
    ckpt.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, report = _check(capsys, raw)
    assert code == 1
    missing = [(p["family"], p["host"], p["day"]) for p in report["problems"]
               if p["kind"] == "missing"]
    assert ("smart", "node002", "2026-11-29") in missing
    assert ("fabric", "node002", "2026-11-29") in missing


def test_unreadable_file_and_missing_dir(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    raw = _sample_copy(tmp_path)
    (raw / "checkpoints" / "notes.bin").write_bytes(b"\x00\x01binary\xff")
    code, report = _check(capsys, raw)
    assert code == 1
    assert [p["kind"] for p in report["problems"]] == ["unreadable"]
    assert report["problems"][0]["message"].startswith("checkpoints/notes.bin: ")
    assert main(["check", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err
    assert main(["check", str(raw), "--ignore", "gpus"]) == 2
    assert "unknown family gpus" in capsys.readouterr().err


def test_adapter_output_without_a_node_says_to_pass_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    raw = _sample_copy(tmp_path)
    log = (SAMPLE.parents[1] / "tests" / "fixtures" / "real" / "checkpoint_timing"
           / "log_excerpts" / "torchtitan_pr1287_dcp_zoc.log")
    assert main(["adapt", "torchtitan", str(log), "--job-id", "job-45972", "--tier", "pool",
                 "--out", str(raw / "checkpoints" / "titan.jsonl")]) == 0
    capsys.readouterr()
    code, report = _check(capsys, raw)
    assert code == 1
    messages = [p["message"] for p in report["problems"]]
    assert "rank host 'unknown' has no SMART on any day (the log adapters' node when none is " \
           "given: pass --node)" in messages
    assert any(h["host"] == "unknown" and h["day"] == "2025-06-25" and h["checkpoints"] == 1
               for h in report["hosts"])
