"""The world mix's renderers: each parses back to the values the default encoding gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.simulate.telemetry.render import (
    ethtool_metric,
    go_float,
    render_node_exporter,
    render_nvme_smart_log_json,
    render_ocp_smart_text,
    render_sysfs_ib_text,
)
from ckptwatch.simulate.telemetry.smart import _smartctl_doc
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.envelope import _load_formats, parse_tool_output
from ckptwatch.sources.ethtool import render_ethtool_s
from ckptwatch.sources.nvme_cli import render_ocp_smart_json
from ckptwatch.sources.perfquery import render_perfquery_x

TS = datetime(2026, 11, 28, tzinfo=UTC)
REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
OCP = {"media_written": 80410014056448, "media_read": 84923571298304, "soft_ecc": 3,
       "system_used": 1, "refresh": 79503, "erase_max": 34, "erase_min": 25, "free_blocks": 12,
       "nuse": 118697984, "plp": 101, "endurance": 23175501818990592, "power_changes": 41}
HEALTH = {"critical_warning": 0, "temperature": 37, "available_spare": 100,
          "available_spare_threshold": 10, "percentage_used": 3, "data_units_read": 9898518,
          "data_units_written": 136157684, "host_reads": 313528805, "host_writes": 1928062610,
          "controller_busy_time": 8284, "power_cycles": 64, "power_on_hours": 4974,
          "unsafe_shutdowns": 39, "media_errors": 0, "num_err_log_entries": 0}
IB = {"port_xmit_wait": 123456789, "port_xmit_data": 2**40 + 3, "port_rcv_data": 2**39,
      "port_xmit_packets": 10**9, "port_rcv_packets": 10**8, "unicast_xmit_packets": 999755859,
      "unicast_rcv_packets": 99975586, "multicast_xmit_packets": 244141,
      "multicast_rcv_packets": 24414}
ROCE = {"rx_bytes_phy": 8654382700876028, "tx_bytes_phy": 12, "rx_prio3_pause": 1389214,
        "tx_pause_ctrl_phy": 2306117, "rx_discards_phy": 0}


def _parse(output: Any, source: str, device: str | None = "nvme0",
           port: str | None = None) -> dict[tuple[Any, ...], float]:
    _load_formats()
    ctx = ToolContext(node="n1", ts=TS, source=source, device=device, port=port)
    out: dict[tuple[Any, ...], float] = {}
    for table, rows in parse_tool_output(output, ctx).items():
        for r in rows:
            key = (r["metric"],) if table == "nvme_smart" else (r["device"], r["port"],
                                                                 r["counter"])
            out[key] = r["value"]
    return out


def test_ocp_text_reads_as_the_ocp_json() -> None:
    text = render_ocp_smart_text(OCP)
    assert _parse(text, "nvme-ocp-smart") == _parse(render_ocp_smart_json(OCP), "nvme-ocp-smart")
    assert _parse(text, "nvme-ocp-smart")[("media_written_bytes",)] == 80410014056448.0


def test_ocp_text_is_laid_out_as_the_real_sample() -> None:
    real = (REAL / "nvme_cli_vendor_logs" / "cachelib_nandwrites"
            / "handlesOcpSupportedDevice_ModelListed__kSmartLogOutputOcp.txt").read_text()
    ours = render_ocp_smart_text({**OCP, "media_written": 80410014056448,
                                  "media_read": 84923571298304})
    real_lines, our_lines = real.splitlines(), ours.splitlines()
    assert our_lines[:4] == real_lines[:4]  # header and the 128-bit "hi lo" lines, byte for byte
    labels = [line.split("\t")[0].split("  ")[1] for line in real_lines[4:] if "\t" in line]
    assert [line.split("\t")[0].split("  ")[1] for line in our_lines[4:]
            if "\t" in line][:len(labels)] == labels


def test_nvme_cli_smart_log_reads_as_smartctl_on_every_shared_metric() -> None:
    ours = _parse(render_nvme_smart_log_json(HEALTH), "nvme-smart-log")
    smartctl = _parse(_smartctl_doc("nvme0", "M", "S", "F", 1.8e9, HEALTH), "smartctl")
    shared = set(ours) & set(smartctl)
    assert len(shared) >= 14
    assert {k: ours[k] for k in shared} == {k: smartctl[k] for k in shared}
    assert render_nvme_smart_log_json(HEALTH)["temperature"] == 310  # Kelvin, as nvme-cli


@pytest.mark.parametrize(("source", "render"), [
    ("sysfs-ib", lambda: render_sysfs_ib_text([("mlx5_0", "1", IB)])),
    ("prometheus", lambda: render_node_exporter(infiniband=[("mlx5_0", "1", IB)])),
], ids=["sysfs", "node_exporter"])
def test_ib_outputs_read_as_perfquery(source: str, render: Any) -> None:
    ours = _parse(render(), source, device=None)
    perfquery = _parse(render_perfquery_x(101, 1, IB), "perfquery", "mlx5_0", "1")
    for name in (*IB, "port_xmit_bytes", "port_rcv_bytes"):
        assert ours[("mlx5_0", "1", name)] == perfquery[("mlx5_0", "1", name)], name


def test_node_exporter_ethtool_reads_as_ethtool() -> None:
    scrape = render_node_exporter(ethtool=[("ens1f0np0", ROCE), ("ens2f0np0", {"rx_bytes_phy": 7})])
    ours = _parse(scrape, "prometheus", device=None)
    direct = _parse(render_ethtool_s("mlx5_core", ROCE, only_given=True), "ethtool", "ens1f0np0")
    assert {k: v for k, v in ours.items() if k[0] == "ens1f0np0"} == direct
    assert ours[("ens2f0np0", "1", "rx_bytes_phy")] == 7.0
    assert "# TYPE node_ethtool_received_prio3_pause untyped" in scrape


def test_node_exporter_names_and_numbers_as_the_go_client_prints_them() -> None:
    assert ethtool_metric("rx_prio3_pause") == "node_ethtool_received_prio3_pause"
    assert ethtool_metric("port.rx_dropped") == "node_ethtool_port_received_dropped"
    assert [go_float(v) for v in (0, 27478, 1416692, 1.8527668e7, 3.91, 1e6)] == [
        "0", "27478", "1.416692e+06", "1.8527668e+07", "3.91", "1e+06"]
    real = (REAL / "prometheus_exposition"
            / "node_exporter_e2e_infiniband_excerpt.prom").read_text()
    assert "1.8527668e+07" in real  # the spelling the real scrape uses


def test_dlio_run_ingests_as_its_saves(tmp_path: Path) -> None:
    from ckptwatch.ingest.run import ingest
    from ckptwatch.lake.query import connect
    from ckptwatch.lake.store import Lake
    from ckptwatch.simulate.telemetry.render import (
        render_dlio_per_epoch_stats,
        render_dlio_summary,
    )

    t0 = TS.timestamp()
    run = tmp_path / "raw" / "checkpoints" / "llama-run"
    run.mkdir(parents=True)
    saves = {0: [(t0, t0 + 30.5), (t0 + 600, t0 + 631.25)], 1: [(t0, t0 + 29.0),
                                                                (t0 + 600, t0 + 640.0)]}
    for rank, s in saves.items():
        (run / f"{rank}_per_epoch_stats.json").write_text(
            json.dumps(render_dlio_per_epoch_stats(s, 64.0)))
    (run / "summary.json").write_text(json.dumps(render_dlio_summary(t0, 2, 1, "n1", 64.0)))
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.quarantined == 0 and report.rows == {"checkpoint_writes": 4}
    con = connect(tmp_path / "lake")
    got = con.execute("select rank, step, round(epoch(end_ts) - epoch(start_ts), 3), bytes "
                      "from read_parquet($g) order by rank, step",
                      {"g": Lake(tmp_path / "lake").glob("checkpoint_writes")}).fetchall()
    assert got == [(0, 1, 30.5, 32 * 2**30), (0, 2, 31.25, 32 * 2**30),
                   (1, 1, 29.0, 32 * 2**30), (1, 2, 40.0, 32 * 2**30)]
