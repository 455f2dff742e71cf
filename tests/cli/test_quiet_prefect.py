"""`ckptwatch nightly` as a new user runs it (issue 17, defect 7): Prefect configured by the
command, so stderr holds only ckptwatch's own lines and no ``~/.prefect`` appears.

The nightly runs on the small raw directory of tests/conftest.py and one job whose tail is at
92% of its timeout (a critical alert for the stdout sink), not on the whole sample: what is
checked is how the command sets Prefect up and where its lines go, not the sample's stalls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import write_hot_job, write_raw_dir

#: What the test's own environment may set that a new user's shell would not.
_DROPPED = ("PREFECT_", "CKPTWATCH_", "XDG_CACHE_HOME", "DO_NOT_TRACK")


def _raw_with_a_critical_job(root: Path) -> Path:
    """The small raw directory, and job ``hot``: 8 checkpoints of 110 s, a 120 s timeout."""
    return write_hot_job(write_raw_dir(root), 110, name="hot")


@pytest.mark.slow
def test_nightly_prints_only_its_own_lines_and_keeps_prefect_out_of_home(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED)}
    env["HOME"] = str(home)
    config = tmp_path / "ckptwatch.toml"  # the raw dir's checkpoints are of 2026-11-28
    config.write_text("[alerts]\nstale_after_s = 1e9\n")
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "nightly",
         str(_raw_with_a_critical_job(tmp_path / "raw")), "--lake", str(tmp_path / "L"),
         "--config", str(config)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "prefect" not in done.stderr.lower(), done.stderr[-3000:]
    assert all(line.startswith("ckptwatch nightly: ") for line in done.stderr.splitlines())
    assert not (home / ".prefect").exists()
    assert (home / ".cache" / "ckptwatch" / "prefect").is_dir()
    # nothing else in the home: matplotlib's state in the same cache (issue 46, bug 7), not
    # ~/.config/matplotlib or ~/.cache/matplotlib
    assert [p.name for p in home.iterdir()] == [".cache"]
    assert [p.name for p in (home / ".cache").iterdir()] == ["ckptwatch"]
    assert {p.name for p in (home / ".cache" / "ckptwatch").iterdir()} <= {
        "prefect", "matplotlib", "ipython"}
    # The stdout sink's alerts reach stdout (the report says they were sent there).
    assert done.stdout.count("[FIRING:critical] CheckpointTailNearTimeout") == 1
    assert "[FIRING:critical] CheckpointTailNearTimeout job_id=hot" in done.stdout
    assert f"report: {tmp_path / 'L' / 'reports' / '2026-11-28' / 'report.html'}" in done.stdout
