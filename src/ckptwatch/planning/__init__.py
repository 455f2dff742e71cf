"""Capacity planning: the lost-work model of local, pool and tiered checkpointing, the yearly bill,
barrier-time tails and timeouts, failure rates from interruption logs, sweeps and the verdict's
flip points (one and two parameters), calibration from the lake, plots."""
