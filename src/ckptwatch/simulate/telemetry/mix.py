"""Which tool format carries which series: the ``--format-mix`` of a simulated scenario.

``default`` is what the simulator has always written: every drive as ``smartctl -j -a`` plus the
OCP log as ``nvme ocp smart-add-log -o json``; RoCE NICs as ``ethtool -S``, InfiniBand HCAs as
``perfquery -x``.

``world`` writes every supported format, the way a cluster whose nodes were set up at different
times by different teams sends them. A series still arrives once, in one format: each drive and
each node is given one collector, round-robin (deterministic, no random draw, so the values are
those of the ``default`` mix with the same seed, only encoded differently):

- drives: ``smartctl`` JSON + OCP JSON, nvme-cli ``smart-log`` JSON + OCP text, ``smartctl`` JSON
  + OCP text (``SMART_ENCODINGS``, by drive number);
- RoCE nodes: ``ethtool -S`` per NIC, or a node_exporter scrape (``--collector.ethtool``) of all
  the node's NICs (``ROCE_FORMATS``);
- InfiniBand nodes: ``perfquery -x`` per HCA port, a sysfs ``grep -H`` snapshot of all HCAs, or a
  node_exporter scrape (``--collector.infiniband``) (``IB_FORMATS``).

Sysfs has no pause frames, so RoCE nodes are never given it (their pause signal would be lost;
the counters real mlx5 sysfs has for RoCE are in ``hw_counters``, without PFC).
"""

from __future__ import annotations

SMART_ENCODINGS = ("smartctl+ocp-json", "nvme-cli+ocp-text", "smartctl+ocp-text")
ROCE_FORMATS = ("ethtool", "prometheus")
IB_FORMATS = ("perfquery", "sysfs-ib", "prometheus")


def smart_encoding(mix: str, drive: int) -> str:
    """The SMART encoding of drive number ``drive`` under ``mix``."""
    if mix == "default":
        return SMART_ENCODINGS[0]
    return SMART_ENCODINGS[drive % len(SMART_ENCODINGS)]


def fabric_format(mix: str, kind: str, nth: int) -> str:
    """The fabric format of the ``nth`` node (0-based) of fabric ``kind`` (roce | ib)."""
    formats = ROCE_FORMATS if kind == "roce" else IB_FORMATS
    return formats[0] if mix == "default" else formats[nth % len(formats)]


def rail_name(primary: str, kind: str, rail: int) -> str:
    """Device name of NIC ``rail`` (0 = the node's modelled NIC, ``primary``)."""
    if rail == 0:
        return primary
    return f"mlx5_{rail}" if kind == "ib" else f"ens{rail + 1}f0np0"
