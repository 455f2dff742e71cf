"""Capacity planning: the lost-work model of local, pool and tiered checkpointing, sweeps and the
verdict's flip points, calibration from the lake, plots."""
