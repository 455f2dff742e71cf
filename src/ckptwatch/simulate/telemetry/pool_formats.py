"""The pool as a storage system's own tools report it (``--pool-format``), one module each:
``pool_lustre``, ``pool_daos``, ``pool_spdk``, ``pool_gpfs``; their names and servers are
``pool_layout``'s, their physics ``pool_model``'s. The long CSV (``csv``) is ``telemetry.pool``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ckptwatch.simulate.cluster import Background, Cluster, Incident, WriteLoad
from ckptwatch.simulate.telemetry.pool_daos import write_daos
from ckptwatch.simulate.telemetry.pool_gpfs import write_gpfs
from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.pool_lustre import write_lustre
from ckptwatch.simulate.telemetry.pool_model import PoolModel
from ckptwatch.simulate.telemetry.pool_spdk import write_spdk
from ckptwatch.simulate.telemetry.sampling import Clocks

WRITERS = {"lustre": write_lustre, "daos": write_daos, "spdk": write_spdk, "gpfs": write_gpfs}


def write_pool_tools(pool_dir: Path, layout: PoolLayout, cluster: Cluster, load: WriteLoad,
                     incidents: Sequence[Incident], bg: Background, t0: float, t1: float,
                     interval: float, rng: np.random.Generator,
                     clocks: Clocks | None = None) -> dict[Path, int]:
    """The pool's tool outputs under ``pool_dir`` in ``layout.format``; the lines (or
    envelopes) written per file."""
    model = PoolModel(layout.format, cluster, load, incidents, bg, t0, rng)
    return WRITERS[layout.format](pool_dir, layout, model, clocks or Clocks(), rng, t0, t1,
                                  interval)
