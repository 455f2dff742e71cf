"""The tail forecast: a robust trend of barrier time, its crossings, and when there is none."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from tests.alerts.alert_cases import T0

from ckptwatch.alerts.forecast import forecast_tail


def test_forecast_predicts_when_a_linear_tail_reaches_warning_and_timeout() -> None:
    t = np.array([T0.timestamp() + 600 * i for i in range(20)])
    y = 60 + 1.0 * np.arange(20)  # +6 s/h; last point 79 s
    f = forecast_tail(t, y, warning_s=84, timeout_s=120, horizon_s=6 * 3600)
    last = T0 + timedelta(seconds=600 * 19)
    assert f.slope_s_per_h == pytest.approx(6.0, rel=1e-3)
    assert f.warning_at is not None and f.timeout_at is None  # timeout is 6.8 h away
    assert abs((f.warning_at - last).total_seconds() - 5 / 6 * 3600) < 60
    assert f.warns and "reaches the warning level 84.0 s at" in f.note


def test_forecast_needs_six_points_and_a_rising_trend() -> None:
    t = [T0.timestamp() + 600 * i for i in range(5)]
    few = forecast_tail(t, [50, 60, 70, 80, 83], warning_s=84, timeout_s=120, horizon_s=21600)
    assert not few.warns and few.slope_s_per_h is None
    assert few.note == "no forecast: 5 checkpoint(s) in the window, needs 6"
    t6 = [T0.timestamp() + 600 * i for i in range(8)]
    falling = forecast_tail(t6, [83, 80, 77, 74, 71, 68, 65, 62], warning_s=84, timeout_s=120,
                            horizon_s=21600)
    assert not falling.warns and falling.note.endswith("not rising")


def test_forecast_ignores_a_single_spike() -> None:
    t = [T0.timestamp() + 600 * i for i in range(20)]
    y = [40.0] * 19 + [80.0]  # one stall at the end: not a trend
    f = forecast_tail(t, y, warning_s=84, timeout_s=120, horizon_s=21600)
    assert f.slope_s_per_h == pytest.approx(0.0, abs=0.5) and not f.warns
