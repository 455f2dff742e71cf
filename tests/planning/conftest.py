"""Planning fixtures: the essay's example inputs."""

from __future__ import annotations

import pytest

from ckptwatch.planning.model import PlanInputs


@pytest.fixture
def essay_inputs() -> PlanInputs:
    """The essay's example: 512 ranks, 8.8 TB per checkpoint, a 0.4 TB/s pool."""
    return PlanInputs(ranks=512, gpus_per_node=8, bytes_per_rank=8.8e12 / 512,
                      pool_bandwidth_bytes_s=0.4e12)
