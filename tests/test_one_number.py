"""One definition per number: every place that reports a p50 / p99 / baseline / alert level of
the same rows reports the same value as the SQL that defines it.

- :func:`ckptwatch.analysis.quantiles.quantiles` is ``quantile_cont`` to the last bit (ties,
  n = 1, n = 2, small n, nulls);
- on one lake, the rank p99 of the stalled checkpoint is the same in ``checkpoint_latency``, the
  stall's record and the post-mortem; the live evidence's rows of it give the same ``stalls``
  row (p99, baseline) as the ingested checkpoint; the barrier p99 of the job is the same
  in ``job_latency``, the headroom and the daily report; the alert levels are the same in the
  headroom, the in-flight assessment and the report;
- ``ckptwatch stalls`` without threshold flags runs with the configured thresholds.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.sql_seed import at, seed, views_read

from ckptwatch.alerts.headroom import VIEWS, headroom, load_window
from ckptwatch.alerts.inflight import OpenCheckpoint, OpenRank, assess_inflight
from ckptwatch.alerts.levels import classify, levels
from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.quantiles import quantiles
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.settings import AlertSettings, JobAlertSettings, Settings

QS = (0.5, 0.9, 0.99, 0.999)


def sql_quantiles(con: duckdb.DuckDBPyConnection,
                  values: Sequence[float | None]) -> list[Any]:
    row = con.execute("select quantile_cont(x, [0.5, 0.9, 0.99, 0.999]) "
                      "from unnest(?::double[]) as t(x)", [list(values)]).fetchall()[0][0]
    return [None] * len(QS) if row is None else list(row)


@pytest.mark.parametrize("values", [
    [7.0],                                   # n = 1: every quantile is the value
    [3.0, 5.0],                              # n = 2: interpolated between the two
    [5.0, 5.0, 5.0],                         # ties only
    [1.0, 2.0, 2.0, 2.0, 9.0],               # ties in the middle
    [10.0, 20.0, 30.0, 40.0, 100.0],         # small n: p99 = 97.6 (nearest would say 100)
    [9.5, 9.5, 9.6, 9.4, 36.4, 36.4, 36.4],  # unsorted, ties at the top
    [0.1, 0.2, None, 0.3],                   # nulls left out
    [None],                                  # no value: null
    [],
])
def test_quantiles_are_quantile_cont(values: list[float | None]) -> None:
    con = duckdb.connect()
    assert quantiles(values, QS) == sql_quantiles(con, values)


def test_quantiles_are_quantile_cont_to_the_last_bit() -> None:
    # Interpolation rounds: lo + (hi - lo) * d (numpy's, polars') differs from DuckDB's
    # arithmetic in the last bit for about a third of these; the mirror must not.
    rng = random.Random(42)
    con = duckdb.connect()
    for _ in range(300):
        values = [round(rng.uniform(0, 600), rng.choice((0, 1, 3, 9)))
                  for _ in range(rng.randint(1, 40))]
        assert quantiles(values, QS) == sql_quantiles(con, values), values


# -- one lake, every reader --------------------------------------------------------------------

JOB = "j"
TIMEOUT_S = 200.0
#: Rank durations per step: five ranks; step 5 stalls (its p99 97.6, nearest-rank 100).
DURATIONS = {0: (9.0, 9.5, 10.0, 10.5, 11.0), 1: (9.0, 9.4, 10.0, 10.6, 12.0),
             2: (9.0, 9.6, 10.0, 10.4, 13.0), 3: (9.0, 9.3, 10.0, 10.7, 14.0),
             4: (9.0, 9.7, 10.0, 10.3, 15.0), 5: (10.0, 20.0, 30.0, 40.0, 100.0)}
STALL_STEP = 5
INTERVAL_S = 600.0


def lake_rows(steps: Iterable[int]) -> list[dict[str, Any]]:
    """The ``checkpoint_writes`` rows of ``steps`` (``DURATIONS``)."""
    rows = []
    for step in steps:
        start = INTERVAL_S * step
        for rank, d in enumerate(DURATIONS[step]):
            rows.append({"job_id": JOB, "step": step, "rank": rank, "node": f"n{rank}",
                         "tier": "pool", "target": f"t{rank % 2}", "start_ts": at(start),
                         "end_ts": at(start + d), "duration_s": d, "bytes": 10**9,
                         "status": "ok", "open_s": 0.1, "write_s": d - 0.3, "fsync_s": 0.1,
                         "close_s": 0.1})
    return rows


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one_number")
    Lake(root).init()
    seed(root, "checkpoint_writes", lake_rows(steps=DURATIONS))
    seed(root, "jobs", [{"job_id": JOB, "n_ranks": 5, "checkpoint_timeout_s": TIMEOUT_S}])
    return root


def one(root: Path, sql: str) -> dict[str, Any]:
    con = connect(root, views=views_read(sql))
    try:
        [row] = run_sql(con, sql).to_dicts()
        return row
    finally:
        con.close()


def test_every_p99_of_the_stalled_checkpoints_ranks_agrees(lake: Path) -> None:
    from ckptwatch.report.postmortem import duration_summary, headline, open_stall, rank_durations

    ranks = DURATIONS[STALL_STEP]
    view = one(lake, f"select p50_s, p99_s from checkpoint_latency where step = {STALL_STEP}")
    assert view["p99_s"] == pytest.approx(97.6, rel=1e-12)
    assert quantiles(ranks, (0.5, 0.99)) == [view["p50_s"], view["p99_s"]]

    case = open_stall(lake, JOB, STALL_STEP)  # the stall's record: ckptwatch stalls, post-mortem
    try:
        assert (case.report["p50_s"], case.report["p99_s"]) == (view["p50_s"], view["p99_s"])
        assert f"p99 {view['p99_s']:.1f} s" in headline(case)
        summary = duration_summary(rank_durations(case)).row(0, named=True)
        assert summary["ranks of"] == "this checkpoint"
        assert summary["p99_s"] == round(view["p99_s"], 2)
        assert summary["p50_s"] == round(view["p50_s"], 2)
    finally:
        case.con.close()



def test_the_live_evidence_judges_the_open_checkpoint_as_the_views(
        lake: Path, tmp_path: Path) -> None:
    """The watcher's rows of the checkpoint, added to a lake without it, give the same stalls
    row (p50, p99, barrier, baseline) as the lake with the checkpoint ingested."""
    from ckptwatch.live.evidence import EvidenceRequest, RankState, checkpoint_rows, open_stall_row

    sql = f"select * from stalls where step = {STALL_STEP}"
    ingested = one(lake, sql)
    assert ingested["p99_s"] == pytest.approx(97.6, rel=1e-12) and ingested["is_stall"]
    before = tmp_path / "before"
    Lake(before).init()
    seed(before, "checkpoint_writes", lake_rows(steps=range(STALL_STEP)))
    seed(before, "jobs", [{"job_id": JOB, "n_ranks": 5, "checkpoint_timeout_s": TIMEOUT_S}])
    ranks = DURATIONS[STALL_STEP]
    start = at(INTERVAL_S * STALL_STEP).timestamp()
    req = EvidenceRequest(JOB, "pool", STALL_STEP, start, start + max(ranks) + 30.0,
                          tuple(RankState(r, f"n{r}", f"t{r % 2}", start, d, start + d)
                                for r, d in enumerate(ranks)))
    con = connect(before, views=("stalls",), extra_rows=checkpoint_rows(req))
    try:
        live = open_stall_row(con, req)
    finally:
        con.close()
    assert live is not None
    keys = ("p50_s", "p99_s", "barrier_s", "baseline_s", "n_ranks", "is_stall",
            "barrier_is_lower_bound")
    assert {k: live[k] for k in keys} == {k: ingested[k] for k in keys}


def test_every_p99_of_the_jobs_barriers_agrees(lake: Path) -> None:
    from ckptwatch.analysis.findings import StallFindings
    from ckptwatch.report.facts import REPORT_VIEWS, build_report

    view = one(lake, "select barrier_p50_s, barrier_p99_s, barrier_max_s from job_latency")
    barriers = [max(d) for d in DURATIONS.values()]
    assert quantiles(barriers, (0.5, 0.99)) == [view["barrier_p50_s"], view["barrier_p99_s"]]
    assert view["barrier_p99_s"] == pytest.approx(15.0 + 0.95 * 85.0, rel=1e-12)

    settings = Settings()
    con = connect(lake, views=VIEWS)
    try:
        window, jobs = load_window(con, settings.alerts)
    finally:
        con.close()
    now = at(INTERVAL_S * STALL_STEP + 3600)
    [job], skipped = headroom(window, jobs, settings.alerts, now=now)
    assert not skipped
    assert (job.p50_s, job.p99_s, job.max_s) == (
        view["barrier_p50_s"], view["barrier_p99_s"], view["barrier_max_s"])

    con = connect(lake, views=REPORT_VIEWS)
    try:
        report = build_report(con, lake, day=at(0).date(), findings=StallFindings((), False),
                              settings=settings, plans=False, now=now)
    finally:
        con.close()
    [facts] = report["jobs"]
    # the report's JSON keeps 6 significant digits
    assert facts["barrier_p99_s"] == float(f"{view['barrier_p99_s']:.6g}")
    assert facts["barrier_p50_s"] == float(f"{view['barrier_p50_s']:.6g}")
    # the day's tier (one day, one job here): tier_latency's numbers, which the nightly's
    # metrics file carries (ckptwatch_nightly_barrier_p50_seconds / _p99_seconds)
    tier = one(lake, "select tier, barrier_p50_s, barrier_p99_s, barrier_max_s from tier_latency")
    [day] = report["tiers"]
    assert {k: day[k] for k in tier} == {
        k: v if k == "tier" else float(f"{v:.6g}") for k, v in tier.items()}


def test_one_definition_of_the_alert_levels(lake: Path) -> None:
    from ckptwatch.analysis.findings import StallFindings
    from ckptwatch.report.facts import REPORT_VIEWS, build_report

    cfg = JobAlertSettings(warning=0.5, critical=0.8)
    alerts = AlertSettings(jobs={JOB: cfg})
    settings = Settings(alerts=alerts)
    lv = levels(cfg, TIMEOUT_S)
    assert lv is not None and (lv.warning_s, lv.critical_s) == (100.0, 160.0)
    assert levels(cfg, None) is None and levels(cfg, 0.0) is None
    assert [classify(v, 100.0, 160.0) for v in (99.9, 100.0, 159.9, 160.0)] == [
        None, "warning", "warning", "critical"]

    con = connect(lake, views=VIEWS)
    try:
        window, jobs = load_window(con, alerts)
    finally:
        con.close()
    now = at(INTERVAL_S * STALL_STEP + 3600)
    [tail], _ = headroom(window, jobs, alerts, now=now)
    assert (tail.warning_s, tail.critical_s, tail.level) == (100.0, 160.0, "warning")

    first = now.timestamp() - 170.0
    open_ck = OpenCheckpoint(JOB, "pool", 6, first, 5, 4, (OpenRank(4, "n4"),))
    inflight = assess_inflight([open_ck], {JOB: TIMEOUT_S}, {JOB: 5}, alerts,
                               now_s=now.timestamp())[(JOB, "pool")]
    assert (inflight.warning_s, inflight.critical_s, inflight.level) == (
        100.0, 160.0, "critical")

    con = connect(lake, views=REPORT_VIEWS)
    try:
        report = build_report(con, lake, day=at(0).date(), findings=StallFindings((), False),
                              settings=settings, plans=False, now=now)
    finally:
        con.close()
    [facts] = report["jobs"]
    assert (facts["warning_s"], facts["critical_s"]) == (100.0, 160.0)


# -- thresholds: the configured value unless a flag is given --------------------------------------

def test_stall_flags_default_to_the_configured_thresholds() -> None:
    from ckptwatch.cli.main import build_parser
    from ckptwatch.cli.stalls import detection_settings

    args = build_parser(["stalls"]).parse_args(["stalls"])
    assert (args.stall_factor, args.stall_min_excess, args.clock_skew) == (None, None, None)
    assert detection_settings(args) == DetectionSettings()  # sql/session.sql's values
    args = build_parser(["stalls"]).parse_args(["stalls", "--stall-factor", "3"])
    assert detection_settings(args) == DetectionSettings(stall_factor=3.0)


def test_the_post_mortem_uses_the_connections_slow_rank_threshold(lake: Path) -> None:
    from ckptwatch.report.postmortem import open_stall, rank_durations

    case = open_stall(lake, JOB, STALL_STEP)
    try:
        normal = rank_durations(case)
        default = DetectionSettings()
        assert normal.slow_threshold_s == max(
            default.slow_rank_factor * normal.normal_rank_s,
            normal.normal_rank_s + default.slow_rank_min_excess_s)
        DetectionSettings(slow_rank_factor=3.0, slow_rank_min_excess_s=0.0).apply(case.con)
        assert rank_durations(case).slow_threshold_s == 3.0 * normal.normal_rank_s
    finally:
        case.con.close()
