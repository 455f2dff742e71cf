"""A format's ``needs`` (``base.ToolFormat``) is never narrower than its detector: text a
detector accepts holds one of its needed strings, so ``detect_tool`` names the same format
with the test as without it. (And ``textkv.first_lines``, which detectors look at, is
``str.splitlines``' first lines.)

Inputs: every text file under ``tests/fixtures/real``, what the simulator writes for each
pool format, the tool outputs the renderers make, and text generated from their lines
(shuffled, cut, with lines of other formats between).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptwatch.simulate.scenario import simulate
from ckptwatch.sources import load_all
from ckptwatch.sources.base import INPUT_ERRORS, TOOL_FORMATS, detect_tool
from ckptwatch.sources.textkv import first_lines

load_all()
REAL = Path(__file__).parents[1] / "fixtures" / "real"


def _texts() -> list[str]:
    out = []
    for path in sorted(REAL.rglob("*")):
        if path.is_file() and path.stat().st_size < 2_000_000:
            try:
                out.append(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue
    return out


def _every_detector(output: Any) -> str | None:
    """``detect_tool`` without the ``needs`` test: every detector asked in turn."""
    for fmt in TOOL_FORMATS.values():
        try:
            if fmt.detect(output):
                return fmt.source
        except INPUT_ERRORS:
            continue
    return None


def _outputs(text: str) -> list[str]:
    """``text``, and the text outputs of its envelopes when it is JSON Lines."""
    out = [text]
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("output"), str):
                out.append(doc["output"])
    return out


@pytest.fixture(scope="module")
def pool_texts(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every file the simulator writes under ``pool/`` in each pool format (a short day)."""
    texts = []
    for fmt in ("lustre", "daos", "spdk", "gpfs"):
        root = tmp_path_factory.mktemp(fmt)
        simulate(root, 3, 4, 1.0, pool_format=fmt, omit=("smart", "fabric", "ocp"))
        for path in sorted((root / "pool").rglob("*")):
            if path.is_file():
                texts += _outputs(path.read_text(encoding="utf-8"))[:200]
    return texts


def test_needs_hold_for_every_fixture_and_pool_output(pool_texts: list[str]) -> None:
    texts = [o for t in _texts() for o in _outputs(t)] + pool_texts
    assert len(texts) > 100
    with_needs = [f for f in TOOL_FORMATS.values() if f.needs is not None]
    assert {f.source for f in with_needs} >= {
        "lctl", "daos-metrics", "dmg-pool-query", "mmpmon", "mmlsqos", "mmdiag-waiters",
        "ethtool", "perfquery", "prometheus", "sysfs-ib", "nvme-ocp-smart"}
    accepted = 0
    for text in texts:
        for fmt in with_needs:
            try:
                if not fmt.detect(text):
                    continue
            except INPUT_ERRORS:
                continue
            accepted += 1
            assert fmt.needs is not None
            assert any(part in text for part in fmt.needs), (fmt.source, text[:200])
        assert detect_tool(text) == _every_detector(text)
    assert accepted > 50


_LINES = sorted({line for t in _texts() for o in _outputs(t) for line in o.splitlines()
                 if 0 < len(line) < 300})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(_LINES), st.text(max_size=40)), max_size=12),
       st.sampled_from(["\n", "\r\n", "\r", "\x0b", "\x1c"]))
def test_detect_tool_is_the_same_with_and_without_needs(lines: list[str], end: str) -> None:
    text = end.join(lines)
    assert detect_tool(text) == _every_detector(text)
    for fmt in TOOL_FORMATS.values():
        if fmt.needs is None:
            continue
        try:
            accepted = fmt.detect(text)
        except INPUT_ERRORS:
            continue
        if accepted:
            assert any(part in text for part in fmt.needs), (fmt.source, text[:200])



_CHUNKS = ["a", "b c", "\n", "\r", "\r\n", "\x0b", "\x1c", "\x85", "\u2028", "x" * 700,
           "y" * 4093]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_CHUNKS), max_size=120), st.integers(0, 60))
def test_first_lines_are_splitlines_first_lines(chunks: list[str], n: int) -> None:
    text = "".join(chunks)
    assert first_lines(text, n) == text.splitlines()[:n]
