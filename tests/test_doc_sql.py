"""Every SQL example of README.md and docs/*.md runs on the sample lake (data/sample ingested).

The rule, per fenced ```` ```sql ```` block:

- it runs as `ckptwatch sql --lake LAKE "<block>"` runs it, without an error;
- it returns at least one row: the text around an example promises what it shows, and on the
  sample (what `make demo` builds) it must show something;
- a block whose first line is ``-- may return no rows: <why>`` must run and may return none;
- a block whose first line is ``-- not run: <why>`` is not run (another engine's SQL, or an
  object store and its credentials); the reason is required.

Every ``duckdb`` CLI command line in the same files (a line, in a code block, that starts with
``duckdb`` or ``.venv/bin/duckdb``) runs from the project root with ``data/lake`` read as the
sample lake, and a query over the views it builds returns rows.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckptwatch.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"--\s*not run:\s*\S")
MAY_BE_EMPTY = re.compile(r"--\s*may return no rows:\s*\S")


def sql_blocks() -> list[tuple[str, str]]:
    """(``file:line``, text) of every ```` ```sql ```` block of README.md and docs/*.md."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(r"^```sql\n(.*?)^```", text, flags=re.S | re.M):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return found


def duckdb_commands() -> list[tuple[str, str]]:
    """(``file:line``, command) of every duckdb CLI command line in README.md and docs/*.md."""
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), start=1):
            if re.match(r"\s*(\.venv/bin/)?duckdb\s", line):
                found.append((f"{doc.relative_to(ROOT)}:{n}", line.strip()))
    return found


BLOCKS = sql_blocks()


def test_the_docs_have_sql_examples_and_each_skip_says_why() -> None:
    assert len(BLOCKS) >= 4
    for where, block in BLOCKS:
        first = block.splitlines()[0] if block.strip() else ""
        if "not run" in first:
            assert NOT_RUN.match(first), f"{where}: `-- not run:` needs a reason"
        if "may return no rows" in first:
            assert MAY_BE_EMPTY.match(first), f"{where}: `-- may return no rows:` needs a reason"


def _sql(lake: Path, query: str) -> tuple[int, str, str]:
    """`ckptwatch sql --lake LAKE --format json QUERY`: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["sql", "--lake", str(lake), "--format", "json", query])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_sql_example_runs_on_the_sample(sample_lake: Path, where: str, block: str) -> None:
    first = block.splitlines()[0]
    if NOT_RUN.match(first):
        pytest.skip(f"{where}: {first}")
    code, out, err = _sql(sample_lake, block)
    assert code == 0, f"{where}: {err.strip()}"
    rows = json.loads(out)
    assert isinstance(rows, list)
    if not MAY_BE_EMPTY.match(first):
        assert rows, f"{where}: no rows on the sample, where the text promises some"


def test_an_empty_result_is_caught(sample_lake: Path) -> None:
    """The check above can fail: a query with no rows on the sample reads as empty."""
    code, out, _ = _sql(sample_lake, "select job_id from checkpoint_latency where false")
    assert code == 0 and json.loads(out) == []
    code, _, err = _sql(sample_lake, "select no_such_column from checkpoint_latency")
    assert code == 2 and "no_such_column" in err


def duckdb_cli() -> str | None:
    """The duckdb CLI next to this interpreter (pip duckdb-cli), else on PATH."""
    here = Path(sys.executable).parent / "duckdb"
    return str(here) if here.exists() else shutil.which("duckdb")


COMMANDS = duckdb_commands()


@pytest.mark.skipif(duckdb_cli() is None, reason="duckdb CLI not installed (pip duckdb-cli)")
@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_duckdb_cli_example_builds_the_views(sample_lake: Path, where: str,
                                             command: str) -> None:
    argv = shlex.split(command.replace("'data/lake'", f"'{sample_lake}'"))
    assert str(sample_lake) in " ".join(argv), f"{where}: the example names no data/lake"
    argv[0] = duckdb_cli() or argv[0]
    argv += ["-json", "-c", "select count(*) as n from checkpoint_latency"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{where}: {done.stderr.strip()}"
    assert json.loads(done.stdout)[0]["n"] > 0
