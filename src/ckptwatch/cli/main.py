"""`ckptwatch` entry point: collects the commands of this package and runs one.

Each module in ``ckptwatch.cli`` (other than this one) defines ``register(subparsers)`` that adds
its sub-command and sets ``func`` (``argparse.Namespace -> int`` exit code). Errors derived from
``CkptwatchError`` become one line on stderr and exit code 2.

A command whose name is its module's (``sql`` -> ``ckptwatch.cli.sql``, ``slow-hosts`` ->
``slow_hosts``) imports only that module: ``ckptwatch sql …`` does not pay for importing every
other command. ``--help``, no command and the commands of another module's (``train-model``,
``explain``) import them all.
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
from ckptwatch.settings.prefect_env import use_cache_for_tool_state


def _command_modules(argv: Sequence[str] | None = None) -> list[str]:
    """The ``ckptwatch.cli`` modules to register: only the command's own module when the first
    argument names one, else every command module (sorted by name)."""
    import ckptwatch.cli as pkg

    names = sorted(info.name for info in pkgutil.iter_modules(pkg.__path__)
                   if info.name != "main" and not info.name.startswith("_"))
    first = next(iter(argv or ()), "")
    own = first.replace("-", "_")
    if first and not first.startswith("-") and own in names:
        return [own]
    return names


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser: every registered command, or (``argv`` naming a command of its
    own module) only that command, the one ``argv`` runs."""
    parser = argparse.ArgumentParser(
        prog="ckptwatch",
        description="Checkpoint tail-stall telemetry: ingest, SQL, stalls, alerts, planning.",
    )
    parser.add_argument("--version", action="version", version=f"ckptwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _command_modules(argv):
        module = importlib.import_module(f"ckptwatch.cli.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    if argv is None:
        argv = sys.argv[1:]
    # matplotlib's and IPython's state in ckptwatch's cache, not the home (before either is
    # imported; the processes a command starts inherit it)
    use_cache_for_tool_state()
    parser = build_parser(argv)
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
