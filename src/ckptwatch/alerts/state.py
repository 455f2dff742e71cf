"""The alert state a lake keeps between runs: ``LAKE/_state/alerts.json``.

It holds each firing alert by :func:`fingerprint` (labels, annotations, ``startsAt``,
``sent_at``, ``ok_count``) and, per sink, the alerts that sink has yet to receive. Written
atomically; the caller holds the lake lock from reading it to writing it.
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
from ckptwatch.alerts.sinks import Alert
from ckptwatch.errors import LakeError
from ckptwatch.lake.store import Lake, atomic_write_bytes

STATE_FILE = Path("_state") / "alerts.json"
#: The alert state's own lock (not the writers' ``.lock``): the watcher sends while an ingest
#: holds the lake for minutes.
STATE_LOCK = ".alerts.lock"
STATE_VERSION = 1


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

    @property
    def fingerprint(self) -> str:
        """The alert's fingerprint."""
        return fingerprint(self.labels)

    @property
    def key(self) -> tuple[str, str]:
        """(job_id, tier): one alert of this name per key."""
        return self.labels["job_id"], self.labels["tier"]

    @property
    def severity(self) -> Severity:
        """The severity label."""
        return cast(Severity, self.labels["severity"])

    def to_json(self) -> dict[str, Any]:
        """JSON form for the state file."""
        return {"status": "firing", "labels": self.labels, "annotations": self.annotations,
                "startsAt": self.starts_at, "sent_at": self.sent_at, "ok_count": self.ok_count,
                "basis": self.basis}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertRecord:
        """Inverse of :meth:`to_json`."""
        return cls(labels=dict(data["labels"]), annotations=dict(data["annotations"]),
                   starts_at=str(data["startsAt"]), ok_count=int(data.get("ok_count", 0)),
                   sent_at=data.get("sent_at"), basis=str(data.get("basis", "tail")))


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
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state version {data.get('version')!r}, expected {STATE_VERSION}")
        firing = {fp: AlertRecord.from_json(r) for fp, r in data.get("alerts", {}).items()}
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
