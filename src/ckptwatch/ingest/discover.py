"""Find the raw files under a raw directory and recognise each by its place and its content.

Places (README, "Input: drop files in a raw directory"): ``checkpoints/``, ``jobs/``,
``smart/``, ``fabric/``, ``pool/`` and ``topology.csv``. Content decides where the place is
silent or wrong: a CSV/JSONL/Parquet's columns name its table, an envelope has ``output``, a
tool's raw output is recognised by the registered detectors. ``.gz`` files are read
decompressed. Nothing is skipped silently: a file that nothing recognises becomes a quarantined
record saying so.

What is not read (kind ``refused``, each a quarantined record with the reason): a symbolic link
that leads outside the raw directory (a link to ``/etc/shadow`` must not copy it into the
lake), a linked directory (not followed), a broken link, and a FIFO, socket or device (reading
would block or never end).

Recognising a file reads its head, or a small whole-file record, through ``ingest.load`` (the
reading of bytes within the limits, which ``ingest.read`` uses for the whole file). A
ckptwatch lake under the raw directory (the ``--lake`` itself, or any directory holding
``_manifest/`` and ``_inflight/``) is never read: discovery skips it and says so once.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq

from ckptwatch.errors import RawDirError
from ckptwatch.ingest.load import READ_ERRORS, head_bytes, read_bytes, to_utf8
from ckptwatch.settings import INGEST, IngestSettings
from ckptwatch.sources import load_all
from ckptwatch.sources.base import INPUT_ERRORS, detect_tool
from ckptwatch.sources.tabular import csv_delimiter

PLACES = {
    "checkpoints": "checkpoint_writes",
    "jobs": "jobs",
    "pool": "pool_metrics",
    "topology": "topology",
    "fabric": "fabric_counters",
    "smart": "nvme_smart",
}
TOOL_PLACES = {"smart", "fabric"}
#: Places whose ``<place>/<node>/<file>`` names the node a bare tool output came from: the tool
#: places, and ``pool/`` (a storage server's ``lctl get_param`` output: ``sources.lustre``),
#: where a file that is no tool's output is still read as the pool's long table.
NODE_PLACES = TOOL_PLACES | {"pool"}
TABULAR_SUFFIXES = {".csv", ".jsonl", ".ndjson", ".json", ".parquet"}
HEAD_BYTES = 1 << 16
#: Directories that make a directory a ckptwatch lake (``lake.store``'s layout).
LAKE_MARKERS = ("_manifest", "_inflight")
#: What a raw file is recognised as (``RawFile.kind``); ``ingest.read.READERS`` reads each.
FileKind = Literal["tabular", "envelope", "tool", "sysfs_tree", "dlio", "unknown", "refused",
                   "ignored"]
#: Files that live beside telemetry but are not telemetry; listed in the summary as ignored.
IGNORED_NAMES = {"readme.md", "readme", "readme.txt", "labels.json", "provenance.md",
                 "dlio.log"}


@dataclass(frozen=True)
class RawFile:
    """A raw file and what it was recognised as.

    ``kind`` is ``tabular`` (a canonical table file; ``table`` says which), ``envelope``,
    ``tool`` (a bare tool output for ``node``), ``sysfs_tree`` (a copied
    ``…/class/infiniband`` directory under ``fabric/<node>/``), ``dlio`` (MLPerf Storage/DLIO
    per-rank stats), ``unknown`` (``reason`` says why), ``refused`` (not read at all;
    ``reason`` says why) or ``ignored`` (documentation, labels).
    """

    path: Path
    rel: str
    kind: FileKind
    table: str | None = None
    node: str | None = None
    reason: str | None = None
    #: The run's ingest limits (``discover``'s): what reads, parses and writes this file applies.
    limits: IngestSettings = field(default=INGEST, repr=False, compare=False)

    @property
    def suffix(self) -> str:
        """Suffix with any ``.gz`` removed."""
        p = self.path
        return Path(p.stem).suffix.lower() if p.suffix.lower() == ".gz" else p.suffix.lower()


def table_for_columns(columns: Iterable[str]) -> str | None:
    """The lake table whose contract these column names are, if any."""
    c = {x.strip().lower() for x in columns}
    if {"rank", "step"} <= c and c & {"start_time", "start_ts", "start"}:
        return "checkpoint_writes"
    if {"n_ranks", "checkpoint_timeout_s"} <= c:
        return "jobs"
    if {"counter", "value", "port"} <= c:
        return "fabric_counters"
    if {"pool", "metric", "value"} <= c:
        return "pool_metrics"
    if "node" in c and c & {"leaf_switch", "leaf"}:
        return "topology"
    return None


def _json_or_none(text: str | bytes) -> Any:
    """Parsed JSON, or None for anything unreadable (deep nesting and huge numbers included)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _is_dlio(obj: object) -> bool:
    if not isinstance(obj, dict) or not obj:
        return False
    return any(isinstance(v, dict) and any(str(k).startswith(("save_ckpt", "load_ckpt"))
                                          for k in v) for v in obj.values())


def _is_dlio_companion(obj: object, name: str) -> bool:
    if not isinstance(obj, dict):
        return False
    if name == "summary.json" and ("num_accelerators" in obj or "metric" in obj):
        return True
    return name.endswith("_output.json") and ("hostname" in obj
                                               or any(str(k).isdigit() for k in obj))


def classify(path: Path, rel: str, limits: IngestSettings = INGEST) -> RawFile:
    """Recognise one raw file (read within ``limits``)."""
    parts = Path(rel).parts
    place = parts[0] if len(parts) > 1 else Path(parts[0]).stem.split(".")[0]
    node = parts[1] if place in NODE_PLACES and len(parts) >= 3 else None
    name = path.name.lower()
    try:
        head = head_bytes(path, HEAD_BYTES)
    except READ_ERRORS as exc:
        return RawFile(path, rel, "unknown", reason=f"cannot read file: {exc}")
    suffix = Path(name[:-3]).suffix if name.endswith(".gz") else Path(name).suffix
    if head[:4] == b"PAR1" or suffix == ".parquet":
        try:
            cols = pq.read_schema(path).names
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types here
            return RawFile(path, rel, "unknown", reason=f"unreadable Parquet: {exc}")
        table = table_for_columns(cols) or PLACES.get(place)
        if table is None or table == "nvme_smart":
            return RawFile(path, rel, "unknown", reason=f"Parquet columns {cols} match no table")
        return RawFile(path, rel, "tabular", table=table)
    text = to_utf8(head)[0].decode("utf-8", errors="replace")
    first = text.lstrip().split("\n", 1)[0].strip()
    if first.startswith("{"):
        obj = _json_or_none(first)
        if isinstance(obj, dict):
            if "output" in obj:
                return RawFile(path, rel, "envelope", node=node)
            table = table_for_columns(obj)
            if table:
                return RawFile(path, rel, "tabular", table=table)
        # A whole-file JSON document: a tool output or DLIO stats.
        try:  # a whole-file record is at most max_record_bytes: a bigger file is not one
            small = path.stat().st_size <= limits.max_record_bytes
            whole = _json_or_none(read_bytes(path, limits)) if small else None
        except READ_ERRORS:
            whole = None
        if whole is not None:
            if _is_dlio(whole) or name.endswith("per_epoch_stats.json"):
                return RawFile(path, rel, "dlio")
            if _is_dlio_companion(whole, name):
                return RawFile(path, rel, "ignored", reason=(
                    "DLIO run summary/output: read alongside the per-rank stats"))
            load_all()
            if detect_tool(whole):
                return _tool_or_unknown(path, rel, place, node)
        lines = _json_lines_kind(path, rel, text, node)
        if lines is not None:
            return lines
        if place in PLACES and place not in TOOL_PLACES:
            return RawFile(path, rel, "tabular", table=PLACES[place])
        if place in TOOL_PLACES:
            return _tool_or_unknown(path, rel, place, node)
        return RawFile(path, rel, "unknown", reason="JSON that matches no known input")
    sep = csv_delimiter(first)
    if sep in first:
        table = table_for_columns(first.split(sep))
        if table:
            return RawFile(path, rel, "tabular", table=table)
    lines = _json_lines_kind(path, rel, text, node)
    if lines is not None:
        return lines
    load_all()
    if detect_tool(text):
        return _tool_or_unknown(path, rel, place, node)
    if place in PLACES and place not in TOOL_PLACES and suffix in TABULAR_SUFFIXES:
        return RawFile(path, rel, "tabular", table=PLACES[place])
    where = f"under {place}/" if place in PLACES else "outside the known directories"
    return RawFile(path, rel, "unknown", reason=(
        f"unrecognised file {where}: not a canonical table (checkpoints, jobs, fabric counters, "
        "pool metrics, topology), an envelope, or a known tool's output"))


def _json_lines_kind(path: Path, rel: str, text: str, node: str | None) -> RawFile | None:
    """A JSON Lines file whose first line is damaged: the first line of the head that is a
    JSON object decides (envelope, or the table its keys name), so that the damaged lines get
    their own reasons instead of the whole file being unrecognised."""
    for line in text.split("\n")[:50]:
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        obj = _json_or_none(stripped)
        if isinstance(obj, dict):
            if "output" in obj:
                return RawFile(path, rel, "envelope", node=node)
            table = table_for_columns(obj)
            return RawFile(path, rel, "tabular", table=table) if table else None
    return None


def _tool_or_unknown(path: Path, rel: str, place: str, node: str | None) -> RawFile:
    if node is None:
        return RawFile(path, rel, "unknown", reason=(
            f"a bare tool output must sit under {place}/<node>/ so its node is known "
            "(or be wrapped in a JSON Lines envelope with 'node')"))
    return RawFile(path, rel, "tool", node=node)


def _refusal(path: Path, root: Path) -> str | None:
    """Why ``path`` (found under ``root``) must not be read, or None when it may be."""
    try:
        st = path.lstat()
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
            return f"broken symbolic link (to {target!r}): nothing to read"
        if not resolved.is_relative_to(root):
            return (f"symbolic link to {target!r}, outside the raw directory: not read (copy "
                    "the file in if it is telemetry)")
        if resolved.is_dir():
            return (f"symbolic link to the directory {target!r}: not followed (put the files "
                    "themselves under the raw directory)")
        st = resolved.stat()
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return "not a regular file (a FIFO, socket or device): not read"
    return None


def is_lake(path: Path) -> bool:
    """True when ``path`` is a ckptwatch lake (it holds ``_manifest/`` and ``_inflight/``); a
    directory that cannot be searched is not one (the walk into it names it)."""
    try:
        return all((path / m).is_dir() for m in LAKE_MARKERS)
    except OSError:
        return False


def check_raw_dir(raw_dir: Path) -> None:
    """Raise :class:`RawDirError` unless ``raw_dir`` is a directory this process can list (a
    directory it may not read would otherwise look empty, and a run would succeed on
    nothing). Nothing is created either way."""
    try:
        with os.scandir(raw_dir) as entries:
            next(entries, None)
    except FileNotFoundError:
        raise RawDirError(f"raw directory {raw_dir} does not exist") from None
    except NotADirectoryError:
        raise RawDirError(f"{raw_dir} is not a directory") from None
    except OSError as exc:
        raise RawDirError(f"raw directory {raw_dir} cannot be read: "
                          f"{exc.strerror or exc}") from None


def _unreadable(raw_dir: Path, exc: OSError) -> RawDirError:
    """The one line for a folder under ``raw_dir`` that could not be listed."""
    where = Path(exc.filename) if exc.filename else raw_dir
    try:
        rel = where.relative_to(raw_dir).as_posix()
    except ValueError:
        rel = str(where)
    name = f"{rel}/ under raw directory {raw_dir}" if rel != "." else f"raw directory {raw_dir}"
    return RawDirError(f"{name} cannot be read: {exc.strerror or exc}; nothing was ingested "
                       "(give this user read and search permission on every folder under it)")


def _walk(raw_dir: Path, lake: Path | None, lakes: list[Path]) -> list[Path]:
    """Every entry under ``raw_dir`` as ``rglob("*")`` lists them, sorted, without hidden
    names and without any lake (``lake``, or a directory ``is_lake``), which go to ``lakes``.
    Raises :class:`RawDirError` naming the first folder that could not be listed (its files
    would otherwise vanish from the run)."""
    lake_real = lake.resolve() if lake is not None else None
    out: list[Path] = []
    errors: list[OSError] = []
    for top, dirs, files in os.walk(raw_dir, onerror=errors.append):
        keep = []
        for d in sorted(dirs):
            path = Path(top, d)
            if d.startswith("."):
                continue
            if not path.is_symlink() and (is_lake(path) or path.resolve() == lake_real):
                lakes.append(path)
                continue
            keep.append(d)
            out.append(path)
        dirs[:] = [d for d in keep if not Path(top, d).is_symlink()]
        out += [Path(top, f) for f in files if not f.startswith(".")]
    if errors:
        raise _unreadable(raw_dir, errors[0])
    return sorted(out)


def discover(raw_dir: Path, *, lake: Path | None = None,
             notes: list[str] | None = None,
             limits: IngestSettings = INGEST) -> list[RawFile]:
    """Every raw file under ``raw_dir`` (hidden files and dirs skipped), sorted by path.

    Each entry is classified; a file that cannot be classified, or must not be read (see the
    module docstring), is listed with a reason, never skipped in silence. A raw directory that
    is missing or cannot be listed, or a folder under it that cannot be, raises
    :class:`RawDirError` (one line naming it): nothing is read then. A lake under
    ``raw_dir`` (``lake``, or any ckptwatch lake) is skipped; ``notes`` gets one line saying so.
    Each file carries ``limits`` (``RawFile.limits``), which its read, parse and write apply.
    """
    check_raw_dir(raw_dir)
    root = raw_dir.resolve()
    out = []
    trees: set[Path] = set()
    lakes: list[Path] = []
    for path in _walk(raw_dir, lake, lakes):
        rel_parts = path.relative_to(raw_dir).parts
        rel = "/".join(rel_parts)
        if any(t in path.parents for t in trees):
            continue  # inside a sysfs tree: read as part of it
        refused = _refusal(path, root)
        if refused:
            out.append(RawFile(path, rel, "refused", reason=refused))
            continue
        if path.is_dir() and path.name == "infiniband" and len(rel_parts) >= 3 \
                and rel_parts[0] == "fabric":
            trees.add(path)
            out.append(RawFile(path, rel, "sysfs_tree", node=rel_parts[1]))
            continue
        if not path.is_file():
            continue  # a directory: its files are listed on their own
        if path.name.lower() in IGNORED_NAMES:
            out.append(RawFile(path, rel, "ignored",
                               reason="documentation or scenario labels, not telemetry"))
            continue
        try:
            out.append(classify(path, rel, limits))
        except INPUT_ERRORS as exc:  # a recogniser failed on hostile content: say so, go on
            detail = " ".join(str(exc).split())[:200]
            out.append(RawFile(path, rel, "unknown", reason=(
                f"could not be recognised ({type(exc).__name__}: {detail}); please report it "
                "as a ckptwatch bug")))
    if lakes and notes is not None:
        names = ", ".join(f"{p.relative_to(raw_dir).as_posix()}/" for p in lakes)
        notes.append(f"skipped {len(lakes)} ckptwatch lake(s) under the raw directory: {names} "
                     "(a lake is never read as raw input; keep --lake outside RAW_DIR)")
    if limits is not INGEST:
        out = [replace(raw, limits=limits) for raw in out]
    return out
