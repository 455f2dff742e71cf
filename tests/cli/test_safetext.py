"""Text from the data made safe: control characters escaped, commands shell-quoted, file names
reduced to a safe piece; and the terminal tables that use them."""

from __future__ import annotations

import json
import re
import shlex

import polars as pl

from ckptwatch.cli._render import render_table
from ckptwatch.safetext import (
    escape_controls,
    escape_json_controls,
    escape_lines,
    safe_file_part,
    shell_command,
)

#: Every character a terminal acts on, except the newline.
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def test_escape_controls_shows_c0_del_and_c1_and_is_idempotent() -> None:
    hostile = "a\x1b[2J\x1b]0;owned\x07\tb\nc\x7f\x9b\x00é ✓ \\x1b"
    shown = escape_controls(hostile)
    assert shown == "a\\x1b[2J\\x1b]0;owned\\x07\\tb\\nc\\x7f\\x9b\\x00é ✓ \\x1b"
    assert not RAW_CONTROL.search(shown) and "\n" not in shown
    assert escape_controls(shown) == shown
    assert escape_lines("x\x1b\ny\x07") == "x\\x1b\ny\\x07"  # newlines kept as layout


def test_escape_json_controls_keeps_the_json_value() -> None:
    value = ["\x1b\x7f\x9b é"]
    text = escape_json_controls(json.dumps(value, ensure_ascii=False))
    assert not RAW_CONTROL.search(text)
    assert json.loads(text) == value


def test_shell_command_quotes_shell_syntax() -> None:
    job = "j <x> ; rm -rf $HOME `id`"
    line = shell_command(["ckptwatch", "postmortem", "--job", job, "--step", 7])
    assert line == "ckptwatch postmortem --job 'j <x> ; rm -rf $HOME `id`' --step 7"
    assert shlex.split(line) == ["ckptwatch", "postmortem", "--job", job, "--step", "7"]


def test_safe_file_part_never_leaves_the_directory() -> None:
    assert safe_file_part("job-98372") == "job-98372"  # ordinary ids unchanged
    for hostile in ("../../../../tmp/x/PWNED", "..", ".hidden", "/etc/passwd", "a\x00b", "",
                    "é" * 300, "x" * 500):
        part = safe_file_part(hostile)
        assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", part), (hostile, part)
        assert len(part) <= 80
    assert safe_file_part("a/b") != safe_file_part("a_b")  # distinct ids, distinct names
    assert safe_file_part("../../../../tmp/x/PWNED").endswith("_tmp_x_PWNED-7b17cc5b")


def test_table_prints_the_digits_it_was_asked_for_and_no_negative_zero() -> None:
    df = pl.DataFrame({"job_id": ["a", "b"], "barrier_s": [48.412, 1234.56],
                       "headroom_s": [-0.04, 2.0], "score": [0.12345, None]})
    lines = render_table(df, float_precision=1, digits={"score": 3}).splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert cells[0] == ["job_id", "barrier_s", "headroom_s", "score"]
    assert cells[2] == ["a", "48.4", "0.0", "0.123"]
    assert cells[3] == ["b", "1,234.6", "2.0", "null"]


def test_table_escapes_values_nested_values_and_names() -> None:
    df = pl.DataFrame({"job\x1b[2J": ["x\x1b]0;owned\x07", "two\nlines"],
                       "ev": [["\x1b[31mred"], []]})
    text = render_table(df)
    assert not RAW_CONTROL.search(text)
    assert "| job\\x1b[2J " in text and "x\\x1b]0;owned\\x07" in text
    assert "two\\nlines" in text and len(text.splitlines()) == 4  # one line per row
    assert "[\"\\x1b[31mred\"]" in text
