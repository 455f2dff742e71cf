"""Write amplification on a common time base (``int_signal_write_amplification()``).

The OCP log (media bytes) and smartctl (host bytes) are two commands run at two moments, each on
its own jittered cadence: their samples never share a timestamp. Each test seeds literal SMART
rows of one drive whose true write amplification is known and checks the ratio per interval of
the sparser tool, and the noise ``int_signal_noise`` rests on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.sql_seed import at, seed

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake

HOST_RATE = 3e7  # host bytes written per second, steady
HOST0, MEDIA0 = 5.0e14, 6.2e14  # the counters' values at T0 (a drive's lifetime so far)
HOURS = 2


def times(every: float, offset: float = 0.0, jitter: float = 0.0, seed_: int = 0) -> list[float]:
    """A tool's sample times over ``HOURS``: every ``every`` s from ``offset``, each moved by up
    to ``jitter`` s (a collector's own cadence)."""
    r = random.Random(seed_)
    n = int((HOURS * 3600 - offset) // every) + 1
    return [t for k in range(n) if (t := offset + k * every + r.uniform(-jitter, jitter)) >= 0]


def drive_rows(host_times: list[float], media_times: list[float],
               wa: Callable[[float], float] = lambda _t: 1.07,
               host: Callable[[float], float] | None = None,
               node: str = "n1") -> list[dict[str, Any]]:
    """One drive's smartctl (host bytes) and OCP (media bytes) rows at their own times. Host
    bytes grow at ``HOST_RATE`` (or ``host(t)``, cumulative); media bytes by ``wa`` of them,
    integrated exactly (``wa`` changes only at whole minutes)."""
    cum_host = host or (lambda t: HOST_RATE * t)

    def media(t: float) -> float:
        whole, total = int(t // 60), 0.0
        for m in range(whole):
            total += wa(m * 60) * (cum_host(m * 60 + 60) - cum_host(m * 60))
        return total + wa(whole * 60) * (cum_host(t) - cum_host(whole * 60))

    def row(t: float, metric: str, value: float, source: str) -> dict[str, Any]:
        return {"ts": at(t), "node": node, "device": "nvme0", "metric": metric, "value": value,
                "source": source}

    return ([row(t, "host_written_bytes", HOST0 + cum_host(t), "smartctl") for t in host_times]
            + [row(t, "media_written_bytes", MEDIA0 + media(t), "nvme-ocp-smart")
               for t in media_times])


def intervals(root: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as the lake's nvme_smart -> the drive's common intervals, oldest first."""
    Lake(root).init()
    seed(root, "nvme_smart", rows)
    con = connect(root, views=("int_signal_noise",))
    try:
        return run_sql(con, "select * from int_signal_write_amplification() "
                            "order by host, device, ts").to_dicts()
    finally:
        con.close()


def noise(root: Path) -> dict[str, Any]:
    con = connect(root, views=("int_signal_noise",))
    try:
        [row] = run_sql(con, "select * from int_signal_noise "
                             "where signal = 'write_amplification'").to_dicts()
        return row
    finally:
        con.close()


def test_tools_run_seconds_apart_meet_on_common_instants(tmp_path: Path) -> None:
    # smartctl every 60 s, the OCP log 1.2 s after it: no timestamp is shared, so a
    # pairing by equal timestamps would find no interval, no write amplification, no noise.
    host_times = times(60, offset=3.0)
    out = intervals(tmp_path, drive_rows(host_times, times(60, offset=4.2)))
    # The first instant has no OCP reading before it: it moves to the OCP log's first reading
    # (1.2 s later, smartctl's bytes interpolated there), so the first interval is 58.8 s.
    assert len(out) == len(host_times) - 1
    assert all(r["wa"] == pytest.approx(1.07, rel=1e-6) for r in out)
    assert {round(r["interval_s"], 6) for r in out} == {60.0, 58.8}
    assert {r["ts"].second for r in out} == {3}  # the host bytes' instants (a tie: the host's)
    n = noise(tmp_path)
    assert n["median_level"] == pytest.approx(1.07, rel=1e-6)
    assert n["mad_level"] == pytest.approx(0.0, abs=1e-9)
    assert n["n_samples"] == len(out)


@pytest.mark.parametrize(("host_every", "media_every"), [
    (30, 300),  # smartctl 10x denser
    (300, 30),  # the OCP log 10x denser
    (45, 900),
    (900, 60),
])
def test_each_tool_at_its_own_jittered_cadence_gives_the_true_ratio(
        tmp_path: Path, host_every: float, media_every: float) -> None:
    # The drive's ratio steps from 1.05 to 1.6 after the first hour. Every interval of the
    # sparser tool that lies on one side of the step has that side's ratio.
    def wa(t: float) -> float:
        return 1.05 if t < 3600 else 1.6

    rows = drive_rows(times(host_every, 7.0, jitter=5.0, seed_=1),
                      times(media_every, 11.0, jitter=5.0, seed_=2), wa)
    out = intervals(tmp_path, rows)
    sparse = max(host_every, media_every)
    assert len(out) >= HOURS * 3600 // sparse - 3
    assert all(abs(r["interval_s"] - sparse) <= 10.0 + 1e-9 for r in out)
    for r in out:
        start, end = (r["prev_ts"] - at(0)).total_seconds(), (r["ts"] - at(0)).total_seconds()
        if end < 3600 - 60:  # the denser tool's readings around it are before the step too
            assert r["wa"] == pytest.approx(1.05, rel=1e-6)
        elif start > 3600 + 60:
            assert r["wa"] == pytest.approx(1.6, rel=1e-6)
    assert noise(tmp_path)["n_samples"] == len(out)  # every interval is in the drive's noise


def test_bursts_between_the_tools_moments_move_a_ratio_by_their_share_only(
        tmp_path: Path) -> None:
    # Checkpoint bursts (2 GB in 10 s, every 300 s) on top of steady writes; the tools run 1.2 s
    # apart, every 60 s. The OCP reading interpolated at smartctl's instant spreads a burst over
    # its 60 s: the two intervals beside a burst move by about the 1.2 s share (~2 %), and the
    # rest (the median) keep the true ratio.
    def host(t: float) -> float:
        bursts = sum(min(max(t - (b + 20.0), 0.0), 10.0) / 10.0 * 2e9
                     for b in range(0, HOURS * 3600, 300))
        return HOST_RATE * t + bursts

    out = intervals(tmp_path, drive_rows(times(60), times(60, offset=1.2), host=host))
    assert out and all(r["wa"] == pytest.approx(1.07, rel=0.03) for r in out)
    assert max(r["host_delta"] for r in out) > 2e9  # the bursts are in there
    assert noise(tmp_path)["median_level"] == pytest.approx(1.07, rel=1e-6)


def test_a_counter_that_restarted_leaves_its_interval_out(tmp_path: Path) -> None:
    # The host-bytes counter restarts from zero (a controller reset) between 1800 and 1860:
    # the common interval spanning it and no other is left out (the denser OCP readings go on).
    rows = drive_rows(times(60), times(20, offset=1.2))
    for r in rows:
        if r["metric"] == "host_written_bytes" and (r["ts"] - at(0)).total_seconds() >= 1860:
            r["value"] -= HOST0 + HOST_RATE * 1800
    out = intervals(tmp_path, rows)
    ends = [(r["ts"] - at(0)).total_seconds() for r in out]
    assert 1860.0 not in ends and 1800.0 in ends and 1920.0 in ends
    assert all(r["wa"] == pytest.approx(1.07, rel=1e-6) for r in out)


def test_a_drive_with_one_tool_only_has_no_ratio(tmp_path: Path) -> None:
    rows = drive_rows(times(60), [])
    assert intervals(tmp_path, rows) == []


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host_every=st.sampled_from([30, 60, 120, 300, 900]),
       media_every=st.sampled_from([30, 60, 120, 300, 900]),
       shift=st.floats(0.0, 0.5), true_wa=st.floats(1.0, 4.0))
def test_any_cadences_and_moments_give_the_true_ratio(
        tmp_path_factory: pytest.TempPathFactory, host_every: int, media_every: int,
        shift: float, true_wa: float) -> None:
    # Steady writes: whatever the two cadences and however far apart the tools run (up to half
    # the OCP log's interval), every common interval has the drive's true ratio.
    rows = drive_rows(times(host_every, 2.0, jitter=1.0, seed_=3),
                      times(media_every, 2.0 + shift * media_every, jitter=1.0, seed_=4),
                      lambda _t: true_wa)
    out = intervals(tmp_path_factory.mktemp("wa"), rows)
    assert len(out) >= HOURS * 3600 // max(host_every, media_every) - 3
    assert all(r["wa"] == pytest.approx(true_wa, rel=1e-6) for r in out)


def test_a_burst_inside_the_first_interval_has_its_ratio(tmp_path: Path) -> None:
    # Both tools every 1046 s, the OCP log 12 s after smartctl: the first smartctl reading has
    # no OCP reading before it. GC (write amplification 1.6) runs inside that first interval:
    # the interval still has its ratio (the instant moves to the OCP log's first reading).
    host_times = times(1046, offset=73.0)
    media_times = times(1046, offset=85.0)
    out = intervals(tmp_path, drive_rows(host_times, media_times,
                                         wa=lambda t: 1.6 if 180 <= t < 660 else 1.05))
    first = out[0]
    assert first["prev_ts"] == at(85.0) and first["ts"] == at(host_times[1])
    # 480 s of 1.6 and the rest of the 1034 s interval at 1.05: the interval's true ratio, but
    # for the OCP log's 12 s past smartctl's closing reading (interpolated at the mean rate)
    assert first["wa"] == pytest.approx((480 * 1.6 + (1034 - 480) * 1.05) / 1034, rel=5e-3)
    assert all(r["wa"] == pytest.approx(1.05, rel=5e-3) for r in out[1:])
