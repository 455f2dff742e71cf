"""The names of ckptwatch's timeout alerts (their ``alertname`` label) and their runbooks.

Two alerts per job and tier, of two different things:

- :data:`TAIL_ALERT`: the across-checkpoint tail of the completed checkpoints is near (or past)
  the job's timeout (``ckptwatch alerts``, the nightly run, the watcher);
- :data:`INFLIGHT_ALERT`: a checkpoint still open is near (or past) it (``ckptwatch watch``);
  the same name as the Prometheus backup rule in deploy/prometheus/ckptwatch-rules.yml, so
  that deploy/alertmanager/ckptwatch-inhibit.yml dedups the pair.
"""

from __future__ import annotations

from urllib.parse import quote

TAIL_ALERT = "CheckpointTailNearTimeout"
INFLIGHT_ALERT = "CheckpointInFlightNearTimeout"
ALERTNAMES = (TAIL_ALERT, INFLIGHT_ALERT)
#: ``basis`` in the alert state: what raised a record.
BASIS = {TAIL_ALERT: "tail", INFLIGHT_ALERT: "inflight"}


def anchor(alertname: str) -> str:
    """The alert's runbook section in docs/alerts.md (its heading is the alert's name)."""
    return alertname.lower()


def alert_url(template: str, alertname: str, job_id: str, tier: str) -> str:
    """A ``runbook_url`` / ``dashboard_url`` template filled in for one alert."""
    return template.format(alertname=quote(alertname, safe=""), anchor=anchor(alertname),
                           job_id=quote(job_id, safe=""), tier=quote(tier, safe=""))
