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

Reading is bounded (``settings.IngestSettings``, RELIABILITY.md "Limits"): ``load`` reads at
most the decompressed-size limit, and says why a file could not be read whole (a corrupt or
truncated ``.gz``, a text file named ``.gz``, a file cut off at the limit, undecodable
UTF-16, a CSV or JSON Lines table that is not UTF-8); a line over the record limit is
blanked, never decoded, and reported with its number. Text with a UTF-8 or UTF-16 byte order
mark, and UTF-16 without one (``utf16_without_bom``), is read as UTF-8 (``to_utf8``). A
ckptwatch lake under the raw directory (the ``--lake`` itself, or any directory holding
``_manifest/`` and ``_inflight/``) is never read: discovery skips it and says so once.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import stat
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import pyarrow.parquet as pq

from ckptwatch.errors import CorruptInputError, RawDirError
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
#: Bytes read from a file per step (a file is never read past its limit).
CHUNK_BYTES = 1 << 20
#: Directories that make a directory a ckptwatch lake (``lake.store``'s layout).
LAKE_MARKERS = ("_manifest", "_inflight")
#: What a raw file is recognised as (``RawFile.kind``); ``ingest.read.READERS`` reads each.
FileKind = Literal["tabular", "envelope", "tool", "sysfs_tree", "dlio", "unknown", "refused",
                   "ignored"]
#: ``CorruptInputError`` is an ``OSError``: a corrupt ``.gz`` is caught here with the rest.
READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error)
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


@dataclass
class Content:
    """A raw file's bytes as the parsers read them, and what stopped it being read whole."""

    #: The bytes read (decompressed; UTF-8 when the file had a byte order mark; with
    #: ``lines``, each line over the record limit blanked).
    data: bytes
    #: SHA-256 (a ``hashlib`` object) of the bytes as stored (decompressed, not re-encoded).
    sha: Any
    #: Decompressed bytes read.
    size: int
    #: Why the file could not be read whole (None: it was).
    failure: str | None = None
    #: Lines over the record limit: (line number, length in bytes, its first bytes).
    long_lines: list[tuple[int, int, bytes]] = field(default_factory=list)

    @property
    def digest(self) -> str:
        """``sha`` as hex: the content's identity."""
        return str(self.sha.hexdigest())


def load(path: Path, *, lines: bool = True, text: bool = False,
         limits: IngestSettings = INGEST) -> Content:
    """Read ``path`` within ``limits``.

    A ``.gz`` is decompressed to at most ``limits.decompressed_limit(its size)`` bytes, any
    file to at most ``max_file_bytes``: the bytes up to the cut are kept and ``failure`` says
    so, as it does for a corrupt or truncated ``.gz`` (the bytes before the damage are kept).
    ``lines``: the file is line-oriented, and each line longer than ``max_record_bytes`` is
    blanked (line numbers stay) and listed in ``long_lines``. ``text``: the file must be text
    (``to_utf8``): bytes that are not UTF-8 are a ``failure``. Raises ``OSError`` only when the
    file cannot be opened or read at all.
    """
    lim = limits
    gz = path.suffix.lower() == ".gz"
    stored = path.stat().st_size
    cap = lim.decompressed_limit(stored) if gz else lim.max_file_bytes
    with open(path, "rb") as fh:
        buf, failure = (_gunzip_capped(fh, cap) if gz else _read_capped(fh, cap))
    if failure is None and len(buf) > cap:
        buf = buf[:cap]
        failure = _cut_message(gz, cap, stored, lim)
    data = buf if isinstance(buf, bytes) else bytes(buf)
    del buf
    sha = hashlib.sha256(data)
    size = len(data)
    data, bad_text = to_utf8(data, text=text)
    failure = failure or bad_text
    long_lines: list[tuple[int, int, bytes]] = []
    if lines and len(data) > lim.max_record_bytes:
        data, long_lines = _blank_long_lines(data, lim.max_record_bytes, lim.quarantine_raw_max)
    return Content(data, sha, size, failure, long_lines)


def _read_capped(fh: BinaryIO, cap: int) -> tuple[bytes | bytearray, str | None]:
    """Up to ``cap + 1`` bytes of a plain file (one more than the cap: it was cut). A file
    within the cap is read in one call, into one buffer of its size (never copied)."""
    size = os.fstat(fh.fileno()).st_size
    buf = bytearray()
    if size <= cap:
        data = fh.read(size + 1)
        if len(data) <= size:
            return data, None
        buf += data  # it grows as it is read: on, a chunk at a time, to the cap
    while len(buf) <= cap:
        chunk = fh.read(min(CHUNK_BYTES, cap + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
    return buf, None


def _gunzip_capped(fh: BinaryIO, cap: int) -> tuple[bytearray, str | None]:
    """Up to ``cap + 1`` decompressed bytes of a gzip stream (members one after another), and
    why it could not be read to its end; what was decompressed before damage is kept."""
    buf = bytearray()
    d = zlib.decompressobj(31)
    fed = False  # the current member has had input
    while len(buf) <= cap:
        data = fh.read(CHUNK_BYTES)
        if not data:
            break
        while data and len(buf) <= cap:
            fed = True
            try:
                buf += d.decompress(data, cap + 1 - len(buf))
            except zlib.error as exc:
                if not buf and data[:2] != b"\x1f\x8b":
                    return buf, (f"not a gzip file ({exc}): rename it without .gz if it is not "
                                 "compressed")
                return buf, (f"corrupt gzip file ({exc}): the {len(buf):,} bytes before the "
                             "damage were read")
            data = d.unconsumed_tail
            if d.eof:  # the next member, if any (trailing zero padding is not one)
                data = d.unused_data
                d = zlib.decompressobj(31)
                fed = False
                if not data.strip(b"\0"):
                    data = b""
    if fed and not d.eof and len(buf) <= cap:
        return buf, ("corrupt gzip file (truncated: it ends before its end-of-stream marker): "
                     f"the {len(buf):,} bytes before the cut were read")
    return buf, None


def _cut_message(gz: bool, cap: int, stored: int, lim: IngestSettings) -> str:
    if gz and cap < lim.max_file_bytes:
        return (f"decompresses to more than {cap:,} bytes ({lim.max_decompressed_ratio} times "
                f"its {stored:,} bytes; CKPTWATCH_MAX_DECOMPRESSED_RATIO): read up to there "
                "only; split the file or raise the limit")
    return (f"more than {cap:,} bytes{' decompressed' if gz else ''} (CKPTWATCH_MAX_FILE_BYTES): "
            "read up to there only; split the file or raise the limit")


#: How much of a file without a byte order mark the UTF-16 detection looks at.
UTF16_SNIFF_BYTES = 1024


def utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` when ``data`` looks like UTF-16 text without a byte
    order mark: in its first KB every other byte is NUL (the high byte of the ASCII that
    telemetry is written in: odd bytes for little-endian, even ones for big-endian) and the
    bytes between are not. None otherwise (UTF-8 text has no NUL bytes)."""
    head = data[:UTF16_SNIFF_BYTES]
    head = head[:len(head) - len(head) % 2]
    if len(head) < 4:
        return None
    half = len(head) // 2
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd == half and even < half // 10 + 1:
        return "utf-16-le"
    if even == half and odd < half // 10 + 1:
        return "utf-16-be"
    return None


def to_utf8(data: bytes, *, text: bool = False) -> tuple[bytes, str | None]:
    """``data`` as the parsers read it, and why it is not text they can read (None: it is).

    The one place where text encodings are recognised: a UTF-8 byte order mark is dropped;
    UTF-16, by its mark or (``utf16_without_bom``) by its NUL bytes, is re-encoded as UTF-8,
    the undecodable characters replaced when it does not decode. ``text``: the bytes must be
    text (a CSV or JSON Lines file): without a mark they must be valid UTF-8, else the reason
    says where the first bad byte is (the file is then failed whole, as it cannot be read)."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _from_utf16(data, "utf-16")
    elif (codec := utf16_without_bom(data)) is not None:
        return _from_utf16(data, codec)
    if text:
        bad = _not_utf8(data)
        if bad is not None:
            return data, (f"not UTF-8 text at byte {bad[0]:,} ({bad[1]}): save it as UTF-8 "
                          "(e.g. iconv -f latin1 -t utf-8)")
    return data, None


def _not_utf8(data: bytes) -> tuple[int, str] | None:
    """Where ``data`` stops being UTF-8 and why (None: it is UTF-8), checked by an incremental
    decoder ``SCAN_BYTES`` at a time: a file's text is never held beside its bytes."""
    if data.isascii():  # ASCII is UTF-8 (a scan in C many times the decoder's speed)
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for at in range(0, max(len(data), 1), SCAN_BYTES):
        held = len(decoder.getstate()[0])  # bytes of a character cut by the last piece
        try:
            decoder.decode(view[at:at + SCAN_BYTES], final=at + SCAN_BYTES >= len(data))
        except UnicodeDecodeError as exc:  # its offsets count the held bytes first
            return at - held + exc.start, exc.reason
    return None


def _from_utf16(data: bytes, codec: str) -> tuple[bytes, str | None]:
    try:
        return data.decode(codec).encode("utf-8"), None
    except UnicodeDecodeError as exc:
        decoded = data.decode(codec, errors="replace")
        return decoded.encode("utf-8", "replace"), (
            f"undecodable UTF-16 text ({exc.reason} at byte {exc.start:,})")


#: Bytes scanned for newlines at a time by ``_line_spans`` (its temporary arrays stay small).
SCAN_BYTES = 1 << 24


def _line_spans(data: bytes) -> tuple[Any, Any]:
    """(start, end) offsets of every line of ``data`` (end: its ``\\n``, or the end of the
    data), as numpy arrays, found in C a chunk at a time (``SCAN_BYTES``)."""
    view = np.frombuffer(data, dtype=np.uint8)
    newlines = [np.flatnonzero(view[at:at + SCAN_BYTES] == 10) + at
                for at in range(0, len(view), SCAN_BYTES)]
    ends = np.concatenate([*newlines, np.array([len(view)], dtype=np.int64)])
    starts = np.concatenate([np.array([0], dtype=np.int64), ends[:-1] + 1])
    return starts, ends


def _has_long_line(data: bytes, limit: int) -> bool:
    """Whether a line of ``data`` is over ``limit`` bytes (its newline not counted): the line
    at ``pos`` is when the ``limit + 1`` bytes from it hold no newline; else every line
    before the last newline among them is within the limit, and the next starts after it. A
    search (``memrchr``, in C) per ~``limit`` bytes, not a look at every line (``_line_spans``
    over every line is ~10 % of the ingesting process's CPU on a large day)."""
    pos, size = 0, len(data)
    while size - pos > limit:
        newline = data.rfind(b"\n", pos, pos + limit + 1)
        if newline < 0:
            return True
        pos = newline + 1
    return False


def _blank_long_lines(data: bytes, limit: int, keep: int) -> tuple[
        bytes, list[tuple[int, int, bytes]]]:
    """Each line of ``data`` over ``limit`` bytes replaced by an empty line (found by a scan
    in C, never decoded); the lines' numbers, lengths and first ``keep`` bytes."""
    if not _has_long_line(data, limit):  # the usual file: no newline scan of every line
        return data, []
    starts, ends = _line_spans(data)
    found = np.flatnonzero(ends - starts > limit)
    if not found.size:
        return data, []
    out: list[bytes] = []
    long_lines = []
    at = 0
    for k in found.tolist():  # the long lines only: few (each is over the record limit)
        start, end = int(starts[k]), int(ends[k])
        long_lines.append((k + 1, end - start, data[start:start + keep]))
        out.append(data[at:start])
        at = end
    out.append(data[at:])
    return b"".join(out), long_lines


def read_bytes(path: Path, limits: IngestSettings = INGEST) -> bytes:
    """File content, decompressed when it ends in ``.gz``, within ``limits``.

    Raises ``CorruptInputError`` (an OSError) when it cannot be read whole (``load``).
    """
    content = load(path, lines=False, limits=limits)
    if content.failure:
        raise CorruptInputError(content.failure)
    return content.data


def _gunzip(path: Path, limit: int) -> bytes:
    """Up to ``limit`` decompressed bytes (what a damaged stream held before the damage);
    CorruptInputError when nothing of it can be read."""
    with open(path, "rb") as fh:
        buf, failure = _gunzip_capped(fh, limit)
    if failure and not buf:
        raise CorruptInputError(failure)
    return bytes(buf[:limit])


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


def _head(path: Path) -> bytes:
    if path.suffix.lower() == ".gz":
        return _gunzip(path, HEAD_BYTES)
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES)


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
        head = _head(path)
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
    """True when ``path`` is a ckptwatch lake (it holds ``_manifest/`` and ``_inflight/``)."""
    return all((path / m).is_dir() for m in LAKE_MARKERS)


def _walk(raw_dir: Path, lake: Path | None, lakes: list[Path]) -> list[Path]:
    """Every entry under ``raw_dir`` as ``rglob("*")`` lists them, sorted, without hidden
    names and without any lake (``lake``, or a directory ``is_lake``), which go to ``lakes``."""
    lake_real = lake.resolve() if lake is not None else None
    out: list[Path] = []
    for top, dirs, files in os.walk(raw_dir):
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
    return sorted(out)


def discover(raw_dir: Path, *, lake: Path | None = None,
             notes: list[str] | None = None,
             limits: IngestSettings = INGEST) -> list[RawFile]:
    """Every raw file under ``raw_dir`` (hidden files and dirs skipped), sorted by path.

    Each entry is classified; a file that cannot be classified, or must not be read (see the
    module docstring), is listed with a reason, never skipped in silence. A lake under
    ``raw_dir`` (``lake``, or any ckptwatch lake) is skipped; ``notes`` gets one line saying so.
    Each file carries ``limits`` (``RawFile.limits``), which its read, parse and write apply.
    """
    if not raw_dir.exists():
        raise RawDirError(f"raw directory {raw_dir} does not exist")
    if not raw_dir.is_dir():
        raise RawDirError(f"{raw_dir} is not a directory")
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
