"""`ckptwatch config show [--config FILE] [--format table|json]`: the effective settings, each
with its source (default, file, environment, flag), secrets redacted."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``config`` command (``config show``)."""
    p = sub.add_parser(
        "config", help="show the effective settings and where each came from",
        description="The settings every command runs with: the config file (--config FILE, "
        "else env CKPTWATCH_CONFIG, else none), then the CKPTWATCH_* variables, over the "
        "built-in defaults.")
    commands = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True,
                                help="show: print the effective settings")
    show = commands.add_parser(
        "show", help="print every setting, its value and its source",
        description="Print every setting (dotted name, as in the config file's tables), its "
        "effective value and its source: default, file, environment ($NAME) or flag "
        "(--name). Secrets (tokens, basic auth, a secret webhook URL) are shown as ***, URLs "
        "without credentials or query. A bad file or variable is one line and exit 2.")
    show.add_argument("--config", type=Path, default=None, metavar="FILE",
                      help="settings file (TOML; default: env CKPTWATCH_CONFIG, else built-in "
                      "defaults); see examples/ckptwatch.toml")
    show.add_argument("--format", choices=("table", "json"), default="table",
                      help="table: one line per setting; json: an object of name -> {value, "
                      "source} (default: %(default)s)")
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    """Print the effective settings; exit 0 (a bad setting raises ``ConfigError``: exit 2)."""
    from ckptwatch.settings import load_settings
    from ckptwatch.settings.explain import effective

    rows = effective(load_settings(args.config))
    if args.format == "json":
        print(json.dumps({r.name: {"value": r.value, "source": r.source} for r in rows},
                         indent=2))
    else:
        print(render_settings([(r.name, r.value, r.source) for r in rows]))
    return 0


def render_settings(rows: list[tuple[str, object, str]]) -> str:
    """Aligned columns setting / value / source; text escaped (control characters)."""
    from ckptwatch.safetext import escape_controls

    def text(value: object) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list | dict):
            return escape_controls(json.dumps(value))
        return escape_controls(value)

    table = [("setting", "value", "source"), *((text(n), text(v), text(s)) for n, v, s in rows)]
    widths = [max(len(row[k]) for row in table) for k in range(2)]
    return "\n".join(f"{n:<{widths[0]}}  {v:<{widths[1]}}  {s}".rstrip() for n, v, s in table)
