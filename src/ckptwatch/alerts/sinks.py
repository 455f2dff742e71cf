"""Alert sinks: stdout, a JSON Lines file, a generic webhook, Alertmanager's v2 API.

An alert is a dict in Alertmanager's format (``labels``, ``annotations``, ``startsAt``,
``endsAt``) plus ``status`` (``firing``/``resolved``) and ``fingerprint``. Every sink takes a
batch and either delivers all of it or raises :class:`SinkError`; :func:`deliver` runs each
configured sink, keeps what a failing sink did not get for the next run, never lets one
sink's failure stop another, and counts what each sink took (:class:`SinkResult`);
:func:`delivery_summary` is the one line every command prints of those counts.

HTTP goes through ``urllib.request`` (no extra dependency): JSON body, a timeout, one retry on
a connection error, a timeout or a 5xx/429 answer. Errors name the URL without credentials or
query string, and every secret of the settings is redacted from them.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO
from urllib.parse import urlsplit

from ckptwatch import __version__
from ckptwatch.errors import SinkError
from ckptwatch.httpclient import RETRY_BACKOFF_S, basic_auth, redact_cut, split_userinfo
from ckptwatch.settings import Secret, Settings, display_url, redact

log = logging.getLogger(__name__)

#: The fields of Alertmanager's ``postableAlert``; everything else is ours.
ALERTMANAGER_FIELDS = ("labels", "annotations", "startsAt", "endsAt", "generatorURL")
ALERTMANAGER_PATH = "/api/v2/alerts"

Alert = dict[str, Any]
#: An alert's ``status``: ``resolved`` once the condition has cleared.
AlertStatus = Literal["firing", "resolved"]


class Sink(Protocol):
    """Somewhere alerts go. ``name`` keys the pending queue in the alert state."""

    name: str

    def send(self, alerts: Sequence[Alert]) -> None:
        """Deliver every alert of the batch, or raise :class:`SinkError`."""
        ...


# -- rendering --------------------------------------------------------------------------------


def render_alert(alert: Mapping[str, Any]) -> str:
    """An alert as a person reads it (the stdout sink, the CLI's table format)."""
    labels = alert.get("labels", {})
    ann = alert.get("annotations", {})
    status = str(alert.get("status", "firing")).upper()
    head = (f"[{status}:{labels.get('severity', '?')}] {labels.get('alertname', '?')} "
            f"job_id={labels.get('job_id', '?')} tier={labels.get('tier', '?')}")
    lines = [head, f"  {ann.get('summary', '')}"]
    if "inflight_s" in ann:  # an open checkpoint (ckptwatch watch)
        left = str(ann.get("remaining_s", "?"))
        left = f"{left.removeprefix('-')} s past it" if left.startswith("-") else f"{left} s left"
        lines.append(f"  open {ann['inflight_s']} s | timeout {ann.get('timeout_s', '?')} s | "
                     f"{left} | ranks started "
                     f"{ann.get('ranks_started', '?')}, finished {ann.get('ranks_finished', '?')}"
                     f", open {ann.get('ranks_open', '?')}")
        if ann.get("evidence"):
            lines.append(f"  live evidence: {ann['evidence']}")
        if ann.get("tail"):
            lines.append(f"  tail of the completed checkpoints: {ann['tail']}")
    nums = [f"{k.removesuffix('_s')} {ann[k]} s" for k in
            ("p50_s", "p99_s", "max_s", "timeout_s", "headroom_s") if k in ann]
    if nums and "inflight_s" not in ann:
        lines.append("  " + " | ".join(nums))
    if ann.get("forecast"):
        lines.append(f"  forecast: {ann['forecast']}")
    if ann.get("worst_step"):
        lines.append(f"  worst checkpoint in the window: step {ann['worst_step']}")
    if ann.get("top_cause"):
        lines.append(f"  top cause of the worst recent stall: {ann['top_cause']}")
    span = f"since {alert.get('startsAt', '?')}"
    if status == "RESOLVED":
        span += f", resolved {alert.get('endsAt', '?')}"
    lines.append(f"  {span}  fingerprint {alert.get('fingerprint', '?')}")
    return "\n".join(lines)


# -- local sinks ------------------------------------------------------------------------------


class StdoutSink:
    """Print each alert, human-readable, to a stream (default: stdout at send time).

    Written to the stream, not through ``print``: inside a Prefect flow with ``log_prints``
    (the nightly flow) ``print`` goes to the run's log, and the alerts would not reach stdout.
    """

    name = "stdout"

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def send(self, alerts: Sequence[Alert]) -> None:
        """Print the batch."""
        out = self.stream or sys.stdout
        try:
            for a in alerts:
                out.write(render_alert(a) + "\n")
                out.flush()
        except (OSError, ValueError) as exc:  # a closed pipe or stream
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise SinkError(self.name, f"{self.name}: cannot write alerts: {reason}",
                            reason) from None


class JsonlSink:
    """Append each alert as one JSON object a line; fsync before returning."""

    name = "jsonl"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def send(self, alerts: Sequence[Alert]) -> None:
        """Append the batch."""
        text = "".join(json.dumps(a, sort_keys=True) + "\n" for a in alerts)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise SinkError(self.name, f"{self.name}: cannot append alerts to JSON Lines file "
                            f"{self.path}: {reason}", reason) from None


# -- HTTP -------------------------------------------------------------------------------------


def post_json(url: str, body: Any, *, headers: Mapping[str, str], timeout_s: float,
              sink: str, secrets: Sequence[str], shown_url: str | None = None,
              retries: int = 1) -> None:
    """POST ``body`` as JSON; retry ``retries`` times on connection errors, timeouts, 5xx, 429.

    Raises :class:`SinkError` naming the sink and the URL as ``shown_url`` (default: the URL
    without credentials or query), with every secret redacted from the reason.
    """
    data = json.dumps(body).encode()
    target, userinfo = split_userinfo(url)
    hdrs = {"Content-Type": "application/json", "User-Agent": f"ckptwatch/{__version__}",
            **headers}
    if userinfo and "Authorization" not in hdrs:
        hdrs["Authorization"] = basic_auth(userinfo)
    shown = shown_url or display_url(url)
    reason = short = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(RETRY_BACKOFF_S)
        req = urllib.request.Request(target, data=data, headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                resp.read()
            return
        except urllib.error.HTTPError as exc:
            excerpt = redact_cut(_excerpt(exc), secrets)
            short = f"HTTP {exc.code} {exc.reason}"
            reason = short + (f": {excerpt}" if excerpt else "")
            if exc.code < 500 and exc.code != 429:
                break  # the request is wrong (auth, schema): retrying will not help
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            inner = getattr(exc, "reason", exc)
            reason = str(inner) or type(inner).__name__
            short = _short_reason(inner)
    tries = attempt + 1
    msg = (f"{sink}: POST {shown} failed ({tries} attempt{'s' if tries > 1 else ''}): "
           f"{reason}")
    raise SinkError(sink, redact(msg, secrets), redact(short, secrets))


def _short_reason(exc: object) -> str:
    """A connection error in a few words: "connection refused", "timed out"."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[:1].lower() + text[1:]


def _excerpt(exc: urllib.error.HTTPError, limit: int = 300) -> str:
    try:
        text = exc.read(limit).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""
    return " ".join(text.split())[:limit]


@dataclass
class WebhookSink:
    """POST the JSON array of alerts to a URL, optionally with a bearer token."""

    url: str
    token: Secret | None = None
    timeout_s: float = 10.0
    url_is_secret: bool = False
    secrets: Sequence[str] = field(default_factory=list)
    name: str = "webhook"

    def shown_url(self) -> str:
        """The URL as logs show it."""
        if self.url_is_secret:
            parts = urlsplit(self.url)
            return f"{parts.scheme}://{parts.hostname}/… (secret URL)"
        return display_url(self.url)

    def send(self, alerts: Sequence[Alert]) -> None:
        """POST the batch."""
        headers = {"Authorization": f"Bearer {self.token.reveal()}"} if self.token else {}
        post_json(self.url, list(alerts), headers=headers, timeout_s=self.timeout_s,
                  sink=self.name, secrets=self._all_secrets(), shown_url=self.shown_url())

    def _all_secrets(self) -> list[str]:
        out = list(self.secrets)
        if self.token:
            out.append(self.token.reveal())
        if self.url_is_secret:
            # the whole URL, and its path's long segments (a token in the path is echoed back
            # in request lines and error bodies without scheme or host)
            out.append(self.url)
            path = urlsplit(self.url).path
            out += [path] + [seg for seg in path.split("/") if len(seg) >= 8]
        return out


@dataclass
class AlertmanagerSink:
    """POST alerts to Alertmanager's ``/api/v2/alerts`` (basic auth or bearer token)."""

    url: str
    basic_auth: Secret | None = None
    token: Secret | None = None
    timeout_s: float = 10.0
    secrets: Sequence[str] = field(default_factory=list)
    name: str = "alertmanager"

    def endpoint(self) -> str:
        """The full URL alerts are POSTed to."""
        base = self.url.rstrip("/")
        return base if base.endswith(ALERTMANAGER_PATH) else base + ALERTMANAGER_PATH

    def send(self, alerts: Sequence[Alert]) -> None:
        """POST the batch (only Alertmanager's own fields)."""
        headers: dict[str, str] = {}
        secrets = list(self.secrets)
        if self.basic_auth:
            headers["Authorization"] = basic_auth(self.basic_auth.reveal())
            secrets.append(self.basic_auth.reveal())
        elif self.token:
            headers["Authorization"] = f"Bearer {self.token.reveal()}"
            secrets.append(self.token.reveal())
        body = [{k: a[k] for k in ALERTMANAGER_FIELDS if k in a} for a in alerts]
        post_json(self.endpoint(), body, headers=headers, timeout_s=self.timeout_s,
                  sink=self.name, secrets=secrets)


# -- wiring -----------------------------------------------------------------------------------


def build_sinks(settings: Settings, *, stdout: bool | None = None,
                stream: TextIO | None = None) -> list[Sink]:
    """The sinks the settings configure (``stdout`` overrides ``[sinks] stdout``)."""
    s = settings.sinks
    secrets = settings.secrets()
    sinks: list[Sink] = []
    if s.stdout if stdout is None else stdout:
        sinks.append(StdoutSink(stream))
    if s.jsonl is not None:
        sinks.append(JsonlSink(s.jsonl))
    if s.webhook_url:
        sinks.append(WebhookSink(s.webhook_url, s.webhook_token, s.timeout_s,
                                 url_is_secret=s.webhook_url_secret, secrets=secrets))
    if s.alertmanager_url:
        sinks.append(AlertmanagerSink(s.alertmanager_url, s.alertmanager_basic_auth,
                                      s.alertmanager_token, s.timeout_s, secrets=secrets))
    return sinks


@dataclass(frozen=True)
class SinkResult:
    """One sink's part of a round of sends. A sink takes its batch whole or not at all, so
    ``delivered`` is ``attempted`` or 0."""

    sink: str
    #: Alerts handed to the sink: the round's due alerts and its own pending ones.
    attempted: int
    #: Alerts the sink took.
    delivered: int
    #: Why it took none, in a few words ("connection refused"); None: it took them all.
    reason: str | None = None
    #: The failure's whole line (sink, URL without credentials, reason); None: no failure.
    error: str | None = None

    @property
    def failed(self) -> int:
        """Alerts the sink did not take (kept pending for the next run)."""
        return self.attempted - self.delivered

    def to_dict(self) -> dict[str, Any]:
        """The per-sink row of the nightly result and ``report.json``."""
        return {"sink": self.sink, "attempted": self.attempted, "delivered": self.delivered,
                "failed": self.failed, "reason": self.reason, "error": self.error}


def delivery_summary(n_alerts: int, results: Sequence[SinkResult], *, sent: bool = True,
                     sinks: Sequence[str] = (), noun: str = "", n_resolved: int = 0) -> str:
    """A round of sends in one line, counted per sink (the words every command prints).

    "3 sent to stdout, jsonl" when every sink took every alert handed to it; per-sink counts
    when they differ (a sink also retried alerts it missed before); a failure makes the alerts
    "due", not "sent": "3 due: 3 delivered to stdout, 0 of 3 to webhook (connection refused;
    kept for the next run)". ``n_alerts``: the round's alerts (due and retried). A dry run
    (``sent`` False) names the ``sinks`` a sending run would deliver them to. ``noun`` follows
    the count (" alert(s)"). ``n_resolved``: how many of them are resolutions, said beside the
    count when there are any ("3 (1 firing, 2 resolved) due"): a stale lake's round is all
    resolutions, no page.
    """
    count = f"{n_alerts}{noun}" + (f" ({n_alerts - n_resolved} firing, {n_resolved} resolved)"
                                   if n_resolved else "")
    if not sent:
        if not n_alerts:
            return f"{count} due (dry run: nothing sent)"
        where = f"; a sending run delivers them to {', '.join(sinks)}" if sinks else ""
        return f"{count} due, nothing sent (dry run){where}"
    tried = [r for r in results if r.attempted]
    if not tried:
        return f"{count} due, no sink to send them to" if n_alerts else f"{count} due"
    if all(r.reason is None for r in tried):
        if all(r.delivered == n_alerts for r in tried):
            return f"{count} sent to {', '.join(r.sink for r in tried)}"
        return f"{count} sent: " + ", ".join(f"{r.delivered} to {r.sink}" for r in tried)
    parts: list[str] = []
    for r in tried:
        verb = "" if parts else "delivered "
        if r.reason is None:
            parts.append(f"{r.delivered} {verb}to {r.sink}")
        else:
            parts.append(f"{r.delivered} of {r.attempted} {verb}to {r.sink} "
                         f"({r.reason}; kept for the next run)")
    return f"{count} due: " + ", ".join(parts)


@dataclass
class Delivery:
    """What one round of sends did: the alerts handed to sinks, what is left, what failed."""

    #: Every alert this round tried to deliver (due, then pending retries), in order.
    alerts: list[Alert]
    #: sink name -> fingerprint -> alert still to deliver to that sink next run.
    pending: dict[str, dict[str, Alert]]
    failures: list[SinkError]
    #: One per sink, in the sinks' order (a sink with nothing to send: attempted 0).
    results: list[SinkResult] = field(default_factory=list)

    def summary(self, noun: str = "") -> str:
        """:func:`delivery_summary` of this round."""
        return delivery_summary(len(self.alerts), self.results, noun=noun)


def deliver(due: Sequence[Alert], sinks: Sequence[Sink],
            pending: Mapping[str, Mapping[str, Alert]] | None = None) -> Delivery:
    """Send each sink its pending alerts from earlier runs plus ``due``; keep what failed.

    For one fingerprint only the newest alert is sent (a resolution supersedes a firing alert
    that never arrived). A failing sink keeps its whole batch pending; other sinks go on.
    """
    pending = pending or {}
    sent: dict[tuple[str, str], Alert] = {}
    for a in due:
        sent[(a["fingerprint"], a["status"])] = a
    new_pending: dict[str, dict[str, Alert]] = {}
    failures: list[SinkError] = []
    results: list[SinkResult] = []
    for sink in sinks:
        batch: dict[str, Alert] = dict(pending.get(sink.name, {}))
        for a in due:
            batch.pop(a["fingerprint"], None)
            batch[a["fingerprint"]] = a
        if not batch:
            results.append(SinkResult(sink.name, 0, 0))
            continue
        for a in batch.values():
            sent.setdefault((a["fingerprint"], a["status"]), a)
        try:
            sink.send(list(batch.values()))
            log.info("alerts: %d sent to %s", len(batch), sink.name)
            results.append(SinkResult(sink.name, len(batch), len(batch)))
        except SinkError as exc:
            # info, not warning: every caller reports the failure itself, in one line
            log.info("alerts: %s (kept %d alert(s) for the next run)", exc, len(batch))
            failures.append(exc)
            new_pending[sink.name] = batch
            results.append(SinkResult(sink.name, len(batch), 0, exc.reason, str(exc)))
    return Delivery(alerts=list(sent.values()), pending=new_pending, failures=failures,
                    results=results)
