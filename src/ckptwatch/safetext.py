"""Text from the data made safe to print, to paste into a shell and to name a file with.

Values in the lake (job ids, node and target names, file names, reasons) come from files that
anyone may have written. Before one reaches a terminal, a shell or a path:

- :func:`escape_controls`: control characters (C0 with ESC, BEL, TAB and newline; DEL; C1)
  become visible escapes (``\\x1b``), so a value cannot clear the screen, set the window title
  or forge a line. Printable text, backslashes included, is left alone, so escaping twice gives
  the same text as escaping once;
- :func:`escape_lines`: the same for multi-line text whose newlines are layout;
- :func:`escape_json_controls`: JSON text with DEL and C1 shown as ``\\u00XX`` as well (every
  JSON writer escapes C0; some leave DEL and C1 raw);
- :func:`shell_command`: a command line for a person to copy, each argument shell-quoted;
- :func:`safe_file_part`: a piece of a file name (only ``[A-Za-z0-9._-]``, no leading dot,
  bounded length, distinct inputs kept distinct by a short hash).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
#: C0 (U+0000-U+001F), DEL (U+007F) and C1 (U+0080-U+009F) -> their escapes.
_CONTROLS: dict[int, str] = {
    cp: _NAMED.get(chr(cp), f"\\x{cp:02x}")
    for cp in (*range(0x00, 0x20), *range(0x7F, 0xA0))
}
#: The characters :func:`escape_controls` escapes, as a regular expression (Python and Rust
#: syntax: polars' ``str.contains`` takes it too).
CONTROL_PATTERN = r"[\x00-\x1f\x7f-\x9f]"
_C1_RE = re.compile(r"[\x7f-\x9f]")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")

#: Longest :func:`safe_file_part` (characters), hash included.
MAX_FILE_PART = 80


def escape_controls(value: object) -> str:
    """``str(value)`` with every control character shown as an escape (``\\x1b``, ``\\n``)."""
    return str(value).translate(_CONTROLS)


def escape_lines(text: str) -> str:
    """Multi-line ``text`` with its newlines kept (layout) and every other control character
    escaped, line by line."""
    return "\n".join(escape_controls(line) for line in text.split("\n"))


def escape_json_controls(text: str) -> str:
    """JSON ``text`` with every raw DEL or C1 character written as ``\\u00XX``: still the same
    JSON value (such characters can only stand inside strings), safe on a terminal."""
    return _C1_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shell_command(args: Iterable[str | Path | int]) -> str:
    """A command line to copy into a POSIX shell: each argument quoted where it needs it
    (``shlex.join``), so a value holding ``;``, ``<``, ``>``, ``$`` or a space stays one
    argument. Print it through :func:`escape_controls` (a control character in an argument
    is shown, not sent to the terminal)."""
    return shlex.join(str(a) for a in args)


def safe_file_part(text: str, max_chars: int = MAX_FILE_PART) -> str:
    """``text`` as a piece of a file name: characters outside ``[A-Za-z0-9._-]`` become
    ``_``, leading dots are dropped (no hidden file, no ``..``) and it is at most
    ``max_chars`` long. When anything had to change, a short hash of ``text`` is appended so
    that two different values do not name the same file. Never empty, never a path."""
    safe = _UNSAFE_FILE_CHARS.sub("_", text).lstrip(".")
    if safe == text and 0 < len(safe) <= max_chars:
        return safe
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[:max(0, max_chars - 9)]}-{digest}".lstrip("-") if safe else digest
