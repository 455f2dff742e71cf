"""The checkpoint that never finished: a scenario option (``hang_ranks``) of the simulator.

With ``hang_ranks = N`` (``simulate(..., hang_ranks=N)``), N ranks of one checkpoint hang: each
writes its start marker (``status = "started"``) and never its finished record. The job is
chosen among the pool-tier jobs (the local tier when there is none) and the checkpoint is that
job's **last** one: the job's watchdog kills it when the checkpoint reaches its timeout, so the
job writes no later checkpoint in the scenario. The hung ranks are consecutive, from the first
rank of one of the job's nodes (8 ranks a node: N <= 8 hang on one node, the way a stuck NIC
or drive hangs a host).

Nothing else changes: the choice comes from its own random stream (seeded from the scenario
seed), so a scenario with ``hang_ranks = 0`` (the default) is byte-identical to one made before
the option existed, and with N > 0 every other file, incident and stall label is the same as
without it. ``labels.json`` then holds ``hangs`` (job, step, ranks, nodes, targets, the start
and the kill time) and a stall label for the checkpoint (``timed_out``, ``unfinished_ranks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptwatch.errors import SimulationConfigError
from ckptwatch.simulate.cluster import GPUS_PER_NODE, Cluster, Job

#: Mixed into the scenario seed for the hang's own random stream ("hang").
HANG_STREAM = 0x68616E67


@dataclass(frozen=True)
class Hang:
    """N ranks of checkpoint ``row`` of job ``job`` (an index into the job list) never finish."""

    job: int
    row: int
    ranks: np.ndarray

    def unfinished(self, job_index: int, n_checkpoints: int, n_ranks: int) -> np.ndarray:
        """Mask over a job's (checkpoint, rank) records: True where no record is written."""
        mask = np.zeros((n_checkpoints, n_ranks), dtype=bool)
        if job_index == self.job:
            mask[self.row, self.ranks] = True
        return mask


def plan_hang(n: int, seed: int, jobs: list[Job]) -> Hang | None:
    """Where ``n`` ranks hang (None for ``n = 0``); ``SimulationConfigError`` when no job has
    a checkpoint and ``n`` ranks."""
    if n <= 0:
        return None
    fits = [j for j, job in enumerate(jobs) if job.starts.size and job.n_ranks >= n]
    pool = [j for j in fits if jobs[j].tier == "pool"]
    choices = pool or fits
    if not choices:
        raise SimulationConfigError(
            f"--hang-ranks {n}: no job has a checkpoint and {n} ranks (the largest job has "
            f"{max((job.n_ranks for job in jobs), default=0)}); use fewer ranks or more nodes")
    rng = np.random.Generator(np.random.PCG64([seed, HANG_STREAM]))
    j = int(choices[int(rng.integers(len(choices)))])
    job = jobs[j]
    first = int(rng.integers(job.n_ranks // GPUS_PER_NODE)) * GPUS_PER_NODE
    ranks = (first + np.arange(n)) % job.n_ranks
    return Hang(job=j, row=job.starts.size - 1, ranks=np.sort(ranks))


def hang_labels(hang: Hang, jobs: list[Job], cluster: Cluster,
                iso: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``hangs`` entry and the stall label of the hung checkpoint (``iso``: epoch -> text)."""
    job = jobs[hang.job]
    start = float(job.starts[hang.row] + job.skew[hang.row].min())
    nodes = sorted({cluster.nodes[int(job.rank_node[r])] for r in hang.ranks})
    targets = (sorted({cluster.targets[int(job.rank_target[r])] for r in hang.ranks})
               if job.tier == "pool" else
               sorted({"{}:{}".format(*cluster.drive_name(int(job.rank_drive[r])))
                       for r in hang.ranks}))
    step = int(job.steps[hang.row])
    entry = {"job_id": job.job_id, "step": step, "ranks": [int(r) for r in hang.ranks],
             "nodes": nodes, "leaves": sorted({cluster.leaves[int(cluster.leaf[
                 cluster.nodes.index(n)])] for n in nodes}),
             "targets": targets, "start": iso(start), "killed_at": iso(start + job.timeout_s),
             "checkpoint_timeout_s": job.timeout_s}
    stall = {"job_id": job.job_id, "step": step, "causes": ["unknown"], "incidents": [],
             "timed_out": True, "unfinished_ranks": len(hang.ranks)}
    return entry, stall
