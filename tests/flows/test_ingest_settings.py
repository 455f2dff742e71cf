"""``ckptwatch ingest --flow`` hands the run's settings to the flow as a parameter, not through
the environment: a limit given as a flag reaches the flow's tasks, and the command leaves the
environment as it found it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ckptwatch.cli.main import main
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST_LIMIT_ENV, WORKERS_ENV

pytestmark = pytest.mark.prefect


def _record(job: str, rank: int) -> dict[str, object]:
    return {"job_id": job, "step": 1, "rank": rank, "node": "n0", "tier": "pool",
            "start_time": "2026-11-28T00:00:00Z", "end_time": "2026-11-28T00:00:05Z",
            "bytes": 1024}


def test_a_limit_flag_reaches_the_flow_without_the_environment(
        prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for var in (*INGEST_LIMIT_ENV.values(), WORKERS_ENV):
        monkeypatch.delenv(var, raising=False)
    raw = tmp_path / "raw" / "checkpoints"
    raw.mkdir(parents=True)
    (raw / "c.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in (_record("j1", 0), _record("a-long-job", 1))))
    before = dict(os.environ)
    code = main(["ingest", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"), "--flow",
                 "--max-field-chars", "8", "--workers", "1", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert dict(os.environ) == before
    [reason] = Lake(tmp_path / "lake").read("quarantine")["reason"]
    assert reason == "job_id is 10 characters, over the limit of 8 (CKPTWATCH_MAX_FIELD_CHARS)"
    assert Lake(tmp_path / "lake").read("checkpoint_writes")["job_id"].to_list() == ["j1"]
