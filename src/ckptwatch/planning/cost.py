"""The yearly bill of each checkpoint strategy, in US dollars a year.

The essay's binding quantity: "the sum of the committed cost, the per-unit cost and the cost of
the occasions when the system behaves badly", after a full year. Every term is its own key
(the names are a contract, see docs/planning.md):

- ``committed_usd_per_year``: what a pool costs before the first checkpoint, whatever its size:
  ``pool_fixed_usd / amortisation_years + pool_staff_usd_per_year``, for ``pool`` and
  ``tiered`` (which drains into one); 0 for ``local`` and ``local+replica``.
- ``per_unit_usd_per_year``: capacity and bandwidth bought in proportion to the job, amortised:
  local NVMe on every node for ``retained_checkpoints`` copies of the node's slice (twice that
  with a neighbour's replica), and the pool's capacity (``retained_checkpoints`` whole
  checkpoints) and bandwidth (``pool_usd_per_gb_s`` per GB/s).
- ``lost_work_usd_per_year``: GPU-hours not training because of checkpoints, rework after
  failures and restarts (``overhead_fraction - timeout_fraction``) x GPUs x 8760 h x
  ``gpu_hour_usd``.
- ``timeout_usd_per_year``: the same for the checkpoints that outlast the timeout
  (``timeout_fraction``).
- ``total_usd_per_year``: the sum.

The ``local`` strategy's off-node copy lands on the site's general storage and is not charged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import (
    HOURS_PER_YEAR,
    STRATEGIES,
    PlanInputs,
    StrategyResult,
    finite_or_none,
)

OBJECTIVES = ("cost", "overhead")
_TB = 1e12
_GB_S = 1e9


@dataclass(frozen=True)
class Bill:
    """One strategy's yearly bill, USD a year; keys as in the module docstring."""

    committed_usd_per_year: float
    per_unit_usd_per_year: float
    lost_work_usd_per_year: float
    timeout_usd_per_year: float

    @property
    def total_usd_per_year(self) -> float:
        """The sum of the four terms."""
        return (self.committed_usd_per_year + self.per_unit_usd_per_year
                + self.lost_work_usd_per_year + self.timeout_usd_per_year)

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready mapping, the total included."""
        return {k: finite_or_none(v) for k, v in
                {**asdict(self), "total_usd_per_year": self.total_usd_per_year}.items()}


def committed_usd_per_year(name: str, inputs: PlanInputs) -> float:
    """The pool's fixed cost, amortised, plus its staff; 0 for strategies without a pool."""
    if name in ("pool", "tiered"):
        return inputs.pool_fixed_usd / inputs.amortisation_years + inputs.pool_staff_usd_per_year
    return 0.0


def per_unit_usd_per_year(name: str, inputs: PlanInputs) -> float:
    """Local drives on every node and the pool's capacity and bandwidth, amortised."""
    kept = inputs.retained_checkpoints
    local_tb = inputs.n_nodes * inputs.bytes_per_node * kept / _TB
    local = local_tb * inputs.local_usd_per_tb
    pool = (inputs.total_bytes * kept / _TB * inputs.pool_usd_per_tb
            + inputs.pool_bandwidth_bytes_s / _GB_S * inputs.pool_usd_per_gb_s)
    purchase = {"local": local, "local+replica": 2.0 * local, "pool": pool,
                "tiered": local + pool}
    if name not in purchase:
        raise PlanInputError(f"unknown strategy {name!r}; use one of: {', '.join(STRATEGIES)}")
    return purchase[name] / inputs.amortisation_years


def bill(result: StrategyResult, inputs: PlanInputs) -> Bill:
    """The yearly bill of one evaluated strategy."""
    gpu_year_usd = inputs.n_gpus * HOURS_PER_YEAR * inputs.gpu_hour_usd
    return Bill(
        committed_usd_per_year=committed_usd_per_year(result.name, inputs),
        per_unit_usd_per_year=per_unit_usd_per_year(result.name, inputs),
        lost_work_usd_per_year=(result.overhead_fraction - result.timeout_fraction)
        * gpu_year_usd,
        timeout_usd_per_year=result.timeout_fraction * gpu_year_usd,
    )


def bills(results: Sequence[StrategyResult], inputs: PlanInputs) -> dict[str, Bill]:
    """Strategy name -> bill."""
    return {r.name: bill(r, inputs) for r in results}


def scores(results: Sequence[StrategyResult], inputs: PlanInputs,
           objective: str) -> dict[str, float]:
    """Strategy name -> the number ``objective`` minimises (total USD a year, or overhead)."""
    if objective == "overhead":
        return {r.name: r.overhead_fraction for r in results}
    if objective == "cost":
        return {name: b.total_usd_per_year for name, b in bills(results, inputs).items()}
    raise PlanInputError(f"unknown objective {objective!r}; use one of: {', '.join(OBJECTIVES)}")


def best_by(results: Sequence[StrategyResult], inputs: PlanInputs, objective: str) -> str:
    """The strategy with the smallest score (ties: the earlier in STRATEGIES)."""
    sc = scores(results, inputs, objective)
    return min((r.name for r in results), key=lambda n: sc[n])
