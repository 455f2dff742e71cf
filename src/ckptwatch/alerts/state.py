"""The alert state a lake keeps between runs: ``LAKE/_state/alerts.json``.

It holds each firing alert by :func:`fingerprint` (labels, annotations, ``startsAt``,
``sent_at``, ``ok_count``) and, per sink, the alerts that sink has yet to receive. Written
atomically; the caller holds the lake lock from reading it to writing it.

Version 1 (one ``alertname`` for the tail and the in-flight alert) is read and migrated: a
record raised by an open checkpoint (``basis`` ``inflight``) takes the in-flight alert's name;
it is not sent again for that (its ``sent_at`` stands), and remembers the labels it was sent
under (``replaces``) so that its next delivery also resolves the old one in Alertmanager.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ckptwatch.alerts.headroom import Severity
from ckptwatch.alerts.names import BASIS, INFLIGHT_ALERT, TAIL_ALERT
from ckptwatch.alerts.sinks import Alert
from ckptwatch.errors import LakeError
from ckptwatch.lake.store import Lake, atomic_write_bytes

STATE_FILE = Path("_state") / "alerts.json"
#: The alert state's own lock (not the writers' ``.lock``): the watcher sends while an ingest
#: holds the lake for minutes.
STATE_LOCK = ".alerts.lock"
STATE_VERSION = 2
#: Versions read (older ones are migrated on load).
READ_VERSIONS = (1, 2)


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable id of an alert: a hash of its sorted labels."""
    text = "\x00".join(f"{k}={labels[k]}" for k in sorted(labels))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class AlertRecord:
    """A firing alert as the state remembers it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str
    #: Consecutive evaluations with the tail clear of this alert's level (hysteresis).
    ok_count: int = 0
    #: When this alert was last sent (handed to the sinks).
    sent_at: str | None = None
    #: What raised it: ``tail`` (the completed checkpoints) or ``inflight`` (an open
    #: checkpoint's age). An in-flight alert is lowered as soon as its checkpoint completes.
    basis: str = "tail"
    #: Newest record of the job when last evaluated (ISO): staleness of an alert that a run
    #: no longer assesses (an in-flight alert seen from the nightly run).
    data_at: str | None = None
    #: Labels this alert was last sent under before a rename (state version 1): resolved in
    #: the sinks with its next delivery.
    replaces: dict[str, str] | None = None

    @property
    def fingerprint(self) -> str:
        """The alert's fingerprint."""
        return fingerprint(self.labels)

    @property
    def alertname(self) -> str:
        """The ``alertname`` label."""
        return self.labels.get("alertname", TAIL_ALERT)

    @property
    def key(self) -> tuple[str, str]:
        """(job_id, tier)."""
        return self.labels["job_id"], self.labels["tier"]

    @property
    def slot(self) -> tuple[str, str, str]:
        """(alertname, job_id, tier): one firing alert per slot."""
        return self.alertname, self.labels["job_id"], self.labels["tier"]

    @property
    def severity(self) -> Severity:
        """The severity label."""
        return cast(Severity, self.labels["severity"])

    def to_json(self) -> dict[str, Any]:
        """JSON form for the state file."""
        out = {"status": "firing", "labels": self.labels, "annotations": self.annotations,
               "startsAt": self.starts_at, "sent_at": self.sent_at, "ok_count": self.ok_count,
               "basis": self.basis, "data_at": self.data_at}
        if self.replaces is not None:
            out["replaces"] = self.replaces
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertRecord:
        """Inverse of :meth:`to_json`."""
        replaces = data.get("replaces")
        return cls(labels=dict(data["labels"]), annotations=dict(data["annotations"]),
                   starts_at=str(data["startsAt"]), ok_count=int(data.get("ok_count", 0)),
                   sent_at=data.get("sent_at"), basis=str(data.get("basis", "tail")),
                   data_at=data.get("data_at"),
                   replaces=None if replaces is None else dict(replaces))

    def migrated(self) -> AlertRecord:
        """A version-1 record under its present name: an in-flight one is renamed (and
        remembers the labels it was sent under); a tail one is unchanged."""
        if self.basis != BASIS[INFLIGHT_ALERT] or self.alertname == INFLIGHT_ALERT:
            return self
        return AlertRecord(labels={**self.labels, "alertname": INFLIGHT_ALERT},
                           annotations=dict(self.annotations), starts_at=self.starts_at,
                           ok_count=self.ok_count, sent_at=self.sent_at, basis=self.basis,
                           data_at=self.data_at, replaces=dict(self.labels))


@dataclass
class AlertState:
    """What the previous runs left: firing alerts, and alerts a sink has yet to receive."""

    firing: dict[str, AlertRecord] = field(default_factory=dict)
    #: sink name -> fingerprint -> alert that sink failed to receive (sent again next run).
    pending: dict[str, dict[str, Alert]] = field(default_factory=dict)
    evaluated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form for the state file."""
        return {"version": STATE_VERSION, "evaluated_at": self.evaluated_at,
                "alerts": {fp: r.to_json() for fp, r in sorted(self.firing.items())},
                "pending": self.pending}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertState:
        """Inverse of :meth:`to_json`."""
        version = data.get("version")
        if version not in READ_VERSIONS:
            raise ValueError(f"state version {version!r}, expected one of "
                             f"{', '.join(map(str, READ_VERSIONS))}")
        records = [AlertRecord.from_json(r) for r in data.get("alerts", {}).values()]
        if version == 1:
            records = [r.migrated() for r in records]
        firing = {r.fingerprint: r for r in records}
        return cls(firing=firing, pending={k: dict(v) for k, v in data.get("pending", {}).items()},
                   evaluated_at=data.get("evaluated_at"))


def state_path(lake_root: Path | str) -> Path:
    """``LAKE/_state/alerts.json``."""
    return Lake(lake_root).root / STATE_FILE


def load_state(lake_root: Path | str) -> AlertState:
    """The alert state of a lake (empty when there is none yet)."""
    path = state_path(lake_root)
    try:
        return AlertState.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return AlertState()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LakeError(f"corrupt alert state {path}: {exc}; move it aside to start afresh "
                        "(alerts still firing will be sent again)") from None


def state_lock(lake_root: Path | str, wait_s: float = 600.0) -> AbstractContextManager[None]:
    """Hold from reading the alert state to writing it (``ckptwatch alerts``, the nightly run
    and ``ckptwatch watch`` share it; an ingest does not take it)."""
    return Lake(lake_root).lock(wait_s, name=STATE_LOCK, what="another alert evaluation")


def save_state(lake_root: Path | str, state: AlertState) -> None:
    """Write the alert state atomically."""
    data = json.dumps(state.to_json(), indent=1, sort_keys=True).encode()
    atomic_write_bytes(state_path(lake_root), data)
