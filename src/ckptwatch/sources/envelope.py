"""The JSON Lines envelope (DESIGN "Input contract"), and bare tool-output files.

An envelope line is ``{"node", "device", "port", "collected_at", "source", "output"}``; ``output``
is the tool's raw JSON object or raw text. ``source`` picks the parser; when it is missing the
format is recognised from the content. A file that is a tool's raw output on its own (e.g.
``smart/<node>/nvme0.json``) takes its node from the directory and its time from the file name
(or the tool's own clock, or the file's mtime).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from ckptwatch.config import INGEST
from ckptwatch.errors import RecordError
from ckptwatch.schema import PROVENANCE, TABLES
from ckptwatch.sources import load_all
from ckptwatch.sources.base import TOOL_FORMATS, Parsed, Reject, ToolContext, detect_tool

PROVENANCE_NAMES = {f.name for f in PROVENANCE}


def _clip(text: str) -> str:
    return text.encode("utf-8", "replace")[: INGEST.quarantine_raw_max].decode("utf-8", "ignore")


def parse_time(value: Any) -> datetime:
    """An envelope's ``collected_at``: ISO-8601 (offset or Z; naive is UTC) or epoch seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        ts = datetime.fromtimestamp(float(value), tz=UTC)
    elif isinstance(value, str):
        text = value.strip()
        try:
            ts = datetime.fromtimestamp(float(text), tz=UTC)
        except ValueError:
            ts = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if not INGEST.min_year <= ts.year <= INGEST.max_year:
        raise ValueError(f"implausible timestamp {value!r}")
    return ts


def _row_schema(table: str) -> dict[str, pl.DataType]:
    empty = pl.from_arrow(TABLES[table].schema.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return {k: v for k, v in empty.schema.items() if k not in PROVENANCE_NAMES}


def rows_to_frames(result: dict[str, list[dict[str, Any]]], out: Parsed) -> None:
    """Type parser row dicts with the canonical schema (one frame per table) and add them.

    A row whose required column is missing or of the wrong type is rejected (with the line
    recorded under ``__line`` by ``read_envelopes``), never written half-empty.
    """
    for table, rows in result.items():
        if not rows:
            continue
        schema = _row_schema(table)
        columns: dict[str, list[Any]] = {k: [r.get(k) for r in rows] for k in schema}
        df = pl.DataFrame(columns, schema=schema, strict=False).with_columns(
            pl.Series("__line", [r.get("__line") for r in rows], dtype=pl.Int64))
        required = [f.name for f in TABLES[table].schema
                    if not f.nullable and f.name in schema]
        bad = pl.any_horizontal([pl.col(c).is_null() for c in required])
        for row in df.filter(bad).iter_rows(named=True):
            cols = ", ".join(c for c in required if row[c] is None)
            what = row.get("metric") or row.get("counter") or ""
            out.rejects.append(Reject(
                f"{table} row {what!s} has no valid {cols}".replace("  ", " "),
                row["__line"], None, table))
        out.add(table, df.filter(~bad).drop("__line"))


def _accumulate(into: dict[str, list[dict[str, Any]]],
                result: dict[str, list[dict[str, Any]]], line: int | None) -> None:
    for table, rows in result.items():
        into.setdefault(table, []).extend({**r, "__line": line} for r in rows)


def parse_tool_output(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """Run the registered parser for ``ctx.source`` over one raw output."""
    load_all()
    fmt = TOOL_FORMATS.get(ctx.source)
    if fmt is None:
        known = ", ".join(sorted(TOOL_FORMATS)) or "none"
        raise RecordError(f"no parser for source '{ctx.source}' (known: {known})")
    try:
        return fmt.parse(output, ctx)
    except RecordError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise RecordError(f"{ctx.source} output malformed: {type(exc).__name__}: {exc}") from exc


def read_envelopes(data: bytes, *, file_label: str, default_node: str | None = None) -> Parsed:
    """Parse a JSON Lines envelope file; bad lines are rejected with their line number."""
    load_all()
    out = Parsed()
    rows: dict[str, list[dict[str, Any]]] = {}
    for i, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            env = json.loads(line)
            if not isinstance(env, dict):
                raise RecordError(f"expected a JSON object, got {type(env).__name__}")
            if "output" not in env:
                raise RecordError("envelope has no 'output'")
            node = env.get("node") or default_node
            if not isinstance(node, str) or not node.strip():
                raise RecordError(
                    "envelope has no 'node' (and the file is not under <kind>/<node>/)")
            if "collected_at" not in env:
                raise RecordError("envelope has no 'collected_at'")
            try:
                ts = parse_time(env["collected_at"])
            except ValueError as exc:
                raise RecordError(f"collected_at: {exc}") from exc
            output = env["output"]
            source = env.get("source") or detect_tool(output)
            if not source:
                raise RecordError("envelope names no 'source' and the output matches no known "
                                  "format")
            dev, port = env.get("device"), env.get("port")
            ctx = ToolContext(node=node.strip(), ts=ts, source=str(source),
                              device=str(dev) if dev is not None else None,
                              port=str(port) if port is not None else None)
            _accumulate(rows, parse_tool_output(output, ctx), i)
        except json.JSONDecodeError as exc:
            out.rejects.append(Reject(f"invalid JSON ({exc.msg} at column {exc.colno})", i,
                                      _clip(line)))
        except RecordError as exc:
            out.rejects.append(Reject(exc.reason, i, _clip(line)))
    rows_to_frames(rows, out)
    return out


_NAME_TS = re.compile(r"(\d{4}-?\d{2}-?\d{2}T\d{2}:?\d{2}:?\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")
_NAME_EPOCH = re.compile(r"(?<!\d)(1\d{9}(?:\.\d+)?)(?!\d)")


def time_from_name(name: str) -> datetime | None:
    """A collection time written into a file name (ISO basic/extended, or epoch seconds)."""
    m = _NAME_TS.search(name)
    if m:
        text = m.group(1)
        if "-" not in text[:8]:
            text = f"{text[0:4]}-{text[4:6]}-{text[6:8]}{text[8:]}"
        date, _, clock = text.partition("T")
        zone = ""
        zm = re.search(r"(Z|[+-]\d{2}:?\d{2})$", clock)
        if zm:
            zone, clock = zm.group(1), clock[: zm.start()]
        if ":" not in clock:
            clock = f"{clock[0:2]}:{clock[2:4]}:{clock[4:]}"
        try:
            return parse_time(f"{date}T{clock}{zone}")
        except ValueError:
            return None
    m = _NAME_EPOCH.search(name)
    if m:
        try:
            return parse_time(float(m.group(1)))
        except ValueError:
            return None
    return None


_TOOL_WORDS = {"smartctl", "smart", "nvme", "perfquery", "ethtool", "sysfs", "prometheus",
               "node", "metrics", "scrape", "ocp", "counters", "stats", "output", "out"}


def device_from_name(name: str) -> str | None:
    """The device a bare tool file names: ``eth0_2026….txt`` -> ``eth0``; tool words -> None."""
    stem = name.split(".", 1)[0]
    token = re.split(r"[_\-@]", stem, maxsplit=1)[0]
    if not token or token.lower() in _TOOL_WORDS or token[0].isdigit():
        return None
    return token


def read_tool_file(data: bytes, *, file_label: str, node: str, ts: datetime,
                   device: str | None = None) -> Parsed:
    """A bare tool output (JSON object or text) for one node; the whole file is one record."""
    load_all()
    out = Parsed()
    text = data.decode("utf-8", errors="replace")
    output: Any = text
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            output = json.loads(text)
        except json.JSONDecodeError as exc:
            out.rejects.append(Reject(
                f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                None, _clip(text)))
            return out
    source = detect_tool(output)
    if source is None:
        out.rejects.append(Reject("not a recognised tool output (smartctl, nvme-cli, perfquery, "
                                  "sysfs, ethtool, prometheus)", None, _clip(text)))
        return out
    if device is None:
        device = device_from_name(file_label.rsplit("/", 1)[-1])
    ctx = ToolContext(node=node, ts=ts, source=source, device=device)
    try:
        rows_to_frames(parse_tool_output(output, ctx), out)
    except RecordError as exc:
        out.rejects.append(Reject(exc.reason, None, _clip(text)))
    return out
