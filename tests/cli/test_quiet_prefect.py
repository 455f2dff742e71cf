"""`ckptwatch nightly` as a new user runs it (issue 17, defect 7): Prefect configured by the
command, so stderr holds only ckptwatch's own lines and no ``~/.prefect`` appears.

The nightly runs on the small raw directory of tests/conftest.py and one job whose tail is at
92% of its timeout (a critical alert for the stdout sink), not on the whole sample: what is
checked is how the command sets Prefect up and where its lines go, not the sample's stalls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from tests.conftest import ALERT_T0, write_raw_dir

#: What the test's own environment may set that a new user's shell would not.
_DROPPED = ("PREFECT_", "CKPTWATCH_", "XDG_CACHE_HOME", "DO_NOT_TRACK")


def _raw_with_a_critical_job(root: Path) -> Path:
    """The small raw directory, and job ``hot``: 8 checkpoints of 110 s, a 120 s timeout."""
    raw = write_raw_dir(root)
    rows = [{"job_id": "hot", "step": s, "rank": 0, "node": "n0", "tier": "pool",
             "start_time": (ALERT_T0 + timedelta(minutes=10 * s)).isoformat(),
             "end_time": (ALERT_T0 + timedelta(minutes=10 * s, seconds=110)).isoformat(),
             "bytes": 1}
            for s in range(8)]
    (raw / "checkpoints" / "hot.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (raw / "jobs" / "hot.csv").write_text("job_id,n_ranks,checkpoint_timeout_s\nhot,1,120\n")
    return raw


@pytest.mark.slow
def test_nightly_prints_only_its_own_lines_and_keeps_prefect_out_of_home(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED)}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "nightly",
         str(_raw_with_a_critical_job(tmp_path / "raw")), "--lake", str(tmp_path / "L")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "prefect" not in done.stderr.lower(), done.stderr[-3000:]
    assert all(line.startswith("ckptwatch nightly: ") for line in done.stderr.splitlines())
    assert not (home / ".prefect").exists()
    assert (home / ".cache" / "ckptwatch" / "prefect").is_dir()
    # The stdout sink's alerts reach stdout (the report says they were sent there).
    assert done.stdout.count("[FIRING:critical] CheckpointTailNearTimeout") == 1
    assert "[FIRING:critical] CheckpointTailNearTimeout job_id=hot" in done.stdout
    assert f"report: {tmp_path / 'L' / 'reports' / '2026-11-28' / 'report.html'}" in done.stdout
