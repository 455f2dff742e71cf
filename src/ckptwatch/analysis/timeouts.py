"""Timed-out checkpoints in words: "timed out: 16 of 16 ranks report timeout".

``checkpoint_latency`` decides whether a checkpoint timed out and why (``timeout_reason``,
docs/concepts.md): a rank's record says so (``status``), ranks were still open at the job's
timeout (``unfinished``), or the barrier reached it (``barrier``). The stall table, ``explain``,
the daily report and the post-mortem say it with :func:`why_timed_out`; the mark on a row is
:func:`timeout_mark`.
"""

from __future__ import annotations

#: The values of ``timeout_reason``, in the order the mart tries them.
REASONS = ("status", "unfinished", "barrier")


def why_timed_out(*, reason: str | None, n_timed_out: int = 0, n_ranks: int = 0,
                  timeout_s: float | None = None) -> str:
    """One clause on why a checkpoint timed out (``n_ranks``: every rank known to it, finished
    or not; ``timeout_s``: the job's checkpoint timeout, when known); empty when it did not."""
    if reason is None:
        return ""
    limit = f"the job's {timeout_s:g} s timeout" if timeout_s else "the job's timeout"
    if reason == "status":
        noun = "rank" if n_ranks == 1 else "ranks"
        verb = "reports" if n_timed_out == 1 else "report"
        return f"timed out: {n_timed_out} of {n_ranks} {noun} {verb} timeout"
    if reason == "unfinished":
        if timeout_s is None:
            return ("timed out: ranks still open at the job's timeout (or, for a job without "
                    "one, at the end of the data)")
        return f"timed out: ranks still open at {limit}"
    return f"timed out: the barrier reached {limit}"


def timeout_mark(timed_out: bool, reason: str | None) -> str:
    """``timed out (status)`` for a timed-out checkpoint's row, else empty."""
    if not timed_out:
        return ""
    return f"timed out ({reason})" if reason else "timed out"
