"""`ckptwatch ingest` frictions: an empty raw directory, a wait on another run's lake lock."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ckptwatch.cli.main import build_parser, main
from ckptwatch.lake.store import Lake


def test_empty_raw_dir_says_so_and_exits_1(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "raw").mkdir()
    rc = main(["ingest", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"), "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "files: 0 seen" in out
    assert err == (f"ckptwatch ingest: no raw files found under {tmp_path / 'raw'} (expected "
                   "checkpoints/, jobs/, smart/, fabric/, pool/ or topology.csv; see "
                   "docs/formats.md)\n")
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    help_text = sub.choices["ingest"].description  # type: ignore[union-attr]
    assert "1 when some file could not be read or RAW_DIR holds no file at all" in help_text


def test_a_wait_on_the_lake_lock_is_said_once(raw_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # another run: its own open file, so flock excludes this process too
        with Lake(lake).lock(wait_s=0):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    timer = threading.Timer(1.0, release.set)  # the other run ends after ~5 polls
    timer.start()
    try:
        rc = main(["ingest", str(raw_dir), "--lake", str(lake), "--quiet", "--lock-wait", "30"])
    finally:
        release.set()
        timer.cancel()
        holder.join()
    out, err = capsys.readouterr()
    assert rc == 0 and "6 ingested" in out
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"ckptwatch: lake {lake} is locked by another run "
                               f"(pid {os.getpid()} since ")
    assert lines[0].endswith("); waiting up to 30 s for it to finish")
