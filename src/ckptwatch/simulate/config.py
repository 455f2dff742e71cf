"""Knobs of a simulated scenario (``ckptwatch simulate`` options) and their validation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ckptwatch.errors import SimulationConfigError

DEFAULT_START = "2026-11-28T00:00:00Z"
#: Values of ``--format-mix``.
FORMAT_MIXES = ("default", "world")
GC_EVIDENCE = ("full", "wa_only")
SIGNAL_STRENGTHS = ("strong", "weak")
OMITTABLE = ("topology", "phases", "ocp", "pool", "smart", "fabric")


@dataclass(frozen=True)
class SimulationConfig:
    """Scenario knobs. ``None`` means: derive from the cluster size (see each field)."""

    nodes: int = 8
    hours: float = 4.0
    start: str = DEFAULT_START
    jobs: int | None = None  # None: 2-4 drawn from the seed
    incidents_per_hour: float = 2.0
    pool_targets: int | None = None  # None: nodes / 2, within 2..64
    pool_bandwidth_gbs: float | None = None  # aggregate GB/s; None: 6.25 per target
    nodes_per_leaf: int | None = None  # None: 4 below 64 nodes, else 16
    fabric: str = "mixed"  # mixed (alternate leaves RoCE / IB) | roce | ib
    fabric_format: str = "raw"  # raw (ethtool / perfquery envelopes) | canonical
    drives_per_node: int = 1
    drives_per_target: int = 2
    fabric_interval_s: float = 90.0
    pool_interval_s: float = 30.0
    smart_interval_s: float = 900.0
    #: Ranks of one checkpoint that never finish (``ckptwatch.simulate.hang``); 0: none.
    hang_ranks: int = 0
    #: How SMART and fabric samples are encoded (``FORMAT_MIXES``): ``default`` (smartctl JSON +
    #: OCP JSON; ethtool -S / perfquery -x) or ``world`` (every supported format, see
    #: ``ckptwatch.simulate.telemetry.mix``). The values are the same series either way.
    format_mix: str = "default"
    #: NICs (RoCE netdevs / IB HCAs) per node; the extra rails carry the node's counters scaled.
    nics_per_node: int = 1
    #: How GC on local drives shows (``GC_EVIDENCE``): ``full`` (write amplification, free
    #: blocks dip, controller busy, temperature) or ``wa_only`` (a modest write-amplification
    #: rise and nothing else: all some drives show).
    gc_evidence: str = "full"
    #: ``strong`` or ``weak`` (``SIGNAL_STRENGTHS``): weak stall signals (pause rates and write
    #: amplification a few times lower: still outside their series' noise) and a noisier
    #: background of pause frames and write amplification.
    signal_strength: str = "strong"
    #: Chance that each stall has a background episode at the same time on hosts it does not
    #: slow (a pause burst on the checkpoint's fast nodes, GC on a target its slow ranks do not
    #: use): activity that singles out no slow rank. 0: none.
    background_per_stall: float = 0.0
    #: Telemetry families left out of the scenario (``OMITTABLE``): ``topology`` (no
    #: topology.csv), ``phases`` (no open/write/fsync/close columns), ``ocp`` (no OCP SMART:
    #: no media bytes written, so no write amplification), ``pool`` (no pool metrics),
    #: ``smart`` (no SMART files), ``fabric`` (no fabric counter files).
    omit: tuple[str, ...] = ()

    def start_epoch(self) -> float:
        """``start`` as epoch seconds."""
        try:
            when = datetime.fromisoformat(self.start.replace("Z", "+00:00"))
        except ValueError as exc:
            raise SimulationConfigError(f"--start {self.start!r} is not ISO-8601; "
                                        "use e.g. 2026-11-28T00:00:00Z") from exc
        if when.tzinfo is None:
            raise SimulationConfigError(f"--start {self.start!r} has no UTC offset; "
                                        "append Z or +00:00")
        return when.timestamp()

    def validate(self) -> None:
        """Raise ``SimulationConfigError`` naming the first option out of range."""
        checks = [
            (self.nodes >= 2, "--nodes must be at least 2 (one local-tier and one pool-tier job)"),
            (0.25 <= self.hours <= 24 * 14, "--hours must be between 0.25 and 336"),
            (self.jobs is None or 2 <= self.jobs <= self.nodes,
             "--jobs must be between 2 and --nodes"),
            (self.incidents_per_hour >= 0, "--incidents-per-hour must be >= 0"),
            (self.pool_targets is None or 1 <= self.pool_targets <= 999,
             "--pool-targets must be between 1 and 999"),
            (self.pool_bandwidth_gbs is None or self.pool_bandwidth_gbs > 0,
             "--pool-bandwidth-gbs must be positive"),
            (self.nodes_per_leaf is None or self.nodes_per_leaf >= 1,
             "--nodes-per-leaf must be >= 1"),
            (self.fabric in ("mixed", "roce", "ib"), "--fabric must be mixed, roce or ib"),
            (self.fabric_format in ("raw", "canonical"),
             "--fabric-format must be raw or canonical"),
            (self.drives_per_node in (1, 2, 4, 8), "--drives-per-node must be 1, 2, 4 or 8"),
            (1 <= self.drives_per_target <= 16, "--drives-per-target must be between 1 and 16"),
            (min(self.fabric_interval_s, self.pool_interval_s, self.smart_interval_s) >= 5,
             "sample intervals must be at least 5 s"),
            (self.hang_ranks >= 0, "--hang-ranks must be >= 0"),
            (self.format_mix in FORMAT_MIXES,
             f"--format-mix must be one of {', '.join(FORMAT_MIXES)}"),
            (1 <= self.nics_per_node <= 8, "--nics-per-node must be between 1 and 8"),
            (self.nics_per_node == 1 or self.fabric_format == "raw",
             "--nics-per-node above 1 needs --fabric-format raw"),
            (self.gc_evidence in GC_EVIDENCE,
             f"gc_evidence must be one of {', '.join(GC_EVIDENCE)}"),
            (self.signal_strength in SIGNAL_STRENGTHS,
             f"signal_strength must be one of {', '.join(SIGNAL_STRENGTHS)}"),
            (0.0 <= self.background_per_stall <= 1.0,
             "background_per_stall must be between 0 and 1"),
            (set(self.omit) <= set(OMITTABLE),
             f"omit: unknown telemetry family {sorted(set(self.omit) - set(OMITTABLE))}; "
             f"choose from {', '.join(OMITTABLE)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise SimulationConfigError(message)
        self.start_epoch()
