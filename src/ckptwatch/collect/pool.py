"""Pool sources of ``ckptwatch collect``: the storage servers' own statistics, as raw outputs.

On the hosts that serve the pool, one collection round also runs what the host has of:

* ``lctl get_param`` with the parameters the Lustre reader reads (``LUSTRE_PARAMS``; OSS and
  MDS parameters in one call: a server prints those it has) -> source ``lctl``;
* ``daos_metrics -C -S <n>`` for each I/O engine of the host (0, 1, … until the first index
  that has no engine) -> source ``daos-metrics``;
* the SPDK target's JSON-RPC socket: ``bdev_get_iostat``, spoken as JSON-RPC 2.0 over the
  Unix socket (``/var/tmp/spdk.sock`` by default) -> source ``spdk-iostat``;
* ``mmpmon -p -s`` with ``fs_io_s`` on its input -> ``mmpmon``; ``mmlsqos <fs> -Y --seconds
  <interval>`` per file system (``--gpfs-fs``, else those mmpmon reports) -> ``mmlsqos``;
  ``mmdiag --waiters -Y`` -> ``mmdiag-waiters``.

Each output is kept as the tool printed it (``PoolOutput``); the collector writes it as an
envelope under ``pool/`` and the readers in ``sources/`` (docs/formats.md, "Pool telemetry")
parse it at ingest. What the host does not have is one note per process, not a failure: a
compute node has no pool tool, a Lustre client has ``lctl`` but no server statistics, a GPFS
file system may run without QoS. A tool the host has that fails (an error, a timeout, an
output that is not its format, a refused socket) is a failure, reported as one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptwatch.sources import daos, lustre, spdk, storage_scale

#: The pool tools ``--tools`` may name, in the order a round runs them.
POOL_TOOLS = ("lctl", "daos_metrics", "spdk", "mmpmon", "mmlsqos", "mmdiag")
#: Envelope ``source`` per pool tool (docs/formats.md).
POOL_SOURCES = {"lctl": lustre.SOURCE, "daos_metrics": daos.SOURCE,
                "spdk": spdk.IOSTAT_SOURCE, "mmpmon": storage_scale.MMPMON_SOURCE,
                "mmlsqos": storage_scale.MMLSQOS_SOURCE, "mmdiag": storage_scale.WAITERS_SOURCE}
#: What ``lctl get_param`` is asked for: every parameter ``sources.lustre`` reads (OSS, then
#: MDS). ``osd-*``, not ``obdfilter.*``, for brw_stats: the obdfilter name is an optional
#: symlink to the same file (both would read it twice).
LUSTRE_PARAMS = ("obdfilter.*.stats", "obdfilter.*.job_stats", "osd-*.*.brw_stats",
                 "ost.OSS.ost_io.stats", "mdt.*.md_stats", "mdt.*.job_stats",
                 "mds.MDS.mdt.stats")
DEFAULT_SPDK_SOCKET = Path("/var/tmp/spdk.sock")
#: Where storage tools live besides PATH: lctl in /usr/sbin (not on a user's PATH), the Storage
#: Scale commands in /usr/lpp/mmfs/bin (on nobody's PATH by default).
TOOL_DIRS = ("/usr/sbin", "/usr/lpp/mmfs/bin")
#: Engines probed per host at most (a DAOS server runs one or two).
MAX_DAOS_ENGINES = 16
#: mmlsqos --seconds takes 1..999.
QOS_SECONDS = (1, 999)

#: lctl's line for a parameter this server does not have (an OSS has no mdt.*; a client has
#: none): ``error: get_param: param_path 'mdt/*/md_stats': No such file or directory`` (older
#: versions: ``…: Found no match``).
_LCTL_ABSENT = re.compile(r"^error: get_param: .*(?:No such file or directory|Found no match)")
_DAOS_NO_ENGINE = "Unable to attach to the shared memory"
_QOS_STATS = re.compile(r"^mmlsqos:stats:(?!HEADER:)", re.MULTILINE)
_MMPMON_FS = re.compile(r"\b_fs_\s+(\S+)")
_DENIED = ("permission denied", "operation not permitted", "access denied")


@dataclass(frozen=True)
class PoolOutput:
    """One raw output of a pool tool, to be written as an envelope."""

    tool: str
    device: str
    source: str
    output: Any


@dataclass(frozen=True)
class PoolSettings:
    """What the pool sources need to know about this host."""

    spdk_socket: Path = DEFAULT_SPDK_SOCKET
    #: File systems mmlsqos queries; None: those mmpmon reports mounted here.
    gpfs_filesystems: tuple[str, ...] | None = None
    #: mmlsqos --seconds: the interval its statistics cover (the collection interval).
    qos_seconds: int = 60
    tool_dirs: tuple[str, ...] = TOOL_DIRS
    timeout_s: float = 20.0


@dataclass(frozen=True)
class _Run:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def first_line(self) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return text[0][:200] if text else "(no output)"

    def command(self) -> str:
        return " ".join(self.argv)


def qos_seconds(interval_s: float) -> int:
    """mmlsqos ``--seconds`` for a collection interval: the interval, within 1..999."""
    low, high = QOS_SECONDS
    return max(low, min(high, round(interval_s)))


class SpdkRpcError(Exception):
    """A JSON-RPC call to the SPDK target that did not give a result."""


def spdk_rpc(path: Path, method: str, *, timeout_s: float, request_id: int = 1,
             params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-RPC 2.0 call over SPDK's Unix socket: the whole response object.

    SPDK writes the response as one JSON object and keeps the connection open for more, so the
    response ends where the bytes read so far parse as JSON (as SPDK's own ``rpc.py`` reads it).
    Raises ``SpdkRpcError`` for an error response and ``OSError`` (``TimeoutError`` included)
    when the socket cannot be used.
    """
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params:
        request["params"] = params
    deadline = time.monotonic() + timeout_s
    buf = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode())
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete response within {timeout_s:g} s")
            sock.settimeout(left)
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SpdkRpcError("the target closed the connection before a complete "
                                   f"response ({len(buf)} bytes)")
            buf += chunk
            try:
                response = json.loads(buf)
            except ValueError:
                continue
            break
    if not isinstance(response, dict):
        raise SpdkRpcError(f"the response is not a JSON object: {buf[:80]!r}")
    if "error" in response:
        err = response["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise SpdkRpcError(f"{method} failed: {message}")
    if response.get("id") != request_id:
        raise SpdkRpcError(f"the response answers request id {response.get('id')!r}, not "
                           f"{request_id}")
    return response


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False


class PoolSources:
    """Runs the pool tools of one host (see the module docstring).

    ``note(key, message)`` reports what the host does not have (the caller prints each key
    once per process); ``fail(tool, message)`` reports a failure of a tool the host has;
    ``ok(tool)`` says a tool gave its output (a failure that ended).
    """

    def __init__(self, settings: PoolSettings, env: Mapping[str, str], *,
                 note: Callable[[str, str], None], fail: Callable[[str, str], None],
                 ok: Callable[[str], None]) -> None:
        self.settings = settings
        self.env = dict(env)
        self.note = note
        self.fail = fail
        self.ok = ok

    # ------------------------------------------------------------------ presence

    def search_path(self) -> str:
        """PATH, then the storage tools' own directories."""
        return os.pathsep.join([self.env.get("PATH", os.defpath), *self.settings.tool_dirs])

    def find(self, tool: str) -> str | None:
        """The executable (for ``spdk``: the socket) of a pool tool on this host, or None."""
        if tool == "spdk":
            sock = self.settings.spdk_socket
            return str(sock) if _is_socket(sock) else None
        return shutil.which(tool, path=self.search_path())

    def looked_for(self, tools: Iterable[str]) -> str:
        """Where ``tools`` were looked for, in words."""
        names = [t for t in tools if t != "spdk"]
        where = []
        if names:
            dirs = ", ".join(self.settings.tool_dirs)
            where.append(f"{', '.join(names)} on PATH" + (f" and in {dirs}" if dirs else ""))
        if "spdk" in tools:
            where.append(f"the SPDK socket {self.settings.spdk_socket}")
        return " and ".join(where)

    # ------------------------------------------------------------------ a round

    def collect(self, tools: Iterable[str]) -> list[PoolOutput]:
        """Run every pool tool of ``tools`` this host has; note the others (once)."""
        chosen = [t for t in POOL_TOOLS if t in set(tools)]
        if not chosen:
            return []
        found = {t: self.find(t) for t in chosen}
        absent = [t for t in chosen if found[t] is None]
        if absent and len(absent) == len(chosen):
            self.note("pool-absent", f"no pool tool on this host (looked for "
                      f"{self.looked_for(absent)}): no pool statistics collected")
        elif absent:
            self.note("pool-absent", f"pool tools not on this host, skipped: "
                      f"{self.looked_for(absent)}")
        out: list[PoolOutput] = []
        filesystems: list[str] | None = None
        for tool in chosen:
            where = found[tool]
            if where is None:
                continue
            if tool == "lctl":
                got = self.collect_lctl(where)
            elif tool == "daos_metrics":
                got = self.collect_daos(where)
            elif tool == "spdk":
                got = self.collect_spdk(Path(where))
            elif tool == "mmpmon":
                got = self.collect_mmpmon(where)
                filesystems = _mmpmon_filesystems(got)
            elif tool == "mmlsqos":
                got = self.collect_mmlsqos(where, filesystems)
            else:
                got = self.collect_waiters(where)
            if got is not None:
                self.ok(tool)
                out += got
        return out

    # ------------------------------------------------------------------ tool calls

    def run(self, tool: str, exe: str, args: list[str], stdin: str | None = None) -> _Run | None:
        """``exe args`` with the timeout; None after reporting the failure when it could not
        run to its end."""
        argv = (tool, *args)
        env = {**self.env, "LC_ALL": "C"}
        timeout = self.settings.timeout_s
        try:
            done = subprocess.run([exe, *args], capture_output=True, timeout=timeout, env=env,
                                  check=False, input=stdin.encode() if stdin is not None
                                  else None,
                                  stdin=subprocess.DEVNULL if stdin is None else None)
        except subprocess.TimeoutExpired:
            self.fail(tool, f"`{' '.join(argv)}` timed out after {timeout:g} s (raise "
                      "--timeout if the server is just slow)")
            return None
        except OSError as exc:
            self.fail(tool, f"cannot run {exe}: {exc.strerror or exc}")
            return None
        return _Run(argv, done.returncode, done.stdout.decode("utf-8", "replace"),
                    done.stderr.decode("utf-8", "replace"))

    def failed(self, tool: str, run: _Run, why: str | None = None) -> None:
        """Report a tool call that ran but did not give its output."""
        text = (run.stderr + run.stdout).lower()
        if why is None and any(word in text for word in _DENIED):
            why = f"permission denied ({run.first_line()}); run the collector as root"
        elif why is None:
            why = f"exited {run.returncode}: {run.first_line()}"
        self.fail(tool, f"`{run.command()}` {why}")

    def collect_lctl(self, exe: str) -> list[PoolOutput] | None:
        """``lctl get_param`` of the Lustre server statistics (one output)."""
        run = self.run("lctl", exe, ["get_param", *LUSTRE_PARAMS])
        if run is None:
            return None
        lines = [line.strip() for line in run.stderr.splitlines() if line.strip()]
        absent = [line for line in lines if _LCTL_ABSENT.match(line)]
        errors = [line for line in lines if not _LCTL_ABSENT.match(line)]
        has_stats = lustre.detect(run.stdout)
        if errors:
            # what was read stands; the rest is a failure
            self.failed("lctl", run, f"exited {run.returncode}: {errors[0][:200]}")
            return [PoolOutput("lctl", "lustre", POOL_SOURCES["lctl"], run.stdout)] \
                if has_stats else None
        if has_stats:
            return [PoolOutput("lctl", "lustre", POOL_SOURCES["lctl"], run.stdout)]
        if len(absent) == len(LUSTRE_PARAMS):
            self.note("lctl-client", "lctl: this host serves no Lustre target (none of "
                      f"{', '.join(LUSTRE_PARAMS)} exists: a Lustre client?); nothing "
                      "collected from lctl")
            return []
        if run.returncode != 0 and not run.stdout.strip() and not lines:
            self.failed("lctl", run, f"exited {run.returncode} and printed nothing (Lustre "
                        "keeps the server statistics root-only: run the collector as root)")
        else:
            self.failed("lctl", run, f"exited {run.returncode} without any of the parameters "
                        f"asked for ({run.first_line()})")
        return None

    def collect_daos(self, exe: str) -> list[PoolOutput] | None:
        """``daos_metrics -C -S <n>`` for engines 0, 1, … (each its own output)."""
        out: list[PoolOutput] = []
        for engine in range(MAX_DAOS_ENGINES):
            run = self.run("daos_metrics", exe, ["-C", "-S", str(engine)])
            if run is None:
                return None
            if _DAOS_NO_ENGINE in run.stdout + run.stderr:
                if engine == 0:
                    self.failed("daos_metrics", run, "finds no I/O engine 0 on this host ("
                                f"{run.first_line()}): is daos_server running, and the "
                                "collector run as root or the engines' user?")
                    return None
                break  # engines are numbered from 0: the first index without one ends them
            if run.returncode != 0 or not daos.detect(run.stdout):
                self.failed("daos_metrics", run,
                            None if run.returncode != 0 else "printed no telemetry rows")
                return None
            out.append(PoolOutput("daos_metrics", f"engine{engine}", POOL_SOURCES["daos_metrics"],
                                  run.stdout))
        return out

    def collect_spdk(self, path: Path) -> list[PoolOutput] | None:
        """``bdev_get_iostat`` over the SPDK target's socket (one output)."""
        timeout = self.settings.timeout_s
        try:
            response = spdk_rpc(path, "bdev_get_iostat", timeout_s=timeout)
        except SpdkRpcError as exc:
            self.fail("spdk", f"bdev_get_iostat on {path}: {exc}")
            return None
        except TimeoutError:
            self.fail("spdk", f"bdev_get_iostat on {path}: no answer within {timeout:g} s "
                      "(raise --timeout if the target is just slow)")
            return None
        except ConnectionRefusedError:
            self.fail("spdk", f"nothing listens on {path} (is the SPDK target running? a "
                      "socket left by a stopped one refuses connections)")
            return None
        except PermissionError:
            self.fail("spdk", f"cannot connect to {path}: permission denied; run the collector "
                      "as root (or as the target's user)")
            return None
        except OSError as exc:
            self.fail("spdk", f"cannot use {path}: {exc.strerror or exc}")
            return None
        result = response.get("result")
        if not spdk.detect_iostat(response):
            self.fail("spdk", f"bdev_get_iostat on {path}: the result has no tick_rate and "
                      f"bdevs list: {json.dumps(result)[:120]}")
            return None
        if isinstance(result, dict) and not result.get("bdevs"):
            self.note("spdk-no-bdevs", f"spdk: the target on {path} has no bdevs; nothing "
                      "collected from it")
            return []
        return [PoolOutput("spdk", "spdk", POOL_SOURCES["spdk"], response)]

    def collect_mmpmon(self, exe: str) -> list[PoolOutput] | None:
        """``mmpmon -p -s`` with ``fs_io_s`` on its input (one output)."""
        run = self.run("mmpmon", exe, ["-p", "-s"], stdin="fs_io_s\n")
        if run is None:
            return None
        if run.returncode != 0 or not storage_scale.detect_mmpmon(run.stdout):
            self.failed("mmpmon", run, None if run.returncode != 0
                        else f"replied without _fs_io_s_ lines ({run.first_line()})")
            return None
        return [PoolOutput("mmpmon", "gpfs", POOL_SOURCES["mmpmon"], run.stdout)]

    def collect_mmlsqos(self, exe: str,
                        from_mmpmon: list[str] | None) -> list[PoolOutput] | None:
        """``mmlsqos <fs> -Y --seconds <s>`` per file system (each its own output, ``device``
        the file system)."""
        filesystems = self.settings.gpfs_filesystems
        if filesystems is None:
            filesystems = tuple(from_mmpmon if from_mmpmon is not None
                                else self.gpfs_filesystems())
        if not filesystems:
            self.note("mmlsqos-no-fs", "mmlsqos: no file system to query (mmpmon reports "
                      "none mounted here; name them with --gpfs-fs)")
            return []
        out: list[PoolOutput] = []
        seconds = str(self.settings.qos_seconds)
        for fs in filesystems:
            run = self.run("mmlsqos", exe, [fs, "-Y", "--seconds", seconds])
            if run is None:
                return None
            if run.returncode != 0 or not storage_scale.detect_mmlsqos(run.stdout):
                self.failed("mmlsqos", run, None if run.returncode != 0
                            else f"printed no mmlsqos: lines ({run.first_line()})")
                return None
            if not _QOS_STATS.search(run.stdout):
                self.note(f"mmlsqos-off-{fs}", f"mmlsqos: {fs} has no QoS statistics (QoS "
                          f"off? `mmchqos {fs} --enable` turns it on); nothing collected for it")
                continue
            out.append(PoolOutput("mmlsqos", fs, POOL_SOURCES["mmlsqos"], run.stdout))
        return out

    def gpfs_filesystems(self) -> list[str]:
        """The file systems ``mmpmon fs_io_s`` reports, when mmpmon itself is not collected."""
        exe = self.find("mmpmon")
        if exe is None:
            return []
        got = self.collect_mmpmon(exe)
        if got is not None:
            self.ok("mmpmon")
        return _mmpmon_filesystems(got) or []

    def collect_waiters(self, exe: str) -> list[PoolOutput] | None:
        """``mmdiag --waiters -Y`` (one output)."""
        run = self.run("mmdiag", exe, ["--waiters", "-Y"])
        if run is None:
            return None
        if run.returncode != 0 or not storage_scale.detect_waiters(run.stdout):
            self.failed("mmdiag", run, None if run.returncode != 0
                        else f"printed no mmdiag:waiters: lines ({run.first_line()})")
            return None
        return [PoolOutput("mmdiag", "gpfs", POOL_SOURCES["mmdiag"], run.stdout)]


def _mmpmon_filesystems(outputs: list[PoolOutput] | None) -> list[str] | None:
    """The file systems (``_fs_``) an mmpmon output names, in order; None without one."""
    if not outputs:
        return None
    names: dict[str, None] = {}
    for out in outputs:
        for line in str(out.output).splitlines():
            if line.lstrip().startswith("_fs_io_s_ ") and " _rc_ 0 " in f"{line} ":
                m = _MMPMON_FS.search(line)
                if m:
                    names[m.group(1)] = None
    return list(names)


__all__ = ["DEFAULT_SPDK_SOCKET", "LUSTRE_PARAMS", "POOL_SOURCES", "POOL_TOOLS", "PoolOutput",
           "PoolSettings", "PoolSources", "SpdkRpcError", "qos_seconds", "spdk_rpc"]
