"""Files are recognised by place and content, never by a list typed by the user."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.errors import CorruptInputError, RawDirError
from ckptwatch.ingest import load as load_module
from ckptwatch.ingest.discover import classify, discover, table_for_columns
from ckptwatch.ingest.load import read_bytes


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


def _blank_long_lines_by_regex(data: bytes, limit: int, keep: int) -> tuple[
        bytes, list[tuple[int, int, bytes]]]:
    """The reference ``load._blank_long_lines`` is held to: each line over ``limit``
    bytes found by a regular expression, blanked, listed (line number, length, head)."""
    import re

    found = [(m.start(), m.end())
             for m in re.finditer(rb"(?m)^[^\n]{%d,}" % (limit + 1), data)]
    out, long_lines, at = [], [], 0
    for start, end in found:
        long_lines.append((data.count(b"\n", 0, start) + 1, end - start,
                           data[start:start + keep]))
        out.append(data[at:start])
        at = end
    out.append(data[at:])
    return b"".join(out), long_lines


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=80).map(lambda b: b.replace(b"\x01", b"\n")),
       limit=st.integers(0, 10), keep=st.integers(0, 6), scan=st.integers(1, 9))
def test_long_lines_are_blanked_as_the_regex_finds_them(
        data: bytes, limit: int, keep: int, scan: int) -> None:
    """Long lines are found by a numpy scan for newlines, in chunks of ``SCAN_BYTES``
    (tiny here, so that lines cross chunk boundaries): the same lines, numbers, lengths and
    heads as the regular expression, the same bytes left (CR and NUL are line content).
    The quick look for any long line (``_has_long_line``) says so exactly when there is one."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(load_module, "SCAN_BYTES", scan)
        got = load_module._blank_long_lines(data, limit, keep)
    want = _blank_long_lines_by_regex(data, limit, keep)
    assert got == want
    assert load_module._has_long_line(data, limit) == bool(want[1])


def test_a_long_line_is_blanked_and_listed() -> None:
    data = b"short\n" + b"x" * 12 + b"\r\n\nok\n" + b"y" * 11
    blanked, long_lines = load_module._blank_long_lines(data, 10, 3)
    assert blanked == b"short\n\n\nok\n"
    assert long_lines == [(2, 13, b"xxx"), (5, 11, b"yyy")]
