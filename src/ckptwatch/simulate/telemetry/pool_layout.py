"""Where a simulated pool's targets live and what they are called, per ``--pool-format``.

The scenario's pool is ``n`` targets of equal bandwidth; a real pool names them after its own
parts, and its tools report them under those names (``ckptwatch.sources``). So the targets a
checkpoint record names, the pool telemetry and the SMART of the targets' drives all use:

============  ==========================================  ==================================
format        targets (``PoolLayout.targets``)            servers, metadata
============  ==========================================  ==================================
``csv``       ``pool0-tgt01`` …                           none (one row per target)
``lustre``    OSTs ``pool0-OST0000`` … (fsname ``pool0``)  OSS ``oss01`` … two OSTs each; MDS
                                                          ``mds01`` with ``pool0-MDT0000``
``daos``      ``daos01/engine0/tgt_0`` … (the reader's     server ``daos01`` … one engine of
              ``<host>/engine<e>/tgt_<n>``)                two targets; pool service on the
                                                          engines; pool = a UUID
``spdk``      ``nvmf01/Nvme0n1`` … (``<host>/<bdev>``)     target host ``nvmf01`` … two bdevs
``gpfs``      NSD servers ``nsd01`` … (one per target)     file system ``pool0``; mmpmon on
                                                          the compute nodes
============  ==========================================  ==================================

``StatsClear``: a real pool's statistics are cleared now and then (``lctl set_param
*.stats=clear``, an engine restart, ``bdev_reset_iostat``, ``mmpmon reset``): a day of two
hours or more has one, on one server, at 30-80 % of the day.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

import numpy as np

#: Targets per server (the last server may have fewer).
PER_SERVER = {"lustre": 2, "daos": 2, "spdk": 2, "gpfs": 1}


@dataclass(frozen=True)
class StatsClear:
    """A server's statistics cleared at ``at`` (epoch seconds): its counters restart at 0."""

    server: int
    at: float


@dataclass(frozen=True)
class PoolLayout:
    """The pool's names: targets, the servers serving them, the metadata service."""

    format: str
    #: the pool as its telemetry names it: the Lustre fsname / GPFS file system, the DAOS
    #: pool UUID, ``spdk``, ``pool0`` (csv)
    pool: str
    targets: tuple[str, ...]
    #: hosts that serve the targets (``csv``: none)
    servers: tuple[str, ...] = ()
    #: per target: the index of its server
    server_of: tuple[int, ...] = ()
    #: per target: its name on its server (``OST0003``, ``tgt_1``, ``Nvme1n1``)
    local: tuple[str, ...] = ()
    #: the metadata target (Lustre MDT) and its server, where the pool has them
    metadata: str | None = None
    metadata_server: str | None = None
    clear: StatsClear | None = None

    def served_by(self, server: int) -> list[int]:
        """The targets of server number ``server``."""
        return [t for t, s in enumerate(self.server_of) if s == server]

    def labels(self) -> dict[str, object]:
        """What ``labels.json`` says of the pool's layout (beyond its name and targets)."""
        out: dict[str, object] = {"format": self.format}
        if self.servers:
            out["servers"] = {srv: [self.targets[t] for t in self.served_by(i)]
                              for i, srv in enumerate(self.servers)}
        if self.metadata:
            out["metadata"] = {"target": self.metadata, "server": self.metadata_server}
        return out


def pool_layout(fmt: str, pool: str, n_targets: int, default_targets: tuple[str, ...],
                rng: np.random.Generator) -> PoolLayout:
    """The layout of a pool of ``n_targets`` in format ``fmt`` (``csv``: the simulator's own
    names, ``default_targets``)."""
    if fmt == "csv":
        return PoolLayout("csv", pool, default_targets)
    per = PER_SERVER[fmt]
    n_servers = -(-n_targets // per)
    server_of = tuple(t // per for t in range(n_targets))
    slot = [t % per for t in range(n_targets)]
    if fmt == "lustre":
        local = tuple(f"OST{t:04X}" for t in range(n_targets))
        servers = tuple(f"oss{s + 1:02d}" for s in range(n_servers))
        return PoolLayout(fmt, pool, tuple(f"{pool}-{x}" for x in local), servers, server_of,
                          local, metadata=f"{pool}-MDT0000", metadata_server="mds01")
    if fmt == "daos":
        servers = tuple(f"daos{s + 1:02d}" for s in range(n_servers))
        local = tuple(f"engine0/tgt_{k}" for k in slot)
        label = str(uuid.UUID(int=int(rng.integers(2**63)) << 64 | int(rng.integers(2**63)),
                              version=4))
        return PoolLayout(fmt, label, tuple(f"{servers[s]}/{x}"
                                            for s, x in zip(server_of, local, strict=True)),
                          servers, server_of, local)
    if fmt == "spdk":
        servers = tuple(f"nvmf{s + 1:02d}" for s in range(n_servers))
        local = tuple(f"Nvme{k}n1" for k in slot)
        return PoolLayout(fmt, "spdk", tuple(f"{servers[s]}/{x}"
                                             for s, x in zip(server_of, local, strict=True)),
                          servers, server_of, local)
    if fmt == "gpfs":
        servers = tuple(f"nsd{s + 1:02d}" for s in range(n_servers))
        return PoolLayout(fmt, pool, servers, servers, server_of, servers)
    raise ValueError(f"unknown pool format {fmt!r}")


def plan_clear(layout: PoolLayout, rng: np.random.Generator, t0: float, t1: float,
               n_nodes: int) -> PoolLayout:
    """``layout`` with its statistics clear: on a day of two hours or more, one server's (for
    Lustre the MDS counts as the last server; for GPFS, whose counters are mmpmon's on the
    compute nodes, one of the ``n_nodes`` nodes) at 30-80 % of the day."""
    if layout.format == "csv" or t1 - t0 < 2 * 3600.0:
        return layout
    n = len(layout.servers) + (1 if layout.metadata_server else 0)
    if layout.format == "gpfs":
        n = n_nodes
    return replace(layout, clear=StatsClear(int(rng.integers(n)),
                                            t0 + float(rng.uniform(0.3, 0.8)) * (t1 - t0)))
