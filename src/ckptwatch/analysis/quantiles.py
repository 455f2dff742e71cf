"""The marts' statistics of a job's or a checkpoint's durations, for Python that holds the rows
itself (a trailing window, a live checkpoint, a day of the report) rather than a mart to read.

- :func:`quantiles` mirrors DuckDB's ``quantile_cont`` as ``checkpoint_latency.sql`` (rank p50,
  p90, p99 of a checkpoint), ``job_latency.sql`` and ``tier_latency.sql`` (barrier p50, p90,
  p99 over checkpoints) compute it;
- :func:`stall_baseline` mirrors ``baseline_s`` of ``stalls.sql``: the median barrier time of
  the job's previous 10 checkpoints, the job's overall median while fewer than 3 precede.

tests/test_one_number.py holds each equal to its SQL on the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

#: ``stalls.sql``: the baseline is the median of this many previous checkpoints …
BASELINE_WINDOW = 10
#: … once at least this many precede (before that: the job's overall median).
BASELINE_MIN_RECENT = 3


def quantiles(values: Iterable[float | None], qs: Sequence[float]) -> list[float | None]:
    """The ``qs`` quantiles of ``values`` as ``quantile_cont`` computes them: linear
    interpolation between order statistics, at position ``(n - 1) × q`` of the sorted values.
    Nulls and NaN are left out; no value: None for each q.

    The interpolation is DuckDB's own arithmetic for doubles, ``lo × (1 − d) + hi × d`` with the
    first product and the sum fused (one rounding), so the doubles are the mart's to the last
    bit, not only to a tolerance."""
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(v))
    if not xs:
        return [None] * len(qs)
    out: list[float | None] = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        pos = (len(xs) - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        out.append(xs[lo] if lo == hi else _interpolate(xs[lo], pos - lo, xs[hi]))
    return out


def _interpolate(lo: float, d: float, hi: float) -> float:
    """``fma(lo, 1 - d, hi * d)``: exact products and sum, rounded once (math.fma is 3.13+)."""
    return float(Fraction(lo) * Fraction(1.0 - d) + Fraction(hi * d))


def median(values: Iterable[float | None]) -> float | None:
    """``median`` (= ``quantile_cont(…, 0.5)``) of ``values``; None without any."""
    return quantiles(values, (0.5,))[0]


def stall_baseline(previous: Sequence[float], job_all: Iterable[float] | None = None
                   ) -> float | None:
    """A checkpoint's ``baseline_s`` as ``stalls.sql`` defines it.

    ``previous``: the barrier times of the job's checkpoints before it, oldest first (its
    order: start time, then step). ``job_all``: every barrier time of the job (``stalls.sql``
    takes the median over all of the job's checkpoints while fewer than
    :data:`BASELINE_MIN_RECENT` precede); None: ``previous``. None: no checkpoint to take it
    from."""
    recent = previous[-BASELINE_WINDOW:]
    if len(recent) >= BASELINE_MIN_RECENT:
        return median(recent)
    return median(previous if job_all is None else job_all)
