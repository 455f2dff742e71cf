"""The JSON Lines envelope: dispatch by source, detection by content, per-line rejects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import TOOL_FORMATS, ToolContext, register_tool
from ckptwatch.sources.envelope import read_envelopes, read_tool_file, time_from_name


@pytest.fixture
def toy_tool() -> Iterator[str]:
    """A registered toy format: text 'TOY key=value …' -> one nvme_smart row per key."""

    def detect(output: Any) -> bool:
        return isinstance(output, str) and output.startswith("TOY ")

    @register_tool("toy", detect)
    def parse(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
        if not isinstance(output, str) or not output.startswith("TOY "):
            raise RecordError("toy output must start with 'TOY '")
        rows = []
        for kv in output[4:].split():
            k, v = kv.split("=")
            rows.append({"ts": ctx.ts, "node": ctx.node, "device": ctx.device or "nvme0",
                         "source": ctx.source, "metric": k, "value": v})
        return {"nvme_smart": rows}

    yield "toy"
    del TOOL_FORMATS["toy"]


def _env(**kw: Any) -> str:
    base = {"node": "n1", "device": "nvme1", "collected_at": "2026-11-28T00:00:00Z",
            "source": "toy", "output": "TOY temperature_c=41"}
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_envelope_rows_carry_node_device_and_time(toy_tool: str) -> None:
    out = read_envelopes((_env() + "\n").encode(), file_label="smart/x.jsonl")
    [df] = out.frames["nvme_smart"]
    row = df.row(0, named=True)
    assert (row["node"], row["device"], row["metric"], row["value"]) == (
        "n1", "nvme1", "temperature_c", 41.0)
    assert row["ts"] == datetime(2026, 11, 28, tzinfo=UTC)


def test_source_is_detected_when_missing(toy_tool: str) -> None:
    out = read_envelopes((_env(source=None) + "\n").encode(), file_label="f")
    assert out.rows("nvme_smart") == 1 and not out.rejects


@pytest.mark.parametrize(("line", "reason"), [
    (_env(node=None), "envelope has no 'node'"),
    (_env(collected_at="soon"), "collected_at: Invalid isoformat string: 'soon'"),
    (_env(collected_at=None), "envelope has no 'collected_at'"),
    (_env(source="nvme-teapot"), "no parser for source 'nvme-teapot'"),
    (_env(source=None, output={"what": 1}), "envelope names no 'source'"),
    (_env(output="TOY temperature_c=hot"), "nvme_smart row temperature_c has no valid value"),
    (_env(output="nonsense"), "toy output must start with 'TOY '"),
    ('{"node": "n1", "output": "TOY a=1", "collected_at": "2026-11-28T00:00:00Z"', "invalid JSON"),
    ("[1]", "expected a JSON object, got list"),
])
def test_bad_envelope_lines_are_rejected_with_line_and_reason(toy_tool: str, line: str,
                                                              reason: str) -> None:
    data = "\n".join([_env(), line, _env(device="nvme2")]) + "\n"
    out = read_envelopes(data.encode(), file_label="f")
    assert out.rows("nvme_smart") == 2
    [rej] = out.rejects
    assert rej.line == 2
    assert rej.reason.startswith(reason), rej.reason


def test_bare_tool_file_takes_node_from_its_place(toy_tool: str) -> None:
    out = read_tool_file(b"TOY percent_used_pct=3", file_label="smart/n7/x.txt", node="n7",
                         ts=datetime(2026, 11, 28, tzinfo=UTC))
    assert out.frames["nvme_smart"][0]["node"].to_list() == ["n7"]


@pytest.mark.parametrize(("name", "iso"), [
    ("nvme0-20261129T030000Z.json", "2026-11-29T03:00:00+00:00"),
    ("perfquery_2026-11-29T03:00:00+01:00.txt", "2026-11-29T02:00:00+00:00"),
    ("ethtool.1764385200.txt", "2025-11-29T03:00:00+00:00"),
])
def test_time_from_name(name: str, iso: str) -> None:
    ts = time_from_name(name)
    assert ts is not None and ts.isoformat() == iso


def test_time_from_name_none() -> None:
    assert time_from_name("nvme0.json") is None
