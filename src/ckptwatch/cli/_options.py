"""Options several commands share, defined once (``_``: not a command of its own)."""

from __future__ import annotations

import argparse


def add_lock_wait(p: argparse.ArgumentParser) -> None:
    """``--lock-wait SECONDS``: how long to wait for another run's lake lock."""
    p.add_argument("--lock-wait", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for another run holding the lake lock "
                   "(default: %(default)s)")


def add_dask(p: argparse.ArgumentParser, what: str) -> None:
    """``--dask [ADDRESS]``: run ``what`` on a Dask cluster (local when no address)."""
    p.add_argument("--dask", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help=f"{what} (needs prefect-dask: the [dask] extra): without ADDRESS a "
                   "local cluster of 2 worker processes, with ADDRESS (tcp://host:8786) that "
                   "scheduler; its workers must see RAW_DIR and the lake at the same paths")


def add_verbose(p: argparse.ArgumentParser) -> None:
    """``--verbose``: Prefect's own log too (every command that starts Prefect has it)."""
    from ckptwatch.flows.local_prefect import VERBOSE_HELP

    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)


def positive_float(text: str) -> float:
    """An argparse ``type``: a number above 0 (seconds, intervals)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def tcp_port(text: str) -> int:
    """An argparse ``type``: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {text}")
    return value
