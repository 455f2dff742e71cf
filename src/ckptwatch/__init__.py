"""ckptwatch: checkpoint tail-stall telemetry analysis for ML training clusters."""

__version__ = "0.1.0"
