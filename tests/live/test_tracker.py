"""Open checkpoints: completion, past the timeout until given up, late records, state."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from ckptwatch.alerts.inflight import assess_inflight
from ckptwatch.live.tracker import Tracker
from ckptwatch.settings import AlertSettings

T = 1_800_000_000.0


def starts(job: str, step: int, ranks: range, at: float = T, node: str = "n1") -> pl.DataFrame:
    return pl.DataFrame({
        "job_id": [job] * len(ranks), "step": [step] * len(ranks), "rank": list(ranks),
        "node": [node] * len(ranks), "tier": ["pool"] * len(ranks),
        "target": ["t1"] * len(ranks),
        "start_ts": [datetime.fromtimestamp(at, UTC)] * len(ranks)})


def writes(job: str, step: int, ranks: list[int], dur: float, at: float = T) -> pl.DataFrame:
    return pl.DataFrame({
        "job_id": [job] * len(ranks), "step": [step] * len(ranks), "rank": ranks,
        "tier": ["pool"] * len(ranks), "duration_s": [dur] * len(ranks),
        "end_ts": [datetime.fromtimestamp(at + dur, UTC)] * len(ranks)})


def test_a_checkpoint_completes_when_every_rank_of_the_job_finished() -> None:
    t = Tracker(settle_s=30)
    t.add_starts(starts("j", 1, range(4)), T)
    t.add_writes(writes("j", 1, [0, 1, 2], 5.0), T + 5)
    assert t.settle(T + 6, {"j": 4}, {"j": 60.0}) == []
    t.add_writes(writes("j", 1, [3], 9.0), T + 9)
    (done,) = t.settle(T + 10, {"j": 4}, {"j": 60.0})
    assert (done.step, done.barrier_s, done.n_ranks, done.timed_out) == (1, 9.0, 4, False)
    t.add_writes(writes("j", 1, [3], 9.0), T + 11)  # a late duplicate does not reopen it
    assert not t.tracked


def test_without_the_job_size_a_quiet_checkpoint_completes_after_settle() -> None:
    t = Tracker(settle_s=30)
    t.add_starts(starts("j", 1, range(2)), T)
    t.add_writes(writes("j", 1, [0, 1], 4.0), T + 4)
    assert t.settle(T + 20, {}, {}) == []
    (done,) = t.settle(T + 40, {}, {})
    assert done.barrier_s == 4.0


def test_an_open_checkpoint_past_its_timeout_stays_open_until_it_is_history() -> None:
    t = Tracker()
    t.add_starts(starts("j", 1, range(4)), T)
    t.add_writes(writes("j", 1, [0, 1], 5.0), T + 5)
    day = {"j": 86400.0}.__getitem__
    assert t.settle(T + 121, {"j": 4}, {"j": 60.0}, day) == []  # past its timeout: still open
    (f,) = assess_inflight(t.open_checkpoints({}), {"j": 60.0}, {}, AlertSettings(),
                           now_s=T + 121).values()
    assert (f.timed_out, f.n_open, f.level) == (True, 2, "critical")
    # its newest record (the ends at T + 5) more than a day old: history
    assert t.settle(T + 5 + 86400, {"j": 4}, {"j": 60.0}, day) == []
    (done,) = t.settle(T + 6 + 86400, {"j": 4}, {"j": 60.0}, day)
    assert (done.timed_out, done.n_unfinished) == (True, 2)
    assert done.given_up is not None and done.given_up.startswith("history")
    assert not t.tracked


def test_a_later_checkpoint_after_the_timeout_gives_up_the_open_one() -> None:
    t = Tracker()
    t.add_starts(starts("j", 1, range(2)), T)
    t.add_starts(starts("j", 2, range(2), at=T + 30), T + 30)  # within the timeout: overlap
    assert t.settle(T + 61, {"j": 2}, {"j": 60.0}) == []
    t.add_starts(starts("j", 3, range(2), at=T + 90), T + 90)  # the job restarted
    gone = t.settle(T + 91, {"j": 2}, {"j": 60.0})
    assert [(c.step, c.given_up) for c in gone] == [
        (1, "a later checkpoint of the job started after its timeout")]
    u = Tracker()
    u.load(t.to_json())
    assert u.latest_start == {("j", "pool"): T + 90}


def test_assessment_names_the_open_ranks_and_their_levels() -> None:
    t = Tracker()
    t.add_starts(starts("j", 1, range(4), node="n1"), T)
    t.add_starts(starts("j", 1, range(4, 6), node="n7"), T)
    t.add_writes(writes("j", 1, [0, 1, 2, 3], 5.0), T + 5)
    found = assess_inflight(t.open_checkpoints({"n7": "leaf03"}), {"j": 60.0}, {"j": 6},
                            AlertSettings(), now_s=T + 43)
    f = found[("j", "pool")]
    assert (f.n_open, f.level, round(f.age_s)) == (2, "warning", 43)
    assert f.where() == "ranks 4, 5 on n7 (leaf03), target t1"
    later = assess_inflight(t.open_checkpoints({}), {"j": 60.0}, {}, AlertSettings(),
                            now_s=T + 55)
    assert later[("j", "pool")].level == "critical"
    unknown = assess_inflight(t.open_checkpoints({}), {}, {}, AlertSettings(), now_s=T + 500)
    assert unknown[("j", "pool")].level is None  # no timeout: no level


def test_state_round_trip_keeps_open_checkpoints() -> None:
    t = Tracker()
    t.add_starts(starts("j", 1, range(3)), T)
    t.add_writes(writes("j", 1, [0], 5.0), T + 5)
    u = Tracker()
    u.load(t.to_json())
    assert [c.open_ranks for c in u.tracked.values()] == [[1, 2]]
    assert u.tracked[("j", 1)].first_start_s == T
