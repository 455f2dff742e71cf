"""Prefect entry point: the watcher for a bounded time (``prefect.yaml``: ``watch``, hourly).

The flow itself is :mod:`ckptwatch.flows.watch`; this file only names it for deployments.
"""

from __future__ import annotations

from ckptwatch.flows.watch import watch_flow

__all__ = ["watch_flow"]
