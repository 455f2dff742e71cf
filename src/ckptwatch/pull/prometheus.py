"""``ckptwatch pull prometheus``: SMART, fabric and pool history from a Prometheus server into
the lake.

What is read: the series of node_exporter's ``infiniband`` and ``ethtool`` collectors and of
smartctl_exporter that ``sources.prometheus`` maps to canonical names (the parser decides: a
metric it turns into no row is not pulled). ``/api/v1/series`` finds them; ``query_range``
reads them in chunks of time and of hosts, each at most ``max_points_per_query`` points, so
memory stays bounded whatever the range; a pull whose points would exceed ``max_points`` is
refused before any query runs.

Every stored sample, not a resampled grid: each chunk asks for ``m`` and ``timestamp(m)`` and
keeps a point whenever the sample's own timestamp changes, so at a ``--step`` at or below the
scrape interval the lake holds exactly the samples Prometheus stores, with their values,
cumulative (the lake's counter semantics, resets and saturation, apply unchanged).

Pool series: those the ``[pool.prometheus]`` rules map (``pull.pool_mapping``: discovery, and
samples -> ``pool_metrics`` rows) are read by the same chunks and host batches; pool-looking
names no rule maps are named in the notes.

Hosts: the ``node_label`` (default ``instance``) without its ``:port``, or what the
``node_map`` CSV (``instance,node``) says. Rows go through the ingest's write path
(``ingest.write.write_file``): one lake transaction per chunk, ``source = prometheus``, rows
already in the lake (same key and time, from an earlier pull) left out first, so pulling the
same range twice adds nothing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from ckptwatch.errors import ConfigError, RecordError
from ckptwatch.ingest.discover import RawFile
from ckptwatch.ingest.read import ParsedFile
from ckptwatch.ingest.write import FileResult, prepare_lake, write_file
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.pull.pool_mapping import PoolPlan, Sample, discover, map_samples, plan_notes
from ckptwatch.pull.promapi import PrometheusAPI, PullError
from ckptwatch.settings import INGEST, IngestSettings, PrometheusSettings, display_url, sql_dir
from ckptwatch.settings.pool import PoolPrometheusSettings
from ckptwatch.sources.base import Parsed, ToolContext, safe_text
from ckptwatch.sources.envelope import rows_to_frames
from ckptwatch.sources.prometheus import SOURCE, parse_prometheus

#: The metric families ``sources.prometheus`` reads (discovery asks only for these).
FAMILIES = '{__name__=~"node_infiniband_.+|node_ethtool_.+|smartctl_device(_.+)?"}'
#: The info series that carries a drive's protocol, model, serial and firmware.
DEVICE_INFO = "smartctl_device"
#: Prometheus refuses a ``query_range`` of more than this many steps per series.
MAX_STEPS = 11_000
#: Queries of one chunk in flight at once (Prometheus runs 20 by default).
QUERY_WORKERS = 4
#: The key columns of a pulled row per table (a row already in the lake is not written again).
KEYS = {"fabric_counters": ("node", "device", "port", "counter", "ts"),
        "nvme_smart": ("node", "device", "metric", "ts"),
        "pool_metrics": ("pool", "target", "metric", "ts")}

Range = tuple[float, float]


@dataclass
class PullReport:
    """What one pull did."""

    url: str
    ranges: list[Range]
    series: int
    #: Values of the node label (instances) the series came from.
    hosts: int
    #: Pool series the ``[pool.prometheus]`` rules map (and their divisors), and their hosts.
    pool_series: int = 0
    pool_hosts: int = 0
    queries: int = 0
    #: Chunks committed to the lake (each one lake transaction).
    chunks: list[FileResult] = field(default_factory=list)
    #: Rows left out because the lake already held them (an earlier pull of the same range).
    already: int = 0
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: Pool samples no row came of, by rule and reason (named in the notes at the end).
    pool_skipped: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per table."""
        out: dict[str, int] = {}
        for c in self.chunks:
            for t, n in c.rows.items():
                out[t] = out.get(t, 0) + n
        return out

    @property
    def quarantined(self) -> int:
        """Records quarantined (rows the parser or the row checks rejected)."""
        return sum(c.quarantined for c in self.chunks)


# -- hosts --------------------------------------------------------------------------------


def strip_port(instance: str) -> str:
    """``host:9100`` -> ``host``; ``[::1]:9100`` -> ``::1``; a value without a port as is."""
    m = re.fullmatch(r"\[(.+)\](?::\d+)?", instance)
    if m:
        return m.group(1)
    host, sep, port = instance.rpartition(":")
    if sep and port.isdigit() and host and ":" not in host:
        return host
    return instance


def load_node_map(path: Path) -> dict[str, str]:
    """The ``instance,node`` CSV (header required); ConfigError naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"node map {path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"node map {path}: not UTF-8 text") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows or [c.strip() for c in rows[0][:2]] != ["instance", "node"]:
        raise ConfigError(f"node map {path} line 1: the header must be 'instance,node'")
    out: dict[str, str] = {}
    for i, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise ConfigError(f"node map {path} line {i}: expected 'instance,node', got "
                              f"{','.join(row)[:80]!r}")
        out[row[0].strip()] = row[1].strip()
    return out


def node_namer(settings: PrometheusSettings) -> Callable[[str], str]:
    """label value -> node: the map's entry (for the value, or the value without its port),
    else the value without its ``:port``."""
    mapping = load_node_map(settings.node_map) if settings.node_map else {}

    def name(value: str) -> str:
        return mapping.get(value) or mapping.get(strip_port(value)) or strip_port(value)

    return name


# -- what is read -------------------------------------------------------------------------


@cache
def is_read(metric: str) -> bool:
    """True when ``sources.prometheus`` turns a sample of ``metric`` into a canonical row (or
    reads it for a drive's identity): the parser is the one list of what is mapped."""
    if metric == DEVICE_INFO:
        return True
    probe = f'{metric}{{device="nvme0",port="1"}} 1 0\n'
    try:
        return bool(parse_prometheus(probe, ToolContext("probe", datetime.now(UTC), SOURCE)))
    except RecordError:
        return False


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition_line(metric: str, labels: dict[str, str], value: str, ts_s: float) -> str:
    """One sample in the text format, with its timestamp (ms): what the parser reads."""
    inner = ",".join(f'{k}="{_label_text(v)}"' for k, v in sorted(labels.items())
                     if k != "__name__")
    return f"{metric}{{{inner}}} {value} {round(ts_s * 1000)}"


def _regex_alternatives(values: Sequence[str]) -> str:
    """A PromQL string literal matching exactly ``values`` with ``=~``."""
    return json.dumps("|".join(re.escape(v) for v in sorted(values)), ensure_ascii=False)


# -- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One query window: query ``[start, end]`` on the step grid, keep samples in
    ``[keep_from, keep_to)`` (``keep_to`` inclusive for a range's last chunk)."""

    start: float
    end: float
    keep_from: float
    keep_to: float
    last: bool


def plan_chunks(ranges: Sequence[Range], step: float, steps_per_query: int) -> list[Chunk]:
    """Chunks over ``ranges`` on a grid of ``step`` aligned to the epoch (the same range gives
    the same queries every time). A chunk queries one step past its end, so a sample in its
    last step is seen at the next grid point."""
    out: list[Chunk] = []
    span = step * steps_per_query
    for a, b in ranges:
        c = math.floor(a / step) * step
        while True:
            nxt = c + span
            last = nxt > b
            out.append(Chunk(c, min(nxt, math.floor(b / step) * step + step),
                             max(a, c), b if last else nxt, last))
            if last:
                break
            c = nxt
    return out


def merge_ranges(ranges: Sequence[Range]) -> list[Range]:
    """Overlapping or touching ranges merged, sorted."""
    out: list[Range] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def checkpoint_ranges(lake_root: Path, margin_s: float) -> list[Range]:
    """``--around-checkpoints``: each checkpoint of the lake from its first rank's start to its
    last rank's end (an unfinished one: its start markers), widened by ``margin_s`` each way,
    merged. Every checkpoint, not only stalls: attribution compares a stall's window with the
    same series' median over all its samples (``stall_signals``' baseline), which the normal
    checkpoints' windows supply."""
    con = connect(lake_root, views=("checkpoint_writes", "checkpoint_starts"))
    try:
        frame = run_sql(con, """
            with spans as (
                select job_id, step, min(start_ts) as first_ts, max(end_ts) as last_ts
                from checkpoint_writes group by job_id, step
                union all
                select job_id, step, min(start_ts) as first_ts, max(start_ts) as last_ts
                from checkpoint_starts group by job_id, step
            )
            select
                epoch(min(first_ts)) as first_s,
                epoch(max(last_ts)) as last_s,
            from spans
            group by job_id, step
            order by first_s
        """)
    finally:
        con.close()
    return merge_ranges([(a - margin_s, b + margin_s) for a, b in frame.iter_rows()])


# -- the pull -----------------------------------------------------------------------------


def _epoch(when: datetime) -> float:
    return when.timestamp()


def check_range(since: datetime, until: datetime) -> None:
    """Raise ``ConfigError`` when ``--until`` is not after ``--since``."""
    if until <= since:
        raise ConfigError(f"--until ({until.isoformat()}) must be after --since "
                          f"({since.isoformat()})")


def pull_prometheus(url: str, lake_root: Path, settings: PrometheusSettings, *,
                    since: datetime | None = None, until: datetime | None = None,
                    around_checkpoints: bool = False, step_s: float | None = None,
                    secrets: Sequence[str] = (), lock_wait_s: float = 600.0,
                    progress: Callable[[int, int], None] | None = None,
                    limits: IngestSettings = INGEST,
                    pool: PoolPrometheusSettings | None = None) -> PullReport:
    """Pull ``[since, until]`` (or the windows around the lake's checkpoints) into the lake;
    its rows are checked as an ingest's are, under ``limits`` (field length, rejects kept).
    ``pool``: the ``[pool.prometheus]`` mapping (None: no rules; pool-looking metric names
    are still named in the notes).

    Raises :class:`PullError` (server unreachable, an HTTP error, a pull over ``max_points``)
    and ``ConfigError`` (a bad node map, a range that ends before it starts).
    """
    t0 = time.monotonic()
    step = float(step_s or settings.step_s)
    if step <= 0 or not math.isfinite(step):
        raise ConfigError(f"--step must be a positive number of seconds (got {step:g})")
    if around_checkpoints:
        if not Lake(lake_root).exists():
            raise PullError(f"--around-checkpoints: no lake at {lake_root} (ingest the "
                            "checkpoint records first, or give --since/--until)")
        ranges = checkpoint_ranges(lake_root, settings.around_margin_s)
    else:
        if since is None or until is None:
            raise ConfigError("give --since and --until, or --around-checkpoints")
        check_range(since, until)
        ranges = [(_epoch(since), _epoch(until))]
    api = PrometheusAPI(url, settings, secrets)
    report = PullReport(display_url(url), ranges, series=0, hosts=0)
    if not ranges:
        report.notes.append(f"no checkpoints in the lake {lake_root}: nothing to pull")
        return report
    namer = node_namer(settings)
    label = settings.node_label
    found = api.series(FAMILIES, ranges[0][0], ranges[-1][1])
    report.queries += 1
    per_host: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    unlabelled = 0
    for labels in found:
        metric = labels.get("__name__", "")
        if not is_read(metric):
            continue
        if label not in labels:
            unlabelled += 1
            continue
        per_host[labels[label]][metric] += 1
    if unlabelled:
        report.notes.append(f"{unlabelled} series without a {label!r} label left out (set "
                            "[prometheus] node_label to the label that names the host)")
    report.series = sum(sum(m.values()) for m in per_host.values())
    report.hosts = len(per_host)
    mapping = pool or PoolPrometheusSettings()
    plan, queries = discover(api, mapping.effective_rules(sql_dir()), ranges[0][0],
                             ranges[-1][1], label)
    report.queries += queries
    report.pool_series, report.pool_hosts = plan.series, len(plan.per_host)
    report.notes += plan_notes(plan, mapping.presets)
    if not per_host:
        report.notes.append(f"Prometheus {api.shown} has no node_infiniband_*, node_ethtool_* "
                            "or smartctl_device_* series in the range"
                            + ("" if plan.per_host else ": nothing to pull"))
    if not per_host and not plan.per_host:
        report.elapsed_s = time.monotonic() - t0
        return report
    pool_metrics = plan.metrics
    merged: dict[str, dict[str, int]] = defaultdict(dict)
    for source in (per_host, plan.per_host):
        for host, counts in source.items():
            merged[host].update(counts)
    per_host = merged
    widest = max(sum(m.values()) for m in per_host.values())
    longest = max(math.ceil((b - a) / step) + 1 for a, b in ranges)  # steps of the longest
    steps = max(1, min(MAX_STEPS - 1, longest, settings.max_points_per_query // widest - 1))
    chunks = plan_chunks(ranges, step, steps)
    total_steps = sum(round((c.end - c.start) / step) + 1 for c in chunks)
    series = report.series + report.pool_series
    points = 2 * series * total_steps  # a value and a timestamp per point
    if points > settings.max_points:
        raise PullError(
            f"Prometheus {api.shown}: the pull would read {points:,} points ({series:,} "
            f"series x {total_steps:,} steps of {step:g} s, value and timestamp), more than "
            f"the limit of {settings.max_points:,} ([prometheus] max_points): narrow "
            "--since/--until, raise --step, or raise the limit")
    batches = _host_batches(per_host, settings.max_points_per_query // (steps + 1))
    lake = Lake(lake_root)
    with lake.lock(wait_s=lock_wait_s):
        lake, _ = prepare_lake(lake_root)
        known = lake.manifest_keys()
        con = connect(lake_root, views=tuple(KEYS))
        try:
            done = 0
            for chunk in chunks:
                for hosts in batches:
                    done += 1
                    if progress:
                        progress(done, len(chunks) * len(batches))
                    samples = _read_chunk(api, chunk, step, label, hosts, per_host, report)
                    text_by_host: dict[str, list[str]] = defaultdict(list)
                    pool_samples: list[Sample] = []
                    for host, metric, labels, value, ts in samples:
                        if metric in pool_metrics:
                            pool_samples.append((host, metric, labels, value, ts))
                        else:
                            text_by_host[host].append(exposition_line(metric, labels, value,
                                                                      ts))
                    _write_chunk(lake, con, known, report, chunk, text_by_host, namer, limits,
                                 pool_samples, plan)
        finally:
            con.close()
    report.notes += [f"{why} ({n:,} sample{'s' if n > 1 else ''} left out)"
                     for why, n in sorted(report.pool_skipped.items())]
    report.elapsed_s = time.monotonic() - t0
    return report


def _host_batches(per_host: dict[str, dict[str, int]], room: int) -> list[list[str]]:
    """Hosts in groups of at most ``room`` series (a host wider than that alone)."""
    out: list[list[str]] = []
    size = 0
    for host in sorted(per_host):
        n = sum(per_host[host].values())
        if out and size + n <= room:
            out[-1].append(host)
            size += n
        else:
            out.append([host])
            size = n
    return out


def _read_chunk(api: PrometheusAPI, chunk: Chunk, step: float, label: str, hosts: list[str],
                per_host: dict[str, dict[str, int]], report: PullReport) -> list[Sample]:
    """The chunk's stored samples of ``hosts`` (host label value, metric, labels, value,
    time), in the order of the metrics and series (the same every run). A host "" is the
    series without the label (``=~""`` selects them)."""
    metrics = sorted({m for h in hosts for m in per_host[h]})
    selector = f"{{{label}=~{_regex_alternatives(hosts)}}}"
    wanted = set(hosts)
    out: list[Sample] = []

    def read(metric: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return (api.query_range(f"{metric}{selector}", chunk.start, chunk.end, step),
                api.query_range(f"timestamp({metric}{selector})", chunk.start, chunk.end,
                                step))

    with ThreadPoolExecutor(QUERY_WORKERS) as pool:
        answers = list(pool.map(read, metrics))  # in order: the same lines every run
    for metric, (values, stamps) in zip(metrics, answers, strict=True):
        report.queries += 2
        by_labels = {_series_key(s.get("metric", {})): s.get("values", []) for s in stamps}
        for series in values:
            labels = series.get("metric", {})
            host = labels.get(label, "")
            if host not in wanted:
                continue
            plain = {k: v for k, v in labels.items() if k != "__name__"}
            raw_ts = dict((float(t), float(v)) for t, v in by_labels.get(_series_key(labels), []))
            last: float | None = None
            for t, value in series.get("values", []):
                ts = raw_ts.get(float(t))
                if ts is None or ts == last:
                    continue
                last = ts
                if ts < chunk.keep_from or ts > chunk.keep_to or (
                        ts == chunk.keep_to and not chunk.last):
                    continue
                out.append((host, metric, plain, value, ts))
    return out


def _series_key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _write_chunk(lake: Lake, con: Any, known: set[str], report: PullReport, chunk: Chunk,
                 lines: dict[str, list[str]], namer: Callable[[str], str],
                 limits: IngestSettings, pool_samples: Sequence[Sample] = (),
                 plan: PoolPlan | None = None) -> None:
    """Parse the chunk's samples per host (pool samples through the plan's rules), leave out
    rows the lake has, commit the rest."""
    parsed = Parsed(limits=limits)
    when = datetime.fromtimestamp(chunk.start, tz=UTC)
    if pool_samples and plan is not None:
        mapped = map_samples(pool_samples, plan.rules, namer)
        for why, n in mapped.skipped.items():
            report.pool_skipped[why] = report.pool_skipped.get(why, 0) + n
        rows_to_frames({"pool_metrics": mapped.rows}, parsed)
    for host in sorted(lines):
        node = namer(host)
        try:
            result = parse_prometheus("\n".join(lines[host]) + "\n",
                                      ToolContext(node, when, SOURCE))
        except RecordError as exc:
            note = safe_text(f"{host} (node {node}): {exc}")
            if note not in report.notes:
                report.notes.append(note)
            continue
        rows_to_frames(result, parsed)
    fresh = Parsed(rejects=parsed.rejects, notes=parsed.notes, limits=limits)
    for table, frames in parsed.frames.items():
        frame = pl.concat(frames, how="diagonal_relaxed")
        new = _not_in_lake(con, table, frame)
        report.already += frame.height - new.height
        fresh.add(table, new)
    if not fresh.frames and not fresh.rejects:
        return
    digest = hashlib.sha256(b"prometheus pull\0")
    for table in sorted(fresh.frames):
        frame = pl.concat(fresh.frames[table], how="diagonal_relaxed")
        digest.update(table.encode() + b"\0" + frame.sort(frame.columns).write_csv().encode())
    for r in fresh.rejects:
        digest.update(f"{r.reason}\0{r.raw}".encode("utf-8", "backslashreplace"))
    key = digest.hexdigest()
    if key in known:
        return
    span = (f"{datetime.fromtimestamp(chunk.keep_from, tz=UTC):%Y-%m-%dT%H:%M:%SZ}/"
            f"{datetime.fromtimestamp(chunk.keep_to, tz=UTC):%Y-%m-%dT%H:%M:%SZ}")
    rel = f"prometheus {report.url} {span}"
    raw = RawFile(Path(rel), rel, "envelope", limits=limits)
    written = write_file(lake, ParsedFile(raw, key, 0, fresh), datetime.now(UTC))
    known.add(key)
    report.chunks.append(written)


#: Per table: the pulled rows (``pulled_rows``, a registered frame) whose key the lake's rows
#: from earlier pulls do not hold. Parameters: source, first and last day, first and last ts
#: (pool_metrics has no source column: a row of any origin with the same key is there).
_NEW_ROWS = {
    "fabric_counters": """
        select new.*
        from pulled_rows as new
        anti join (
            select node, device, port, counter, ts
            from fabric_counters
            where source = ? and date between ? and ? and ts between ? and ?
        ) as old using (node, device, port, counter, ts)
    """,
    "nvme_smart": """
        select new.*
        from pulled_rows as new
        anti join (
            select node, device, metric, ts
            from nvme_smart
            where source = ? and date between ? and ? and ts between ? and ?
        ) as old using (node, device, metric, ts)
    """,
    "pool_metrics": """
        select new.*
        from pulled_rows as new
        anti join (
            select pool, target, metric, ts
            from pool_metrics
            where ? is not null and date between ? and ? and ts between ? and ?
        ) as old using (pool, target, metric, ts)
    """,
}


def _not_in_lake(con: Any, table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``frame`` whose key (``KEYS``) the lake's pulled rows do not hold yet."""
    if frame.is_empty():
        return frame
    lo, hi = frame["ts"].min(), frame["ts"].max()
    assert isinstance(lo, datetime) and isinstance(hi, datetime)
    con.register("pulled_rows", frame.to_arrow())
    try:
        return run_sql(con, _NEW_ROWS[table], [SOURCE, lo.date(), hi.date(), lo, hi])
    finally:
        con.unregister("pulled_rows")


def default_range(now: datetime, since_s: float) -> tuple[datetime, datetime]:
    """The nightly flow's range: the last ``since_s`` seconds up to ``now``."""
    return now - timedelta(seconds=since_s), now
