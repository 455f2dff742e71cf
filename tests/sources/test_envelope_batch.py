"""Envelope files read together (``envelope.read_envelope_files``: the envelopes of all of them
through each bulk parser at once) give each file exactly what reading it on its own gives:
rows, rejects (under the file's own line numbers) and notes."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.bulk_oracle import BULK_EXAMPLES, assert_batch_matches_one_by_one, assert_same_parse
from tests.sources.test_bulk_json import BASES, _mixed_lines, envelope
from tests.sources.test_envelope import _text_envelope

from ckptwatch.settings import IngestSettings
from ckptwatch.sources import envelope as envelope_module
from ckptwatch.sources.base import BULK_PARSERS, JSON_BULK_PARSERS
from ckptwatch.sources.envelope import EnvelopeFile, read_envelope_files

ETH = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_bytes: 9\n"


def _file(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def bulk_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of envelopes handed to each bulk-parser call, call by call."""
    calls: list[int] = []
    for registry in (BULK_PARSERS, JSON_BULK_PARSERS):
        for source, parse in list(registry.items()):
            def counted(env: pl.DataFrame, *rest: Any, parse: Any = parse) -> Any:
                calls.append(env.height)
                return parse(env, *rest)
            monkeypatch.setitem(registry, source, counted)
    return calls


@pytest.mark.parametrize("chunk", [8192, 3], ids=["one-chunk", "chunks-of-3"])
def test_files_of_mixed_formats_and_bad_lines_read_together(
        chunk: int, bulk_calls: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file keeps its rows, its rejects under its own lines and its note; in chunks of 3
    envelopes the chunks straddle the files' boundaries."""
    monkeypatch.setattr(envelope_module, "_BULK_CHUNK", chunk)
    mixed = _mixed_lines()
    files = [
        _file(mixed),
        _file([envelope("ethtool", ETH, device="mlx5_0", extra=1)]),   # a note of its own
        b"",                                                            # empty
        _file(["{not json", envelope("smartctl", BASES[0][1])]),        # bad line first
        _file(mixed[::-1]),                                             # the lines reversed
        _file([json.dumps({"collected_at": "2026-11-28T00:00:00Z", "source": "ethtool",
                           "output": ETH, "device": "eth0"})]),         # node from its place
    ]
    got = assert_batch_matches_one_by_one(files)
    assert [r.line for r in got[3].rejects] == [1]
    assert got[4].rejects and got[4].rejects != got[0].rejects  # the same records, other lines
    assert got[1].notes == ["f1: envelope keys not read: 'extra' (first on line 1)"]
    assert got[5].rows("fabric_counters") == got[1].rows("fabric_counters") > 0
    assert pl.concat(got[5].frames["fabric_counters"])["node"].unique().to_list() == ["n5"]
    if chunk == 8192:  # one call per source for all the files (smartctl, ethtool, nvme-cli
        bulk_calls.clear()  # smart-log, the OCP log), not one per file and source
        read_envelope_files([EnvelopeFile(data, f"f{k}", f"n{k}")
                             for k, data in enumerate(files)])
        together = len(bulk_calls)
        bulk_calls.clear()
        for k, data in enumerate(files):
            read_envelope_files([EnvelopeFile(data, f"f{k}", f"n{k}")])
        assert together == 4 < len(bulk_calls)


def test_a_file_over_the_quarantine_cap_reads_as_on_its_own() -> None:
    """Which rejects a file over the cap keeps depends on when its envelopes are parsed: such
    a file is read again on its own, so that it keeps the same ones."""
    bad_time = [envelope("ethtool", ETH, device="mlx5_0", collected_at="2026-02-30T00:00:00Z")
                for _ in range(4)]
    lines = [x for pair in zip(bad_time, ["{not json"] * 4, strict=True) for x in pair]
    limits = IngestSettings(max_quarantine_rows=5)
    got = read_envelope_files([EnvelopeFile(_file(lines), "f0", "n0"),
                               EnvelopeFile(_file(_mixed_lines()), "f1", "n1")], limits=limits)
    alone = read_envelope_files([EnvelopeFile(_file(lines), "f0", "n0")], limits=limits)[0]
    assert got[0].capped.dropped == 3
    assert_same_parse(got[0], alone)


_FILE_LINES = st.lists(st.one_of(
    _text_envelope(),
    st.sampled_from(BASES).map(lambda base: envelope(*base, device="nvme0")),
    st.sampled_from(_mixed_lines())), min_size=0, max_size=6)


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_FILE_LINES, min_size=2, max_size=5), st.sampled_from([8192, 2, 5]))
def test_generated_files_read_together_as_one_by_one(files: list[list[str]],
                                                     chunk: int) -> None:
    saved = envelope_module._BULK_CHUNK
    envelope_module._BULK_CHUNK = chunk  # not a fixture: hypothesis runs the body many times
    try:
        assert_batch_matches_one_by_one([_file(lines) for lines in files])
    finally:
        envelope_module._BULK_CHUNK = saved


def _real_files() -> list[bytes]:
    """The genuine tool outputs of tests/fixtures/real as envelope files, one per fixture:
    OCP / vendor logs as nvme-cli text, smartctl JSON, ethtool -S text, Prometheus scrapes."""
    from tests.sources.test_bulk_json import SMARTCTL_FILES, _lines
    from tests.sources.test_bulk_prometheus import IB_PROM, SMART_PROM
    from tests.sources.test_bulk_prometheus import envelopes as prom_envelopes
    from tests.sources.test_bulk_text import OCP_TEXTS, REAL
    from tests.sources.test_bulk_text import envelopes as ocp_envelopes

    files = [ocp_envelopes([p.read_text()] * 2) for p in OCP_TEXTS]
    files += [_file(_lines("smartctl", json.loads(p.read_text()))) for p in SMARTCTL_FILES]
    files += [_file([json.dumps({"node": "n1", "collected_at": "2026-11-28T00:00:00Z",
                                 "source": "ethtool", "device": "eth0",
                                 "output": p.read_text()})])
              for p in sorted((REAL / "ethtool").rglob("*.txt"))]
    files += [prom_envelopes([p.read_text()]) for p in (IB_PROM, SMART_PROM)]
    return files


REAL_FILES = _real_files()


def test_the_real_fixtures_read_together_as_one_by_one() -> None:
    """Every genuine fixture's envelope file in one batch (several bulk parsers, declined
    vendor layouts, rejects) gives each file what reading it alone gives."""
    assert len(REAL_FILES) > 10
    together = assert_batch_matches_one_by_one(REAL_FILES)
    assert sum(sum(f.height for f in p.frames.get("nvme_smart", [])) for p in together) > 0


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(range(len(REAL_FILES))), min_size=1, max_size=8))
def test_any_mix_of_real_fixtures_reads_together_as_one_by_one(picks: list[int]) -> None:
    """Any order and repetition of the genuine fixtures' files, batched, as one by one."""
    assert_batch_matches_one_by_one([REAL_FILES[i] for i in picks])


@pytest.fixture
def finished(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The files (their indexes) each ``_finish_together`` call finished in its one pass."""
    calls: list[list[int]] = []
    real = envelope_module._finish_together

    def spy(scans: Any, aside: Any) -> Any:
        done = real(scans, aside)
        calls.append(sorted(done))
        return done

    monkeypatch.setattr(envelope_module, "_finish_together", spy)
    return calls


def test_files_all_in_bulk_finish_in_one_pass(finished: list[list[int]]) -> None:
    """Files whose rows all came valid from the bulk parsers finish in one pass over each
    table's frames (``_finish_together``); a file with rows parsed one by one (an output with
    a ``\\u`` escape is never set aside) finishes on its own. Each file as one by one either
    way."""
    clean = [_file([envelope("ethtool", ETH, device=f"mlx5_{k}"),
                    envelope("smartctl", BASES[k][1])]) for k in range(3)]
    escaped = _file([envelope("ethtool", "NIC statistics:\n# carte r\u00e9seau\n rx_bytes: 1\n"
                              " tx_bytes: 2\n", device="eth0")])
    got = assert_batch_matches_one_by_one([clean[0], escaped, clean[1], clean[2]])
    assert finished and finished[0] == [0, 2, 3]
    assert all(p.rows("fabric_counters") and p.rows("nvme_smart") for p in (got[0], got[2]))
    assert got[1].rows("fabric_counters") == 2


def test_the_real_fixtures_take_the_one_pass(finished: list[list[int]]) -> None:
    """The genuine fixtures' files read together: those whose rows all come valid from the bulk
    parsers finish in the one pass (``_finish_together``), the rest on their own, and every
    file gets what it gets alone."""
    assert_batch_matches_one_by_one(REAL_FILES)
    assert finished and 2 <= len(finished[0]) <= len(REAL_FILES)
