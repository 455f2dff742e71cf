"""Knobs of a simulated scenario (``ckptwatch simulate`` options) and their validation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ckptwatch.errors import SimulationConfigError

DEFAULT_START = "2026-11-28T00:00:00Z"
#: Values of ``--format-mix``.
FORMAT_MIXES = ("default", "world")
#: Values of ``--pool-format``: how the pool reports itself (``ckptwatch.simulate.telemetry.
#: pool_layout``): the long CSV, or a storage system's own tools.
POOL_FORMATS = ("csv", "lustre", "daos", "spdk", "gpfs")
GC_EVIDENCE = ("full", "wa_only")
SIGNAL_STRENGTHS = ("strong", "weak")
OMITTABLE = ("topology", "phases", "ocp", "pool", "smart", "fabric")
#: Values of ``tool_clocks``.
TOOL_CLOCKS = ("aligned", "apart")
#: Tools whose sample instants ``sample_shift`` can move: the SMART health log (smartctl or
#: nvme-cli smart-log; with ``aligned`` clocks the OCP log is read at the same moment and moves
#: with it), the OCP log alone, the fabric counters, the pool exporters.
SHIFTABLE_TOOLS = ("smart", "ocp", "fabric", "pool")
#: Largest host clock offset ``clock_skew_s`` and ``host_clock`` accept, s.
MAX_CLOCK_SKEW_S = 600.0


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
    #: How the pool reports itself (``POOL_FORMATS``): ``csv`` (the long CSV
    #: ``ts,pool,target,metric,value``) or the tools of a real pool: ``lustre`` (``lctl
    #: get_param`` on OSSs and an MDS), ``daos`` (``daos_metrics -C``, ``dmg pool query``),
    #: ``spdk`` (``bdev_get_iostat``), ``gpfs`` (``mmpmon``, ``mmlsqos``, ``mmdiag --waiters``).
    #: The targets take the system's names; the incidents and labels are the same
    #: (``ckptwatch.simulate.telemetry.pool_layout``).
    pool_format: str = "csv"
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
    #: Correlated checkpoint bursts per hour (``saturation``): pool jobs' checkpoints aligned
    #: on one moment, the pool's bandwidth shared by all their ranks and other tenants, every
    #: rank slowed by demand over capacity; as many bursts that stay under it (confounders).
    #: 0: none (the pool jobs' phases fall where their schedules put them).
    bursts_per_hour: float = 0.0
    #: With bursts: the pool jobs were launched together and checkpoint on one schedule (the
    #: first pool job's interval, phases within seconds), so their checkpoints collide by
    #: themselves and a burst is such a collision the other tenants push over the capacity
    #: (no checkpoint is moved). What a stagger plan (``ckptwatch plan stagger``) spreads.
    aligned_phases: bool = False
    #: (job id, seconds) pairs: every checkpoint of that job starts this much later (what a
    #: scheduler applying a stagger plan's offsets does); checkpoints pushed past the day's
    #: end are not taken.
    phase_offsets: tuple[tuple[str, float], ...] = ()
    #: Telemetry families left out of the scenario (``OMITTABLE``): ``topology`` (no
    #: topology.csv), ``phases`` (no open/write/fsync/close columns), ``ocp`` (no OCP SMART:
    #: no media bytes written, so no write amplification), ``pool`` (no pool metrics),
    #: ``smart`` (no SMART files), ``fabric`` (no fabric counter files).
    omit: tuple[str, ...] = ()
    #: How the tools of one host take their samples (``TOOL_CLOCKS``): ``aligned`` (a drive's
    #: health log and OCP log at one instant, a node's NICs at one instant, device names as the
    #: envelope's ``nvme0``) or ``apart`` (as a cluster's collectors do: the OCP log is its own
    #: command on its own jittered cadence, seconds after the health log or 10x denser or 2x
    #: sparser than it; each NIC read in turn, seconds apart; device names spelled as the tools
    #: print them: ``/dev/nvme0``, ``/dev/nvme0n1``, ``nvme0n1``).
    tool_clocks: str = "aligned"
    #: Largest telemetry host clock error, s: each node and pool target stamps what it collects
    #: (SMART, fabric counters, pool metrics) on its own clock, off by a value drawn in
    #: [-clock_skew_s, clock_skew_s]; the values are those at the true instants. Checkpoint
    #: records stay on the reference clock. 0: every host on one clock.
    clock_skew_s: float = 0.0
    #: (tool, seconds) pairs: every sample instant of the tool (``SHIFTABLE_TOOLS``) moves by
    #: the seconds, its values read at the moved instants (the same day sampled at another
    #: phase; the random draws stay those of the unshifted day). For what-if and property tests.
    sample_shift: tuple[tuple[str, float], ...] = ()
    #: (host, seconds) pairs: that host's clock offset, instead of the drawn one.
    host_clock: tuple[tuple[str, float], ...] = ()

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
            (self.pool_format in POOL_FORMATS,
             f"--pool-format must be one of {', '.join(POOL_FORMATS)}"),
            (1 <= self.nics_per_node <= 8, "--nics-per-node must be between 1 and 8"),
            (self.nics_per_node == 1 or self.fabric_format == "raw",
             "--nics-per-node above 1 needs --fabric-format raw"),
            (self.gc_evidence in GC_EVIDENCE,
             f"gc_evidence must be one of {', '.join(GC_EVIDENCE)}"),
            (self.signal_strength in SIGNAL_STRENGTHS,
             f"signal_strength must be one of {', '.join(SIGNAL_STRENGTHS)}"),
            (0.0 <= self.background_per_stall <= 1.0,
             "background_per_stall must be between 0 and 1"),
            (0.0 <= self.bursts_per_hour <= 10.0, "bursts_per_hour must be between 0 and 10"),
            (all(abs(off) <= 86400.0 for _, off in self.phase_offsets),
             "phase_offsets must be within a day"),
            (self.tool_clocks in TOOL_CLOCKS,
             f"tool_clocks must be one of {', '.join(TOOL_CLOCKS)}"),
            (0.0 <= self.clock_skew_s <= MAX_CLOCK_SKEW_S,
             f"clock_skew_s must be between 0 and {MAX_CLOCK_SKEW_S:g}"),
            ({tool for tool, _ in self.sample_shift} <= set(SHIFTABLE_TOOLS),
             f"sample_shift: tools are {', '.join(SHIFTABLE_TOOLS)}"),
            (all(abs(off) <= MAX_CLOCK_SKEW_S for _, off in self.host_clock),
             f"host_clock offsets must be within ±{MAX_CLOCK_SKEW_S:g} s"),
            (set(self.omit) <= set(OMITTABLE),
             f"omit: unknown telemetry family {sorted(set(self.omit) - set(OMITTABLE))}; "
             f"choose from {', '.join(OMITTABLE)}"),
        ]
        for ok, message in checks:
            if not ok:
                raise SimulationConfigError(message)
        self.start_epoch()
