"""Pool target identity (docs/formats.md, "Pool target identity"): a checkpoint record's target
meets the pool telemetry's on one spelling, whatever each tool printed — ``lfs getstripe`` and
``lfs df`` say ``fs-OST0003_UUID``, a client's device is ``fs-OST0003-osc-ffff…``, the OSS's
``lctl`` says ``fs-OST0003``. The readers' rule (``ckptwatch.sources.pool_common.pool_target``)
and the staging views' (the SQL macro ``pool_target``, sql/session.sql) are one rule."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.stall_cases import Case, build

from ckptwatch.analysis.findings import find_stalls
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.settings import sql_dir
from ckptwatch.sources.pool_common import pool_target


@functools.cache
def _macro_connection() -> duckdb.DuckDBPyConnection:
    """A connection with sql/session.sql's macros (one for the module's examples)."""
    con = duckdb.connect()
    con.execute((sql_dir() / "session.sql").read_text())
    return con


def _sql(name: str | None) -> Any:
    row = _macro_connection().execute("select pool_target(?)", [name]).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize(("printed", "target"), [
    ("fs-OST0003", "fs-OST0003"),
    ("fs-OST0003_UUID", "fs-OST0003"),  # lfs df, lfs getstripe --obd
    ("fs-OST0003-osc-ffff8803c9c0f000", "fs-OST0003"),  # the client's device (lctl dl)
    ("scratch-MDT0000-mdc-ffff88007a2b8800", "scratch-MDT0000"),
    ("fs-ost000a", "fs-OST000A"),  # any case: the kind and the hex index
    (" fs-OST0003_UUID\n", "fs-OST0003"),
    ("lustre_2-OST00ff_uuid", "lustre_2-OST00FF"),
    ("pool0-tgt07", "pool0-tgt07"),  # not a Lustre name: as written
    ("daos01/engine0/tgt_3", "daos01/engine0/tgt_3"),
    (" spdk1/Nvme0n1 ", "spdk1/Nvme0n1"),  # trimmed
    ("n1:nvme0", "n1:nvme0"),  # a node-local drive
    ("fs-OST03", "fs-OST03"),  # not four hex digits: not a Lustre target
    ("averylongfs-OST0001", "averylongfs-OST0001"),  # a Lustre fsname has at most 8 characters
])
def test_spellings_fold_to_the_target_in_python_and_sql(printed: str, target: str) -> None:
    assert pool_target(printed) == target
    assert _sql(printed) == target


def test_a_striped_records_targets_fold_each() -> None:
    row = _macro_connection().execute(
        "select pool_targets(?), pool_targets(?), pool_targets(null)",
        ["fs-OST0001_UUID, fs-ost0002-osc-ffff8803c9c0f000", "t1"]).fetchone()
    assert row == ("fs-OST0001,fs-OST0002", "t1", None)


_LUSTRE = st.builds(
    lambda fs, kind, index, suffix, left, right: f"{left}{fs}-{kind}{index}{suffix}{right}",
    st.text("abcXYZ019_", min_size=1, max_size=9),
    st.sampled_from(["OST", "ost", "Ost", "MDT", "mdt", "OSD", "ST"]),
    st.text("0123456789abcdefABCDEFg", min_size=3, max_size=5),
    st.sampled_from(["", "_UUID", "_uuid", "-osc-ffff8803c9c0f000", "-mdc-ffff88", "-osc-",
                     "-lwp-OST0000", "_UUIDx", "-osc-ff ff"]),
    st.sampled_from(["", " ", "\t", "\n", "x"]),
    st.sampled_from(["", " ", "\r\n", "/"]))


@settings(max_examples=400, deadline=None)
@given(st.one_of(_LUSTRE, st.text(st.characters(min_codepoint=9, max_codepoint=126),
                                  max_size=24)))
def test_the_sql_rule_is_the_readers_rule(name: str) -> None:
    # One rule in two places (the readers write it, staging re-reads every stored row and every
    # record's targets through it): any name, nonsense included, folds alike.
    assert _sql(name) == pool_target(name)


def test_the_rule_keeps_a_canonical_name_and_is_idempotent() -> None:
    for name in ("fs-OST0003_UUID", "x-mdt00ab-mdc-1", " pool0-tgt07 "):
        once = pool_target(name)
        assert pool_target(once) == once == _sql(once)


# -- the join: records and telemetry spelled apart --------------------------------------------

#: The lake's targets as the records name them and as the pool telemetry names them.
_RECORDS = {"t1": "fs-OST0001_UUID", "t2": " fs-ost0002-osc-ffff8803c9c0f000"}
_TELEMETRY = {"t1": "fs-OST0001", "t2": "fs-OST0002", "t3": "fs-OST0003"}
_CANONICAL = {"t1": "fs-OST0001", "t2": "fs-OST0002", "t3": "fs-OST0003"}


def _rename(lake: Path, table: str, names: dict[str, str]) -> None:
    for path in sorted((lake / table).rglob("*.parquet")):
        t = pq.read_table(path)
        if not t.num_rows:
            continue
        at = t.schema.get_field_index("target")
        values = [names.get(v, v) for v in t.column("target").to_pylist()]
        pq.write_table(t.set_column(at, t.schema.field(at), pa.array(values, pa.string())), path)


def _respelled(root: Path, lake: Path, records: dict[str, str],
               telemetry: dict[str, str]) -> Path:
    out = root / "lake"
    shutil.copytree(lake, out)
    _rename(out, "checkpoint_writes", records)
    _rename(out, "pool_metrics", telemetry)
    return out


_SIGNALS_SQL = """
    select host, family, signal, n_series, n_samples, level, baseline_level
    from stall_signals
    where family = 'gc' and host like 'fs-%'
    order by all
"""


def _gc_signals(lake: Path) -> list[dict[str, Any]]:
    con = connect(lake, views=("stall_signals",))
    try:
        return [{k: float(f"{v:.9g}") if isinstance(v, float) else v for k, v in r.items()}
                for r in run_sql(con, _SIGNALS_SQL).to_dicts()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def gc_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GC stall on pool target t1 (tests/stall_cases.py), its targets named as Lustre's."""
    lake = build(tmp_path_factory.mktemp("gc") / "lake", Case(stall="gc"))
    return _respelled(tmp_path_factory.mktemp("canonical"), lake, _CANONICAL, _CANONICAL)


def test_records_and_telemetry_spelled_apart_join_as_one_target(
        gc_lake: Path, tmp_path: Path) -> None:
    # The records say fs-OST0001_UUID and a client's osc device, the OSS says fs-OST0001: the
    # stall's pool GC signals are those of the lake spelled alike, and the verdict names them.
    apart = _respelled(tmp_path, gc_lake, _RECORDS | {"fs-OST0001": _RECORDS["t1"],
                                                     "fs-OST0002": _RECORDS["t2"]}, {})
    expected = _gc_signals(gc_lake)
    assert {r["host"] for r in expected} >= {"fs-OST0001"}
    assert _gc_signals(apart) == expected
    [stall] = find_stalls(apart).stalls
    top = stall.causes[0]
    assert top.cause == "gc" and top.supported
    assert "fs-OST0001" in " ".join(top.evidence)
