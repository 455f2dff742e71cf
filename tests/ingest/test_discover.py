"""Files are recognised by place and content, never by a list typed by the user."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptwatch.errors import CorruptInputError, RawDirError
from ckptwatch.ingest.discover import classify, discover, read_bytes, table_for_columns


@pytest.mark.parametrize(("columns", "table"), [
    (["job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes"],
     "checkpoint_writes"),
    (["Job_ID", "N_Ranks", "checkpoint_timeout_s"], "jobs"),
    (["ts", "node", "device", "port", "counter", "value"], "fabric_counters"),
    (["ts", "pool", "target", "metric", "value"], "pool_metrics"),
    (["node", "leaf_switch", "nic", "port"], "topology"),
    (["a", "b"], None),
])
def test_table_for_columns(columns: list[str], table: str | None) -> None:
    assert table_for_columns(columns) == table


def test_content_wins_over_a_misleading_place(tmp_path: Path) -> None:
    f = tmp_path / "pool" / "actually_jobs.csv"
    f.parent.mkdir()
    f.write_text("job_id,n_ranks,checkpoint_timeout_s\nj,8,60\n")
    assert classify(f, "pool/actually_jobs.csv").table == "jobs"


def test_envelope_and_bare_tool_files_are_told_apart(tmp_path: Path) -> None:
    env = tmp_path / "smart" / "n1.jsonl"
    env.parent.mkdir()
    env.write_text('{"node": "n1", "collected_at": "2026-11-28T00:00:00Z", "output": {}}\n')
    assert classify(env, "smart/n1.jsonl").kind == "envelope"


def test_discover_lists_everything_and_says_what_it_ignores(raw_dir: Path) -> None:
    (raw_dir / "README.md").write_text("about this data")
    (raw_dir / ".hidden").write_text("x")
    found = {f.rel: f.kind for f in discover(raw_dir)}
    assert found["README.md"] == "ignored"
    assert ".hidden" not in found
    assert found["checkpoints/j1.jsonl"] == "tabular"
    assert found["topology.csv"] == "tabular"


def test_missing_raw_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RawDirError, match="does not exist"):
        discover(tmp_path / "nope")


def test_a_corrupt_gzip_is_a_corrupt_input_error_and_an_os_error(tmp_path: Path) -> None:
    """Discovery catches it with the other read errors (``OSError``); ingest quarantines it."""
    bad = tmp_path / "x.csv.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00broken")
    with pytest.raises(CorruptInputError, match="corrupt gzip file") as err:
        read_bytes(bad)
    assert isinstance(err.value, OSError)
