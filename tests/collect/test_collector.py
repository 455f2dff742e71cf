"""`ckptwatch collect`: fake smartctl/nvme/ethtool on PATH print real outputs; real parsers ingest.

The fake executables answer exactly the commands the collector is meant to run and fail loudly
(exit 64) on anything else, so a happy-path round without warnings also pins the command lines.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.collect.collector import (
    TOOLS,
    CollectError,
    Collector,
    envelope_path,
    next_round_at,
    nvme_controllers,
    rdma_netdevs,
    run_loop,
)

REAL = Path(__file__).parents[1] / "fixtures" / "real"
SMARTCTL_NVME0 = REAL / "smartctl_json_nvme" / "scrutiny" / "smart-nvme2.json"  # argv -a -j
SMARTCTL_NVME1 = (REAL / "smartctl_json_nvme" / "smartctl_exporter"
                  / "nvme-null-INTEL_SSDPE2KX010T8-nvme1.json")
SMARTCTL_SCAN_ONE = REAL / "smartctl_json_nvme" / "scrutiny" / "smartctl_scan_nvme.json"
OCP_TEXT = (REAL / "nvme_cli_vendor_logs" / "cachelib_nandwrites"
            / "handlesOcpSupportedDevice_ModelListed__kSmartLogOutputOcp.txt")
ETHTOOL_MLX5 = REAL / "ethtool" / "ethq" / "ethtool-S_mlx5_core.txt"
SYSFS_FIXTURE = REAL / "infiniband" / "procfs_sysfs" / "sys"
NODE = "gpu-node-07"
NOON = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)

#: `smartctl --scan -j` in smartctl 7.x's real layout (keys as in the scrutiny sample
#: tests/fixtures/real/smartctl_json_nvme/scrutiny/smartctl_scan_nvme.json; the SATA entry as
#: smartctl prints it, e.g. `{"name": "/dev/sda", "info_name": "/dev/sda [SAT]", "type": "sat",
#: "protocol": "ATA"}`); the device list is ours.
SCAN = {
    "json_format_version": [1, 0],
    "smartctl": {"version": [7, 3], "svn_revision": "5338", "platform_info":
                 "x86_64-linux-6.1.0-18-amd64", "build_info": "(local build)",
                 "argv": ["smartctl", "--scan", "-j"], "exit_status": 0},
    "devices": [
        {"name": "/dev/sda", "info_name": "/dev/sda [SAT]", "type": "sat", "protocol": "ATA"},
        {"name": "/dev/nvme0", "info_name": "/dev/nvme0", "type": "nvme", "protocol": "NVMe"},
        {"name": "/dev/nvme1", "info_name": "/dev/nvme1", "type": "nvme", "protocol": "NVMe"},
    ],
}
#: `nvme smart-log /dev/nvme0 -o json` in nvme-cli 2.x layout (key names as nvme-cli prints
#: them; values ours — the real samples we know of are GPL-3.0 and not copied).
SMART_LOG = {
    "critical_warning": 0, "temperature": 318, "avail_spare": 100, "spare_thresh": 10,
    "percent_used": 4, "endurance_grp_critical_warning_summary": 0, "data_units_read": 1000,
    "data_units_written": 2500, "host_read_commands": 10, "host_write_commands": 20,
    "controller_busy_time": 7, "power_cycles": 3, "power_on_hours": 99, "unsafe_shutdowns": 1,
    "media_errors": 0, "num_err_log_entries": 2, "warning_temp_time": 0,
    "critical_comp_time": 0, "temperature_sensor_1": 320, "thm_temp1_trans_count": 5,
    "thm_temp2_trans_count": 0, "thm_temp1_total_time": 60, "thm_temp2_total_time": 0,
}
#: smartctl's answer when it may not open the device (as non-root): exit status bit 1.
SMARTCTL_DENIED = {
    "json_format_version": [1, 0],
    "smartctl": {"version": [7, 3], "argv": ["smartctl", "-j", "-a", "/dev/nvme0"],
                 "messages": [{"string": "Smartctl open device: /dev/nvme0 failed: Permission "
                               "denied", "severity": "error"}], "exit_status": 2},
    "device": {"name": "/dev/nvme0", "info_name": "/dev/nvme0", "type": "nvme",
               "protocol": "NVMe"},
}

FAKE = """#!{python}
import json, sys, time
RESPONSES = json.loads({responses!r})
key = " ".join(sys.argv[1:])
r = RESPONSES.get(key)
if r is None:
    sys.stderr.write("fake {tool}: unexpected arguments: " + key + "\\n")
    sys.exit(64)
time.sleep(r.get("sleep", 0))
if "file" in r:
    sys.stdout.write(open(r["file"], encoding="utf-8").read())
sys.stdout.write(r.get("stdout", ""))
sys.stderr.write(r.get("stderr", ""))
sys.exit(r.get("rc", 0))
"""


def write_fake(bin_dir: Path, tool: str, responses: dict[str, dict[str, Any]]) -> None:
    """An executable ``bin_dir/tool`` answering ``" ".join(argv[1:])`` from ``responses``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / tool
    path.write_text(FAKE.format(python=sys.executable, responses=json.dumps(responses),
                                tool=tool))
    path.chmod(0o755)


def default_responses(tmp: Path) -> dict[str, dict[str, dict[str, Any]]]:
    scan = tmp / "scan.json"
    scan.write_text(json.dumps(SCAN, indent=2))
    smart_log = tmp / "smart-log.json"
    smart_log.write_text(json.dumps(SMART_LOG, indent=2))
    return {
        "smartctl": {
            "--scan -j": {"file": str(scan)},
            "-j -a /dev/nvme0": {"file": str(SMARTCTL_NVME0)},
            "-j -a /dev/nvme1": {"file": str(SMARTCTL_NVME1), "rc": 64},  # bit 6: error log
        },
        "nvme": {
            "smart-log /dev/nvme0 -o json": {"file": str(smart_log)},
            "smart-log /dev/nvme1 -o json": {"file": str(smart_log)},
            "ocp smart-add-log /dev/nvme0": {"file": str(OCP_TEXT)},
            "ocp smart-add-log /dev/nvme1": {
                "rc": 1, "stderr": "NVMe status: Invalid Log Page: The log page indicated is "
                                   "invalid(0x2109)\n"},
        },
        "ethtool": {"-S eth2": {"file": str(ETHTOOL_MLX5)}},
    }


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """The procfs sysfs fixture, with mlx5_0 turned into a RoCE HCA whose PCI function has eth2
    (the fixture's ports are all InfiniBand and it has no ``device`` links) and two NVMe
    controllers under class/nvme."""
    root = tmp_path / "sys"
    shutil.copytree(SYSFS_FIXTURE, root)
    mlx5 = root / "class" / "infiniband" / "mlx5_0"
    (mlx5 / "ports" / "1" / "link_layer").write_text("Ethernet\n")
    (mlx5 / "device" / "net" / "eth2").mkdir(parents=True)
    for ctrl in ("nvme0", "nvme1"):
        (root / "class" / "nvme" / ctrl).mkdir(parents=True)
    return root


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/bin with fake smartctl, nvme and ethtool, and nothing else, as PATH."""
    bin_dir = tmp_path / "bin"
    for tool, responses in default_responses(tmp_path).items():
        write_fake(bin_dir, tool, responses)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def collector(out: Path, sysfs: Path, warn: io.StringIO, **kw: Any) -> Collector:
    kw.setdefault("clock", lambda: NOON)
    return Collector(out, node=NODE, sysfs_root=sysfs, warn=warn, **kw)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def ingest_counts(raw: Path, lake: Path) -> tuple[dict[str, int], int, Any]:
    from ckptwatch.ingest.run import ingest

    report = ingest(raw, lake)
    return report.rows, report.quarantined, report


# --------------------------------------------------------------------------- a full round


def test_round_writes_envelopes_the_ingest_reads_without_quarantine(
        tmp_path: Path, sysfs: Path, fake_path: Path) -> None:
    warn = io.StringIO()
    out = tmp_path / "raw"
    result = collector(out, sysfs, warn).run_round()
    assert warn.getvalue() == ""  # every command was one the fakes expect
    smart = out / "smart" / f"{NODE}-2026-11-28.jsonl"
    fabric = out / "fabric" / f"{NODE}-2026-11-28.jsonl"
    assert set(result.files) == {smart, fabric}
    s, f = lines(smart), lines(fabric)
    assert [(e["source"], e["device"]) for e in s] == [
        ("smartctl", "nvme0"), ("smartctl", "nvme1"), ("nvme-smart-log", "nvme0"),
        ("nvme-ocp-smart", "nvme0"), ("nvme-smart-log", "nvme1")]  # no OCP log on nvme1
    assert [(e["source"], e["device"], e.get("port")) for e in f] == [
        ("ethtool", "eth2", "1"), ("sysfs-ib", "hfi1_0", None), ("sysfs-ib", "mlx4_0", None),
        ("sysfs-ib", "mlx5_0", None)]
    for env in s + f:
        assert env["node"] == NODE and env["collected_at"] == "2026-11-28T12:00:00.000Z"
        assert list(env)[-2:] == ["source", "output"]
    assert s[0]["output"] == json.loads(SMARTCTL_NVME0.read_text())  # raw, unchanged
    assert f[0]["output"] == ETHTOOL_MLX5.read_text()
    assert f[3]["output"]["mlx5_0/ports/1/counters/port_xmit_wait"] == (
        SYSFS_FIXTURE / "class/infiniband/mlx5_0/ports/1/counters/port_xmit_wait").read_text(
    ).strip()
    rows, quarantined, report = ingest_counts(out, tmp_path / "lake")
    assert quarantined == 0, [(r.rel, r.notes) for r in report.files]
    assert rows["nvme_smart"] > 0 and rows["fabric_counters"] > 0

    from ckptwatch.lake.store import Lake

    lake = Lake(tmp_path / "lake")
    smart_sources = set(lake.read("nvme_smart")["source"].unique())
    assert smart_sources == {"smartctl", "nvme-smart-log", "nvme-ocp-smart"}
    counters = lake.read("fabric_counters")
    assert set(counters["source"].unique()) == {"ethtool", "sysfs-ib"}
    assert set(counters["node"].unique()) == {NODE}


def test_rounds_append_and_rotate_by_utc_day(tmp_path: Path, sysfs: Path,
                                             fake_path: Path) -> None:
    times = iter([NOON.replace(hour=23, minute=59, second=59)] * 100
                 + [NOON + timedelta(hours=12, seconds=1)] * 100)
    out = tmp_path / "raw"
    c = collector(out, sysfs, io.StringIO(), tools=("sysfs",), clock=lambda: next(times))
    c.run_round()
    c.run_round()  # still 23:59:59 for the first 100 clock reads
    first = out / "fabric" / f"{NODE}-2026-11-28.jsonl"
    assert len(lines(first)) == 6  # 3 HCAs x 2 rounds, appended
    times = iter([NOON + timedelta(hours=12, seconds=1)] * 10)
    c.clock = lambda: next(times)
    c.run_round()
    assert len(lines(out / "fabric" / f"{NODE}-2026-11-29.jsonl")) == 3
    assert envelope_path(out, "smart", NODE, NOON) == out / "smart" / f"{NODE}-2026-11-28.jsonl"


def test_truncated_last_line_is_isolated_and_quarantined(tmp_path: Path, sysfs: Path,
                                                         fake_path: Path) -> None:
    out = tmp_path / "raw"
    fabric = out / "fabric" / f"{NODE}-2026-11-28.jsonl"
    c = collector(out, sysfs, io.StringIO(), tools=("sysfs", "ethtool"))
    c.run_round()
    whole = fabric.read_bytes()
    fabric.write_bytes(whole + whole.splitlines(keepends=True)[0][:57])  # killed mid-line
    c.run_round()
    data = fabric.read_bytes()
    assert data.endswith(b"\n")
    text = data.decode().splitlines()
    assert len(text) == 9 and text[4] == whole.splitlines()[0][:57].decode()
    rows, quarantined, report = ingest_counts(out, tmp_path / "lake")
    assert quarantined == 1
    assert rows["fabric_counters"] > 0


# --------------------------------------------------------------------------- problems


def test_missing_tool_is_reported_once_and_skipped(tmp_path: Path, sysfs: Path,
                                                   fake_path: Path) -> None:
    (fake_path / "nvme").unlink()
    warn = io.StringIO()
    c = collector(tmp_path / "raw", sysfs, warn)
    first = c.run_round()
    c.run_round()
    assert warn.getvalue().splitlines() == [
        "ckptwatch collect: warning: nvme: not found on PATH; install nvme-cli (skipping nvme)"]
    assert first.count("smart") == 2 and first.count("fabric") == 4


def test_permission_denied_is_reported_once_with_the_fix(tmp_path: Path, sysfs: Path,
                                                         fake_path: Path) -> None:
    denied = tmp_path / "denied.json"
    denied.write_text(json.dumps(SMARTCTL_DENIED))
    responses = default_responses(tmp_path)
    responses["smartctl"]["-j -a /dev/nvme0"] = {"file": str(denied), "rc": 2}
    responses["smartctl"]["-j -a /dev/nvme1"] = {"file": str(denied), "rc": 2}
    write_fake(fake_path, "smartctl", responses["smartctl"])
    write_fake(fake_path, "nvme", {k: {"rc": 1, "stderr": "open: Permission denied\n"}
                                   for k in responses["nvme"]})
    warn = io.StringIO()
    result = collector(tmp_path / "raw", sysfs, warn).run_round()
    got = warn.getvalue().splitlines()
    assert len(got) == 2
    assert got[0].startswith("ckptwatch collect: warning: smartctl: `smartctl -j -a /dev/nvme0`: "
                             "permission denied (Smartctl open device: /dev/nvme0 failed: "
                             "Permission denied); run as root or grant CAP_SYS_ADMIN")
    assert got[1].startswith("ckptwatch collect: warning: nvme: `nvme smart-log /dev/nvme0 -o "
                             "json`: permission denied")
    assert result.count("smart") == 0 and result.count("fabric") == 4


def test_tool_timeout_is_reported_and_the_round_goes_on(tmp_path: Path, sysfs: Path,
                                                        fake_path: Path) -> None:
    """The hung tool is given up after the timeout; the round's other tools still run. The
    timeout leaves room for the fake tools' own start (a Python script each: at a load of 15
    on 2 cores, 0.5 s timed out the healthy ones too); the hung one sleeps far longer."""
    write_fake(fake_path, "ethtool", {"-S eth2": {"sleep": 120, "stdout": "rx_bytes: 1\n"}})
    warn = io.StringIO()
    t0 = time.monotonic()
    result = collector(tmp_path / "raw", sysfs, warn, timeout_s=4).run_round()
    assert time.monotonic() - t0 < 60
    assert warn.getvalue() == ("ckptwatch collect: warning: ethtool: `ethtool -S eth2` timed out "
                               "after 4 s (skipped; raise --timeout if the device is just "
                               "slow)\n")
    assert result.count("fabric") == 3 and result.count("smart") == 5


def test_real_single_device_scan_sample(tmp_path: Path, sysfs: Path, fake_path: Path) -> None:
    responses = default_responses(tmp_path)["smartctl"]
    responses["--scan -j"] = {"file": str(SMARTCTL_SCAN_ONE)}
    write_fake(fake_path, "smartctl", responses)
    c = collector(tmp_path / "raw", sysfs, io.StringIO(), tools=("smartctl",))
    assert c.smartctl_devices() == ["/dev/nvme0"]


def test_rdma_netdevs_and_controllers(sysfs: Path) -> None:
    assert rdma_netdevs(sysfs) == ["eth2"]
    assert rdma_netdevs(SYSFS_FIXTURE) == []  # InfiniBand-only HCAs: IPoIB, no ethtool
    assert nvme_controllers(sysfs, ["/dev/nvme10n1", "/dev/sda"]) == ["nvme0", "nvme1", "nvme10"]
    assert nvme_controllers(tmp := sysfs / "absent") == [] and not tmp.exists()


def test_bad_settings_are_refused(tmp_path: Path, sysfs: Path) -> None:
    with pytest.raises(CollectError, match="node name 'a/b' cannot name a file"):
        Collector(tmp_path, node="a/b")
    with pytest.raises(CollectError, match="unknown tool"):
        Collector(tmp_path, node=NODE, tools=("smartctl", "perfquery"))
    with pytest.raises(CollectError, match="--timeout must be positive"):
        Collector(tmp_path, node=NODE, timeout_s=0)
    (tmp_path / "file").write_text("")
    c = Collector(tmp_path / "file", node=NODE, sysfs_root=sysfs, tools=("sysfs",))
    with pytest.raises(CollectError, match="^cannot append to .*fabric/gpu-node-07-.*; check "
                       "--out exists and is writable$"):
        c.run_round()


def test_next_round_is_aligned_and_never_right_after_the_last() -> None:
    # Started 23 ms before a 30 s boundary (as a collector started at 14:59:59.977 is): the
    # next round is the boundary after it, not 23 ms later (two samples 23 ms apart).
    assert next_round_at(1_799_999.977, 1_799_999.990, 30) == 1_800_030
    # Started mid-interval: the next boundary.
    assert next_round_at(1_800_010.0, 1_800_010.5, 30) == 1_800_030
    # A round that overran its interval: the next boundary after now, still aligned.
    assert next_round_at(1_800_000.0, 1_800_071.0, 30) == 1_800_090
    # Exactly half an interval after the start is far enough.
    assert next_round_at(1_800_015.0, 1_800_015.1, 30) == 1_800_030


def test_loop_stops_when_asked(tmp_path: Path, sysfs: Path, fake_path: Path) -> None:
    import threading

    stop = threading.Event()
    seen: list[int] = []

    def on_round(result: Any) -> None:
        seen.append(result.count("fabric"))
        if len(seen) == 2:
            stop.set()

    c = collector(tmp_path / "raw", sysfs, io.StringIO(), tools=("sysfs",))
    assert run_loop(c, interval_s=0.05, stop=stop, on_round=on_round) == 2
    assert run_loop(c, interval_s=3600, stop=threading.Event(), once=True) == 1


# --------------------------------------------------------------------------- command line


def cli_env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": str(bin_dir)}


def test_cli_once_then_ingest(tmp_path: Path, sysfs: Path, fake_path: Path) -> None:
    out = tmp_path / "raw"
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "collect", "--out", str(out), "--once",
         "--node", NODE, "--sysfs-root", str(sysfs), "--tools", "nvme,sysfs", "--timeout", "10"],
        capture_output=True, text=True, env=cli_env(fake_path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"collected 3 SMART and 3 fabric envelope(s) for {NODE} into ")
    rows, quarantined, _ = ingest_counts(out, tmp_path / "lake")
    assert quarantined == 0 and rows["nvme_smart"] > 0


def test_cli_sigterm_ends_cleanly_after_the_round(tmp_path: Path, sysfs: Path,
                                                  fake_path: Path) -> None:
    out = tmp_path / "raw"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptwatch.cli.main", "collect", "--out", str(out),
         "--interval", "30", "--node", NODE, "--sysfs-root", str(sysfs), "--tools", "sysfs"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(fake_path))
    try:
        deadline = time.monotonic() + 30
        while not list(out.glob("fabric/*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    files = list(out.glob("fabric/*.jsonl"))
    assert len(files) == 1 and len(lines(files[0])) == 3


def test_cli_help_documents_every_flag() -> None:
    from ckptwatch.cli import collect as cli_collect
    from ckptwatch.cli.main import build_parser

    assert cli_collect.TOOL_NAMES == TOOLS
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    collect = sub.choices["collect"]  # type: ignore[index]
    flags = {o for a in collect._actions for o in a.option_strings if a.help}
    assert {"--out", "--interval", "--once", "--node", "--sysfs-root", "--tools",
            "--timeout"} <= flags
    with pytest.raises(SystemExit):
        parser.parse_args(["collect", "--out", "x", "--tools", "smartctl,perfquery"])


def test_cli_once_with_no_tool_says_so_and_fails(tmp_path: Path) -> None:
    empty = tmp_path / "bin"  # a PATH with none of the tools, and a sysfs without devices
    empty.mkdir()
    (tmp_path / "sys").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "collect", "--out", str(tmp_path / "raw"),
         "--once", "--node", NODE, "--sysfs-root", str(tmp_path / "sys")],
        capture_output=True, text=True, env=cli_env(empty), timeout=60)
    assert done.returncode == 1
    assert "ckptwatch collect: nothing collected: none of smartctl, nvme, ethtool, sysfs gave " \
           "an output on this node (see the warnings above about smartctl;" \
           in done.stderr


def test_cli_once_on_a_node_without_drives_or_ports_is_not_a_failure(tmp_path: Path) -> None:
    """sysfs alone on a node without NVMe or InfiniBand: nothing to read, no warning, so no
    "see the warnings above" and exit 0 (a timer runs it every minute there)."""
    (tmp_path / "sys").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "collect", "--out", str(tmp_path / "raw"),
         "--once", "--node", NODE, "--sysfs-root", str(tmp_path / "sys"), "--tools", "sysfs"],
        capture_output=True, text=True, env=cli_env(tmp_path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"ckptwatch collect: nothing to collect on {NODE}: sysfs found no "
                           "NVMe drive and no RDMA port\n")
    assert done.stdout.startswith(f"collected 0 SMART and 0 fabric envelope(s) for {NODE}")
