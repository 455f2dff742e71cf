"""Connections build every view, or only the views a step reads (and what those read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptwatch.errors import QueryError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, view_files


def _views(con: object) -> set[str]:
    rows = con.execute("select view_name from duckdb_views() where not internal").fetchall()  # type: ignore[attr-defined]
    return {r[0] for r in rows}


def test_only_the_needed_views_and_what_they_read_are_built(raw_dir: Path,
                                                            tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    every = connect(lake)
    some = connect(lake, views=["checkpoint_latency", "stg_jobs"])
    try:
        built = _views(some)
        assert {"checkpoint_latency", "stg_checkpoint_writes", "checkpoint_writes", "stg_jobs",
                "jobs"} <= built
        assert "stall_signals" not in built and "stg_counter_deltas" not in built
        assert built < _views(every)
        query = "select job_id, step, barrier_s from checkpoint_latency order by 1, 2"
        assert some.execute(query).fetchall() == every.execute(query).fetchall()
    finally:
        every.close()
        some.close()
    order = [f.stem for f in view_files()]
    subset = [f.stem for f in view_files(needed=["checkpoint_latency"])]
    assert subset == [n for n in order if n in subset]  # build order kept


def test_an_unknown_view_is_a_query_error(raw_dir: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    with pytest.raises(QueryError, match="no view named no_such_view"):
        connect(lake, views=["no_such_view"])
