"""Prefect flow: ``ckptwatch watch`` for a bounded time (``prefect.yaml``: ``watch``).

The primary way to run the watcher is a long-lived service (``deploy/systemd/``). Sites that
run everything through Prefect deploy this flow instead: each run watches for ``minutes`` and
stops cleanly; the next scheduled run resumes from the watcher's state in the lake (file
offsets, open checkpoints, the alert state), so nothing is read or sent twice. One watcher per
lake: a run that overlaps a previous one fails at once saying so.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from prefect import flow, get_run_logger

from ckptwatch.live.watch import Watcher
from ckptwatch.safetext import escape_controls
from ckptwatch.settings import load_settings


@flow(name="watch", flow_run_name="watch {raw_dir}")
def watch_flow(raw_dir: str, lake_root: str, minutes: float = 59.0, interval_s: float = 10.0,
               metrics_file: str | None = None, metrics_port: int | None = None,
               config: str | None = None) -> dict[str, int]:
    """Watch ``raw_dir``'s checkpoints for ``minutes``; returns scans, alerts sent, failures."""
    logger = get_run_logger()
    settings = load_settings(Path(config) if config else None)
    options = replace(settings.watch, interval_s=interval_s,
                      metrics_file=Path(metrics_file) if metrics_file else None,
                      metrics_port=metrics_port)
    watcher = Watcher(Path(raw_dir), Path(lake_root), settings, options)
    stop = threading.Event()
    timer = threading.Timer(minutes * 60.0, stop.set)
    # "sent": alerts of scans where every sink took them; else counted as undelivered
    counts = {"scans": 0, "alerts_sent": 0, "alerts_undelivered": 0, "sink_failures": 0}
    watcher.start()
    timer.start()
    try:
        while not stop.is_set():
            report = watcher.scan()
            counts["scans"] += 1
            if report.alerts is not None:
                key = "alerts_sent" if report.alerts.delivered else "alerts_undelivered"
                counts[key] += len(report.alerts.alerts)
                counts["sink_failures"] += len(report.alerts.failures)
                for alert in report.alerts.alerts:
                    logger.info("%s", escape_controls(
                        f"{alert['status']}: {alert['annotations'].get('summary', '')}"))
            stop.wait(interval_s)
    finally:
        timer.cancel()
        watcher.stop()
    logger.info("watched %s for %.0f min: %d scans, %d alert(s) sent, %d not taken by every "
                "sink (%d sink failure(s))", escape_controls(raw_dir), minutes, counts["scans"],
                counts["alerts_sent"], counts["alerts_undelivered"], counts["sink_failures"])
    return counts
