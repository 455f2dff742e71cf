"""The bulk parsers' oracle: a file read in bulk and one envelope at a time gives the same."""

from __future__ import annotations

import os

import polars as pl

from ckptwatch.sources.base import Parsed
from ckptwatch.sources.envelope import read_envelopes

#: Examples per generated-input property test of a bulk parser against its fallback: 50 in
#: ``make test`` (each example parses a file twice, through polars and one by one);
#: ``CKPTWATCH_BULK_EXAMPLES=1000`` for a deeper search, as ``CKPTWATCH_FUZZ_EXAMPLES`` does
#: for the fuzz tests.
BULK_EXAMPLES = int(os.environ.get("CKPTWATCH_BULK_EXAMPLES", "50"))


def assert_bulk_matches_one_by_one(data: bytes) -> Parsed:
    """The bulk path gives exactly what parsing every envelope one by one gives: the same
    rows in the same order with the same types (floats to the bit), rejects and notes."""
    fast = read_envelopes(data, file_label="f", bulk=True)
    slow = read_envelopes(data, file_label="f", bulk=False)
    assert fast.rejects == slow.rejects
    assert fast.notes == slow.notes
    assert sorted(fast.frames) == sorted(slow.frames)
    for table in slow.frames:
        a, b = pl.concat(fast.frames[table]), pl.concat(slow.frames[table])
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)
        for col, dtype in a.schema.items():
            if dtype == pl.Float64:
                assert a[col].to_numpy().tobytes() == b[col].to_numpy().tobytes()
    return fast
