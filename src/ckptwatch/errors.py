"""Named exceptions. The CLI and flow edge turns each into one actionable line and an exit code."""

from __future__ import annotations

from typing import Any


class CkptwatchError(Exception):
    """Base class: a failure the user can act on; its message says what, where and what to do."""


class RawDirError(CkptwatchError):
    """The raw input directory is missing, unreadable or not a directory."""


class LakeError(CkptwatchError):
    """The lake cannot be read or written (missing, permissions, disk full, corrupt manifest)."""


class LakeLockedError(LakeError):
    """Another ingest or nightly run holds the lake's lock."""


class RecordError(CkptwatchError):
    """One input record is malformed; it goes to quarantine, the run continues."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


class QueryError(CkptwatchError):
    """A SQL query or view build failed."""


class PlanInputError(CkptwatchError):
    """A planning input, config file or sweep specification is malformed or out of range."""


class ConfigError(CkptwatchError):
    """The settings file is missing, not TOML, or holds an unknown key or a bad value."""


class SinkError(CkptwatchError):
    """An alert sink could not deliver a batch (the batch stays pending for the next run).

    The message is the whole line (the sink's name first, then what it tried and why);
    ``reason`` is the why in a few words ("connection refused", "HTTP 503 Service
    Unavailable") for summaries that count deliveries per sink.
    """

    def __init__(self, sink: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.sink = sink
        self.reason = reason or message.removeprefix(f"{sink}: ")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.sink, str(self), self.reason))


class CollectError(CkptwatchError):
    """The collector cannot run at all (bad output directory, node name or tool list)."""


class SimulationConfigError(CkptwatchError):
    """A scenario generator option is out of range or the output directory is unusable."""


class ModelError(CkptwatchError):
    """The attribution model file is missing, unreadable or built for other features."""


class AlertsUndeliveredError(SinkError):
    """Alert sinks failed in a nightly run whose report was written (``result`` says where)."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__("nightly", message)
        self.result = result

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.result))


class StallNotFoundError(CkptwatchError):
    """The stall asked for is not in the lake (no such job, no stall at that step, no ranks)."""


class NotebookError(CkptwatchError):
    """The post-mortem notebook is missing, a cell failed, or its output cannot be written."""


class MissingExtraError(CkptwatchError):
    """An optional dependency is not installed; the message names the extra that provides it."""


class CorruptInputError(CkptwatchError, OSError):
    """A raw file's bytes cannot be decoded (a corrupt or oversized ``.gz``): quarantined."""


class UsageError(CkptwatchError):
    """A command-line value argparse accepts but the command cannot use (e.g. ``--seeds 9-1``)."""


class PrefectStartError(CkptwatchError):
    """Prefect's local server, or its home directory, could not be set up for a flow command."""


class PullError(CkptwatchError):
    """Prometheus could not be read: unreachable, an HTTP error, a refused or too large query."""


class MetricsFileError(CkptwatchError):
    """The nightly run's metrics file (node_exporter's textfile directory) could not be written."""
