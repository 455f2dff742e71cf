"""Stalls attributed in groups of jobs (``findings.find_stalls_by_job``: the nightly flow's
``--dask`` runs each group as a task on a connection of its own) are one run's stalls, in one
run's order, whatever the grouping; here the groups run in this process, one after another
(tests/flows/test_dask.py runs them on a Dask cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.analysis.findings import (
    ATTRIBUTION_VIEWS,
    JobGroup,
    StallFindings,
    StallRecord,
    find_stalls,
    find_stalls_by_job,
    job_groups,
    merge_findings,
    stalls_of_group,
)
from ckptwatch.errors import QueryError
from ckptwatch.lake.query import connect


def _plain(records: Sequence[StallRecord]) -> list[dict[str, Any]]:
    """Every field but ``features`` (their last bits vary from run to run: DuckDB's parallel
    float sums), which are compared approximately."""
    return [{k: v for k, v in r.to_dict().items() if k != "features"} for r in records]


def test_job_groups_even_out_stalls_and_keep_every_job_once() -> None:
    keys = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3), ("d", 1), ("b", 2)]
    # the job with the most stalls first, each into the group with the fewest so far
    assert job_groups(keys, 2) == [("a", "d"), ("b", "c")]
    assert job_groups(keys, 3) == [("a",), ("b",), ("c", "d")]
    assert job_groups(keys, 10) == [("a",), ("b",), ("c",), ("d",)]  # at most a group a job
    assert job_groups(keys, 1) == [("a", "b", "c", "d")]


def test_merge_refuses_findings_without_a_stall_of_the_mart() -> None:
    with pytest.raises(QueryError, match="missing"):
        merge_findings([("a", 1)], [StallFindings((), False)], False)


def test_stalls_attributed_in_job_groups_are_those_of_one_run(sample_lake: Path) -> None:
    con = connect(sample_lake, views=ATTRIBUTION_VIEWS)
    try:
        whole = find_stalls(sample_lake, con=con)
        assert len({s.job_id for s in whole.stalls}) >= 3 and len(whole.stalls) >= 6
        # the sample's stalls interleave their jobs in time: the merge restores one run's order
        assert [s.job_id for s in whole.stalls] != sorted(s.job_id for s in whole.stalls)
        ran: list[JobGroup] = []

        def here(groups: Sequence[JobGroup]) -> list[StallFindings]:
            ran.extend(groups)
            return [stalls_of_group(g) for g in groups]

        for n_groups in (2, 10):
            ran.clear()
            split = find_stalls_by_job(sample_lake, con, days=None, memory_limit=None,
                                       n_groups=n_groups, map_groups=here)
            assert len(ran) == min(n_groups, len({s.job_id for s in whole.stalls}))
            assert _plain(split.stalls) == _plain(whole.stalls)
            assert split.with_model == whole.with_model
            for mine, theirs in zip(split.stalls, whole.stalls, strict=True):
                assert dict(mine.features) == pytest.approx(dict(theirs.features), rel=1e-9,
                                                            nan_ok=True)
    finally:
        con.close()
