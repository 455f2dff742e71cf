"""`ckptwatch pull prometheus URL --lake LAKE (--since T --until T | --around-checkpoints)`:
SMART, fabric and pool history from a Prometheus server into the lake."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from ckptwatch.cli._options import add_lock_wait, positive_float
from ckptwatch.settings import default_lake


def parse_time(text: str) -> datetime:
    """An argparse type: ISO-8601 (a time without offset is UTC) or epoch seconds."""
    value = text.strip()
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use ISO-8601 such as 2026-11-28T00:00:00Z, or epoch "
            "seconds)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``pull`` command and its ``prometheus`` source."""
    p = sub.add_parser(
        "pull", help="pull telemetry from where the cluster already keeps it (Prometheus)",
        description="Read telemetry from a server that already holds it, into the lake.")
    sources = p.add_subparsers(dest="source", metavar="SOURCE", required=True,
                               help="where the telemetry is kept: prometheus")
    q = sources.add_parser(
        "prometheus", help="SMART, fabric and pool history from a Prometheus server",
        description="Read the node_exporter infiniband/ethtool and smartctl_exporter series "
        "that map to ckptwatch's SMART and fabric names from a Prometheus server's HTTP API "
        "(/api/v1/series, then /api/v1/query_range in chunks of time and series) and write "
        "them to the lake's nvme_smart and fabric_counters tables with source = prometheus, "
        "counters cumulative; and the pool series the [pool.prometheus] rules and presets of "
        "--config map, into pool_metrics (pool-looking names no rule maps are named in the "
        "notes). node = the instance label without its :port, or what "
        "[prometheus] node_map says. Pulling the same range again adds nothing. Auth: "
        "[prometheus] token_env / basic_auth_env in --config, else $CKPTWATCH_PROMETHEUS_TOKEN "
        "(bearer) or $CKPTWATCH_PROMETHEUS_BASIC_AUTH (user:password). Exit 0 on success, 2 "
        "when the server cannot be read (one line says why).")
    q.add_argument("url", metavar="URL", help="the Prometheus server's base URL, e.g. "
                   "http://prometheus:9090")
    q.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    when = q.add_mutually_exclusive_group(required=True)
    when.add_argument("--since", type=parse_time, metavar="T",
                      help="start of the range (ISO-8601 or epoch seconds); needs --until")
    when.add_argument("--around-checkpoints", action="store_true",
                      help="only the windows around the lake's checkpoints (each widened by "
                      "[prometheus] around_margin_s, default 300 s), not whole days")
    q.add_argument("--until", type=parse_time, metavar="T", help="end of the range")
    q.add_argument("--step", type=positive_float, default=None, metavar="S",
                   help="query resolution in seconds (default: [prometheus] step_s, 15); at "
                   "or below the scrape interval every stored sample is read")
    q.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file with a [prometheus] section (default: "
                   "$CKPTWATCH_CONFIG)")
    add_lock_wait(q)
    q.add_argument("--quiet", action="store_true", help="no progress on stderr")
    q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Pull and print the summary."""
    from ckptwatch.cli._progress import Progress
    from ckptwatch.errors import UsageError
    from ckptwatch.pull.prometheus import check_range, pull_prometheus
    from ckptwatch.settings import load_settings

    if args.since is not None and args.until is None:
        raise UsageError("--since needs --until (or use --around-checkpoints)")
    if args.around_checkpoints and args.until is not None:
        raise UsageError("--until goes with --since, not with --around-checkpoints")
    if args.since is not None:
        check_range(args.since, args.until)  # before the progress line: a usage error alone
    settings = load_settings(args.config)
    with Progress("pull", quiet=args.quiet) as progress:
        progress.stage("querying Prometheus")
        report = pull_prometheus(
            args.url, args.lake, settings.prometheus, since=args.since, until=args.until,
            around_checkpoints=args.around_checkpoints, step_s=args.step,
            secrets=settings.secrets(), lock_wait_s=args.lock_wait,
            progress=lambda i, n: progress.count("pull", i, n, "chunks"),
            limits=settings.ingest, pool=settings.pool.prometheus)
    print(render_pull(report, args.lake))
    return 0


def render_pull(report: object, lake: Path) -> str:
    """The pull's summary, as the ingest prints its own."""
    from ckptwatch.pull.prometheus import PullReport
    from ckptwatch.safetext import escape_controls

    assert isinstance(report, PullReport)
    span = ", ".join(
        f"{datetime.fromtimestamp(a, tz=UTC):%Y-%m-%dT%H:%M:%SZ} to "
        f"{datetime.fromtimestamp(b, tz=UTC):%Y-%m-%dT%H:%M:%SZ}" for a, b in report.ranges[:3])
    if len(report.ranges) > 3:
        span += f" (+{len(report.ranges) - 3} more windows)"
    rows = report.rows
    lines = [
        f"pull prometheus {escape_controls(report.url)} -> {escape_controls(lake)}  "
        f"({report.elapsed_s:.1f} s)",
        f"  range: {span or 'none'}",
        f"  series: {report.series:,} from {report.hosts:,} instance(s); {report.queries:,} "
        "queries",
        *([f"  pool series: {report.pool_series:,} from {report.pool_hosts:,} instance(s) "
           "([pool.prometheus] rules)"] if report.pool_series else []),
        "  rows written: " + (", ".join(f"{t} {n:,}" for t, n in sorted(rows.items()))
                              or "none")
        + (f" ({report.already:,} already in the lake)" if report.already else ""),
        f"  quarantined: {report.quarantined:,}",
    ]
    lines += [f"  note: {escape_controls(n)}" for n in report.notes]
    return "\n".join(lines)
