"""Live mode: follow checkpoint files as they grow and warn while a checkpoint is in flight."""
