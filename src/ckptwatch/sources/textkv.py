"""Key/value text helpers shared by the text tool parsers (perfquery, ethtool, nvme-cli, sysfs).

Nothing here knows a tool: it splits lines, reads the numbers tools print (decimal, hex,
thousands separators, ``hi lo`` 128-bit pairs) and normalises labels for table look-ups.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_INT = re.compile(r"[+-]?\d+")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_CAMEL_1 = re.compile(r"(.)([A-Z][a-z]+)")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers (line endings stripped)."""
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield i, line.rstrip("\r\n")


def first_lines(text: str, n: int) -> list[str]:
    """``text.splitlines()[:n]``, without splitting all of a long text (a detector looks at
    the first lines of a whole lctl dump): a head of the text is split, one that holds more
    than ``n`` lines (its last may be cut short, or end in a ``\r`` whose ``\n`` follows)."""
    size = 8192
    while size < len(text):
        head = text[:size].splitlines()
        if len(head) > n:
            return head[:n]
        size *= 8
    return text.splitlines()[:n]


def parse_int(text: str) -> int | None:
    """An integer as tools print it: ``123``, ``-4``, ``0x1f``, ``1,234,567``; else None."""
    s = text.strip()
    try:
        if _INT.fullmatch(s):
            return int(s)
        if _HEX.fullmatch(s):
            return int(s, 16)
        if _GROUPED.fullmatch(s):
            return int(s.replace(",", ""))
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return None
    return None


def parse_number(value: Any) -> float | int | None:
    """A JSON or text number: int, float, numeric string, hex string, ``{"hi","lo"}``; else None.

    Booleans are not numbers. ``{"hi": h, "lo": l}`` is nvme-cli's 128-bit counter.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if value != value else value  # NaN is not a reading
    if isinstance(value, dict) and set(value) >= {"hi", "lo"}:
        hi, lo = parse_number(value["hi"]), parse_number(value["lo"])
        if isinstance(hi, int) and isinstance(lo, int):
            return (hi << 64) + lo
        return None
    if isinstance(value, str):
        s = value.strip()
        as_int = parse_int(s)
        if as_int is not None:
            return as_int
        if _FLOAT.fullmatch(s):
            f = float(s)
            return int(f) if f.is_integer() and "." not in s and "e" not in s.lower() else f
    return None


def snake_case(name: str) -> str:
    """``PortXmitWait`` -> ``port_xmit_wait``; ``VL15Dropped`` -> ``vl15_dropped``."""
    s = _CAMEL_1.sub(r"\1_\2", name)
    s = _CAMEL_2.sub(r"\1_\2", s)
    return re.sub(r"[^0-9a-zA-Z]+", "_", s).strip("_").lower()


def label_key(label: str) -> str:
    """A label normalised for table look-up: lower case, ``_`` as space, one space between words.

    Also drops a leading byte-range tag such as Samsung's ``[015:000]`` and trailing
    separators (``-``, ``:``).
    """
    s = re.sub(r"^\s*\[\d+:\d+\]\s*", "", label)
    s = s.replace("_", " ").lower()
    s = re.sub(r"\s+", " ", s).strip()
    return s.rstrip(" -:").strip()


def shorten(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters for an error message."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
