"""`ckptwatch collect` on the hosts that serve the pool: fake lctl, daos_metrics, mmpmon,
mmlsqos and mmdiag on PATH print the genuine samples of tests/fixtures/real/pool_telemetry/,
a fake SPDK target answers JSON-RPC on a Unix socket with the genuine bdev_get_iostat
response, and the envelopes written ingest to exactly the rows the readers give.

The fake executables answer only the command lines the collector is meant to run (anything
else exits 64 and is a failure), so a round without errors also pins the command lines.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.collect.test_collector import NODE, NOON, cli_env, ingest_counts, lines, write_fake

from ckptwatch.collect import pool as pool_mod
from ckptwatch.collect.collector import NODE_TOOLS, POOL_TOOLS, TOOLS, Collector
from ckptwatch.collect.pool import LUSTRE_PARAMS, SpdkRpcError, spdk_rpc
from ckptwatch.sources import daos, lustre, spdk, storage_scale
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.envelope import LINE_REJECTS

POOL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry"
LCTL_OSS = POOL / "lustrefs_exporter_ddn" / "valid.txt"
DAOS_CSV = POOL / "daos" / "telemetry_guide_io_latency_update_fetch_4MB_per_target.txt"
DAOS_TREE = POOL / "daos" / "telemetry_guide_sched_cycle_stuck_xs3.txt"
IOSTAT = POOL / "spdk" / "bdev_get_iostat_example_response.json"
MMPMON = POOL / "gpfs_exporter" / "mmpmon_fs_io_s_stdout.txt"
MMLSQOS = POOL / "gpfs_exporter" / "mmlsqos_stats_stdout.txt"
WAITERS = POOL / "gpfs_exporter" / "mmdiag_waiters_stdout.txt"

#: lctl's stderr for the parameters valid.txt does not hold (the format of lustre/utils/
#: lustreapi_param.c's "error: %s: param_path '%s': %s", with the name as lctl cleans it).
LCTL_ABSENT = "".join(f"error: get_param: param_path '{p.replace('.', '/')}': No such file or "
                      "directory\n" for p in ("obdfilter.*.job_stats", "mdt.*.job_stats",
                                              "mds.MDS.mdt.stats"))
#: What daos_metrics prints (on stdout, exit status 255) for an engine index with no engine
#: (src/utils/daos_metrics/daos_metrics.c).
DAOS_NO_ENGINE = ("Unable to attach to the shared memory for the server index: {n}\nMake sure "
                  "to run the I/O Engine with the same index to initialize the shared memory "
                  "and populate it with metrics.\nVerify user/group settings match those that "
                  "started the I/O Engine.\n")
#: `mmlsqos <fs> -Y` of a file system without QoS: the sample's HEADER and status lines with
#: QoS disabled, and no stats line (ours, in the sample's layout).
QOS_OFF = ("mmlsqos:status:HEADER:version:reserved:reserved:enabled:throttling:monitoring:"
           "fineStatsSecs:idStats:\nmmlsqos:stats:HEADER:version:reserved:reserved:pool:"
           "timeEpoch:class:iops:ioql:qsdl:et:MBs:\nmmlsqos:status:0:1:::No:No:No:0:No:\n")


def pool_responses() -> dict[str, dict[str, dict[str, Any]]]:
    """The fake pool tools of an OSS that is also a DAOS server and a GPFS node."""
    return {
        "lctl": {"get_param " + " ".join(LUSTRE_PARAMS): {
            "file": str(LCTL_OSS), "stderr": LCTL_ABSENT, "rc": 2}},
        "daos_metrics": {
            "-C -S 0": {"file": str(DAOS_CSV)},
            "-C -S 1": {"file": str(DAOS_TREE)},
            "-C -S 2": {"stdout": DAOS_NO_ENGINE.format(n=2), "rc": 255},
        },
        "mmpmon": {"-p -s": {"file": str(MMPMON)}},
        "mmlsqos": {"scratch -Y --seconds 60": {"file": str(MMLSQOS)},
                    "project -Y --seconds 60": {"stdout": QOS_OFF}},
        "mmdiag": {"--waiters -Y": {"file": str(WAITERS)}},
    }


# --------------------------------------------------------------------------- fake SPDK target


class FakeSpdk:
    """An SPDK target's JSON-RPC server on a Unix socket: reads one request per connection
    and answers ``reply`` (bytes, sent in two pieces as a stream may deliver them), or never
    answers (``reply`` None). The requests it got are in ``requests``."""

    def __init__(self, path: Path, reply: bytes | None) -> None:
        self.path = path
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while True:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                    try:
                        self.requests.append(json.loads(buf))
                    except ValueError:
                        continue
                    break
                if self.reply is None:
                    self.stop.wait(30)
                    continue
                half = len(self.reply) // 2
                conn.sendall(self.reply[:half])
                conn.sendall(self.reply[half:])
                conn.recv(1)  # SPDK keeps the connection: the client closes it

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (a Unix socket's path has at most 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ckw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def spdk_target(short_dir: Path) -> Iterator[FakeSpdk]:
    server = FakeSpdk(short_dir / "spdk.sock", IOSTAT.read_bytes())
    yield server
    server.close()


@pytest.fixture
def pool_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/bin with the fake pool tools, and nothing else, as PATH."""
    bin_dir = tmp_path / "bin"
    for tool, responses in pool_responses().items():
        write_fake(bin_dir, tool, responses)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def pool_collector(out: Path, sock: Path, warn: io.StringIO, notes: io.StringIO,
                   **kw: Any) -> Collector:
    kw.setdefault("clock", lambda: NOON)
    kw.setdefault("tools", POOL_TOOLS)
    return Collector(out, node=NODE, warn=warn, notes=notes, spdk_socket=sock, tool_dirs=(),
                     sysfs_root=out / "no-sysfs", **kw)


def reader_rows(env: dict[str, Any]) -> tuple[list[tuple[Any, ...]], int]:
    """The rows (and rejected lines) the source's reader gives for one envelope."""
    parse = {lustre.SOURCE: lustre.parse_lctl, daos.SOURCE: daos.parse_daos_metrics,
             spdk.IOSTAT_SOURCE: spdk.parse_iostat,
             storage_scale.MMPMON_SOURCE: storage_scale.parse_mmpmon,
             storage_scale.MMLSQOS_SOURCE: storage_scale.parse_mmlsqos,
             storage_scale.WAITERS_SOURCE: storage_scale.parse_waiters}[env["source"]]
    ctx = ToolContext(node=env["node"], ts=datetime.fromisoformat(env["collected_at"]),
                      source=env["source"], device=env["device"])
    got = parse(env["output"], ctx)
    rows = [(r["ts"], r["pool"], r["target"], r["metric"], r["value"])
            for r in got["pool_metrics"]]
    return rows, len(got.get(LINE_REJECTS, []))


# --------------------------------------------------------------------------- the parameters


def test_lctl_is_asked_for_exactly_what_the_reader_reads() -> None:
    for param in LUSTRE_PARAMS:  # each pattern, with names as a server has them
        name = param.replace("osd-*", "osd-ldiskfs").replace("*", "fs-OST0000")
        assert lustre.detect(f"{name}=\n"), param
    # every kind of block the reader reads is asked for
    kinds = {"obdfilter.x.stats", "mdt.x.md_stats", "ost.OSS.ost_io.stats", "mds.MDS.mdt.stats",
             "osd-ldiskfs.x.brw_stats", "obdfilter.x.job_stats", "mdt.x.job_stats"}
    asked = {p.replace("osd-*", "osd-ldiskfs").replace("*", "x") for p in LUSTRE_PARAMS}
    assert asked == kinds


def test_tool_names_agree_with_the_command_line() -> None:
    from ckptwatch.cli import collect as cli_collect

    assert cli_collect.NODE_TOOL_NAMES == NODE_TOOLS
    assert cli_collect.POOL_TOOL_NAMES == POOL_TOOLS == pool_mod.POOL_TOOLS
    assert TOOLS == NODE_TOOLS + POOL_TOOLS


# --------------------------------------------------------------------------- a full round


def test_pool_round_writes_envelopes_that_ingest_to_the_readers_rows(
        tmp_path: Path, pool_path: Path, spdk_target: FakeSpdk) -> None:
    warn, notes = io.StringIO(), io.StringIO()
    out = tmp_path / "raw"
    result = pool_collector(out, spdk_target.path, warn, notes).run_round()
    assert warn.getvalue() == "" and result.failures == []
    # the file system without QoS statistics is a note, not a failure
    assert notes.getvalue() == ("ckptwatch collect: note: mmlsqos: project has no QoS "
                                "statistics (QoS off? `mmchqos project --enable` turns it on); "
                                "nothing collected for it\n")
    path = out / "pool" / f"{NODE}-2026-11-28.jsonl"
    assert set(result.files) == {path}
    envs = lines(path)
    assert [(e["source"], e["device"]) for e in envs] == [
        ("lctl", "lustre"), ("daos-metrics", "engine0"), ("daos-metrics", "engine1"),
        ("spdk-iostat", "spdk"), ("mmpmon", "gpfs"), ("mmlsqos", "scratch"),
        ("mmdiag-waiters", "gpfs")]
    for env in envs:
        assert env["node"] == NODE and env["collected_at"] == "2026-11-28T12:00:00.000Z"
    # raw, as the tools printed it
    assert envs[0]["output"] == LCTL_OSS.read_text()
    assert envs[1]["output"] == DAOS_CSV.read_text()
    assert envs[3]["output"] == json.loads(IOSTAT.read_text())
    assert envs[4]["output"] == MMPMON.read_text()
    assert envs[6]["output"] == WAITERS.read_text()
    # JSON-RPC 2.0 as SPDK's rpc.py sends it
    assert spdk_target.requests == [{"jsonrpc": "2.0", "method": "bdev_get_iostat", "id": 1}]

    expected: list[tuple[Any, ...]] = []
    rejected = 0
    for env in envs:
        rows, bad = reader_rows(env)
        assert rows, env["source"]
        expected += rows
        rejected += bad
    assert rejected == 4  # the waiters sample's last 4 lines are malformed on purpose

    counts, quarantined, report = ingest_counts(out, tmp_path / "lake")
    assert quarantined == rejected, [(r.rel, r.notes) for r in report.files]
    from ckptwatch.lake.store import Lake

    lake = Lake(tmp_path / "lake").read("pool_metrics")
    got = sorted((ts.astimezone(UTC), p, t, m, v) for ts, p, t, m, v in lake.select(
        "ts", "pool", "target", "metric", "value").iter_rows())
    assert got == sorted(expected)
    assert counts["pool_metrics"] == len(expected)
    by_key = {(p, t, m): v for _, p, t, m, v in got}
    # by hand: DAOS tgt_0 of the sample: sum 307839671 µs over 42 updates; the OST's writes
    assert by_key[("daos", f"{NODE}/engine0/tgt_0", "write_latency_us_total")] == 307839671
    assert by_key[("daos", f"{NODE}/engine0/tgt_0", "write_ops")] == 42
    assert by_key[("spdk", f"{NODE}/Nvme0n1", "queue_depth.disk")] == 0
    assert by_key[("scratch", "ib-pitzer-rw02.ten", "write_ops")] == 18874626


def test_mmlsqos_alone_learns_the_file_systems_from_mmpmon(tmp_path: Path, pool_path: Path,
                                                           short_dir: Path) -> None:
    warn, notes = io.StringIO(), io.StringIO()
    c = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                       tools=("mmlsqos",))
    result = c.run_round()
    assert warn.getvalue() == "" and result.failures == []
    assert [(e.source, e.device) for e in result.envelopes] == [("mmlsqos", "scratch")]


def test_mmlsqos_file_systems_can_be_named(tmp_path: Path, pool_path: Path,
                                           short_dir: Path) -> None:
    warn, notes = io.StringIO(), io.StringIO()
    write_fake(pool_path, "mmlsqos", {"fs9 -Y --seconds 30": {"file": str(MMLSQOS)}})
    c = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                       tools=("mmlsqos",), gpfs_filesystems=["fs9"], interval_s=30)
    result = c.run_round()
    assert warn.getvalue() == "" and result.failures == []
    assert [(e.source, e.device) for e in result.envelopes] == [("mmlsqos", "fs9")]


# --------------------------------------------------------------------------- absent, not failed


def test_a_host_without_pool_tools_says_once_what_was_looked_for(tmp_path: Path,
                                                                short_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    warn, notes = io.StringIO(), io.StringIO()
    sock = short_dir / "spdk.sock"
    c = pool_collector(tmp_path / "raw", sock, warn, notes)
    first, second = c.run_round(), c.run_round()
    assert first.envelopes == second.envelopes == [] and first.failures == []
    assert warn.getvalue() == ""
    assert notes.getvalue() == (
        "ckptwatch collect: note: no pool tool on this host (looked for lctl, daos_metrics, "
        f"mmpmon, mmlsqos, mmdiag on PATH and the SPDK socket {sock}): no pool statistics "
        "collected\n")


def test_some_pool_tools_absent_are_named_and_the_rest_run(tmp_path: Path, pool_path: Path,
                                                          short_dir: Path) -> None:
    for tool in ("lctl", "daos_metrics"):
        (pool_path / tool).unlink()
    warn, notes = io.StringIO(), io.StringIO()
    sock = short_dir / "spdk.sock"
    sock.write_text("")  # a file, not a socket: no SPDK target here
    c = pool_collector(tmp_path / "raw", sock, warn, notes, tools=POOL_TOOLS)
    result = c.run_round()
    assert warn.getvalue() == "" and result.failures == []
    assert notes.getvalue().splitlines()[0] == (
        "ckptwatch collect: note: pool tools not on this host, skipped: lctl, daos_metrics on "
        f"PATH and the SPDK socket {sock}")
    assert [e.source for e in result.envelopes] == ["mmpmon", "mmlsqos", "mmdiag-waiters"]


def test_a_lustre_client_has_lctl_but_nothing_to_collect(tmp_path: Path, pool_path: Path,
                                                         short_dir: Path) -> None:
    absent = "".join(f"error: get_param: param_path '{p.replace('.', '/')}': No such file or "
                     "directory\n" for p in LUSTRE_PARAMS)
    write_fake(pool_path, "lctl", {"get_param " + " ".join(LUSTRE_PARAMS): {
        "stderr": absent, "rc": 2}})
    warn, notes = io.StringIO(), io.StringIO()
    c = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes, tools=("lctl",))
    assert c.run_round().failures == [] and c.run_round().envelopes == []
    assert warn.getvalue() == ""
    assert notes.getvalue().startswith("ckptwatch collect: note: lctl: this host serves no "
                                       "Lustre target (none of obdfilter.*.stats, ")
    assert len(notes.getvalue().splitlines()) == 1


# --------------------------------------------------------------------------- present and failing


def test_a_present_tool_that_fails_is_a_failure_said_when_it_starts_and_ends(
        tmp_path: Path, pool_path: Path, short_dir: Path) -> None:
    write_fake(pool_path, "mmdiag", {"--waiters -Y": {
        "rc": 1, "stderr": "mmdiag: The GPFS daemon is not running.\n"}})  # message ours
    warn, notes = io.StringIO(), io.StringIO()
    c = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                       tools=("mmdiag", "mmpmon"))
    first, second = c.run_round(), c.run_round()
    failure = ("mmdiag: `mmdiag --waiters -Y` exited 1: mmdiag: The GPFS daemon is not "
               "running.")
    assert first.failures == second.failures == [failure]
    assert [e.source for e in first.envelopes] == ["mmpmon"]  # the others still collected
    assert warn.getvalue() == f"ckptwatch collect: error: {failure}\n"  # once while it lasts
    write_fake(pool_path, "mmdiag", {"--waiters -Y": {"file": str(WAITERS)}})
    third = c.run_round()
    assert third.failures == [] and [e.source for e in third.envelopes] == [
        "mmpmon", "mmdiag-waiters"]
    assert warn.getvalue().splitlines()[-1] == "ckptwatch collect: mmdiag: collecting again"


def test_lctl_errors_beside_its_output_keep_the_output_and_fail(tmp_path: Path,
                                                                pool_path: Path,
                                                                short_dir: Path) -> None:
    write_fake(pool_path, "lctl", {"get_param " + " ".join(LUSTRE_PARAMS): {
        "file": str(LCTL_OSS), "rc": 5,
        "stderr": LCTL_ABSENT + "error: get_param: read('/sys/kernel/debug/lustre/obdfilter/"
                                "ai400-OST0001/job_stats') failed: Input/output error\n"}})
    warn, notes = io.StringIO(), io.StringIO()
    result = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                            tools=("lctl",)).run_round()
    assert [e.source for e in result.envelopes] == ["lctl"]
    assert len(result.failures) == 1 and "Input/output error" in result.failures[0]


def test_lctl_as_non_root_prints_nothing_and_fails_with_the_fix(tmp_path: Path,
                                                                pool_path: Path,
                                                                short_dir: Path) -> None:
    write_fake(pool_path, "lctl", {"get_param " + " ".join(LUSTRE_PARAMS): {"rc": 2}})
    warn, notes = io.StringIO(), io.StringIO()
    result = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                            tools=("lctl",)).run_round()
    assert result.envelopes == []
    assert result.failures == [
        f"lctl: `lctl get_param {' '.join(LUSTRE_PARAMS)}` exited 2 and printed nothing "
        "(Lustre keeps the server statistics root-only: run the collector as root)"]


def test_daos_engines_end_at_the_first_missing_one_but_engine_0_must_be_there(
        tmp_path: Path, pool_path: Path, short_dir: Path) -> None:
    write_fake(pool_path, "daos_metrics", {"-C -S 0": {"stdout": DAOS_NO_ENGINE.format(n=0),
                                                       "rc": 255}})
    warn, notes = io.StringIO(), io.StringIO()
    result = pool_collector(tmp_path / "raw", short_dir / "none.sock", warn, notes,
                            tools=("daos_metrics",)).run_round()
    assert result.envelopes == []
    assert result.failures == [
        "daos_metrics: `daos_metrics -C -S 0` finds no I/O engine 0 on this host (Unable to "
        "attach to the shared memory for the server index: 0): is daos_server running, and "
        "the collector run as root or the engines' user?"]


@pytest.mark.parametrize(("reply", "failure"), [
    (b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}',
     "bdev_get_iostat failed: Method not found"),
    (None, "no answer within 1 s"),
    (b'{"jsonrpc": "2.0", "id": 7, "result": {}}', "answers request id 7, not 1"),
])
def test_spdk_target_failures(tmp_path: Path, short_dir: Path, reply: bytes | None,
                              failure: str) -> None:
    server = FakeSpdk(short_dir / "spdk.sock", reply)
    try:
        warn, notes = io.StringIO(), io.StringIO()
        result = pool_collector(tmp_path / "raw", server.path, warn, notes, tools=("spdk",),
                                timeout_s=1).run_round()
    finally:
        server.close()
    assert result.envelopes == []
    assert len(result.failures) == 1 and failure in result.failures[0], result.failures


def test_a_socket_nobody_listens_on_is_a_failure(tmp_path: Path, short_dir: Path) -> None:
    stale = short_dir / "spdk.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(stale))  # bound, never listening: as a stopped target leaves it
    try:
        warn, notes = io.StringIO(), io.StringIO()
        result = pool_collector(tmp_path / "raw", stale, warn, notes,
                                tools=("spdk",)).run_round()
    finally:
        sock.close()
    assert result.failures == [f"spdk: nothing listens on {stale} (is the SPDK target "
                               "running? a socket left by a stopped one refuses connections)"]


def test_spdk_rpc_reads_a_response_split_across_reads(spdk_target: FakeSpdk) -> None:
    response = spdk_rpc(spdk_target.path, "bdev_get_iostat", timeout_s=5)
    assert response["result"]["tick_rate"] == 2200000000
    with pytest.raises(SpdkRpcError):
        spdk_target.reply = b'{"jsonrpc": "2.0", "id": 1, "error": {"message": "nope"}}'
        spdk_rpc(spdk_target.path, "bdev_get_iostat", timeout_s=5)


# --------------------------------------------------------------------------- command line


def run_cli(args: list[str], bin_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ckptwatch.cli.main", "collect", *args],
                          capture_output=True, text=True, env=cli_env(bin_dir), timeout=120)


def test_cli_once_on_a_host_without_pool_tools_exits_0_with_a_note(tmp_path: Path,
                                                                  short_dir: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    sock = short_dir / "spdk.sock"
    done = run_cli(["--out", str(tmp_path / "raw"), "--once", "--node", NODE,
                    "--tools", ",".join(POOL_TOOLS), "--spdk-socket", str(sock)], empty)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "ckptwatch collect: note: no pool tool on this host (looked for lctl, daos_metrics, "
        "mmpmon, mmlsqos, mmdiag on PATH and in /usr/sbin, /usr/lpp/mmfs/bin and the SPDK "
        f"socket {sock}): no pool statistics collected",
        f"collected 0 SMART, 0 fabric and 0 pool envelope(s) for {NODE} into {tmp_path / 'raw'}"]


def test_cli_once_on_a_pool_server_then_ingest(tmp_path: Path, pool_path: Path,
                                               spdk_target: FakeSpdk) -> None:
    out = tmp_path / "raw"
    done = run_cli(["--out", str(out), "--once", "--node", NODE, "--spdk-socket",
                    str(spdk_target.path), "--tools", "lctl,spdk,mmpmon,mmlsqos",
                    "--gpfs-fs", "scratch"], pool_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"collected 0 SMART, 0 fabric and 4 pool envelope(s) for "
                                  f"{NODE} into ")
    counts, quarantined, _ = ingest_counts(out, tmp_path / "lake")
    assert quarantined == 0 and counts["pool_metrics"] > 0


def test_cli_once_with_a_failing_pool_tool_exits_1(tmp_path: Path, pool_path: Path,
                                                   short_dir: Path) -> None:
    write_fake(pool_path, "mmpmon", {"-p -s": {"rc": 1, "stderr": "mmpmon: error\n"}})
    done = run_cli(["--out", str(tmp_path / "raw"), "--once", "--node", NODE,
                    "--tools", "mmpmon,mmdiag", "--spdk-socket", str(short_dir / "x.sock")],
                   pool_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "ckptwatch collect: error: mmpmon: `mmpmon -p -s` exited 1: mmpmon: error",
        "ckptwatch collect: failed: mmpmon (see the errors above); 1 envelope(s) of the other "
        "tools written"]
    assert len(lines(tmp_path / "raw" / "pool" / f"{NODE}-{datetime.now(UTC).date()}.jsonl")) \
        == 1


def test_cli_help_names_the_pool_flags() -> None:
    from ckptwatch.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    collect = sub.choices["collect"]  # type: ignore[index]
    flags = {o for a in collect._actions for o in a.option_strings if a.help}
    assert {"--spdk-socket", "--gpfs-fs"} <= flags
    args = parser.parse_args(["collect", "--out", "x", "--tools", "lctl,spdk",
                              "--gpfs-fs", "fs1,fs2"])
    assert args.tools == ("lctl", "spdk") and args.gpfs_fs == ("fs1", "fs2")
