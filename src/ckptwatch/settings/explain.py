"""The effective settings, one row per value with where it came from (``ckptwatch config
show``): the tree flattened to dotted names (``alerts.defaults.warning``,
``alerts.jobs."llama-70b".critical``, ``ingest.max_record_bytes``), each value fit for output
(secrets as ``***``, URLs without credentials) and its source: ``default``, ``file``,
``environment ($NAME)`` or ``flag (--name)`` (``Settings.origins``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from ckptwatch.settings.models import Settings
from ckptwatch.settings.secrets import REDACTED, Secret, display_url, redact

DEFAULT = "default"
#: The servers' URLs, which may carry credentials: shown as logs show them (``display_url``).
SERVER_URLS = ("sinks.webhook_url", "sinks.alertmanager_url", "prometheus.url")
#: The source of a detection threshold nobody overrode: the SQL session file.
SESSION_DEFAULT = "default (sql/session.sql)"


@dataclass(frozen=True)
class Effective:
    """One setting as it applies: its dotted name, its value (JSON-safe, secrets redacted) and
    where it came from."""

    name: str
    value: Any
    source: str


def effective(settings: Settings) -> list[Effective]:
    """Every value of ``settings``, in the tree's order, redacted (``Settings.secrets``)."""
    secrets = settings.secrets()
    origins = settings.origins
    out = [Effective("config_file", None if settings.source is None else str(settings.source),
                     origins.get("config_file", DEFAULT))]
    for name, value in _walk(settings, ""):
        out.append(Effective(name, _shown(name, value, settings, secrets),
                             _source(name, origins)))
    return out


def _walk(obj: object, prefix: str) -> Iterator[tuple[str, Any]]:
    assert is_dataclass(obj)
    for f in fields(obj):
        if not prefix and f.name in ("source", "origins"):
            continue
        value = getattr(obj, f.name)
        name = f"{prefix}{f.name}"
        if is_dataclass(value) and not isinstance(value, type):
            yield from _walk(value, f"{name}.")
        elif isinstance(value, Mapping):  # alerts.jobs: job_id -> its settings
            for key in sorted(value):
                yield from _walk(value[key], f'{name}."{key}".')
        else:
            yield name, value


def _shown(name: str, value: Any, settings: Settings, secrets: list[str]) -> Any:
    """``value`` as output may show it."""
    if isinstance(value, Secret):
        return REDACTED
    if name == "sinks.webhook_url" and value and settings.sinks.webhook_url_secret:
        return REDACTED
    if isinstance(value, str) and name in SERVER_URLS:
        value = display_url(value)
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple | list | frozenset | set):  # pool rules: each as a table
        value = [asdict(v) if is_dataclass(v) and not isinstance(v, type) else v
                 for v in value]
    return redact(value, secrets) if isinstance(value, str) else value


def _source(name: str, origins: Mapping[str, str]) -> str:
    if name in origins:
        return origins[name]
    if name.startswith("alerts.jobs."):  # a job's value it does not override: [alerts]'s
        return origins.get(f"alerts.defaults.{name.rsplit('.', 1)[1]}", DEFAULT)
    if name.startswith("detection."):
        return SESSION_DEFAULT
    return DEFAULT
