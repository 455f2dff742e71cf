"""Training code imports the recorder by its documented names; they are the collect/ modules."""

from __future__ import annotations

import subprocess
import sys


def test_recorder_names_are_the_collect_modules() -> None:
    import ckptwatch.collect.adapters
    import ckptwatch.collect.recorder
    import ckptwatch.recorder
    import ckptwatch.recorder_adapters
    from ckptwatch.recorder import CheckpointRecorder
    from ckptwatch.recorder_adapters import DCPCheckpointHandler

    assert ckptwatch.recorder is ckptwatch.collect.recorder
    assert ckptwatch.recorder_adapters is ckptwatch.collect.adapters
    assert CheckpointRecorder.__module__ == "ckptwatch.collect.recorder"
    assert DCPCheckpointHandler.__module__ == "ckptwatch.collect.adapters"


def test_adapters_run_as_a_module_by_their_old_name() -> None:
    out = subprocess.run([sys.executable, "-m", "ckptwatch.recorder_adapters", "megatron",
                          "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--job-id" in out.stdout
