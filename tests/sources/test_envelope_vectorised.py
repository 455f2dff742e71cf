"""The vectorised envelope read (``envelope._Bulk.take_lines``: a file of many small envelopes
decoded by polars, their sources recognised by ``base.detect_tools``) gives exactly what the
per-envelope path gives (``bulk=False``: every line read by ``json`` and parsed one by one):
the same rows, rejects and notes, on envelopes of the genuine outputs in
``tests/fixtures/real`` and on perturbed files (a bad line in the middle, envelopes of mixed
sources in one file, shuffled order). And in the lake: the same rows with the vectorised read
as without it, a bad record quarantined with its file and line, and a rerun writes nothing.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from tests.bulk_oracle import assert_batch_matches_one_by_one

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.sources import envelope as envelope_module
from ckptwatch.sources import load_all
from ckptwatch.sources.base import (
    PLAIN_TEXT,
    TOOL_FORMATS,
    detect_tool,
    detect_tools,
)

load_all()
REAL = Path(__file__).parents[1] / "fixtures" / "real"


def _real_outputs() -> list[str]:
    """Every text file of the genuine fixtures (small enough for an envelope)."""
    out = []
    for path in sorted(REAL.rglob("*")):
        if path.is_file() and path.suffix != ".md" and path.stat().st_size < 200_000:
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            if not text.lstrip().startswith(("{", "[")):
                out.append(text)
    return out


OUTPUTS = _real_outputs()


def _line(output: str, k: int, **extra: object) -> str:
    env: dict[str, object] = {"node": f"node{k % 3:02d}",
                              "collected_at": f"2026-11-28T00:{k % 60:02d}:00Z",
                              "output": output}
    env.update(extra)
    return json.dumps(env)


def _taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many lines ``take_lines`` sets aside, per call (a spy)."""
    counts: list[int] = []
    real = envelope_module._Bulk.take_lines

    def spy(self: envelope_module._Bulk, defaults: list[str | None]) -> object:
        taken = real(self, defaults)
        counts.append(int(taken.sum()))
        return taken

    monkeypatch.setattr(envelope_module._Bulk, "take_lines", spy)
    return counts


def test_fixture_envelopes_read_in_bulk_as_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each genuine output in envelopes (its source left to the content, or named; a node of
    its own or the file's): the same as the per-envelope path, and read in bulk."""
    counts = _taken(monkeypatch)
    lines = []
    for k, output in enumerate(OUTPUTS * 3):
        source = detect_tool(output)
        if k % 3 == 1 and source:
            lines.append(_line(output, k, source=source))
        elif k % 3 == 2:
            env = json.loads(_line(output, k))
            del env["node"]  # the file's node
            lines.append(json.dumps(env, separators=(",", ":")))
        else:
            lines.append(_line(output, k))
    assert_batch_matches_one_by_one(["\n".join(lines).encode(), "\n".join(lines[::-1]).encode()])
    assert sum(counts) > len(lines) // 2


def _perturbed(seed: int) -> list[str]:
    """Envelopes of mixed sources (genuine outputs and simulated mmdiag waiters), shuffled,
    with bad lines in the middle."""
    rng = random.Random(seed)
    waiters = (REAL / "pool_telemetry" / "gpfs_exporter" / "mmdiag_waiters_stdout.txt").read_text()
    header = waiters.splitlines()[0]
    lines = [_line(header + "\n", k) for k in range(40)] + [_line(waiters, k) for k in range(40)]
    lines += [_line(o, k) for k, o in enumerate(OUTPUTS)]
    rng.shuffle(lines)
    bad = [
        '{"node":"n1","collected_at":"2026-11-28T00:00:00Z","output":"mmdiag:waiters:HEADER',
        '{"node":"n1","node":"n2","collected_at":"2026-11-28T00:00:00Z","output":"' +
        json.dumps(header)[1:-1] + '"}',  # a key twice: json takes the last
        _line(header, 1, node=" n1 "),
        _line(header, 2, node="  "),
        json.dumps({"node": "n1", "output": header}),  # no collected_at
        _line(header, 3, collected_at="yesterday"),
        _line(header, 4, collected_at="2026-11-28 00:00:00+01:00"),
        _line(header, 5, source="no-such-tool"),
        _line(header, 6, source=""),
        _line("mmdiag:waiters:0:1:::12:0x1:RebuildWorkThread:x:notanumber" + ":" * 10, 7),
        _line(header + "\n\u00e9", 8),
        _line(header, 9, extra="kept out"),
        _line(header, 10, port=1),
        json.dumps([1, 2]),
        "",
        "   ",
        _line("nothing at all", 11),
        json.dumps({"node": "n\u2028", "collected_at": "2026-11-28T00:00:00Z",
                    "output": header}, ensure_ascii=False),
    ]
    for b in bad:
        lines.insert(rng.randrange(len(lines)), b)
    return lines


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_perturbed_files_read_in_bulk_as_one_by_one(seed: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _taken(monkeypatch)
    lines = _perturbed(seed)
    got = assert_batch_matches_one_by_one(["\n".join(lines).encode(),
                                           "\r\n".join(lines[:50]).encode()])
    assert sum(counts) > 50
    reasons = [r.reason for r in got[0].rejects]
    assert any("invalid JSON" in r for r in reasons)
    assert any("collected_at" in r for r in reasons)
    assert any("no parser for source 'no-such-tool'" in r for r in reasons)


def test_chunks_of_a_large_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """More lines than a chunk (``_BULK_CHUNK``, made small here): the same again."""
    monkeypatch.setattr(envelope_module, "_BULK_CHUNK", 7)
    assert_batch_matches_one_by_one(["\n".join(_perturbed(4)).encode(),
                                     "\n".join(_perturbed(5)[:30]).encode()])


def _texts() -> list[str]:
    """Texts to recognise: the fixtures, their envelopes' outputs, their heads and tails,
    and lines of several formats mixed."""
    rng = random.Random(7)
    out = list(OUTPUTS)
    for text in OUTPUTS:
        lines = text.splitlines(keepends=True)
        out += ["".join(lines[:25]), "".join(lines[18:]), "".join(rng.sample(lines, len(lines)))]
        out += ["\n" * n + text for n in (18, 19, 20)]
        out.append("  \t" + text)
    mixed = [ln for t in OUTPUTS for ln in t.splitlines(keepends=True)[:30]]
    out += ["".join(rng.sample(mixed, 40)) for _ in range(100)]
    return out + ["", "\n", "mmdiag:waiters:", " _fs_io_s_ x", "\t_fs_io_s_ "]


def test_detect_tools_names_what_detect_tool_names() -> None:
    texts = _texts()
    series = pl.Series(texts, dtype=pl.String)
    want = [detect_tool(t) for t in texts]
    assert detect_tools(series, series.str.contains(PLAIN_TEXT)).to_list() == want
    assert detect_tools(series).to_list() == want  # none taken as plain: every one by hand


def test_detect_plain_is_detect_on_plain_text() -> None:
    texts = pl.Series(_texts(), dtype=pl.String)
    plain = texts.filter(texts.str.contains(PLAIN_TEXT))
    assert plain.len() > 100
    for fmt in TOOL_FORMATS.values():
        if fmt.detect_plain is None:
            continue
        got = pl.select(fmt.detect_plain(pl.lit(plain))).to_series().to_list()
        assert got == [bool(fmt.detect(t)) for t in plain.to_list()], fmt.source


def _raw(root: Path) -> Path:
    lines = _perturbed(9)
    for k in range(3):
        d = root / "pool" / f"nsd0{k}"
        d.mkdir(parents=True)
        (d / "mmdiag_waiters.jsonl").write_text("\n".join(lines[k::3]) + "\n")
    return root


def _rows(lake: Path) -> dict[str, list[tuple[object, ...]]]:
    out = {}
    for table in ("pool_metrics", "fabric_counters", "nvme_smart", "quarantine"):
        df = Lake(lake).read(table).drop("ingested_ts")
        out[table] = sorted(df.rows(), key=repr)
    return out


def test_the_lake_is_the_same_with_and_without_the_vectorised_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _raw(tmp_path / "raw")
    fast = ingest(raw, tmp_path / "fast")
    with monkeypatch.context() as m:  # nothing taken in bulk: every line through the loop
        m.setattr(envelope_module._Bulk, "take_lines",
                  lambda self, defaults: __import__("numpy").zeros(len(self.lines), bool))
        slow = ingest(raw, tmp_path / "slow")
    assert _rows(tmp_path / "fast") == _rows(tmp_path / "slow")
    assert fast.rows == slow.rows and fast.rows["pool_metrics"] > 100
    assert fast.quarantined == slow.quarantined > 5
    quarantine = Lake(tmp_path / "fast").read("quarantine")
    bad = quarantine.filter(pl.col("reason").str.contains("invalid JSON"))
    assert bad.height >= 1
    assert bad["source_file"][0].startswith("pool/nsd0") and bad["line"][0] is not None
    again = ingest(raw, tmp_path / "fast")  # a rerun writes nothing
    assert {f.status for f in again.files} == {"skipped"}
    assert _rows(tmp_path / "fast") == _rows(tmp_path / "slow")
