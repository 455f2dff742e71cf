"""The bulk parsers' oracle: a file read in bulk and one envelope at a time gives the same."""

from __future__ import annotations

import os

import polars as pl

from ckptwatch.sources.base import Parsed
from ckptwatch.sources.envelope import EnvelopeFile, read_envelope_files, read_envelopes

#: Examples per generated-input property test of a bulk parser against its fallback: 50 in
#: ``make test`` (each example parses a file twice, through polars and one by one);
#: ``CKPTWATCH_BULK_EXAMPLES=1000`` for a deeper search, as ``CKPTWATCH_FUZZ_EXAMPLES`` does
#: for the fuzz tests.
BULK_EXAMPLES = int(os.environ.get("CKPTWATCH_BULK_EXAMPLES", "50"))


def assert_bulk_matches_one_by_one(data: bytes) -> Parsed:
    """The bulk path gives exactly what parsing every envelope one by one gives: the same
    rows in the same order with the same types (floats to the bit), rejects and notes."""
    fast = read_envelopes(data, file_label="f", bulk=True)
    assert_same_parse(fast, read_envelopes(data, file_label="f", bulk=False))
    return fast


def assert_batch_matches_one_by_one(files: list[bytes]) -> list[Parsed]:
    """Files read together (``read_envelope_files``: their envelopes through each bulk parser
    at once) give each file exactly what reading it alone gives, in bulk and one envelope at a
    time."""
    named = [EnvelopeFile(data, f"f{k}", f"n{k}") for k, data in enumerate(files)]
    together = read_envelope_files(named)
    assert len(together) == len(files)
    for file, got in zip(named, together, strict=True):
        assert_same_parse(got, read_envelopes(file.data, file_label=file.label,
                                              default_node=file.default_node, bulk=False))
        assert_same_parse(got, read_envelopes(file.data, file_label=file.label,
                                              default_node=file.default_node))
    return together


def assert_same_parse(fast: Parsed, slow: Parsed) -> None:
    """``fast`` and ``slow`` hold the same rows in the same order with the same types (floats
    to the bit), the same rejects and the same notes."""
    assert fast.rejects == slow.rejects
    assert fast.capped.dropped == slow.capped.dropped
    assert fast.notes == slow.notes
    assert sorted(fast.frames) == sorted(slow.frames)
    for table in slow.frames:
        a, b = pl.concat(fast.frames[table]), pl.concat(slow.frames[table])
        assert a.schema == b.schema
        assert a.equals(b, null_equal=True)
        for col, dtype in a.schema.items():
            if dtype == pl.Float64:
                assert a[col].to_numpy().tobytes() == b[col].to_numpy().tobytes()
