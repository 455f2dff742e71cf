"""``read_json_line``: orjson's reading where it is ``json``'s, ``json``'s everywhere else."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import LONG_DIGITS, load_json, read_json_line

_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
              st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12)


def _read(line: str, read: Any) -> Any:
    try:
        return ("ok", read(line))
    except RecordError as exc:
        return ("reject", exc.reason)


def _long_digits(line: str) -> Any:
    return lambda: re.search(LONG_DIGITS, line) is not None


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES, st.booleans(), st.sampled_from(["", " ", "\r", "x", "}", "\ufeff"]))
def test_read_json_line_reads_as_load_json(value: Any, ascii_only: bool, tail: str) -> None:
    for doc in (value, {"node": "n1", "output": value}):  # also as a flat envelope
        text = json.dumps(doc, ensure_ascii=ascii_only)
        for line in (text, text + tail, tail + text, text[: len(text) // 2]):
            slow = _read(line, lambda t: load_json(t, one_line=True))
            quick = _read(line, lambda t: read_json_line(t, _long_digits(t)))
            assert repr(quick) == repr(slow)  # repr: nan, -0.0 and int/float told apart


def test_read_json_line_looks_for_long_digits_only_past_a_flat_object() -> None:
    asked: list[str] = []

    def long_digits(line: str) -> Any:
        def ask() -> bool:
            asked.append(line)
            return re.search(LONG_DIGITS, line) is not None
        return ask

    flat = '{"node": "n1", "port": 1, "output": "PortXmitData:...18446744073709551616"}'
    nested = '{"node": "n1", "output": {"data_units_written": 18446744073709551616}}'
    assert read_json_line(flat, long_digits(flat))["port"] == 1
    assert read_json_line(nested, long_digits(nested))["output"] == {
        "data_units_written": 18446744073709551616}  # an int, as json reads it
    assert asked == [nested]
