"""DLIO / MLPerf Storage runs as users have them (issue 19, item 4): ``<rank>_output.json``
host names, saves and loads apart, summary.json / dlio.log, the published results layout."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.in_place import IN_PLACE, IN_PLACE_REASON

from ckptwatch.errors import RecordError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.sources.mlperf import (
    GIB,
    hostname_from_output,
    job_id_from_layout,
    parse_dlio_checkpoints,
    read_dlio_run,
)

REAL = IN_PLACE / "checkpoint_timing"
AISTORE = REAL / "mlperf_storage_v3.0_nvidia_aistore_llama3-8b_8rank"
SAVE_LOAD = REAL / "mlperf_storage_v3.0_nebius_llama3-8b_8rank_save_load"
NEBIUS_64 = REAL / "mlperf_storage_v3.0_nebius_llama3-70b_64rank"

#: dlio.log lines in DLIO's layout (values ours).
LOG = """\
[OUTPUT] [DEBUG DLIOBenchmark.__init__] After LoadConfig:
[OUTPUT]   storage_type   = <StorageType.LOCAL_FS: 'local_fs'>
[OUTPUT]   storage_root   = '/lustre/ckpt'
[OUTPUT]   framework      = <FrameworkType.PYTORCH: 'pytorch'>
[OUTPUT] 2026-11-28T10:00:00.100000 Running DLIO [Checkpointing] with 4 process(es)
[OUTPUT] 2026-11-28T10:00:00.200000 Total checkpoint size: 8.000000 GiB
[OUTPUT] 2026-11-28T10:05:00.000000 Saved outputs in {}
""".format("/results/sysA/checkpointing/llama3-8b/20261128_095959")


def stats(rank: int, day: int = 28) -> dict[str, Any]:
    """A per_epoch_stats.json with two saves and one load; rank 3 saves 2 s slower. Ranks 0-2
    time alike (their files differ by name only)."""
    extra = 2.0 if rank == 3 else 0.0
    doc: dict[str, Any] = {"1": {
        "start": "2026-11-28T10:00:00.000000",
        "save_ckpt1": {"start": "2026-11-28T10:00:05.000000",
                       "end": f"2026-11-28T10:00:{15 + extra:09.6f}", "duration": 10.0 + extra,
                       "throughput": 0.8},
        "save_ckpt2": {"start": "2026-11-28T10:01:05.000000",
                       "end": f"2026-11-28T10:01:{16 + extra:09.6f}", "duration": 11.0 + extra,
                       "throughput": 0.75},
        "load_ckpt1": {"start": "2026-11-28T10:03:00.000000", "end": "2026-11-28T10:03:04.000000",
                       "duration": 4.0, "throughput": 2.0},
        "end": "2026-11-28T10:03:05.000000",
    }}
    return json.loads(json.dumps(doc).replace("2026-11-28", f"2026-11-{day:02d}"))


def write_run(run: Path, *, hosts: dict[int, str] | None, day: int = 28) -> Path:
    """A DLIO run directory: 4 ranks' stats, their output.json (``hosts``), summary, log."""
    run.mkdir(parents=True)
    for rank in range(4):
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps(stats(rank, day),
                                                                     indent=4))
        if hosts is not None:
            (run / f"{rank}_output.json").write_text(json.dumps(
                {"host_memory_GB": 512.0, "1": {"start": "2026-11-28T10:00:00"},
                 "hostname": hosts[rank]}, indent=4))
    (run / "summary.json").write_text(json.dumps(
        {"start": "2026-11-28T10:00:00.050000", "num_accelerators": 4, "num_hosts": 2,
         "metric": {"checkpoint_size_GB": 8.0}}))
    (run / "dlio.log").write_text(LOG)
    return run


HOSTS = {0: "gpu-a01", 1: "gpu-a01", 2: "gpu-a02", 3: "gpu-a02"}


def test_a_results_directory_in_the_mlperf_layout_ingests_with_host_names(
        tmp_path: Path) -> None:
    raw = tmp_path / "results"
    write_run(raw / "sysA" / "checkpointing" / "llama3-8b" / "20261128_095959", hosts=HOSTS)
    write_run(raw / "sysA" / "checkpointing" / "llama3-8b" / "20261129_120000", hosts=HOSTS,
              day=29)
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0 and report.count("failed") == 0
    assert report.rows == {"checkpoint_writes": 16, "checkpoint_loads": 8}
    lake = Lake(tmp_path / "lake")
    writes = lake.read("checkpoint_writes")
    assert set(writes["job_id"]) == {"sysA/llama3-8b/20261128_095959",
                                     "sysA/llama3-8b/20261129_120000"}
    assert set(zip(writes["rank"], writes["node"], strict=True)) == set(HOSTS.items())
    assert set(writes["target"]) == {"/lustre/ckpt"} and set(writes["tier"]) == {"pool"}
    first = writes.filter((writes["rank"] == 0) & (writes["step"] == 1))
    assert set(first["bytes"]) == {round(8.0 * GIB / 4)}  # 0.8 GiB/s x 10 s over 4 ranks


def test_saves_and_loads_land_in_their_own_tables(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_run(raw / "sysA" / "checkpointing" / "llama3-8b" / "20261128_095959", hosts=HOSTS)
    ingest(raw, tmp_path / "lake")
    con = connect(tmp_path / "lake", views=("stg_checkpoint_loads", "checkpoint_latency"))
    try:
        loads = run_sql(con, "select job_id, step, rank, node, tier, start_ts, end_ts, "
                             "duration_s, bytes from stg_checkpoint_loads order by rank")
        saves = run_sql(con, "select step, max_s from checkpoint_latency order by step")
    finally:
        con.close()
    assert loads["step"].to_list() == [1, 1, 1, 1]
    assert loads["duration_s"].to_list() == [4.0] * 4
    assert loads["node"].to_list() == ["gpu-a01", "gpu-a01", "gpu-a02", "gpu-a02"]
    assert loads["start_ts"][0] == datetime(2026, 11, 28, 10, 3, tzinfo=UTC)
    assert set(loads["bytes"]) == {round(2.0 * 4.0 * GIB / 4)}
    # The saves' barriers are the slow rank's, untouched by the (faster) loads.
    assert saves.rows() == [(1, 12.0), (2, 13.0)]


def test_without_output_json_the_node_is_unknown_and_a_note_says_so(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    write_run(raw / "checkpoints" / "run7", hosts=None)
    report = ingest(raw, tmp_path / "lake")
    writes = Lake(tmp_path / "lake").read("checkpoint_writes")
    assert set(writes["node"]) == {"unknown"}
    # dlio.log says where the run was published: that names the job.
    assert set(writes["job_id"]) == {"sysA/llama3-8b/20261128_095959"}
    notes = [n for f in report.files for n in f.notes]
    assert any("no hostname in a 0_output.json beside it (node='unknown')" in n for n in notes)


def test_the_run_directory_names_the_job_outside_the_layout(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    run = write_run(raw / "checkpoints" / "run7", hosts=HOSTS)
    (run / "dlio.log").write_text(LOG.split("[OUTPUT] 2026-11-28T10:05")[0])
    ingest(raw, tmp_path / "lake")
    assert set(Lake(tmp_path / "lake").read("checkpoint_loads")["job_id"]) == {"run7"}


def test_run_facts_from_summary_and_log() -> None:
    run = read_dlio_run(json.dumps({"start": "2026-11-28T10:00:00.050000",
                                    "num_accelerators": 4, "num_hosts": 2}), LOG)
    assert run.start_ts == datetime(2026, 11, 28, 10, 0, 0, 50000, tzinfo=UTC)
    assert (run.n_ranks, run.n_hosts) == (4, 2)
    assert (run.storage_type, run.storage_root) == ("local_fs", "/lustre/ckpt")
    assert run.checkpoint_bytes == 8 * GIB
    assert run.results_dir == "/results/sysA/checkpointing/llama3-8b/20261128_095959"
    only_log = read_dlio_run(None, LOG)
    assert only_log.n_ranks == 4
    assert only_log.start_ts == datetime(2026, 11, 28, 10, 0, 0, 100000, tzinfo=UTC)
    assert read_dlio_run(None, None) == type(run)()
    with pytest.raises(RecordError, match=r"^DLIO summary.json is not valid JSON"):
        read_dlio_run("{not json", None)


def test_layout_host_names_and_loads_only() -> None:
    assert job_id_from_layout("/r/closed/X/results/sys-1/checkpointing/llama3-70b/"
                              "20260714_121444") == "sys-1/llama3-70b/20260714_121444"
    assert job_id_from_layout("/r/sys-1/training/unet3d/20260714_121444") is None
    assert job_id_from_layout("checkpointing/m/t") is None
    assert hostname_from_output('{"hostname": " node-7 "}') == "node-7"
    assert hostname_from_output({"hostname": ""}) is None
    assert hostname_from_output({"1": {}}) is None
    doc = stats(0)
    for key in ("save_ckpt1", "save_ckpt2"):
        del doc["1"][key]
    tables = parse_dlio_checkpoints(doc, rank=2, job_id="j", node="n", n_ranks=4)
    assert tables["checkpoint_writes"] == []
    [load] = tables["checkpoint_loads"]
    assert (load["step"], load["rank"], load["duration_s"]) == (1, 2, 4.0)
    assert "status" not in load and "open_s" not in load


def test_a_load_entry_that_is_broken_names_itself() -> None:
    doc = stats(0)
    doc["1"]["load_ckpt1"]["end"] = "2026-11-28T10:02:00"
    with pytest.raises(RecordError) as err:
        parse_dlio_checkpoints(doc, rank=0, job_id="j", node="n", n_ranks=4)
    assert err.value.reason == ("epoch 1 load_ckpt1: end 2026-11-28T10:02:00 is before start "
                                "2026-11-28T10:03:00.000000")


# MLPerf Storage v3.0 results (licence not determined): ingested where they lie, never copied.
@pytest.mark.skipif(not AISTORE.exists(), reason=IN_PLACE_REASON)
def test_genuine_run_with_output_json_gets_its_host_name(tmp_path: Path) -> None:
    report = ingest(AISTORE, tmp_path / "lake")
    assert report.quarantined == 0 and report.rows == {"checkpoint_writes": 80}
    writes = Lake(tmp_path / "lake").read("checkpoint_writes")
    assert set(writes["node"]) == {"oke-c64fnefufbq-n775xlwpuya-snnft4edapa-0"}
    # The folder is in the published layout under another name; dlio.log says where DLIO
    # saved it (.../results/aistore/checkpointing/llama3-8b/20260708_175046).
    assert set(writes["job_id"]) == {"aistore/llama3-8b/20260708_175046"}
    assert set(writes["target"]) == {"mlp-ckpt"}


@pytest.mark.skipif(not SAVE_LOAD.exists(), reason=IN_PLACE_REASON)
def test_genuine_saves_and_loads_are_told_apart(tmp_path: Path) -> None:
    report = ingest(SAVE_LOAD, tmp_path / "lake")
    assert report.rows == {"checkpoint_writes": 80, "checkpoint_loads": 80}
    lake = Lake(tmp_path / "lake")
    saves, loads = lake.read("checkpoint_writes"), lake.read("checkpoint_loads")
    assert sorted(set(loads["step"])) == list(range(1, 11))
    # summary.json: save mean 37.24 s, load mean 14.67 s (rank 0's figures).
    rank0 = loads.filter(loads["rank"] == 0)
    assert rank0["duration_s"].mean() == pytest.approx(14.668, abs=0.01)
    assert saves.filter(saves["rank"] == 0)["duration_s"].mean() == pytest.approx(37.24,
                                                                                  abs=0.01)
    assert loads["start_ts"].sort()[0] > saves["end_ts"].sort()[-1]


@pytest.mark.skipif(not NEBIUS_64.exists(), reason=IN_PLACE_REASON)
def test_genuine_64_rank_run_is_named_by_where_dlio_saved_it(tmp_path: Path) -> None:
    ingest(NEBIUS_64, tmp_path / "lake")
    writes = Lake(tmp_path / "lake").read("checkpoint_writes")
    assert set(writes["job_id"]) == {"nebius-s3-ckpt-llama3-70b/llama3-70b/20260714_121444"}
    assert sorted(set(writes["rank"])) == [0, 63]


def test_a_broken_companion_file_is_a_note_not_a_lost_run(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    run = write_run(raw / "checkpoints" / "run7", hosts=HOSTS)
    (run / "summary.json").write_text('{"num_accelerators": 4, "start": ')  # cut off
    (run / "1_output.json").write_text('{"hostname": ')
    report = ingest(raw, tmp_path / "lake")
    stats_files = [f for f in report.files if f.rel.endswith("_per_epoch_stats.json")]
    assert [f.status for f in stats_files] == ["ingested"] * 4
    assert report.rows["checkpoint_writes"] == 8
    lake = Lake(tmp_path / "lake")
    writes = lake.read("checkpoint_writes")
    assert sorted(set(zip(writes["rank"], writes["node"], strict=True))) == [
        (0, "gpu-a01"), (1, "unknown"), (2, "gpu-a02"), (3, "gpu-a02")]
    notes = [n for f in stats_files for n in f.notes]
    assert any("the run's summary.json is not read (DLIO summary.json is not valid JSON"
               in n for n in notes)
    assert any("1_output.json is not read (DLIO <rank>_output.json is not valid JSON" in n
               for n in notes)
    # Never silent: the broken files themselves are quarantined with their reasons.
    assert {"checkpoints/run7/summary.json", "checkpoints/run7/1_output.json"} <= set(
        lake.read("quarantine")["source_file"])
    # The rank count came from dlio.log instead: 0.8 GiB/s x 10 s over 4 ranks.
    first = writes.filter((writes["rank"] == 0) & (writes["step"] == 1))
    assert set(first["bytes"]) == {round(8.0 * GIB / 4)}


def test_a_run_s_rank_files_read_together_as_one_by_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's per-rank files are typed together (``read._read_dlio_files``): each file gets
    what reading it alone gives, a broken one (its failure) and one with a rejected row (its
    reject) included."""
    from tests.bulk_oracle import assert_same_parse

    from ckptwatch.ingest import read as read_module
    from ckptwatch.ingest.discover import discover

    run = write_run(tmp_path / "raw" / "checkpoints" / "run8", hosts=HOSTS)
    for rank in (4, 5, 6):
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps(stats(rank)))
    broken = stats(1)
    broken["1"]["load_ckpt1"]["end"] = "2026-11-28T10:02:00"  # before its start: the file fails
    (run / "1_per_epoch_stats.json").write_text(json.dumps(broken))
    odd = stats(2)  # one save in an implausible year: that row rejected, the rest kept
    odd["1"]["save_ckpt2"].update(start="1888-11-28T10:01:05", end="1888-11-28T10:01:16")
    (run / "2_per_epoch_stats.json").write_text(json.dumps(odd))
    together: list[int] = []
    real = read_module._read_dlio_files

    def spy(items: Any) -> Any:
        done = real(items)
        together.append(len(done))
        return done

    monkeypatch.setattr(read_module, "_read_dlio_files", spy)
    files = sorted((f for f in discover(tmp_path / "raw") if f.kind == "dlio"),
                   key=lambda f: f.rel)
    assert len(files) == 7
    loaded = [read_module.load_file(f) for f in files]
    batch = read_module.parse_loaded(loaded)
    assert together == [6]  # the broken file is read again on its own
    for got, f in zip(batch, files, strict=True):
        alone = read_module.parse_file(f)
        assert got.failure == alone.failure
        assert_same_parse(got.parsed, alone.parsed)
    by_rank = {f.raw.path.name.split("_")[0]: f for f in batch}
    assert by_rank["1"].failure and not by_rank["2"].failure
    assert len(by_rank["2"].parsed.rejects) == 1
    assert by_rank["2"].parsed.rows("checkpoint_writes") == 1


def _read_together_and_alone(raw: Path) -> list[Any]:
    """Each DLIO per-rank file under ``raw`` read in one batch and read alone: the two
    ``ParsedFile`` of each (the batch's first), asserted to hold the same rows, rejects, notes
    and failure."""
    from tests.bulk_oracle import assert_same_parse

    from ckptwatch.ingest import read as read_module
    from ckptwatch.ingest.discover import discover

    files = sorted((f for f in discover(raw) if f.kind == "dlio"), key=lambda f: f.rel)
    batch = read_module.parse_loaded([read_module.load_file(f) for f in files])
    for got, f in zip(batch, files, strict=True):
        alone = read_module.parse_file(f)
        assert got.failure == alone.failure
        assert_same_parse(got.parsed, alone.parsed)
    return batch


_ENTRY_EDITS = st.sampled_from(["none", "drop_end", "drop_duration", "nan_throughput",
                                "year_1888", "end_before_start", "string_duration", "huge"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.tuples(st.sampled_from(["save_ckpt1", "save_ckpt2", "load_ckpt1"]),
                                   _ENTRY_EDITS), max_size=3), min_size=2, max_size=5))
def test_generated_rank_files_read_together_as_alone(edits: list[list[tuple[str, str]]]) -> None:
    """Rank files with their entries edited (fields dropped, NaN, implausible years, an end
    before its start, text where a number goes, huge numbers), batched: each as alone."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp) / "raw" / "checkpoints" / "run9", hosts=HOSTS)
        for rank, file_edits in enumerate(edits):
            doc = stats(rank)
            for entry, edit in file_edits:
                e = doc["1"][entry]
                if edit == "drop_end":
                    e.pop("end", None)
                elif edit == "drop_duration":
                    e.pop("duration", None)
                elif edit == "nan_throughput":
                    e["throughput"] = float("nan")
                elif edit == "year_1888":
                    e["start"], e["end"] = "1888-11-28T10:00:05", "1888-11-28T10:00:15"
                elif edit == "end_before_start":
                    e["end"] = "2026-11-28T09:00:00"
                elif edit == "string_duration":
                    e["duration"] = "ten"
                elif edit == "huge":
                    e["throughput"] = 1e308
            (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps(doc))
        _read_together_and_alone(Path(tmp) / "raw")


@pytest.mark.skipif(not NEBIUS_64.exists(), reason=IN_PLACE_REASON)
@pytest.mark.parametrize("run", [AISTORE, SAVE_LOAD, NEBIUS_64], ids=["aistore", "save-load",
                                                                      "nebius-64"])
def test_genuine_runs_read_together_as_alone(run: Path) -> None:
    """The MLPerf Storage runs' per-rank files, batched: each as read alone."""
    batch = _read_together_and_alone(run)
    assert len(batch) >= 2 and sum(f.parsed.rows("checkpoint_writes") for f in batch) > 0
