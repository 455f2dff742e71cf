"""Literal checkpoint windows and raw directories for the alert tests (one job, 120 s timeout)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

T0 = datetime(2026, 11, 28, tzinfo=UTC)
EVERY_S = 600  # a checkpoint every 10 minutes
TIMEOUT_S = 120.0  # warning 84 s, critical 108 s with the default levels
JOBS = pl.DataFrame({"job_id": ["j1"], "checkpoint_timeout_s": [TIMEOUT_S]})


def checkpoints(barriers: Sequence[float] | np.ndarray, *, job: str = "j1", tier: str = "pool",
                start: datetime = T0) -> pl.DataFrame:
    """One row per checkpoint, as the checkpoint_latency mart gives them."""
    return pl.DataFrame({
        "job_id": [job] * len(barriers), "tier": [tier] * len(barriers),
        "step": [100 * (i + 1) for i in range(len(barriers))],
        "end_ts": [start + timedelta(seconds=EVERY_S * i) for i in range(len(barriers))],
        "barrier_s": [float(b) for b in barriers],
    })


def write_raw(root: Path, jobs: dict[str, Sequence[float]], *, timeout_s: float = TIMEOUT_S,
              start: datetime = T0) -> Path:
    """A raw directory: per-rank JSON Lines (2 ranks; the slower one is the barrier), jobs.csv."""
    (root / "checkpoints").mkdir(parents=True)
    (root / "jobs").mkdir()
    lines = []
    for job, barriers in jobs.items():
        for i, b in enumerate(barriers):
            t = start + timedelta(seconds=EVERY_S * i)
            for rank, d in enumerate((0.8 * b, b)):
                lines.append(json.dumps({
                    "job_id": job, "step": 100 * (i + 1), "rank": rank, "node": f"n{rank}",
                    "tier": "pool", "start_time": t.isoformat(),
                    "end_time": (t + timedelta(seconds=float(d))).isoformat(), "bytes": 1}))
    (root / "checkpoints" / "ckpt.jsonl").write_text("\n".join(lines) + "\n")
    (root / "jobs" / "jobs.csv").write_text(
        "job_id,n_ranks,checkpoint_timeout_s\n"
        + "".join(f"{job},2,{timeout_s}\n" for job in jobs))
    return root
