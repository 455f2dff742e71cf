"""Timeout headroom and its alerts: evaluation against the job's timeout and the forecast, the
alert state, and the sinks that deliver them (stdout, JSON Lines, webhook, Alertmanager)."""
