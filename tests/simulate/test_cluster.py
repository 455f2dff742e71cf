"""Shared scenario types: interval overlap, piecewise-linear cumulative sums, drive numbering."""

from __future__ import annotations

import numpy as np

from ckptwatch.simulate.cluster import Cluster, Cumulative, grouped, overlap


def _cluster(nodes: int = 2, targets: int = 2, per_node: int = 2, per_target: int = 3) -> Cluster:
    return Cluster(
        nodes=tuple(f"node{i + 1:03d}" for i in range(nodes)), leaf=np.zeros(nodes, dtype=int),
        leaves=("leaf01",), fabric=("roce",) * nodes, nic=("ens1f0np0",) * nodes, port="1",
        pool="pool0", targets=tuple(f"pool0-tgt{j + 1:02d}" for j in range(targets)),
        target_bw=1e9, nic_bw=5e10, drives_per_node=per_node, drives_per_target=per_target,
        local_drive_bw=np.full(nodes * per_node, 3e9),
    )


def test_overlap_counts_seconds_inside_the_window() -> None:
    a0 = np.array([0.0, 5.0, 20.0, 8.0])
    a1 = np.array([10.0, 15.0, 30.0, 9.0])
    assert overlap(a0, a1, 8.0, 12.0).tolist() == [2.0, 4.0, 0.0, 1.0]


def test_cumulative_spreads_amounts_over_their_windows() -> None:
    cum = Cumulative.build(np.array([0.0, 10.0]), np.array([10.0, 20.0]), np.array([100.0, 50.0]))
    at = np.array([-1.0, 0.0, 5.0, 10.0, 15.0, 20.0, 99.0])
    assert np.allclose(cum(at), [0.0, 0.0, 50.0, 100.0, 125.0, 150.0, 150.0])


def test_cumulative_of_nothing_is_zero() -> None:
    cum = Cumulative.build(np.zeros(0), np.zeros(0), np.zeros(0))
    assert cum(np.array([0.0, 1e9])).tolist() == [0.0, 0.0]


def test_grouped_keeps_each_groups_total() -> None:
    group = np.array([1, 0, 1, 2])
    parts = grouped(group, 4, np.zeros(4), np.ones(4), np.array([1.0, 2.0, 3.0, 4.0]))
    assert [float(p(np.array(5.0))) for p in parts] == [2.0, 4.0, 4.0, 0.0]


def test_drives_are_numbered_local_first_then_per_target() -> None:
    cl = _cluster()
    assert (cl.n_local_drives, cl.n_drives) == (4, 10)
    assert cl.drive_name(0) == ("node001", "nvme0")
    assert cl.drive_name(3) == ("node002", "nvme1")
    assert cl.drive_name(4) == ("pool0-tgt01", "nvme0")
    assert cl.drive_name(9) == ("pool0-tgt02", "nvme2")
    assert cl.target_drives(1) == [7, 8, 9]
