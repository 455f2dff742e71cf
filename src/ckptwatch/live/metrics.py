"""The watcher's Prometheus metrics, in the text exposition format 0.0.4 (written by hand).

One :class:`WatchMetrics` per watcher holds, per job and tier, the gauges of its open checkpoint
(age of the oldest open one, the job's timeout, ranks still open), the barrier time of its last
completed checkpoint and a histogram of finished ranks' durations, plus the watcher's own
health (time and duration of its last scan). :meth:`WatchMetrics.render` gives the exposition
text, served by :class:`MetricsServer` (``--metrics-port``) or written by
:func:`write_textfile` for node_exporter's textfile collector (``--metrics-file``).

The names are a contract (``deploy/prometheus/ckptwatch-rules.yml`` and the Grafana dashboard
read them): :data:`METRICS`. Label values come from the data: printable text is kept as it is,
control characters are shown as escapes as in every ckptwatch text output, and the format's
escapes keep a hostile value from breaking or forging a line. Memory is bounded: beyond
``max_series`` job/tier series the least recently updated one is dropped and counted.
"""

from __future__ import annotations

import bisect
import math
import operator
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from ckptwatch.errors import UsageError
from ckptwatch.lake.store import atomic_write_bytes
from ckptwatch.safetext import escape_controls

#: Upper bounds (seconds) of the rank-duration histogram: checkpoints take seconds to an hour.
DURATION_BUCKETS_S: tuple[float, ...] = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800,
                                         3600)
#: Job/tier series kept at most (the least recently updated is dropped beyond it).
DEFAULT_MAX_SERIES = 1000
#: The watcher's default scan interval (seconds), shown as ``ckptwatch_watch_interval_seconds``.
DEFAULT_INTERVAL_S = 10.0
#: Content type of the text exposition format 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The path :class:`MetricsServer` serves.
METRICS_PATH = "/metrics"

INFLIGHT = "ckptwatch_checkpoint_inflight_seconds"
TIMEOUT = "ckptwatch_checkpoint_timeout_seconds"
UNFINISHED = "ckptwatch_checkpoint_unfinished_ranks"
LAST_BARRIER = "ckptwatch_checkpoint_last_barrier_seconds"
DURATION = "ckptwatch_checkpoint_duration_seconds"
LAST_SCAN = "ckptwatch_watch_last_scan_timestamp_seconds"
SCAN_DURATION = "ckptwatch_watch_scan_duration_seconds"
SCANS = "ckptwatch_watch_scans_total"
INTERVAL = "ckptwatch_watch_interval_seconds"
SERIES = "ckptwatch_watch_series"
SERIES_DROPPED = "ckptwatch_watch_series_dropped_total"

#: Every metric family: name -> (type, labels, help). deploy/README.md's table lists the same.
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    INFLIGHT: ("gauge", ("job_id", "tier"),
               "Age of the oldest open checkpoint (now - its earliest start marker); 0 when none."),
    TIMEOUT: ("gauge", ("job_id", "tier"),
              "The job's checkpoint_timeout_s; no series when the timeout is unknown."),
    UNFINISHED: ("gauge", ("job_id", "tier"),
                 "Ranks of the open checkpoint with a start marker and no record yet."),
    LAST_BARRIER: ("gauge", ("job_id", "tier"),
                   "Barrier time (slowest rank) of the last completed checkpoint."),
    DURATION: ("histogram", ("job_id", "tier"),
               "Duration (end - start) of each finished rank's checkpoint."),
    LAST_SCAN: ("gauge", (),
                "Unix time the watcher's last scan ended (dead-man signal); absent before it."),
    SCAN_DURATION: ("gauge", (), "How long the watcher's last scan took."),
    SCANS: ("counter", (), "Scans the watcher has completed since it started."),
    INTERVAL: ("gauge", (), "The watcher's scan interval (--interval)."),
    SERIES: ("gauge", (), "Job/tier series the watcher holds."),
    SERIES_DROPPED: ("counter", (),
                     "Job/tier series dropped (least recently updated) beyond the series cap."),
}


def escape_label_value(value: str) -> str:
    """``value`` as a label value of the text format, safe on a terminal (``curl .../metrics``).

    Control characters become visible escapes first (:func:`~ckptwatch.safetext.escape_controls`,
    as in every ckptwatch text output: ESC shows as ``\\x1b``, a newline as ``\\n``), a lone
    surrogate (no UTF-8 form) as ``\\udcXX``; then the format's escapes: ``\\`` and ``"``.
    Printable text, non-ASCII included, is kept as it is.
    """
    text = escape_controls(value).encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\\", "\\\\").replace('"', '\\"')


def escape_help(text: str) -> str:
    """``text`` as a HELP docstring: ``\\`` and newline escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value (or ``le`` bound) as Go's Prometheus client writes it: 1, 2.5, +Inf, NaN."""
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _where(job_id: str, tier: str) -> str:
    return f"metrics of job {job_id!r} tier {tier!r}"


def _check(where: str, what: str, value: float, *, positive: bool = False) -> float:
    """``value`` as a float; ValueError (saying where and what) unless finite and >= 0 (> 0)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        need = "> 0" if positive else ">= 0"
        raise ValueError(f"{where}: {what} must be a finite number {need}, got {value!r}")
    return v


@dataclass
class _JobSeries:
    """The metric values of one job and tier."""

    inflight_s: float | None = None
    timeout_s: float | None = None
    unfinished_ranks: int | None = None
    last_barrier_s: float | None = None
    #: Observations per bucket of :data:`DURATION_BUCKETS_S`, the last one for +Inf (not
    #: cumulative; :meth:`WatchMetrics.render` sums them).
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS_S) + 1))
    duration_sum_s: float = 0.0
    duration_count: int = 0


class WatchMetrics:
    """The watcher's metrics; every method is thread-safe (one lock)."""

    def __init__(self, *, interval_s: float = DEFAULT_INTERVAL_S,
                 max_series: int = DEFAULT_MAX_SERIES) -> None:
        if not math.isfinite(interval_s) or interval_s <= 0:
            raise ValueError(f"metrics: interval_s must be a finite number > 0, got {interval_s!r}")
        if max_series < 1:
            raise ValueError(f"metrics: max_series must be at least 1, got {max_series!r}")
        self.interval_s = float(interval_s)
        self.max_series = int(max_series)
        self._lock = threading.Lock()
        #: (job_id, tier) -> its values, least recently updated first.
        self._series: OrderedDict[tuple[str, str], _JobSeries] = OrderedDict()
        self._dropped = 0
        self._last_scan_ts: float | None = None
        self._scan_duration_s: float | None = None
        self._scans = 0

    def _touch(self, job_id: str, tier: str) -> _JobSeries:
        """The series of ``job_id``/``tier``, now the most recently updated (lock held)."""
        key = (job_id, tier)
        s = self._series.get(key)
        if s is None:
            s = self._series[key] = _JobSeries()
            while len(self._series) > self.max_series:
                self._series.popitem(last=False)
                self._dropped += 1
        else:
            self._series.move_to_end(key)
        return s

    def set_job(self, job_id: str, tier: str, *, inflight_s: float, timeout_s: float | None,
                unfinished_ranks: int) -> None:
        """Set the gauges of one job/tier: open checkpoint's age (0 when none), timeout, ranks."""
        where = _where(job_id, tier)
        inflight = _check(where, "inflight_s", inflight_s)
        timeout = None if timeout_s is None else _check(where, "timeout_s", timeout_s,
                                                        positive=True)
        try:  # int, numpy and polars integers alike; not 2.5, not True
            ranks = -1 if isinstance(unfinished_ranks, bool) else operator.index(unfinished_ranks)
        except TypeError:
            ranks = -1
        if ranks < 0:
            raise ValueError(f"{where}: unfinished_ranks must be an integer >= 0, "
                             f"got {unfinished_ranks!r}")
        with self._lock:
            s = self._touch(job_id, tier)
            s.inflight_s, s.timeout_s = inflight, timeout
            s.unfinished_ranks = ranks

    def forget_job(self, job_id: str, tier: str) -> None:
        """The job is gone: its series disappear from the next render (histogram included)."""
        with self._lock:
            self._series.pop((job_id, tier), None)

    def observe_duration(self, job_id: str, tier: str, seconds: float) -> None:
        """Count one finished rank's duration (end - start) in the job/tier's histogram."""
        v = _check(_where(job_id, tier), "rank duration", seconds)
        with self._lock:
            s = self._touch(job_id, tier)
            s.bucket_counts[bisect.bisect_left(DURATION_BUCKETS_S, v)] += 1
            s.duration_sum_s += v
            s.duration_count += 1

    def set_last_barrier(self, job_id: str, tier: str, seconds: float) -> None:
        """Set the barrier time (slowest rank) of the job/tier's last completed checkpoint."""
        v = _check(_where(job_id, tier), "barrier time", seconds)
        with self._lock:
            self._touch(job_id, tier).last_barrier_s = v

    def mark_scan(self, ts_s: float, duration_s: float) -> None:
        """One scan ended at Unix time ``ts_s`` after ``duration_s`` seconds."""
        ts = _check("watcher metrics", "scan timestamp", ts_s)
        d = _check("watcher metrics", "scan duration", duration_s)
        with self._lock:
            self._last_scan_ts, self._scan_duration_s = ts, d
            self._scans += 1

    def render(self) -> str:
        """The exposition text (format 0.0.4) of every metric, series sorted by job and tier."""
        with self._lock:
            series = sorted(self._series.items())
            scalars = {LAST_SCAN: self._last_scan_ts, SCAN_DURATION: self._scan_duration_s,
                       SCANS: self._scans, INTERVAL: self.interval_s,
                       SERIES: len(self._series), SERIES_DROPPED: self._dropped}
            # copy the histogram counts under the lock: an observation may land during render
            hist = [(k, list(s.bucket_counts), s.duration_sum_s, s.duration_count)
                    for k, s in series if s.duration_count]
        lines: list[str] = []
        labels = {k: f'job_id="{escape_label_value(k[0])}",tier="{escape_label_value(k[1])}"'
                  for k, _ in series}

        def head(name: str) -> None:
            lines.append(f"# HELP {name} {escape_help(METRICS[name][2])}")
            lines.append(f"# TYPE {name} {METRICS[name][0]}")

        for name, attr in ((INFLIGHT, "inflight_s"), (TIMEOUT, "timeout_s"),
                           (UNFINISHED, "unfinished_ranks"), (LAST_BARRIER, "last_barrier_s")):
            head(name)
            for k, s in series:
                value = getattr(s, attr)
                if value is not None:
                    lines.append(f"{name}{{{labels[k]}}} {format_value(value)}")
        head(DURATION)
        for k, counts, total, n in hist:
            cumulative = 0
            for bound, count in zip((*DURATION_BUCKETS_S, math.inf), counts, strict=True):
                cumulative += count
                lines.append(f'{DURATION}_bucket{{{labels[k]},le="{format_value(bound)}"}} '
                             f"{cumulative}")
            lines.append(f"{DURATION}_sum{{{labels[k]}}} {format_value(total)}")
            lines.append(f"{DURATION}_count{{{labels[k]}}} {n}")
        for name, scalar in scalars.items():
            head(name)
            if scalar is not None:
                lines.append(f"{name} {format_value(scalar)}")
        return "\n".join(lines) + "\n"


def write_textfile(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, for node_exporter's textfile collector.

    A temp file beside it (``.<name>.tmp``: the collector reads only ``*.prom``), fsync, rename:
    the collector never reads half a file. Raises :class:`~ckptwatch.errors.LakeError` naming
    the path when it cannot be written (the shared atomic writer's error).
    """
    atomic_write_bytes(Path(path), text.encode("utf-8"))


class _Handler(BaseHTTPRequestHandler):
    """GET/HEAD /metrics: the exposition text; any other path: 404. No request log."""

    server: _Server
    server_version = "ckptwatch"
    sys_version = ""

    def _reply(self, *, body: bool) -> None:
        if urlsplit(self.path).path == METRICS_PATH:
            status, ctype = 200, CONTENT_TYPE
            data = self.server.metrics.render().encode("utf-8")
        else:
            status, ctype = 404, "text/plain; charset=utf-8"
            data = f"not found: ckptwatch serves {METRICS_PATH} only\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self._reply(body=True)

    def do_HEAD(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self._reply(body=False)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        """Quiet: a scrape every few seconds is not worth a line on stderr."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: WatchMetrics) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.metrics = metrics
        super().__init__(address, _Handler)


class MetricsServer:
    """HTTP on a thread: ``GET /metrics`` answers :meth:`WatchMetrics.render`, else 404.

    The socket is bound when constructed (``port=0``: an ephemeral port, read :attr:`port`);
    :meth:`start` serves, :meth:`stop` stops and closes. Also a context manager.
    """

    def __init__(self, metrics: WatchMetrics, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            self._server = _Server((host, port), metrics)
        except OSError as exc:
            reason = " ".join((exc.strerror or str(exc)).split())
            raise UsageError(f"cannot serve metrics on {host}:{port} (--metrics-port): {reason}; "
                             "choose a free port or stop the process that holds it") from exc
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        """The bound address."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one the OS chose when constructed with 0)."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Serve on a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            kwargs={"poll_interval": 0.2},
                                            name="ckptwatch-metrics", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
