"""Where a long run says how far it got: a hook the command that shows it sets.

The nightly's steps (``flows.run.StepClock``) and the ingest flow's batches call
:func:`progress`; ``ckptwatch.cli._progress.Progress.hook`` points :data:`progress_hook` at
the command's progress line for the run. Nothing is shown when no command set it (a Prefect
worker, a test). A module attribute, not a flow parameter: Prefect records a flow run's
parameters, and a callable is not a value. Imports nothing: the flows import it at no cost.
"""

from __future__ import annotations

from collections.abc import Callable

#: Told ``(stage, detail)``: ``detail`` empty when a stage starts, ``"done in N s"`` when it
#: ends, a count as it goes (``"12/40 files"``). None: nobody is watching.
progress_hook: Callable[[str, str], None] | None = None


def progress(stage: str, detail: str = "") -> None:
    """Tell :data:`progress_hook` (if set) how ``stage`` is going."""
    hook = progress_hook
    if hook is not None:
        hook(stage, detail)
