"""The SQL tests' shared pieces: an empty lake to seed literal rows into, and the mart most of
them read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.sql.test_marts import query

from ckptwatch.lake.store import Lake


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """An initialised, empty lake."""
    Lake(tmp_path).init()
    return tmp_path


def latency(root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """checkpoint_latency by (job_id, step)."""
    return {(r["job_id"], r["step"]): r for r in query(root, "select * from checkpoint_latency")}
