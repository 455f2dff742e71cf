"""A CSV reject's raw text: its record, spelled only for the records that are rejected."""

from __future__ import annotations

from ckptwatch.sources.tabular import canonicalise, load_csv


def test_csv_rejects_carry_their_record_as_raw_text() -> None:
    data = (b"job_id;step;rank;node;tier;start_time;end_time;bytes\n"
            b"j;1;0;n1;pool;1764288000;1764288005;10\n"
            b"j;1;1;n1;tape;1764288000;1764288005;10\n"
            b"j;1;0;n1;pool;1764288000;1764288006;10\n"
            b"j;2;0;;pool;1764288000;1764288005;10\n")
    out = canonicalise(load_csv(data, "checkpoint_writes"), "checkpoint_writes",
                       file_label="checkpoints/a.csv")
    assert out.rows("checkpoint_writes") == 1
    assert sorted((r.line, r.raw) for r in out.rejects) == [
        (2, "j;1;0;n1;pool;1764288000;1764288005;10"),  # a duplicate: line 4 replaced it
        (3, "j;1;1;n1;tape;1764288000;1764288005;10"),
        (5, "j;2;0;;pool;1764288000;1764288005;10")]
    assert "duplicate record: line 4" in min(out.rejects, key=lambda r: r.line or 0).reason
