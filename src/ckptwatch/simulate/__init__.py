"""Simulated clusters in the real raw formats: the scenario, its incidents, the telemetry they
leave, and the evaluation of detection and attribution against the scenario's labels."""
