"""A job's alert levels in seconds and the classification of a duration against them: one
definition for the tail (:mod:`ckptwatch.alerts.headroom`), the open checkpoints
(:mod:`ckptwatch.alerts.inflight`) and the daily report (:mod:`ckptwatch.report.facts`).

The levels are fractions of the job's ``checkpoint_timeout_s``
(:class:`ckptwatch.settings.JobAlertSettings` ``warning`` and ``critical``, per-job overrides
included): ``critical`` when the duration is at or above critical × timeout, ``warning`` when
at or above warning × timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ckptwatch.settings import JobAlertSettings

#: How serious an alert is (its ``severity`` label); None where there is nothing to raise.
Severity = Literal["warning", "critical"]


@dataclass(frozen=True)
class Levels:
    """The warning and critical levels of one job, in seconds."""

    warning_s: float
    critical_s: float


def levels(cfg: JobAlertSettings, timeout_s: float | None) -> Levels | None:
    """The job's levels in seconds for its ``timeout_s``; None when the timeout is unknown (or
    not positive): there is no level to compare with."""
    if timeout_s is None or not timeout_s > 0:
        return None
    return Levels(cfg.warning * timeout_s, cfg.critical * timeout_s)


def classify(duration_s: float, warning_s: float | None,
             critical_s: float | None) -> Severity | None:
    """``critical``, ``warning`` or None: ``duration_s`` against the levels (a None level is
    never reached)."""
    if critical_s is not None and duration_s >= critical_s:
        return "critical"
    if warning_s is not None and duration_s >= warning_s:
        return "warning"
    return None
