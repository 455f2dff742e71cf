"""Planning model: expected lost work, the optimal checkpoint interval, and every strategy's answer.

The essay behind ckptwatch argues that checkpoint storage should be chosen by expected lost work
per failure, not by dollars per terabyte, and that the durable output is the threshold at which
the verdict flips. This module is that model: pure functions and frozen dataclasses, SI units
(bytes, bytes/s, seconds) everywhere inside; display units (GB, GB/s, hours) exist only in the
parameter registry :data:`PARAMETERS` used by the CLI and the plot. Where the verdict flips
(sweeps, the whole plan) is :mod:`ckptwatch.planning.sweep`; inputs measured in the lake are
:mod:`ckptwatch.planning.measure`; config files and ``--sweep`` specifications are
:mod:`ckptwatch.planning.inputs`. They import this module, never the other way round.

Failure model (Daly 2006, exponential failures). The job fails at rate ``1/M`` whenever it runs,
including while it writes a checkpoint or restarts; ``M`` is the job MTBF = node MTBF / nodes.
Work is cut into segments of ``tau`` seconds of useful work, each followed by a checkpoint that
costs ``delta`` seconds; after a failure the job restarts (``R`` seconds, itself exposed to
failures) and redoes the work since the last checkpoint that survived. The expected wall time
per second of useful work is

    T(tau) = (M / tau) * exp(R / M) * (exp((tau + delta) / M) - 1)

Two levels (``local`` and ``tiered``): a fraction ``f`` of failures lose the node's drive. Those
roll back to the last *durable* copy, taken every ``k``-th checkpoint (extra cost ``delta2``);
the others roll back to the last checkpoint. :func:`two_level_wall_time` solves this exactly
(first-step analysis over the ``k`` segments of a block; closed form, see its docstring) and
reduces to Daly's formula for ``k = 1``.

Timeouts (:func:`with_timeouts`). A checkpoint whose barrier outlasts ``checkpoint_timeout_s``
kills the job: it costs the wait, a restart and the segment's work. Its probability ``q`` per
checkpoint comes from the tier's barrier-time tail (:mod:`ckptwatch.planning.tails`: a Pareto
tail through p50 and p99 by default, or fitted to measured barriers); the wall time becomes
``T' = (T + q (timeout + R) / tau) / (1 - q)`` and the interval is optimised with it.

Definitions used in every output (see ``docs/planning.md``):

- ``overhead_fraction`` = ``1 - 1/T'``: the fraction of wall-clock time that is not useful
  training (checkpoint writes, work redone after failures, restarts).
- ``lost_gpu_hours_per_year`` = ``overhead_fraction * GPUs * 8760``: GPU-hours of a job that runs
  all year and spends that fraction of its time not training.
- ``lost_work_per_failure_s`` = wall time lost per failure (work redone since the last surviving
  checkpoint, re-written checkpoints, restart): ``(T - 1 - c) * M / T`` where ``c`` is the
  first-time checkpoint cost per second of work and ``T / M`` the failures per second of work
  (``T`` without timeouts: this is the exponential failures' loss).
- ``timeout_fraction`` = ``1 - T/T'``, the part of the overhead spent on timeouts;
  ``timeouts_per_year`` = ``q / (1 - q) / (T' tau)`` a second, times a year.

Checkpoint cost per strategy. ``checkpoint_s_p50`` is the nominal barrier time (the slowest
rank's write at nominal bandwidth); ``checkpoint_s_p99 = p50 * tail factor``; the cost charged
per checkpoint is ``p99 + fabric_slowdown * (seconds of checkpoint traffic on the fabric)``: the
barrier waits for the slowest rank, and checkpoint bytes on the fabric slow the training traffic
that shares it. One rank per GPU; a node holds ``gpus_per_node`` ranks.

- ``local``: each node writes its slice to its own NVMe. A failure that loses the drive loses the
  slice: the job falls back to the last off-node copy, made every ``offnode_copy_interval_s`` of
  work by a background drain over the NIC (it costs only the fabric slowdown) and restores it at
  the pool's restart cost.
- ``local+replica``: each node also writes its slice to a neighbour over the NIC; the checkpoint
  is done when both copies are. Every failure is covered (a node and its neighbour are assumed
  not to fail within one checkpoint); a drive loss adds the neighbour fetch to the restart.
- ``pool``: all ranks write to the disaggregated pool at its aggregate bandwidth, each node
  bounded by its NIC; the pool's tail factor applies; every failure restores from the pool.
- ``tiered``: local snapshots every ``tau``; every ``k``-th also drains to the pool in the
  background (cost: fabric slowdown only); ``k`` is optimised. A drive loss rolls back to the
  last pool copy; a failure during the drain is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.tails import BarrierTail, tail_from_factor, timeout_probability

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

STRATEGIES: tuple[str, ...] = ("local", "local+replica", "pool", "tiered")
HOURS_PER_YEAR = 8760.0
SECONDS_PER_YEAR = HOURS_PER_YEAR * 3600.0
#: Largest ``k`` (local snapshots per pool copy) the ``tiered`` optimiser considers.
TIERED_K_MAX = 10_000
#: Exponents above this are clipped: the wall time is astronomically large there anyway.
_MAX_EXPONENT = 700.0


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class PlanInputs:
    """Everything the planning model needs, in SI units (bytes, bytes/s, seconds).

    The defaults are docs/planning.md's example: the essay's 512 ranks writing 8.8 TB per
    checkpoint to a 0.4 TB/s pool (22 s nominal), 8 GPUs per node.
    """

    ranks: int = 512
    gpus_per_node: int = 8
    #: Checkpoint bytes written by one rank (8.8 TB / 512 ranks).
    bytes_per_rank: float = 8.8e12 / 512
    #: Sustained write bandwidth of one node's local NVMe.
    local_bandwidth_bytes_s: float = 10e9
    #: Aggregate write bandwidth of the disaggregated pool, shared by all ranks.
    pool_bandwidth_bytes_s: float = 0.4e12
    #: Bandwidth of one node's storage NIC (bounds its pool writes and replica copies).
    nic_bandwidth_bytes_s: float = 50e9
    #: Mean time between failures that interrupt the job, of one node.
    node_mtbf_s: float = 5000.0 * 3600.0
    #: Fraction of node failures after which the node's drive contents are lost or unreachable.
    drive_loss_fraction: float = 0.1
    #: Relaunch and reload from node-local drives.
    restart_local_s: float = 300.0
    #: Relaunch and reload from the pool (or any off-node copy).
    restart_pool_s: float = 360.0
    #: Training time lost per second of checkpoint traffic on the fabric (0 = none).
    fabric_slowdown: float = 0.1
    #: p99/p50 of the pool's checkpoint barrier time (the correlated-burst tail).
    tail_factor: float = 3.0
    #: p99/p50 of the local (and neighbour-replica) barrier time.
    local_tail_factor: float = 1.2
    #: ``local`` strategy only: work between off-node copies that survive a drive loss.
    offnode_copy_interval_s: float = 86400.0
    #: A checkpoint barrier longer than this kills the job (0: no timeout). Default: PyTorch's
    #: NCCL process-group timeout (10 min), the watchdog that fires when ranks wait too long.
    checkpoint_timeout_s: float = 600.0
    # Prices (US dollars; see docs/planning.md "The yearly bill" for the sources).
    #: Price of one GPU-hour (lost work is charged at it).
    gpu_hour_usd: float = 2.0
    #: Committed cost of the pool: controllers, enclosures, fabric ports, software licence.
    pool_fixed_usd: float = 500_000.0
    #: Operations staff a pool needs, per year (the essay's "standing meeting").
    pool_staff_usd_per_year: float = 150_000.0
    #: Life over which purchases are amortised.
    amortisation_years: float = 5.0
    #: Pool capacity, per usable TB (1e12 bytes).
    pool_usd_per_tb: float = 150.0
    #: Pool bandwidth, per GB/s of aggregate write bandwidth (controller and port capacity).
    pool_usd_per_gb_s: float = 1_000.0
    #: Node-local NVMe, per TB (bought on every node).
    local_usd_per_tb: float = 100.0
    #: Checkpoints kept at once (capacity = this x the checkpoint, per copy).
    retained_checkpoints: int = 2
    #: How the pool grows when ``ranks`` changes in a sweep: bandwidth x (ranks ratio) ** this
    #: (1 = bought in proportion to the job, 0 = a fixed pool).
    pool_scale_exponent: float = 1.0
    #: Barrier-time tails (relative to the median); None: from the tail factors (Pareto).
    pool_tail: BarrierTail | None = None
    local_tail: BarrierTail | None = None
    #: Timeouts measured on one tier (``plan --from-lake``): the probability that a checkpoint
    #: of ``measured_timeout_tier`` times out, used instead of that tier's tail (and held as it
    #: is by sweeps and flips: it was measured at the job's own timeout and interval); None:
    #: from the tail.
    measured_timeout_tier: str | None = None
    measured_timeout_probability: float | None = None

    @property
    def n_nodes(self) -> int:
        """Nodes the job spans (a partly filled node still fails as a whole node)."""
        return math.ceil(self.ranks / self.gpus_per_node)

    @property
    def n_gpus(self) -> int:
        """GPUs of the job: one rank per GPU."""
        return self.ranks

    @property
    def bytes_per_node(self) -> float:
        """Bytes the fullest node writes per checkpoint (the barrier waits for it)."""
        return self.bytes_per_rank * min(self.gpus_per_node, self.ranks)

    @property
    def total_bytes(self) -> float:
        """Bytes of one whole checkpoint."""
        return self.bytes_per_rank * self.ranks

    @property
    def job_mtbf_s(self) -> float:
        """Job MTBF: any node failure interrupts the job, so node MTBF / nodes."""
        return self.node_mtbf_s / self.n_nodes

    def validate(self) -> PlanInputs:
        """Raise :class:`PlanInputError` naming the first out-of-range input; return self."""
        checks: list[tuple[str, bool, str]] = [
            ("ranks", self.ranks >= 1, ">= 1"),
            ("gpus_per_node", self.gpus_per_node >= 1, ">= 1"),
            ("bytes_per_rank", self.bytes_per_rank > 0, "> 0"),
            ("local_bandwidth_bytes_s", self.local_bandwidth_bytes_s > 0, "> 0"),
            ("pool_bandwidth_bytes_s", self.pool_bandwidth_bytes_s > 0, "> 0"),
            ("nic_bandwidth_bytes_s", self.nic_bandwidth_bytes_s > 0, "> 0"),
            ("node_mtbf_s", self.node_mtbf_s > 0, "> 0"),
            ("drive_loss_fraction", 0.0 <= self.drive_loss_fraction <= 1.0, "in [0, 1]"),
            ("restart_local_s", self.restart_local_s >= 0, ">= 0"),
            ("restart_pool_s", self.restart_pool_s >= 0, ">= 0"),
            ("fabric_slowdown", self.fabric_slowdown >= 0, ">= 0"),
            ("tail_factor", self.tail_factor >= 1.0, ">= 1 (it is p99/p50)"),
            ("local_tail_factor", self.local_tail_factor >= 1.0, ">= 1 (it is p99/p50)"),
            ("offnode_copy_interval_s", self.offnode_copy_interval_s > 0, "> 0"),
            ("checkpoint_timeout_s", self.checkpoint_timeout_s >= 0, ">= 0 (0 = no timeout)"),
            ("gpu_hour_usd", self.gpu_hour_usd >= 0, ">= 0"),
            ("pool_fixed_usd", self.pool_fixed_usd >= 0, ">= 0"),
            ("pool_staff_usd_per_year", self.pool_staff_usd_per_year >= 0, ">= 0"),
            ("amortisation_years", self.amortisation_years > 0, "> 0"),
            ("pool_usd_per_tb", self.pool_usd_per_tb >= 0, ">= 0"),
            ("pool_usd_per_gb_s", self.pool_usd_per_gb_s >= 0, ">= 0"),
            ("local_usd_per_tb", self.local_usd_per_tb >= 0, ">= 0"),
            ("retained_checkpoints", self.retained_checkpoints >= 1, ">= 1"),
            ("pool_scale_exponent", 0.0 <= self.pool_scale_exponent <= 1.0, "in [0, 1]"),
        ]
        for field_name, ok, rule in checks:
            value = getattr(self, field_name)
            if not ok or not math.isfinite(value):
                p = PARAMETER_BY_FIELD[field_name]
                raise PlanInputError(
                    f"{p.key} must be {rule} and finite (got {p.to_display(value):g}); "
                    f"fix --{p.flag} or the config file")
        return self

    def updated(self, values: Mapping[str, float | int]) -> PlanInputs:
        """A copy with some fields (by field name, SI units) replaced."""
        changes: dict[str, Any] = dict(values)
        return replace(self, **changes)

    def tail(self, tier: str) -> BarrierTail:
        """The barrier-time tail of a tier (``pool`` or ``local``): measured, else from its
        tail factor."""
        if tier == "pool":
            return self.pool_tail or tail_from_factor(self.tail_factor)
        return self.local_tail or tail_from_factor(self.local_tail_factor)

    def timeout_probability(self, tier: str, p50_s: float) -> float:
        """``P(barrier > checkpoint_timeout_s)`` per checkpoint of a tier: measured
        (``measured_timeout_probability``) for the measured tier while a timeout is set, else
        from the tier's tail at nominal barrier ``p50_s``."""
        if (self.measured_timeout_probability is not None and tier == self.measured_timeout_tier
                and self.checkpoint_timeout_s > 0):
            return self.measured_timeout_probability
        return timeout_probability(self.tail(tier), p50_s, self.checkpoint_timeout_s)

    def to_dict(self) -> dict[str, float | int]:
        """The inputs as a JSON-ready mapping (SI units; keys are the field names; the tails
        are reported under ``tails``, a measured timeout probability under ``measured``)."""
        return {k: v for k, v in asdict(self).items() if k not in NON_PARAMETER_FIELDS}

    def derived(self) -> dict[str, float | int]:
        """Quantities derived from the inputs, for reports."""
        return {
            "n_nodes": self.n_nodes,
            "n_gpus": self.n_gpus,
            "bytes_per_node": self.bytes_per_node,
            "total_bytes": self.total_bytes,
            "job_mtbf_s": self.job_mtbf_s,
        }


@dataclass(frozen=True)
class Parameter:
    """One model input as users see it: sweep name, flag/config key, display unit and scale."""

    #: Name used by ``--sweep`` and in ``flips[].parameter``.
    name: str
    #: Field of :class:`PlanInputs` (SI units).
    field: str
    #: Config-file key and (with dashes) the CLI flag; carries the display unit.
    key: str
    #: Display unit ("" for dimensionless).
    unit: str
    #: SI value = display value * scale.
    scale: float
    integer: bool
    help: str

    @property
    def flag(self) -> str:
        """The CLI flag without the leading dashes."""
        return self.key.replace("_", "-")

    @property
    def si_unit(self) -> str:
        """Unit of the SI value."""
        return {"GB": "bytes", "GB/s": "bytes/s", "h": "s"}.get(self.unit, self.unit)

    def to_display(self, si_value: float) -> float:
        """SI value -> display units."""
        return si_value / self.scale

    def to_si(self, display_value: float) -> float | int:
        """Display value -> SI value (int for integer parameters)."""
        v = display_value * self.scale
        return round(v) if self.integer else v

    def describe(self, si_value: float) -> str:
        """``"400 GB/s"``-style text of an SI value."""
        v = self.to_display(si_value)
        text = f"{v:,.0f}" if self.integer or abs(v) >= 100 else f"{v:.3g}"
        return f"{text} {self.unit}".rstrip()


PARAMETERS: dict[str, Parameter] = {
    p.name: p
    for p in (
        Parameter("ranks", "ranks", "ranks", "ranks", 1.0, True,
                  "ranks in the job, one per GPU (job size)"),
        Parameter("gpus_per_node", "gpus_per_node", "gpus_per_node", "", 1.0, True,
                  "GPUs (ranks) per node"),
        Parameter("bytes_per_rank", "bytes_per_rank", "bytes_per_rank_gb", "GB", 1e9, False,
                  "checkpoint bytes per rank, GB (1e9 bytes)"),
        Parameter("local_bandwidth", "local_bandwidth_bytes_s", "local_bandwidth_gb_s", "GB/s",
                  1e9, False, "write bandwidth of one node's local NVMe, GB/s"),
        Parameter("pool_bandwidth", "pool_bandwidth_bytes_s", "pool_bandwidth_gb_s", "GB/s",
                  1e9, False, "aggregate write bandwidth of the shared pool, GB/s"),
        Parameter("nic_bandwidth", "nic_bandwidth_bytes_s", "nic_bandwidth_gb_s", "GB/s", 1e9,
                  False, "storage NIC bandwidth of one node, GB/s"),
        Parameter("node_mtbf", "node_mtbf_s", "node_mtbf_h", "h", 3600.0, False,
                  "mean time between job-interrupting failures of one node, hours"),
        Parameter("drive_loss_fraction", "drive_loss_fraction", "drive_loss_fraction", "", 1.0,
                  False, "fraction of node failures that lose the node's drive contents"),
        Parameter("restart_local", "restart_local_s", "restart_local_s", "s", 1.0, False,
                  "relaunch + reload from local drives, seconds"),
        Parameter("restart_pool", "restart_pool_s", "restart_pool_s", "s", 1.0, False,
                  "relaunch + reload from the pool or another off-node copy, seconds"),
        Parameter("fabric_slowdown", "fabric_slowdown", "fabric_slowdown", "", 1.0, False,
                  "training time lost per second of checkpoint traffic on the fabric"),
        Parameter("tail_factor", "tail_factor", "tail_factor", "", 1.0, False,
                  "p99/p50 of the pool checkpoint barrier time"),
        Parameter("local_tail_factor", "local_tail_factor", "local_tail_factor", "", 1.0,
                  False, "p99/p50 of the local (and replica) checkpoint barrier time"),
        Parameter("offnode_copy_interval", "offnode_copy_interval_s", "offnode_copy_interval_h",
                  "h", 3600.0, False,
                  "'local' only: work between off-node copies that survive a drive loss, hours"),
        Parameter("checkpoint_timeout", "checkpoint_timeout_s", "checkpoint_timeout_s", "s",
                  1.0, False, "a checkpoint barrier longer than this kills the job, seconds "
                  "(0 = none; default: PyTorch's 10 min NCCL timeout)"),
        Parameter("gpu_hour_price", "gpu_hour_usd", "gpu_hour_usd", "USD", 1.0, False,
                  "price of a GPU-hour, USD (2025 H100 rental is ~2-3)"),
        Parameter("pool_fixed_cost", "pool_fixed_usd", "pool_fixed_usd", "USD", 1.0, False,
                  "committed cost of the pool (controllers, enclosures, fabric ports, "
                  "software), USD"),
        Parameter("pool_staff_cost", "pool_staff_usd_per_year", "pool_staff_usd_per_year",
                  "USD", 1.0, False, "operations staff the pool needs, USD a year"),
        Parameter("amortisation", "amortisation_years", "amortisation_years", "years", 1.0,
                  False, "life over which purchases are amortised, years"),
        Parameter("pool_capacity_price", "pool_usd_per_tb", "pool_usd_per_tb", "USD", 1.0,
                  False, "pool capacity, USD per usable TB"),
        Parameter("pool_bandwidth_price", "pool_usd_per_gb_s", "pool_usd_per_gb_s", "USD", 1.0,
                  False, "pool bandwidth, USD per GB/s"),
        Parameter("local_capacity_price", "local_usd_per_tb", "local_usd_per_tb", "USD", 1.0,
                  False, "node-local NVMe, USD per TB"),
        Parameter("retained_checkpoints", "retained_checkpoints", "retained_checkpoints", "",
                  1.0, True, "checkpoints kept at once (sizes every copy's capacity)"),
        Parameter("pool_scale_exponent", "pool_scale_exponent", "pool_scale_exponent", "", 1.0,
                  False, "sweeping ranks buys pool bandwidth x (ranks ratio)^this "
                  "(1 = in proportion, 0 = fixed pool)"),
    )
}
#: PlanInputs fields that are not user parameters (set from measurements only).
NON_PARAMETER_FIELDS: frozenset[str] = frozenset({
    "pool_tail", "local_tail", "measured_timeout_tier", "measured_timeout_probability"})
#: Price inputs: when any is given, ``best`` is chosen by cost unless --objective says not.
PRICE_FIELDS: tuple[str, ...] = ("gpu_hour_usd", "pool_fixed_usd", "pool_staff_usd_per_year",
                                 "amortisation_years", "pool_usd_per_tb", "pool_usd_per_gb_s",
                                 "local_usd_per_tb")
PARAMETER_BY_FIELD: dict[str, Parameter] = {p.field: p for p in PARAMETERS.values()}


def parameter(name: str) -> Parameter:
    """Look a parameter up by sweep name, config key or field name."""
    for p in PARAMETERS.values():
        if name in (p.name, p.key, p.field):
            return p
    raise PlanInputError(
        f"unknown parameter {name!r}; use one of: {', '.join(PARAMETERS)}")


def with_value(inputs: PlanInputs, name: str, si_value: float) -> PlanInputs:
    """A copy of ``inputs`` with one parameter (by any of its names) set to an SI value.

    Changing ``ranks`` buys the pool as a purchase would: its bandwidth is multiplied by
    ``(new ranks / old ranks) ** pool_scale_exponent`` (its capacity follows the checkpoint
    size anyway; the NIC and the local drives are per node). The committed cost stays fixed.
    """
    p = parameter(name)
    value: float | int = round(si_value) if p.integer else float(si_value)
    changes: dict[str, float | int] = {p.field: value}
    if p.field == "ranks" and inputs.pool_scale_exponent > 0.0:
        ratio = float(value) / inputs.ranks
        changes["pool_bandwidth_bytes_s"] = (inputs.pool_bandwidth_bytes_s
                                             * ratio ** inputs.pool_scale_exponent)
    return inputs.updated(changes)


# --------------------------------------------------------------------------------------------
# Interval formulas and the wall-time model


def young_interval(delta: float, mtbf: float) -> float:
    """Young's first-order optimal interval ``sqrt(2 * delta * M)`` (seconds of work)."""
    return math.sqrt(2.0 * delta * mtbf)


def daly_interval(delta: float, mtbf: float) -> float:
    """Daly's higher-order optimal interval (Daly 2006, eq. 37).

    ``sqrt(2 delta M) * [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta`` for
    ``delta < 2M``, and ``M`` for ``delta >= 2M``.
    """
    if delta >= 2.0 * mtbf:
        return mtbf
    x = delta / (2.0 * mtbf)
    return math.sqrt(2.0 * delta * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def optimal_interval_lambert(delta: float, mtbf: float) -> float:
    """Exact optimum of Daly's single-level wall-time model, via the Lambert W function.

    Setting dT/dtau = 0 gives ``(1 - x) * exp(x + delta/M) = 1`` with ``x = tau/M``, so
    ``tau* = M * (1 + W0(-exp(-1 - delta/M)))``. It does not depend on the restart cost; it
    tends to Young's interval as delta -> 0 and to M as delta -> infinity. Used to check the
    numerical optimiser.
    """
    from scipy.special import lambertw

    w = lambertw(-math.exp(-1.0 - delta / mtbf), 0)
    return float(mtbf * (1.0 + w.real))


def daly_wall_time(tau: float, delta: float, mtbf: float, restart: float = 0.0) -> float:
    """Expected wall time per second of useful work, single level (Daly 2006).

    ``T(tau) = (M / tau) * exp(R / M) * (exp((tau + delta) / M) - 1)``; ``inf`` where that
    overflows.
    """
    exponent = (tau + delta) / mtbf
    if exponent > _MAX_EXPONENT or restart / mtbf > _MAX_EXPONENT:
        return math.inf
    return (mtbf / tau) * math.exp(restart / mtbf) * math.expm1(exponent)


def two_level_wall_time(
    tau: npt.ArrayLike,
    delta: float,
    mtbf: float,
    *,
    k: npt.ArrayLike = 1.0,
    delta_durable: float = 0.0,
    restart: float = 0.0,
    restart_severe: float | None = None,
    severe_fraction: float = 0.0,
) -> npt.NDArray[np.float64]:
    """Expected wall time per second of useful work with two checkpoint levels (vectorised).

    A block is ``k`` segments of ``tau`` work, each closed by a level-1 checkpoint costing
    ``delta``; the last one also makes the durable copy, costing ``delta_durable`` more.
    Failures arrive at rate ``1/M`` at all times. A fraction ``severe_fraction`` (``f``) of them
    destroys level-1 copies: the job restarts (``restart_severe``) from the block's start; the
    others restart (``restart``) from the last level-1 checkpoint. A failure during a restart
    restarts that restart. First-step analysis over the segments gives, with
    ``e = expm1((tau + delta)/M)``, ``e_l = expm1((tau + delta + delta_durable)/M)``,
    ``R~ = (1 - f) M expm1(R/M) + f M expm1(R_s/M)``:

        X = (M + R~) * [(1 + f e_l) * expm1((k - 1) log1p(f e)) / f + e_l]

    (``(k - 1) e`` in place of ``expm1(…)/f`` when ``f = 0``), and ``T = X / (k tau)``. With
    ``k = 1`` and equal restarts this is exactly Daly's formula. ``k`` may be fractional (a
    durable copy every ``k * tau`` seconds of work, as for the ``local`` strategy).
    """
    import numpy as np

    tau_a = np.asarray(tau, dtype=np.float64)
    k_a = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    r_s = restart if restart_severe is None else restart_severe
    f = severe_fraction
    r_tilde = (1.0 - f) * mtbf * math.expm1(restart / mtbf) + f * mtbf * math.expm1(r_s / mtbf)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.expm1(np.minimum((tau_a + delta) / mtbf, _MAX_EXPONENT))
        e_l = np.expm1(np.minimum((tau_a + delta + delta_durable) / mtbf, _MAX_EXPONENT))
        m = k_a - 1.0
        # expm1((k - 1) log1p(f e)) / f, whose f -> 0 limit is (k - 1) e
        growth = (np.expm1(np.minimum(m * np.log1p(f * e), _MAX_EXPONENT)) / f
                  if f > 0.0 else m * e)
        x = (mtbf + r_tilde) * ((1.0 + f * e_l) * growth + e_l)
        out = x / (k_a * tau_a)
    return np.asarray(np.where(np.isnan(out), np.inf, out), dtype=np.float64)


def overhead_fraction(wall_time_per_work: float) -> float:
    """Fraction of wall-clock time that is not useful work: ``1 - 1/T``."""
    return 1.0 - 1.0 / wall_time_per_work


def lost_work_per_failure(
    wall_time_per_work: float, checkpoint_per_work: float, mtbf: float
) -> float:
    """Wall time lost per failure: ``(T - 1 - c) * M / T``.

    ``T - 1 - c`` is the wall time per second of work spent on failures (rework, re-written
    checkpoints, restarts), ``c`` the first-time checkpoint cost per second of work, and
    ``T / M`` the expected failures per second of work.
    """
    t = wall_time_per_work
    return (t - 1.0 - checkpoint_per_work) * mtbf / t


def _interval_bounds(delta: float, mtbf: float) -> tuple[float, float]:
    young = young_interval(delta, mtbf)
    lo = max(young / 1e3, mtbf * 1e-9)
    return lo, max(10.0 * mtbf, 10.0 * young)


def optimal_interval(delta: float, mtbf: float, restart: float = 0.0) -> float:
    """Numerical optimum of Daly's single-level model: bounded Brent search for the minimum of
    log T over log tau.

    Returns 0 for ``delta == 0`` (checkpointing is free, so checkpoint continuously).
    """
    if delta <= 0.0:
        return 0.0
    lo, hi = _interval_bounds(delta, mtbf)
    def log_wall(u: float) -> float:  # log T(e^u), finite where T itself overflows
        x = (math.exp(u) + delta) / mtbf
        return math.log(mtbf) - u + restart / mtbf + x + math.log(-math.expm1(-x))

    return math.exp(minimise_bounded(log_wall, math.log(lo), math.log(hi), xatol=1e-10))


# --------------------------------------------------------------------------------------------
# Strategies


@dataclass(frozen=True)
class CheckpointCost:
    """What one checkpoint of a strategy costs, in seconds."""

    #: Nominal barrier time (slowest rank at nominal bandwidth).
    p50_s: float
    #: Tail barrier time: p50 times the tier's tail factor.
    p99_s: float
    #: Seconds of checkpoint traffic on the fabric per checkpoint (slows training).
    fabric_s: float
    #: Cost charged per checkpoint: ``p99_s + fabric_slowdown * fabric_s``.
    cost_s: float


@dataclass(frozen=True)
class _Levels:
    """A strategy mapped onto the two-level model."""

    cost: CheckpointCost
    delta_durable: float
    restart: float
    restart_severe: float
    severe_fraction: float
    #: Checkpoints per durable copy: ``"one"`` (every checkpoint is durable), ``"interval"``
    #: (one durable copy per ``durable_interval_s`` of work: ``k = max(interval / tau, 1)``)
    #: or ``"optimise"`` (the best integer ``k``).
    k_rule: str
    durable_interval_s: float = 0.0

    def k_of_tau(self, tau: float) -> float:
        """Checkpoints per durable copy at interval ``tau`` (not for ``"optimise"``)."""
        return max(self.durable_interval_s / tau, 1.0) if self.k_rule == "interval" else 1.0


def pool_write_s(inputs: PlanInputs) -> float:
    """Nominal time of a whole checkpoint into the pool: the pool or a node's NIC, the slower."""
    return max(inputs.total_bytes / inputs.pool_bandwidth_bytes_s,
               inputs.bytes_per_node / inputs.nic_bandwidth_bytes_s)


def checkpoint_costs(inputs: PlanInputs) -> dict[str, CheckpointCost]:
    """Per-checkpoint times and cost of every strategy (see the module docstring)."""
    s = inputs.fabric_slowdown
    local = inputs.bytes_per_node / inputs.local_bandwidth_bytes_s
    nic = inputs.bytes_per_node / inputs.nic_bandwidth_bytes_s
    pool = pool_write_s(inputs)
    lt, pt = inputs.local_tail_factor, inputs.tail_factor
    replica = max(local, nic)
    return {
        "local": CheckpointCost(local, local * lt, 0.0, local * lt),
        "local+replica": CheckpointCost(replica, replica * lt, nic, replica * lt + s * nic),
        "pool": CheckpointCost(pool, pool * pt, pool, pool * pt + s * pool),
        "tiered": CheckpointCost(local, local * lt, 0.0, local * lt),
    }


def _levels(name: str, inputs: PlanInputs) -> _Levels:
    cost = checkpoint_costs(inputs)[name]
    f = inputs.drive_loss_fraction
    s = inputs.fabric_slowdown
    r_local, r_pool = inputs.restart_local_s, inputs.restart_pool_s
    nic = inputs.bytes_per_node / inputs.nic_bandwidth_bytes_s
    if name == "local":
        return _Levels(cost, s * nic, r_local, r_pool, f, "interval",
                       inputs.offnode_copy_interval_s)
    if name == "local+replica":
        return _Levels(cost, 0.0, r_local, r_local + nic, f, "one")
    if name == "pool":
        return _Levels(cost, 0.0, r_pool, r_pool, 0.0, "one")
    if name == "tiered":
        return _Levels(cost, s * pool_write_s(inputs), r_local, r_pool, f, "optimise")
    raise PlanInputError(f"unknown strategy {name!r}; use one of: {', '.join(STRATEGIES)}")


@dataclass(frozen=True)
class StrategyResult:
    """The model's answer for one strategy. Seconds are seconds; see the module docstring."""

    name: str
    checkpoint_s_p50: float
    checkpoint_s_p99: float
    #: Cost charged per checkpoint (p99 plus the fabric slowdown), the delta of the formulas.
    checkpoint_cost_s: float
    mtbf_s: float
    #: Expected restart: drive-loss failures weighted in.
    restart_s: float
    young_interval_s: float
    daly_interval_s: float
    optimal_interval_s: float
    #: ``tiered``: local snapshots per pool copy (optimised); ``local``: per off-node copy.
    durable_every_k: float | None
    lost_work_per_failure_s: float
    overhead_fraction: float
    lost_gpu_hours_per_year: float
    #: P(barrier > checkpoint_timeout_s) per checkpoint, from the tier's tail.
    timeout_probability: float = 0.0
    #: Expected checkpoints per year that time out and kill the job.
    timeouts_per_year: float = 0.0
    #: Part of ``overhead_fraction`` spent on timeouts (their lost work, wait and restart).
    timeout_fraction: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping; the key names are a contract (see docs/planning.md)."""
        return {k: finite_or_none(v) for k, v in asdict(self).items()}


def finite_or_none(v: Any) -> Any:
    """``v``, or None when it is a float that is not finite (JSON has no inf or NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def with_timeouts(wall: npt.ArrayLike, tau: npt.ArrayLike, q: float,
                  timeout_s: float, restart_s: float) -> npt.NDArray[np.float64]:
    """Wall time per second of work once checkpoints can time out (vectorised).

    Each checkpoint independently outlasts the timeout with probability ``q``; the job is then
    killed at the timeout, restarts (``restart_s``) and redoes the segment. With ``X = T tau``
    the expected time to get one segment of ``tau`` work and its checkpoint through the
    exponential failures, the number of attempts is geometric, so the segment takes
    ``(X + q (timeout + R)) / (1 - q)`` and

        T' = (T + q (timeout + R) / tau) / (1 - q)

    exactly, under the stated assumption that the timeout's wait and restart are not themselves
    interrupted by failures (they are short next to the MTBF). A timeout rolls back one segment
    only: the local copies are intact.
    """
    import numpy as np

    t = np.asarray(wall, dtype=np.float64)
    if q <= 0.0:
        return t
    if q >= 1.0:
        return np.full_like(t, np.inf)
    return np.asarray((t + q * (timeout_s + restart_s) / np.asarray(tau)) / (1.0 - q),
                      dtype=np.float64)


@dataclass(frozen=True)
class _WallTime:
    """One strategy's wall time per second of work as a function of ``(tau, k)``, on Python
    floats: :func:`two_level_wall_time` then :func:`with_timeouts` at one point, operation for
    operation (the same bits; ``tests/planning/test_model.py`` pins it to them). The optimiser
    calls it thousands of times a plan, where numpy's per-call overhead dominated. Hashable:
    it is the key of the optimum's cache."""

    delta: float
    mtbf: float
    delta_durable: float
    restart: float
    restart_severe: float
    severe_fraction: float
    #: P(barrier > timeout) per checkpoint, and the timeout.
    q: float
    timeout_s: float

    @classmethod
    def of(cls, lv: _Levels, mtbf: float, q: float, timeout_s: float) -> _WallTime:
        """The wall time of a strategy's levels."""
        return cls(lv.cost.cost_s, mtbf, lv.delta_durable, lv.restart, lv.restart_severe,
                   lv.severe_fraction, q, timeout_s)

    def base(self, tau: float, k: float) -> float:
        """:func:`two_level_wall_time` at one ``(tau, k)``."""
        mtbf, f, delta = self.mtbf, self.severe_fraction, self.delta
        k = max(k, 1.0)
        r_tilde = ((1.0 - f) * mtbf * math.expm1(self.restart / mtbf)
                   + f * mtbf * math.expm1(self.restart_severe / mtbf))
        e = math.expm1(min((tau + delta) / mtbf, _MAX_EXPONENT))
        e_l = math.expm1(min((tau + delta + self.delta_durable) / mtbf, _MAX_EXPONENT))
        m = k - 1.0
        growth = (math.expm1(min(m * math.log1p(f * e), _MAX_EXPONENT)) / f
                  if f > 0.0 else m * e)
        x = (mtbf + r_tilde) * ((1.0 + f * e_l) * growth + e_l)
        denominator = k * tau
        if denominator == 0.0:  # numpy's x / 0: inf (or NaN, reported as inf)
            return math.inf
        out = x / denominator
        return math.inf if math.isnan(out) else out

    def wall(self, tau: float, k: float) -> float:
        """:func:`with_timeouts` of :meth:`base` at one ``(tau, k)``."""
        t, q = self.base(tau, k), self.q
        if q <= 0.0:
            return t
        if q >= 1.0:
            return math.inf
        return (t + q * (self.timeout_s + self.restart) / tau) / (1.0 - q)


def minimise_bounded(fn: Callable[[float], float], lo: float, hi: float, *,
                     xatol: float) -> float:
    """The ``x`` in ``[lo, hi]`` minimising ``fn``: scipy's bounded Brent method."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(fn, bounds=(lo, hi), method="bounded", options={"xatol": xatol})
    return float(res.x)


def _minimise_tau(fn: Callable[[float], float], lo: float, hi: float) -> float:
    return math.exp(minimise_bounded(lambda u: fn(math.exp(u)), math.log(lo), math.log(hi),
                                     xatol=1e-9))


def _optimise_tiered(lv: _Levels, mtbf: float, q: float = 0.0,
                     timeout_s: float = 0.0) -> tuple[float, int]:
    """Best (tau, integer k): grid over (log tau, log k), zoom, then Brent on tau for k's floor
    and ceiling."""
    import numpy as np

    delta = lv.cost.cost_s
    point = _WallTime.of(lv, mtbf, q, timeout_s)

    def wall(tau: npt.ArrayLike, k: npt.ArrayLike) -> npt.NDArray[np.float64]:
        base = two_level_wall_time(tau, delta, mtbf, k=k, delta_durable=lv.delta_durable,
                                   restart=lv.restart, restart_severe=lv.restart_severe,
                                   severe_fraction=lv.severe_fraction)
        return with_timeouts(base, np.broadcast_to(tau, base.shape), q, timeout_s, lv.restart)

    lo, hi = _interval_bounds(delta, mtbf)
    u_lo, u_hi = math.log(lo), math.log(hi)
    v_lo, v_hi = 0.0, math.log(TIERED_K_MAX)
    best_u = best_v = 0.0
    for _ in range(4):
        us = np.linspace(u_lo, u_hi, 41)
        vs = np.linspace(v_lo, v_hi, 41)
        grid = wall(np.exp(us)[None, :], np.exp(vs)[:, None])
        i, j = np.unravel_index(int(np.argmin(grid)), grid.shape)
        best_u, best_v = float(us[j]), float(vs[i])
        du, dv = us[1] - us[0], vs[1] - vs[0]
        u_lo, u_hi = max(best_u - du, math.log(lo)), min(best_u + du, math.log(hi))
        v_lo, v_hi = max(best_v - dv, 0.0), min(best_v + dv, math.log(TIERED_K_MAX))
    k_cont = math.exp(best_v)
    candidates = {min(max(c, 1), TIERED_K_MAX) for c in (math.floor(k_cont), math.ceil(k_cont))}
    best: tuple[float, float, int] | None = None
    for k in sorted(candidates):

        def wall_k(t: float, k: int = k) -> float:
            return point.wall(t, k)

        tau = _minimise_tau(wall_k, lo, hi)
        t_val = wall_k(tau)
        if best is None or t_val < best[0]:
            best = (t_val, tau, k)
    assert best is not None
    return best[1], best[2]


@lru_cache(maxsize=8192)
def _optimum(lv: _Levels, mtbf: float, q: float, timeout_s: float) -> tuple[float, float]:
    """A strategy's optimal ``(tau, k)``: what its levels, the job MTBF and the timeout make
    it, so computed once however many sweeps, flip searches and plans ask (a sweep of the
    pool's bandwidth leaves ``local`` as it is; a day's report asks ~30 000 times)."""
    if lv.k_rule == "optimise":
        tau, k_int = _optimise_tiered(lv, mtbf, q, timeout_s)
        return tau, float(k_int)
    point = _WallTime.of(lv, mtbf, q, timeout_s)
    lo, hi = _interval_bounds(lv.cost.cost_s, mtbf)
    tau = _minimise_tau(lambda t: point.wall(t, lv.k_of_tau(t)), lo, hi)
    return tau, lv.k_of_tau(tau)


def evaluate_strategy(name: str, inputs: PlanInputs) -> StrategyResult:
    """The model for one strategy at its optimal interval."""
    lv = _levels(name, inputs)
    mtbf = inputs.job_mtbf_s
    delta = lv.cost.cost_s
    f = lv.severe_fraction
    timeout_s = inputs.checkpoint_timeout_s
    q = inputs.timeout_probability("pool" if name == "pool" else "local", lv.cost.p50_s)
    point = _WallTime.of(lv, mtbf, q, timeout_s)
    tau, k = _optimum(lv, mtbf, q, timeout_s)
    t_base = point.base(tau, k)
    t_val = point.wall(tau, k)
    ckpt_per_work = (k * delta + lv.delta_durable) / (k * tau)
    lost = lost_work_per_failure(t_base, ckpt_per_work, mtbf)
    overhead = overhead_fraction(t_val)
    timeout_fraction = 1.0 - t_base / t_val if math.isfinite(t_val) else 1.0
    timeouts = (q / (1.0 - q) / (t_val * tau) * SECONDS_PER_YEAR
                if q < 1.0 and math.isfinite(t_val) else math.inf)
    return StrategyResult(
        name=name,
        checkpoint_s_p50=lv.cost.p50_s,
        checkpoint_s_p99=lv.cost.p99_s,
        checkpoint_cost_s=delta,
        mtbf_s=mtbf,
        restart_s=(1.0 - f) * lv.restart + f * lv.restart_severe,
        young_interval_s=young_interval(delta, mtbf),
        daly_interval_s=daly_interval(delta, mtbf),
        optimal_interval_s=tau,
        durable_every_k=None if name in ("pool", "local+replica") else k,
        lost_work_per_failure_s=lost,
        overhead_fraction=overhead,
        lost_gpu_hours_per_year=overhead * inputs.n_gpus * HOURS_PER_YEAR,
        timeout_probability=q,
        timeouts_per_year=timeouts,
        timeout_fraction=timeout_fraction,
    )


def evaluate(inputs: PlanInputs,
             strategies: Sequence[str] = STRATEGIES) -> tuple[StrategyResult, ...]:
    """Every strategy (or those of ``strategies``), in the order given (:data:`STRATEGIES`
    order by default)."""
    inputs.validate()
    return tuple(evaluate_strategy(name, inputs) for name in strategies)
