"""`ckptwatch` entry point: collects the commands of this package and runs one.

Each module in ``ckptwatch.cli`` (other than this one) defines ``register(subparsers)`` that adds
its sub-command and sets ``func`` (``argparse.Namespace -> int`` exit code). Errors derived from
``CkptwatchError`` become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from ckptwatch import __version__
from ckptwatch.errors import CkptwatchError
from ckptwatch.safetext import escape_controls


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="ckptwatch",
        description="Checkpoint tail-stall telemetry: ingest, SQL, stalls, alerts, planning.",
    )
    parser.add_argument("--version", action="version", version=f"ckptwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import ckptwatch.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name == "main" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ckptwatch.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except CkptwatchError as exc:
        print(f"ckptwatch {args.command}: error: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `ckptwatch sql … | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"ckptwatch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
