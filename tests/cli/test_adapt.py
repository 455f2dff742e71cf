"""`ckptwatch adapt megatron|torchtitan|dcp|slurm`: the adapters from the command line, their
output ingested as the jobs and checkpoint tables, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckptwatch.cli.main import main
from ckptwatch.ingest.discover import classify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"
SACCT = FIXTURES / "slurm" / "clockwork_cedar_sacct_1.json"
EXCERPTS = FIXTURES / "checkpoint_timing" / "log_excerpts"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_adapt_slurm_writes_jobs_the_ingest_files_as_jobs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "raw" / "jobs" / "slurm-2023-03-30.jsonl"
    assert main(["adapt", "slurm", str(SACCT), "--timeout-s", "600", "--tier", "pool",
                 "--out", str(out)]) == 0
    assert _lines(out) == [
        {"job_id": "63768795", "n_ranks": 1, "checkpoint_timeout_s": 600.0, "gpus_per_node": 1,
         "tier": "pool"},
        {"job_id": "63694682", "n_ranks": 1, "checkpoint_timeout_s": 600.0, "gpus_per_node": 1,
         "tier": "pool"}]
    assert capsys.readouterr().out.strip() == (
        f"2 job(s) from sacct --json written to {out}; timeout from the fixed 600 s")
    assert classify(out, "jobs/slurm-2023-03-30.jsonl").table == "jobs"


def test_adapt_slurm_from_stdin_and_jobs_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(SACCT.read_text()))
    out = tmp_path / "jobs.jsonl"
    assert main(["adapt", "slurm", "-", "--timeout-comment-key", "ckpt_timeout",
                 "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "job 63768795: left out: no checkpoint timeout: no ckpt_timeout= in its comment" \
        in captured.err
    assert "0 job(s) from sacct --json nothing written, 2 left out" in captured.out
    assert not out.exists()


def test_adapt_slurm_needs_a_timeout_source(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["adapt", "slurm", str(SACCT), "--out", str(tmp_path / "j.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no checkpoint timeout source" in err


def test_adapt_torchtitan_genuine_log(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "titan.jsonl"
    log = EXCERPTS / "torchtitan_pr1287_dcp_zoc.log"
    assert main(["adapt", "torchtitan", str(log), "--job-id", "4242", "--tier", "pool",
                 "--node", "gpu-07", "--out", str(out)]) == 0
    (record,) = _lines(out)
    assert (record["step"], record["rank"], record["start_time"], record["end_time"]) == (
        800, 0, "2025-06-25T13:20:46.459000+00:00", "2025-06-25T13:20:46.479000+00:00")
    assert capsys.readouterr().out.strip() == f"1 checkpoint record(s) appended to {out}"
    assert classify(out, "checkpoints/titan.jsonl").table == "checkpoint_writes"


def test_adapt_megatron_genuine_log(tmp_path: Path) -> None:
    out = tmp_path / "meg.jsonl"
    log = EXCERPTS / "megatron_hyperpod_slurm_resiliency_doc.log"
    code = main(["adapt", "megatron", str(log), "--job-id", "7", "--tier", "local",
                 "--out", str(out)])
    assert code == 0
    (record,) = _lines(out)
    assert (record["step"], record["rank"], record["status"]) == (1, 0, "ok")


def test_adapt_dcp_replays_captured_events(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ns = 1_795_000_000_000_000_000
    events = [
        {"event": "start", "time": ns, "uuid": "a", "func_name": "save",
         "checkpoint_id": "/ckpt/step_300", "global_rank": "1"},
        {"event": "start", "time": ns + 1000, "uuid": "b", "func_name": "save",
         "checkpoint_id": "/ckpt/step_300", "global_rank": "0"},
        {"event": "end", "time": ns + 2_000_000_000, "times_spent": 1_500_000_000,
         "uuid": "w1", "func_name": "write_data", "global_rank": "1"},
        {"event": "end", "time": ns + 2_500_000_000, "times_spent": 2_500_000_000, "uuid": "a",
         "func_name": "save", "checkpoint_id": "/ckpt/step_300", "global_rank": "1"},
        {"event": "end", "time": ns + 3_000_000_000, "times_spent": 3_000_000_000, "uuid": "b",
         "func_name": "save", "checkpoint_id": "/ckpt/step_300", "global_rank": "0"},
    ]
    src = tmp_path / "dcp-events.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")
    out = tmp_path / "dcp.jsonl"
    assert main(["adapt", "dcp", str(src), "--job-id", "9", "--tier", "pool", "--node", "n1",
                 "--out", str(out)]) == 1  # the line that is not an event is a failure
    records = _lines(out)
    finished = sorted((r["rank"], r["step"], r["write_s"]) for r in records
                      if r["status"] == "ok")
    assert finished == [(0, 300, None), (1, 300, 1.5)]
    assert sum(r["status"] == "started" for r in records) == 2
    captured = capsys.readouterr()
    assert f"{src}:6: not a DCP event" in captured.err
    assert "4 checkpoint record(s) from 5 DCP event(s)" in captured.out


@pytest.mark.parametrize("argv", [
    ["adapt", "torchtitan", "/nonexistent/train.log", "--job-id", "1", "--tier", "pool",
     "--out", "/tmp/x.jsonl"],
    ["adapt", "megatron", "/nonexistent/train.log", "--job-id", "1", "--tier", "pool",
     "--out", "/tmp/x.jsonl"],
    ["adapt", "slurm", "/nonexistent/sacct.json", "--timeout-s", "1", "--out", "/tmp/x.jsonl"],
    ["adapt", "dcp", "/nonexistent/events.jsonl", "--job-id", "1", "--tier", "pool",
     "--out", "/tmp/x.jsonl"],
])
def test_errors_are_one_line_without_traceback(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "ckptwatch.cli.main", *argv],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot read /nonexistent/" in proc.stderr


def test_slurm_input_that_is_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "sacct.txt"
    bad.write_text("JobID|JobName|State\n1|train|RUNNING\n")
    assert main(["adapt", "slurm", str(bad), "--timeout-s", "60",
                 "--out", str(tmp_path / "j.jsonl")]) == 2
    assert f"{bad}: not JSON" in capsys.readouterr().err


def test_adapt_runs_in_a_training_image_without_the_analysis_stack(tmp_path: Path) -> None:
    """The adapters are stdlib only: `ckptwatch adapt` works where polars, pyarrow, duckdb,
    numpy and prefect are not installed (``pip install --no-deps``)."""
    code = (
        "import sys\n"
        "for m in ('polars', 'pyarrow', 'duckdb', 'numpy', 'prefect', 'sklearn'):\n"
        "    sys.modules[m] = None\n"
        "from ckptwatch.cli.main import main\n"
        f"a = main(['adapt', 'torchtitan', {str(EXCERPTS / 'torchtitan_pr1287_dcp_zoc.log')!r},"
        f" '--job-id', '1', '--tier', 'pool', '--out', {str(tmp_path / 't.jsonl')!r}])\n"
        f"b = main(['adapt', 'slurm', {str(SACCT)!r}, '--timeout-s', '60',"
        f" '--out', {str(tmp_path / 'j.jsonl')!r}])\n"
        "sys.exit(a or b)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(_lines(tmp_path / "t.jsonl")) == 1 and len(_lines(tmp_path / "j.jsonl")) == 2
