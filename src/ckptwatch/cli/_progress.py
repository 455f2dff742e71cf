"""Progress of a long command on stderr: one line per stage.

On a terminal the stages share one line, rewritten as they go and ticking the seconds while a
stage runs (``ckptwatch nightly: [12 s] views…``); in a log (stderr not a terminal) each
stage is one plain line, written when it starts and when it ends, so a journal shows where a
run was when it stopped. ``quiet`` writes nothing. No dependency beyond the standard library.

The nightly's steps and the ingest flow's batches report through
:data:`ckptwatch.progress.progress_hook`, which :meth:`Progress.hook` sets for the block.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

#: Seconds between two rewrites of the terminal line while a stage runs.
TICK_S = 1.0


class Progress:
    """The stages of command ``command`` on ``stream`` (default: stderr).

    ``tty``: whether ``stream`` is a terminal (default: asked of it). ``total``: the units
    of work the command will count (scenarios), when known. Use as a context manager
    (the terminal's line is ticked while inside and cleared at the end) or call :meth:`stage`
    and :meth:`close` directly.
    """

    def __init__(self, command: str, stream: TextIO | None = None, *, tty: bool | None = None,
                 quiet: bool = False, total: int = 0) -> None:
        self.command = command
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.tty = _isatty(self.stream) if tty is None else tty
        self.quiet = quiet
        self.t0 = time.monotonic()
        self._text = ""
        self._shown = False  # a terminal line is on screen, to clear before other output
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def stage(self, name: str, detail: str = "") -> None:
        """Stage ``name`` started (``detail`` empty) or moved on (``detail``: ``"12/40
        files"``, ``"done in 3.1 s"``)."""
        if self.quiet:
            return
        text = f"{name}: {detail}" if detail else f"{name}…"
        with self._lock:
            self._text = text
            if self.tty:
                self._draw()
            else:
                # written, not print()ed: a flow with log_prints turns print() into its log
                self.stream.write(f"ckptwatch {self.command}: [{self._elapsed()}] {text}\n")
                self.stream.flush()

    def count(self, name: str, done: int, total: int, unit: str) -> None:
        """``done`` of ``total`` ``unit`` of stage ``name``: every one on a terminal, about a
        tenth at a time in a log (a line per chunk would bury the rest)."""
        step = max(1, total // 10)
        if self.tty or done == total or done % step == 0:
            self.stage(name, f"{done}/{total} {unit}")

    def clear(self) -> None:
        """Take the terminal line away (before other output on the same stream)."""
        with self._lock:
            if self.tty and self._shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._shown = False

    def close(self) -> None:
        """Stop ticking and clear the terminal line."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        self.clear()

    def __enter__(self) -> Progress:
        if self.tty and not self.quiet:
            self._ticker = threading.Thread(target=self._tick, name="ckptwatch-progress",
                                            daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def hook(self) -> Iterator[None]:
        """Route the runs' progress (``ckptwatch.progress.progress_hook``) here for the
        block."""
        from ckptwatch import progress

        before = progress.progress_hook
        progress.progress_hook = self.stage
        try:
            yield
        finally:
            progress.progress_hook = before

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.t0:.0f} s"

    def _draw(self) -> None:
        line = f"ckptwatch {self.command}: [{self._elapsed()}] {self._text}"
        self.stream.write("\r\033[K" + line[:200])
        self.stream.flush()
        self._shown = True

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                if self._text:
                    self._draw()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
