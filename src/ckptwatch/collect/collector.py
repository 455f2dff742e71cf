"""Node collector: run the SMART and fabric tools and append their raw output as envelopes.

One collection round runs, for this node:

* ``smartctl --scan -j``, then ``smartctl -j -a <dev>`` for each NVMe device it lists
  (source ``smartctl``);
* ``nvme smart-log /dev/nvmeX -o json`` (``nvme-smart-log``) and ``nvme ocp smart-add-log
  /dev/nvmeX`` (``nvme-ocp-smart``, kept only when the drive answers with the OCP log) for each
  NVMe controller (``<sysfs>/class/nvme/*`` plus the ones smartctl listed);
* ``ethtool -S <netdev>`` (``ethtool``) for the network interfaces of RDMA devices with an
  Ethernet (RoCE/iWARP) port: ``<sysfs>/class/infiniband/<hca>/device/net/*``;
* the InfiniBand/RoCE port counters under ``<sysfs>/class/infiniband/<hca>/ports/<n>/
  {counters,counters_ext,hw_counters}/*`` (``sysfs-ib``), one JSON object per HCA;
* on the hosts that serve the pool, the pool tools the host has (``collect.pool``: ``lctl``,
  ``daos_metrics``, the SPDK socket, ``mmpmon``, ``mmlsqos``, ``mmdiag``).

Each output becomes one JSON Lines envelope (README "Input": ``node``, ``device``,
``port``, ``collected_at``, ``source``, ``output``) appended to ``OUT/smart/<node>-<date>.jsonl``,
``OUT/fabric/<node>-<date>.jsonl`` or ``OUT/pool/<node>-<date>.jsonl`` (UTC date: files of past
days are complete). For SMART and fabric, a missing tool, a permission problem, a failure or a
timeout is reported once per tool per process on the warning stream and skipped; the rest of
the round goes on. A pool tool the host does not have is one note per process on the note
stream; a pool tool it has that fails is an error, in the round's ``failures``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ckptwatch.collect.pool import (
    DEFAULT_SPDK_SOCKET,
    POOL_TOOLS,
    PoolSettings,
    PoolSources,
    qos_seconds,
)
from ckptwatch.collect.recorder import append_lines, default_node
from ckptwatch.errors import CollectError
from ckptwatch.sources.nvme_cli import detect_ocp
from ckptwatch.sources.smartctl import nvme_device_name

#: The node collectors (SMART and fabric), in the order a round runs them.
NODE_TOOLS = ("smartctl", "nvme", "ethtool", "sysfs")
#: The collectors ``--tools`` may name, in the order a round runs them: the node's, then the
#: pool's (``collect.pool``).
TOOLS = NODE_TOOLS + POOL_TOOLS
#: Envelope ``source`` per command (docs/formats.md).
SOURCES = {"smartctl": "smartctl", "nvme": "nvme-smart-log", "nvme-ocp": "nvme-ocp-smart",
           "ethtool": "ethtool", "sysfs": "sysfs-ib"}
#: What to install when a tool is missing (Debian/Ubuntu and RHEL package names agree).
PACKAGES = {"smartctl": "smartmontools", "nvme": "nvme-cli", "ethtool": "ethtool"}
IB_COUNTER_GROUPS = ("counters", "counters_ext", "hw_counters")
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_INTERVAL_S = 60.0
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NVME_CTRL = re.compile(r"nvme\d+")
_DENIED = ("permission denied", "operation not permitted", "access denied")


@dataclass(frozen=True)
class Envelope:
    """One tool output of one device, as written to a JSON Lines envelope file."""

    kind: str  # smart | fabric | pool
    node: str
    device: str
    collected_at: datetime
    source: str
    output: Any
    port: str | None = None

    def to_json(self) -> str:
        """The envelope line (no newline)."""
        doc: dict[str, Any] = {"node": self.node, "device": self.device}
        if self.port is not None:
            doc["port"] = self.port
        doc["collected_at"] = utc_z(self.collected_at)
        doc["source"] = self.source
        doc["output"] = self.output
        return json.dumps(doc, separators=(",", ":"))


@dataclass
class RoundResult:
    """What one collection round wrote."""

    envelopes: list[Envelope] = field(default_factory=list)
    files: dict[Path, int] = field(default_factory=dict)
    #: Pool tools the host has that failed this round, ``"<tool>: <what>"`` each.
    failures: list[str] = field(default_factory=list)

    def count(self, kind: str) -> int:
        """Envelopes of one kind (``smart``, ``fabric`` or ``pool``)."""
        return sum(e.kind == kind for e in self.envelopes)


@dataclass(frozen=True)
class ToolRun:
    """A finished tool call."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def utc_z(ts: datetime) -> str:
    """ISO-8601 UTC with ``Z`` and milliseconds: ``2026-11-28T12:00:00.000Z``."""
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def envelope_path(out: Path, kind: str, node: str, when: datetime) -> Path:
    """``OUT/<kind>/<node>-YYYY-MM-DD.jsonl`` for the UTC day of ``when``."""
    return out / kind / f"{node}-{when.astimezone(UTC).date().isoformat()}.jsonl"


def check_node_name(node: str) -> str:
    """A node name usable in a file name (letters, digits, ``.``, ``_``, ``-``)."""
    if not _NODE_NAME.fullmatch(node):
        raise CollectError(f"node name {node!r} cannot name a file; pass --node with letters, "
                           "digits, '.', '_' or '-'")
    return node


# --------------------------------------------------------------------------- sysfs discovery


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def rdma_devices(sysfs_root: Path) -> list[Path]:
    """The RDMA devices: ``<sysfs>/class/infiniband/*``."""
    base = sysfs_root / "class" / "infiniband"
    try:
        return sorted(p for p in base.iterdir() if (p / "ports").is_dir())
    except OSError:
        return []


def rdma_netdevs(sysfs_root: Path) -> list[str]:
    """Network interfaces of RDMA devices that have an Ethernet (RoCE/iWARP) port.

    Walks from the RDMA device to its PCI function's netdevs,
    ``<sysfs>/class/infiniband/<hca>/device/net/<netdev>``: every RDMA-capable NIC has the
    ``class/infiniband`` entry, while the reverse link (``class/net/<if>/device/infiniband``)
    needs a netdev with a ``device`` link. InfiniBand-only HCAs (``link_layer`` InfiniBand) are
    skipped: their netdevs are IPoIB, without PFC/ECN counters; their counters come from sysfs.
    """
    found: set[str] = set()
    for hca in rdma_devices(sysfs_root):
        layers = {(_read(p / "link_layer") or "").lower() for p in (hca / "ports").iterdir()}
        if "ethernet" not in layers:
            continue
        try:
            found.update(p.name for p in (hca / "device" / "net").iterdir())
        except OSError:
            continue
    return sorted(found)


def nvme_controllers(sysfs_root: Path, extra: Iterable[str] = ()) -> list[str]:
    """NVMe controllers (``nvme0``, …): ``<sysfs>/class/nvme/*`` plus ``extra`` device names."""
    names = {nvme_device_name(x) for x in extra}
    folder = sysfs_root / "class" / "nvme"
    if folder.is_dir():  # absent when no NVMe driver is loaded
        names.update(p.name for p in folder.iterdir())
    return sorted((n for n in names if _NVME_CTRL.fullmatch(n)), key=lambda n: int(n[4:]))


# --------------------------------------------------------------------------- the collector


class Collector:
    """Runs collection rounds for one node (see the module docstring)."""

    def __init__(self, out: Path, *, node: str | None = None, sysfs_root: Path = Path("/sys"),
                 tools: Iterable[str] = TOOLS, timeout_s: float = DEFAULT_TIMEOUT_S,
                 warn: TextIO | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 spdk_socket: Path = DEFAULT_SPDK_SOCKET,
                 gpfs_filesystems: Iterable[str] | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S,
                 tool_dirs: Iterable[str] | None = None,
                 notes: TextIO | None = None) -> None:
        self.out = out
        self.node = check_node_name(node or default_node())
        self.sysfs_root = sysfs_root
        chosen = set(tools)
        if not chosen or chosen - set(TOOLS):
            raise CollectError(f"unknown tool(s) {sorted(chosen - set(TOOLS)) or '(none)'}; "
                               f"choose from {','.join(TOOLS)}")
        self.tools = tuple(t for t in TOOLS if t in chosen)
        if timeout_s <= 0:
            raise CollectError(f"--timeout must be positive, got {timeout_s}")
        self.timeout_s = timeout_s
        self.warn_stream = warn
        self.note_stream = notes
        self.clock = clock
        self._warned: set[str] = set()
        self._noted: set[str] = set()
        self._failing: dict[str, str] = {}
        self._round_failures: list[str] = []
        settings = PoolSettings(
            spdk_socket=spdk_socket,
            gpfs_filesystems=None if gpfs_filesystems is None else tuple(gpfs_filesystems),
            qos_seconds=qos_seconds(interval_s), timeout_s=timeout_s,
            **({} if tool_dirs is None else {"tool_dirs": tuple(tool_dirs)}))
        self.pool = PoolSources(settings, os.environ, note=self.note, fail=self.pool_failed,
                                ok=self.pool_ok)

    # ------------------------------------------------------------------ warnings

    @property
    def warned(self) -> frozenset[str]:
        """The tools :meth:`warn` has written a line about (missing, denied, timed out)."""
        return frozenset(self._warned)

    def warn(self, tool: str, message: str) -> None:
        """One line per tool per process on the warning stream."""
        if tool in self._warned:
            return
        self._warned.add(tool)
        stream = self.warn_stream if self.warn_stream is not None else sys.stderr
        print(f"ckptwatch collect: warning: {tool}: {message}", file=stream, flush=True)

    def note(self, key: str, message: str) -> None:
        """One line per key per process on the note stream (stdout unless given): something
        this host does not have, which is no failure."""
        if key in self._noted:
            return
        self._noted.add(key)
        stream = self.note_stream if self.note_stream is not None else sys.stdout
        print(f"ckptwatch collect: note: {message}", file=stream, flush=True)

    def pool_failed(self, tool: str, message: str) -> None:
        """A pool tool the host has failed: in this round's failures, and on the warning
        stream when it starts failing (or fails differently) in this process."""
        self._round_failures.append(f"{tool}: {message}")
        if self._failing.get(tool) == message:
            return
        self._failing[tool] = message
        stream = self.warn_stream if self.warn_stream is not None else sys.stderr
        print(f"ckptwatch collect: error: {tool}: {message}", file=stream, flush=True)

    def pool_ok(self, tool: str) -> None:
        """A pool tool ran as it should: a failure of it has ended (said on the warning
        stream, so that a long-running collector's log shows when)."""
        if self._failing.pop(tool, None) is not None:
            stream = self.warn_stream if self.warn_stream is not None else sys.stderr
            print(f"ckptwatch collect: {tool}: collecting again", file=stream, flush=True)

    # ------------------------------------------------------------------ tool calls

    def run_tool(self, tool: str, args: list[str]) -> ToolRun | None:
        """Run ``tool args`` with the timeout; None (after a warning) when it could not run."""
        exe = shutil.which(tool)
        if exe is None:
            self.warn(tool, f"not found on PATH; install {PACKAGES.get(tool, tool)} "
                      f"(skipping {tool})")
            return None
        argv = (tool, *args)
        env = {**os.environ, "LC_ALL": "C"}
        try:
            done = subprocess.run([exe, *args], capture_output=True, timeout=self.timeout_s,
                                  env=env, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.warn(tool, f"`{' '.join(argv)}` timed out after {self.timeout_s:g} s (skipped; "
                      "raise --timeout if the device is just slow)")
            return None
        except PermissionError as exc:
            self.warn(tool, f"cannot execute {exe}: {exc.strerror} (skipping {tool})")
            return None
        except OSError as exc:
            self.warn(tool, f"cannot run {exe}: {exc} (skipping {tool})")
            return None
        return ToolRun(argv, done.returncode, done.stdout.decode("utf-8", "replace"),
                       done.stderr.decode("utf-8", "replace"))

    def _failed(self, tool: str, run: ToolRun) -> None:
        text = (run.stderr.strip() or run.stdout.strip()).splitlines()
        first = text[0][:200] if text else "(no output)"
        if any(word in (run.stderr + run.stdout).lower() for word in _DENIED):
            self.warn(tool, f"`{' '.join(run.argv)}`: permission denied ({first}); run as root "
                      "or grant CAP_SYS_ADMIN (see docs/collecting.md); skipped")
        else:
            self.warn(tool, f"`{' '.join(run.argv)}` exited {run.returncode}: {first}; skipped")

    def _envelope(self, kind: str, device: str, source: str, output: Any,
                  port: str | None = None) -> Envelope:
        return Envelope(kind, self.node, device, self.clock(), source, output, port)

    # ------------------------------------------------------------------ collectors

    def smartctl_devices(self) -> list[str]:
        """NVMe device names from ``smartctl --scan -j`` (empty when smartctl cannot run)."""
        run = self.run_tool("smartctl", ["--scan", "-j"])
        if run is None:
            return []
        try:
            doc = json.loads(run.stdout)
        except json.JSONDecodeError:
            self._failed("smartctl", run)
            return []
        devices = doc.get("devices") if isinstance(doc, dict) else None
        out: list[str] = []
        for dev in devices if isinstance(devices, list) else []:
            if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
                continue
            kind = f"{dev.get('type', '')} {dev.get('protocol', '')}".lower()
            if "nvme" in kind or _NVME_CTRL.match(nvme_device_name(dev["name"])):
                out.append(dev["name"])
        return out

    def collect_smartctl(self, devices: list[str]) -> list[Envelope]:
        """``smartctl -j -a <dev>`` per NVMe device."""
        found: list[Envelope] = []
        for dev in devices:
            run = self.run_tool("smartctl", ["-j", "-a", dev])
            if run is None:
                continue
            try:
                doc = json.loads(run.stdout)
            except json.JSONDecodeError:
                self._failed("smartctl", run)
                continue
            if not isinstance(doc, dict):
                self._failed("smartctl", run)
                continue
            status = (doc.get("smartctl") or {}).get("exit_status", 0)
            if "nvme_smart_health_information_log" not in doc and isinstance(status, int) \
                    and status & 0b11:
                messages = [m.get("string", "") for m in
                            (doc.get("smartctl") or {}).get("messages", []) if isinstance(m, dict)]
                run = ToolRun(run.argv, status, "", "; ".join(messages) or f"exit {status}")
                self._failed("smartctl", run)
                continue
            found.append(self._envelope("smart", nvme_device_name(dev), SOURCES["smartctl"], doc))
        return found

    def collect_nvme(self, controllers: list[str]) -> list[Envelope]:
        """``nvme smart-log -o json`` and, where the drive has it, the OCP extended log."""
        found: list[Envelope] = []
        for ctrl in controllers:
            dev = f"/dev/{ctrl}"
            run = self.run_tool("nvme", ["smart-log", dev, "-o", "json"])
            if run is None:
                continue  # missing tool: warned once, nothing else to try
            if run.returncode != 0:
                self._failed("nvme", run)
                continue
            try:
                doc = json.loads(run.stdout)
            except json.JSONDecodeError:
                self._failed("nvme", ToolRun(run.argv, run.returncode, "",
                                             "output is not JSON: " + run.stdout[:120]))
                continue
            found.append(self._envelope("smart", ctrl, SOURCES["nvme"], doc))
            ocp = self.run_tool("nvme", ["ocp", "smart-add-log", dev])
            # Not every drive has the OCP log (C0h): an error or another output means "no".
            if ocp is not None and ocp.returncode == 0 and detect_ocp(ocp.stdout):
                found.append(self._envelope("smart", ctrl, SOURCES["nvme-ocp"], ocp.stdout))
        return found

    def collect_ethtool(self) -> list[Envelope]:
        """``ethtool -S`` per RDMA-capable Ethernet interface."""
        found: list[Envelope] = []
        for netdev in rdma_netdevs(self.sysfs_root):
            run = self.run_tool("ethtool", ["-S", netdev])
            if run is None:
                continue
            if run.returncode != 0 or not run.stdout.strip():
                self._failed("ethtool", run)
                continue
            found.append(self._envelope("fabric", netdev, SOURCES["ethtool"], run.stdout,
                                        port="1"))
        return found

    def collect_sysfs(self) -> list[Envelope]:
        """One ``{"<hca>/ports/<n>/<group>/<name>": value}`` snapshot per RDMA device."""
        found: list[Envelope] = []
        for hca in rdma_devices(self.sysfs_root):
            snapshot: dict[str, str] = {}
            for port in sorted((hca / "ports").iterdir(), key=lambda p: p.name):
                for group in IB_COUNTER_GROUPS:
                    folder = port / group
                    if not folder.is_dir():
                        continue
                    for counter in sorted(folder.iterdir()):
                        try:
                            value = counter.read_text(errors="replace").strip()
                        except PermissionError:
                            self.warn("sysfs", f"cannot read {counter}: permission denied; "
                                      "run as root (skipping unreadable counters)")
                            continue
                        except OSError:
                            continue  # some hw_counters refuse reads (EINVAL) on some firmware
                        snapshot[f"{hca.name}/ports/{port.name}/{group}/{counter.name}"] = value
            if snapshot:
                found.append(self._envelope("fabric", hca.name, SOURCES["sysfs"], snapshot))
        return found

    def collect(self) -> list[Envelope]:
        """Run every selected tool once; returns the envelopes (nothing written yet)."""
        found: list[Envelope] = []
        scanned: list[str] = []
        if "smartctl" in self.tools:
            scanned = self.smartctl_devices()
            found += self.collect_smartctl(scanned)
        if "nvme" in self.tools:
            found += self.collect_nvme(nvme_controllers(self.sysfs_root, scanned))
        if "ethtool" in self.tools:
            found += self.collect_ethtool()
        if "sysfs" in self.tools:
            found += self.collect_sysfs()
        found += self.collect_pool()
        return found

    def collect_pool(self) -> list[Envelope]:
        """The selected pool tools this host has (``collect.pool``), one envelope per
        output."""
        return [self._envelope("pool", o.device, o.source, o.output)
                for o in self.pool.collect(self.tools)]

    def write(self, envelopes: list[Envelope]) -> dict[Path, int]:
        """Append the envelopes, one locked append and one fsync per file."""
        by_file: dict[Path, list[str]] = {}
        for env in envelopes:
            path = envelope_path(self.out, env.kind, env.node, env.collected_at)
            by_file.setdefault(path, []).append(env.to_json())
        for path, lines in by_file.items():
            try:
                append_lines(path, lines, fsync=True)
            except OSError as exc:
                raise CollectError(f"cannot append to {path}: {exc.strerror or exc}; check "
                                   "--out exists and is writable") from exc
        return {p: len(lines) for p, lines in by_file.items()}

    def run_round(self) -> RoundResult:
        """Collect once and write."""
        self._round_failures = []
        envelopes = self.collect()
        return RoundResult(envelopes, self.write(envelopes), list(self._round_failures))


def next_round_at(began: float, now: float, interval_s: float) -> float:
    """The epoch time of the next round: the first multiple of ``interval_s`` after ``now``
    that is at least ``interval_s / 2`` after ``began`` (the start of the round just run)."""
    wake = (now // interval_s + 1) * interval_s
    while wake - began < interval_s / 2:
        wake += interval_s
    return wake


def run_loop(collector: Collector, *, interval_s: float, stop: threading.Event,
             once: bool = False,
             on_round: Callable[[RoundResult], None] | None = None) -> int:
    """Rounds until ``stop`` is set (or one with ``once``); the next round starts on the next
    multiple of ``interval_s`` (epoch-aligned, so nodes sample together) at least half an
    interval after this round began: a collector started just before a boundary does not take
    two samples milliseconds apart (a rate over 20 ms is noise). Returns rounds run."""
    if interval_s <= 0:
        raise CollectError(f"--interval must be positive, got {interval_s}")
    rounds = 0
    while True:
        began = time.time()
        result = collector.run_round()
        rounds += 1
        if on_round is not None:
            on_round(result)
        if once or stop.is_set():
            return rounds
        now = time.time()
        wake = next_round_at(began, now, interval_s)
        if stop.wait(wake - now):
            return rounds


__all__ = ["Collector", "CollectError", "Envelope", "NODE_TOOLS", "POOL_TOOLS", "RoundResult",
           "TOOLS", "check_node_name",
           "envelope_path", "next_round_at", "nvme_controllers", "rdma_devices", "rdma_netdevs",
           "run_loop", "utc_z"]
