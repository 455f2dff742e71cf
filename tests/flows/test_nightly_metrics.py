"""The nightly's metrics file from literal report facts: which samples each fact gives (stalls
by cause and tier with zeros, the jobs of the day only, a null fact as no sample), the last
success carried over, label values that cannot break a line; promtool and prometheus_client's
parser read the text. The run that writes it: tests/flows/test_nightly_run.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from tests.conftest_prometheus import require_binary

from ckptwatch.analysis.attribution import LABELS
from ckptwatch.flows.nightly_metrics import (
    LAST_SUCCESS,
    METRICS,
    previous_success,
    render,
    write_metrics,
)

NOW = 1_796_000_000.5


def facts(**over: Any) -> dict[str, Any]:
    """The keys of report.json the metrics read: two tiers, three jobs of the day, stalls."""
    base: dict[str, Any] = {
        "date": "2026-11-28",
        "jobs": [{"job_id": "j1", "tier": "pool", "n_timed_out": 2},
                 {"job_id": "j2", "tier": "local", "n_timed_out": 0},
                 {"job_id": 'we"ird\njob', "tier": "pool", "n_timed_out": 0}],
        "tiers": [{"tier": "pool", "n_checkpoints": 30, "barrier_p50_s": 12.5,
                   "barrier_p99_s": 80.25},
                  {"tier": "local", "n_checkpoints": 4, "barrier_p50_s": 3.0,
                   "barrier_p99_s": None}],
        "stalls": [{"cause": "gc", "tier": "pool"}, {"cause": "gc", "tier": "pool"},
                   {"cause": "metadata", "tier": "local"},
                   {"cause": "unknown", "tier": "pool"}],
        # j9 is assessed (its window reaches back) but has no checkpoint that day: left out
        "headroom": [{"job_id": "j1", "tier": "pool", "headroom_s": -3.5, "timeout_s": 120.0},
                     {"job_id": "j9", "tier": "pool", "headroom_s": 50.0, "timeout_s": 60.0}],
    }
    return {**base, **over}


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    done = subprocess.run([require_binary("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def family(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float],
           name: str) -> dict[tuple[str, ...], float]:
    return {tuple(v for _, v in labels): value for (n, labels), value in samples.items()
            if n == f"ckptwatch_nightly_{name}"}


def test_each_fact_of_the_day_is_a_sample() -> None:
    samples = parse(render(facts(), exit_code=0, files_failed=0, now=NOW, last_success=None))
    stalls = family(samples, "stalls")  # labels sorted: (cause, tier)
    # every cause label for each tier of the day, 0 where none stalled
    assert set(stalls) == {(c, t) for c in LABELS for t in ("local", "pool")}
    assert {k: v for k, v in stalls.items() if v} == {
        ("gc", "pool"): 2, ("metadata", "local"): 1, ("unknown", "pool"): 1}
    assert family(samples, "checkpoints") == {("local",): 4, ("pool",): 30}
    assert family(samples, "barrier_p50_seconds") == {("local",): 3.0, ("pool",): 12.5}
    assert family(samples, "barrier_p99_seconds") == {("pool",): 80.25}  # null: no sample
    assert family(samples, "timed_out_checkpoints") == {
        ("j1", "pool"): 2, ("j2", "local"): 0, ('we"ird\\njob', "pool"): 0}
    assert family(samples, "headroom_seconds") == {("j1", "pool"): -3.5}  # j9: not that day
    assert family(samples, "timeout_seconds") == {("j1", "pool"): 120.0}
    assert family(samples, "report_day_timestamp_seconds") == {(): 1795824000.0}
    assert family(samples, "last_run_timestamp_seconds") == {(): NOW}
    assert family(samples, "last_success_timestamp_seconds") == {(): NOW}
    assert family(samples, "last_run_exit_code") == {(): 0}
    assert family(samples, "files_failed") == {(): 0}


def test_a_hostile_label_value_stays_on_its_line() -> None:
    text = render(facts(), exit_code=0, files_failed=0, now=NOW, last_success=None)
    [line] = [x for x in text.splitlines() if "ird" in x and "timed_out" in x]
    assert line == ('ckptwatch_nightly_timed_out_checkpoints{job_id="we\\"ird\\\\njob",'
                    'tier="pool"} 0')


def test_the_last_success_moves_only_on_exit_0() -> None:
    for code in (1, 2):
        failed = parse(render(facts(), exit_code=code, files_failed=3, now=NOW,
                              last_success=1_700_000_000.0))
        assert family(failed, "last_success_timestamp_seconds") == {(): 1_700_000_000.0}
        assert family(failed, "last_run_exit_code") == {(): code}
    first = parse(render(None, exit_code=2, files_failed=None, now=NOW, last_success=None))
    assert {name for name, _ in first} == {"ckptwatch_nightly_last_run_timestamp_seconds",
                                           "ckptwatch_nightly_last_run_exit_code"}


def test_the_file_carries_the_last_success_over_and_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "textfile" / "ckptwatch_nightly.prom"
    assert previous_success(path) is None  # no file yet
    write_metrics(path, facts(), exit_code=0, files_failed=0, now=NOW)
    assert previous_success(path) == NOW
    write_metrics(path, None, exit_code=2, files_failed=None, now=NOW + 86400)
    assert previous_success(path) == NOW
    samples = parse(path.read_text())
    assert family(samples, "last_run_timestamp_seconds") == {(): NOW + 86400}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    path.write_text(f"{LAST_SUCCESS} not-a-number\n")
    assert previous_success(path) is None


def test_every_family_is_a_documented_gauge_of_the_nightly() -> None:
    assert all(name.startswith("ckptwatch_nightly_") and kind == "gauge" and text
               for name, (kind, _labels, text) in METRICS.items())
