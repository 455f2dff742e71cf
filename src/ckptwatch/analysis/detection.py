"""Detection thresholds: their one definition is :mod:`ckptwatch.settings.detection` (the
settings tree's ``detection`` branch); the analysis reads them from here."""

from __future__ import annotations

from ckptwatch.settings.detection import (
    MAX_CLOCK_SKEW_S,
    SESSION_FILE,
    DetectionSettings,
    session_defaults,
)

__all__ = ["MAX_CLOCK_SKEW_S", "SESSION_FILE", "DetectionSettings", "session_defaults"]
