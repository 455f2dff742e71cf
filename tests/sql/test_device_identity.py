"""Device identity (docs/formats.md, "Device identity"): a drive's series across tools meet on
its NVMe controller's kernel name, whatever spelling each tool printed; the parsers' rule
(``nvme_device_name``) and the staging views' (the SQL macro ``nvme_drive``) are one rule."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.stall_cases import Case, build

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.settings import sql_dir
from ckptwatch.sources.smartctl import nvme_device_name

#: How tools print drive nvme0: the controller, its namespaces and partitions, a multipath path
#: through controller 0, the generic device; with and without /dev/ and stray whitespace.
NVME0 = ("nvme0", "/dev/nvme0", "nvme0n1", "/dev/nvme0n1", "nvme0n2", "/dev/nvme0n1p3",
         " /dev/nvme0 ", "nvme3c0n1", "/dev/ng0n1", "/dev/nvme0n1\n")


@functools.cache
def _macro_connection() -> duckdb.DuckDBPyConnection:
    """A connection with stg_nvme_smart.sql's device macros only (nothing else is needed);
    one for the module's examples."""
    text = (sql_dir() / "staging" / "stg_nvme_smart.sql").read_text()
    start = text.index("create or replace macro nvme_drive_text")
    end = text.index("create or replace macro stg_nvme_smart_versions")
    con = duckdb.connect()
    con.execute(text[start:end])
    return con


@pytest.mark.parametrize(("printed", "drive"), [
    *((name, "nvme0") for name in NVME0),
    ("nvme1", "nvme1"),  # another controller is another drive
    ("/dev/nvme1n1", "nvme1"),
    ("nvme12n3p4", "nvme12"),
    ("nvme0c1n1", "nvme1"),  # multipath: subsystem 0, controller 1
    ("IOService:/AppleARMPE/arm-io@10F00000/AppleANS3NVMeController/NS_01@1", "NS_01@1"),
    ("/dev/disk/by-id/nvme-eui.0025385b71b07e2f", "nvme-eui.0025385b71b07e2f"),
    ("nvme0c1", "nvme0c1"),  # no kernel name: kept as printed
])
def test_spellings_fold_to_the_controller_in_python_and_sql(printed: str, drive: str) -> None:
    assert nvme_device_name(printed) == drive
    assert _macro_connection().execute("select nvme_drive(?)", [printed]).fetchone() == (drive,)


_NAME_PARTS = st.sampled_from(["nvme", "ng", "n", "c", "p", "/", "/dev/", " ", "0", "1", "12",
                               "7", "x", "NS_01@1", ":", "\t", "-", "."])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_NAME_PARTS, max_size=8).map("".join),
                 st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)))
def test_the_sql_rule_is_the_parsers_rule(name: str) -> None:
    # One rule in two places (ingest writes it, staging re-reads every stored row through it):
    # any name, nonsense included, folds alike.
    got = _macro_connection().execute("select nvme_drive(?)", [name]).fetchone()
    assert got == (nvme_device_name(name),)


def _respell(lake: Path, spellings: dict[str, list[str]]) -> None:
    """Rewrite the lake's nvme_smart parts with each metric's rows named by its spellings in
    turn (row i of a metric: spellings[metric][i % len]); the rest of every row as it was."""
    for path in sorted((lake / "nvme_smart").rglob("*.parquet")):
        table = pq.read_table(path)
        metrics = table.column("metric").to_pylist()
        seen: dict[str, int] = {}
        devices = []
        for metric, device in zip(metrics, table.column("device").to_pylist(), strict=True):
            assert device == "nvme0"
            names = spellings.get(metric, [device])
            i = seen[metric] = seen.get(metric, -1) + 1
            devices.append(names[i % len(names)])
        at = table.schema.get_field_index("device")
        table = table.set_column(at, table.schema.field(at), pa.array(devices, pa.string()))
        pq.write_table(table, path)


_SIGNALS_SQL = """
    select host, family, signal, kind, n_series, n_samples, level, level_min, level_max,
        baseline_level
    from stall_signals
    where family = 'gc'
    order by all
"""
_NOISE_SQL = "select * from int_signal_noise where family = 'gc' order by all"


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: float(f"{v:.9g}") if isinstance(v, float) else v for k, v in r.items()}
            for r in rows]


def _drive_figures(lake: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    con = connect(lake, views=("stall_signals", "int_signal_noise"))
    try:
        return (_rounded(run_sql(con, _SIGNALS_SQL).to_dicts()),
                _rounded(run_sql(con, _NOISE_SQL).to_dicts()))
    finally:
        con.close()


@pytest.fixture(scope="module")
def gc_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[Any, Any]]:
    """A GC stall on t1's drive seen only through write amplification (host bytes and OCP media
    bytes of one drive, paired per interval), and its drive figures as written (nvme0)."""
    lake = build(tmp_path_factory.mktemp("gc") / "lake", Case(stall="gc", wa_only=4.0))
    return lake, _drive_figures(lake)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host=st.lists(st.sampled_from(NVME0), min_size=1, max_size=3),
       media=st.lists(st.sampled_from(NVME0), min_size=1, max_size=3))
def test_respelling_a_tools_devices_changes_no_signal(
        gc_lake: tuple[Path, tuple[Any, Any]], tmp_path_factory: pytest.TempPathFactory,
        host: list[str], media: list[str]) -> None:
    # smartctl names the drive one way, the OCP log another, each row as it comes: the drive's
    # signals, its write amplification and its noise are those of the lake as written.
    lake, (signals, noise) = gc_lake
    respelled = tmp_path_factory.mktemp("respelled") / "lake"
    shutil.copytree(lake, respelled)
    _respell(respelled, {"host_written_bytes": host, "media_written_bytes": media})
    assert _drive_figures(respelled) == (signals, noise)
    shutil.rmtree(respelled)


def test_the_figures_compared_are_there(gc_lake: tuple[Path, tuple[Any, Any]]) -> None:
    # The property above compares something: the drive's byte signals of the stall, and its
    # write amplification paired from the two tools' rows.
    _, (signals, noise) = gc_lake
    assert {(r["host"], r["signal"]) for r in signals} >= {
        ("t1", "host_written_bytes"), ("t1", "media_written_bytes")}
    assert [r for r in noise if r["host"] == "t1" and r["signal"] == "write_amplification"]
