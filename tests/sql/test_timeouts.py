"""Timed-out checkpoints in the marts: checkpoint_latency's timed_out, n_timed_out and
timeout_reason (a rank's status, unfinished ranks at the timeout, the barrier at the timeout),
the accepted status spellings, job_latency's count and the stalls that carry the reason.

Literal rows in, exact values out. Times are seconds after T0 (tests.sql_seed.at)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.sql.conftest import latency
from tests.sql.test_marts import query, write
from tests.sql_seed import at, marker, seed

from ckptwatch.lake.query import SESSION_FILE
from ckptwatch.lake.schema import STATUS_SPELLINGS, STATUSES, TIMED_OUT
from ckptwatch.settings import sql_dir


def verdict(row: dict[str, Any]) -> tuple[bool, str | None, int]:
    return row["timed_out"], row["timeout_reason"], row["n_timed_out"]


# -- the accepted spellings: one list, read alike by the ingest and by staging ----------------

def test_the_sql_macro_spells_the_input_contracts_list() -> None:
    session = (sql_dir() / SESSION_FILE).read_text()
    macro = session[session.index("create or replace macro canonical_status"):]
    macro = macro[:macro.index(";")]
    pairs = dict(re.findall(r"when '(\w+)' then '(\w+)'", macro))
    # the macro maps every spelling that is not already canonical; the rest pass lowercased
    assert pairs == {k: v for k, v in STATUS_SPELLINGS.items() if k != v}
    assert set(STATUS_SPELLINGS.values()) == set(STATUSES) and TIMED_OUT in STATUSES
    con = duckdb.connect()
    try:
        con.execute(session)
        for spelling, canonical in STATUS_SPELLINGS.items():
            for written in (spelling, spelling.upper(), f" {spelling.title()} "):
                got = con.execute("select canonical_status(?)", [written]).fetchone()
                assert got == (canonical,), written
        assert con.execute("select canonical_status('Done')").fetchone() == ("done",)
    finally:
        con.close()


def test_a_lake_written_before_reads_every_spelling_in_any_case(lake: Path) -> None:
    # The rows go into the lake as written (an older ingest kept them): staging normalises.
    statuses = {1: "KILLED", 2: "Timed_Out", 3: " Aborted", 4: "TimeOut", 5: "OK", 6: "Error"}
    seed(lake, "checkpoint_writes", [write("j1", step, 0, 10.0, start=100.0 * step, status=s)
                                     for step, s in statuses.items()])
    got = latency(lake)
    assert [verdict(got[("j1", step)]) for step in statuses] == [
        (True, "status", 1)] * 4 + [(False, None, 0)] * 2
    assert got[("j1", 6)]["n_ranks_not_ok"] == 1
    rows = query(lake, "select step, status from stg_checkpoint_writes order by step")
    assert [r["status"] for r in rows] == ["timeout"] * 4 + ["ok", "error"]


# -- each reason --------------------------------------------------------------------------------

def test_a_rank_whose_record_says_timeout_times_the_checkpoint_out(lake: Path) -> None:
    # Step 1: 2 of 3 ranks report timeout after 20 s of a 70 s timeout, every rank finished.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 5.0),
                                     write("j1", 1, 1, 20.0, status="timeout"),
                                     write("j1", 1, 2, 20.0, status="timeout"),
                                     write("j1", 2, 0, 5.0, start=100)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 3, "checkpoint_timeout_s": 70.0}])
    got = latency(lake)
    assert verdict(got[("j1", 1)]) == (True, "status", 2)
    assert (got[("j1", 1)]["n_unfinished"], got[("j1", 1)]["barrier_s"]) == (0, 20.0)
    assert verdict(got[("j1", 2)]) == (False, None, 0)


def test_the_status_reason_comes_before_unfinished_ranks(lake: Path) -> None:
    # Rank 0 reports timeout; rank 1 never finished and the data passes the 60 s timeout.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 60.0, status="timeout"),
                                     write("j2", 1, 0, 10.0, start=500)])
    seed(lake, "checkpoint_starts", [marker("j1", 1, 0), marker("j1", 1, 1)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 60.0}])
    row = latency(lake)[("j1", 1)]
    assert verdict(row) == (True, "status", 1)
    assert row["n_unfinished"] == 1


def test_unfinished_ranks_open_at_the_timeout_give_the_unfinished_reason(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 10.0),
                                     write("j2", 1, 0, 10.0, start=500)])
    seed(lake, "checkpoint_starts", [marker("j1", 1, 0), marker("j1", 1, 1)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 60.0}])
    row = latency(lake)[("j1", 1)]
    assert verdict(row) == (True, "unfinished", 0)
    assert row["barrier_s"] == 60.0


def test_a_barrier_that_reached_the_timeout_gives_the_barrier_reason(lake: Path) -> None:
    # Every rank finished ok, the slowest in 70 s: exactly the 70 s timeout (times out);
    # step 2's slowest, 69.9 s, does not.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 10.0), write("j1", 1, 1, 70.0),
                                     write("j1", 2, 0, 69.9, start=100)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 70.0}])
    got = latency(lake)
    assert verdict(got[("j1", 1)]) == (True, "barrier", 0)
    assert verdict(got[("j1", 2)]) == (False, None, 0)


def test_without_a_timeout_only_the_record_or_the_data_end_decide(lake: Path) -> None:
    # No job metadata: a long barrier alone is no timeout; a rank's timeout status is.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 5000.0),
                                     write("j1", 2, 0, 1.0, start=6000, status="Killed")])
    got = latency(lake)
    assert verdict(got[("j1", 1)]) == (False, None, 0)
    assert verdict(got[("j1", 2)]) == (True, "status", 1)


# -- a killed job's hung checkpoint, judged by what arrived later -------------------------------

def seed_killed_job(lake: Path) -> None:
    """j1's step 3 starts at T0 + 1000 with a 120 s timeout; rank 0 finishes in 5 s, rank 1 hangs
    and the job is killed: its own data ends at T0 + 1005."""
    seed(lake, "checkpoint_writes", [write("j1", 3, 0, 5.0, start=1000)])
    seed(lake, "checkpoint_starts", [marker("j1", 3, 0, start=1000),
                                     marker("j1", 3, 1, start=1000)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 120.0}])


def test_a_killed_jobs_hung_checkpoint_stays_open_without_later_data(lake: Path) -> None:
    seed_killed_job(lake)
    row = latency(lake)[("j1", 3)]
    assert verdict(row) == (False, None, 0)
    assert (row["barrier_s"], row["barrier_is_lower_bound"]) == (5.0, True)


@pytest.mark.parametrize("table", ["nvme_smart", "fabric_counters", "pool_metrics"])
def test_a_killed_jobs_hung_checkpoint_times_out_by_later_telemetry(lake: Path,
                                                                     table: str) -> None:
    seed_killed_job(lake)
    sample = {"nvme_smart": {"node": "n0", "device": "nvme0", "source": "smartctl",
                             "metric": "temperature_c", "value": 40.0},
              "fabric_counters": {"node": "n0", "device": "mlx5_0", "port": "1",
                                  "counter": "port_xmit_data", "value": 1.0,
                                  "source": "perfquery"},
              "pool_metrics": {"pool": "pool0", "target": "t0", "metric": "write_latency_ms",
                               "value": 1.0}}[table]
    seed(lake, table, [{**sample, "ts": at(1500)}])  # well past T0 + 1000 + 120
    row = latency(lake)[("j1", 3)]
    assert verdict(row) == (True, "unfinished", 0)
    assert (row["barrier_s"], row["end_ts"]) == (120.0, at(1120))


# -- the per-job count and the stalls ------------------------------------------------------------

def test_job_latency_counts_timed_out_checkpoints_and_stalls_carry_the_reason(
        lake: Path) -> None:
    # j1: steps 0-3 of 10 s; step 4 ends in a rank's timeout, step 5's barrier reaches 60 s.
    rows = [write("j1", s, 0, 10.0, start=100.0 * s) for s in range(4)]
    rows += [write("j1", 4, 0, 11.0, start=400, status="aborted"),
             write("j1", 5, 0, 60.0, start=500)]
    seed(lake, "checkpoint_writes", rows)
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 1, "checkpoint_timeout_s": 60.0}])
    [job] = query(lake, "select n_checkpoints, n_timed_out from job_latency")
    assert (job["n_checkpoints"], job["n_timed_out"]) == (6, 2)
    stalls = query(lake, "select step, is_stall, timed_out, timeout_reason, n_timed_out "
                         "from stalls where timed_out order by step")
    assert [tuple(r.values()) for r in stalls] == [(4, True, True, "status", 1),
                                                   (5, True, True, "barrier", 0)]
    report = query(lake, "select step, timeout_reason, n_timed_out from report_checkpoints "
                         "where timed_out order by step")
    assert [tuple(r.values()) for r in report] == [(4, "status", 1), (5, "barrier", 0)]
