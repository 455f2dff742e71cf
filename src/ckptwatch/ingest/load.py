"""Read a raw file's bytes within the ingest's limits (``settings.IngestSettings``,
RELIABILITY.md "Limits"): the read stage's first step, which discovery also uses to look at a
file's head.

``load`` reads at most the decompressed-size limit, and says why a file could not be read whole
(a corrupt or truncated ``.gz``, a text file named ``.gz``, a file cut off at the limit,
undecodable UTF-16, a CSV or JSON Lines table that is not UTF-8); a line over the record limit
is blanked, never decoded, and reported with its number. Text with a UTF-8 or UTF-16 byte order
mark, and UTF-16 without one (``utf16_without_bom``), is read as UTF-8 (``to_utf8``).
"""

from __future__ import annotations

import codecs
import hashlib
import os
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ckptwatch.errors import CorruptInputError
from ckptwatch.settings import INGEST, IngestSettings

#: Bytes read from a file per step (a file is never read past its limit).
CHUNK_BYTES = 1 << 20
#: ``CorruptInputError`` is an ``OSError``: a corrupt ``.gz`` is caught here with the rest.
READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error)


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
    pieces = _gunzip_pieces(fh, cap)
    while True:
        try:
            buf += next(pieces)
        except StopIteration as stop:
            return buf, stop.value


def _gunzip_pieces(fh: BinaryIO, cap: int) -> Generator[bytes, None, str | None]:
    """``_gunzip_capped`` a piece of at most ``CHUNK_BYTES`` at a time (a megabyte of
    compressed zeros is not a gigabyte at once); returns why the stream could not be read to
    its end (None: it was, or it reached ``cap + 1`` bytes)."""
    total = 0
    d = zlib.decompressobj(31)
    fed = False  # the current member has had input
    while total <= cap:
        data = fh.read(CHUNK_BYTES)
        if not data:
            break
        more = True
        while more and total <= cap:
            fed = fed or bool(data)
            want = min(cap + 1 - total, CHUNK_BYTES)
            try:
                out = d.decompress(data, want)
            except zlib.error as exc:
                if not total and data[:2] != b"\x1f\x8b":
                    return (f"not a gzip file ({exc}): rename it without .gz if it is not "
                            "compressed")
                return (f"corrupt gzip file ({exc}): the {total:,} bytes before the damage "
                        "were read")
            if out:
                total += len(out)
                yield out
            data = d.unconsumed_tail
            # a full piece may leave output in the decompressor with no input left: asked again
            more = bool(data) or len(out) == want
            if d.eof:  # the next member, if any (trailing zero padding is not one)
                data = d.unused_data
                d = zlib.decompressobj(31)
                fed = False
                if not data.strip(b"\0"):
                    data = b""
                more = bool(data)
    if fed and not d.eof and total <= cap:
        return ("corrupt gzip file (truncated: it ends before its end-of-stream marker): "
                f"the {total:,} bytes before the cut were read")
    return None


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
            return data, _not_utf8_reason(bad)
    return data, None


def _not_utf8_reason(bad: tuple[int, str]) -> str:
    """Why a text file is not read (``to_utf8``): where its first byte that is not UTF-8 is."""
    return (f"not UTF-8 text at byte {bad[0]:,} ({bad[1]}): save it as UTF-8 (e.g. iconv -f "
            "latin1 -t utf-8)")


def _not_utf8(data: bytes) -> tuple[int, str] | None:
    """Where ``data`` stops being UTF-8 and why (None: it is UTF-8), checked by an incremental
    decoder ``SCAN_BYTES`` at a time (``Utf8Check``): a file's text is never held beside its
    bytes."""
    if data.isascii():  # ASCII is UTF-8 (a scan in C many times the decoder's speed)
        return None
    check = Utf8Check()
    view = memoryview(data)
    for at in range(0, len(data), SCAN_BYTES):
        check.feed(view[at:at + SCAN_BYTES])
    return check.end()


class Utf8Check:
    """Where bytes given a piece at a time (``feed``) stop being UTF-8 and why (``end``; None:
    they are UTF-8): the first bad byte's offset and the reason that decoding them whole
    gives, a character cut by a piece's end included."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._at = 0  # bytes fed
        self.bad: tuple[int, str] | None = None

    def feed(self, piece: bytes | memoryview) -> None:
        """Check the next ``piece`` (an ASCII one in C only, unless a character is cut)."""
        held = len(self._decoder.getstate()[0])  # bytes of a character cut by the last piece
        if self.bad is None and not (held == 0 and isinstance(piece, bytes)
                                     and piece.isascii()):
            try:
                self._decoder.decode(piece)
            except UnicodeDecodeError as exc:  # its offsets count the held bytes first
                self.bad = (self._at - held + exc.start, exc.reason)
        self._at += len(piece)

    def end(self) -> tuple[int, str] | None:
        """The first bad byte and why, the bytes fed being all (a character they cut short
        at their end is bad)."""
        if self.bad is None:
            held = len(self._decoder.getstate()[0])
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                self.bad = (self._at - held + exc.start, exc.reason)
        return self.bad


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


def gunzip_head(path: Path, limit: int) -> bytes:
    """Up to ``limit`` decompressed bytes (what a damaged stream held before the damage);
    CorruptInputError when nothing of it can be read."""
    with open(path, "rb") as fh:
        buf, failure = _gunzip_capped(fh, limit)
    if failure and not buf:
        raise CorruptInputError(failure)
    return bytes(buf[:limit])


def head_bytes(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of ``path`` (decompressed when it ends in ``.gz``)."""
    if path.suffix.lower() == ".gz":
        return gunzip_head(path, n)
    with open(path, "rb") as fh:
        return fh.read(n)


#: What of a text file's beginning ``ContentStream.head`` keeps (its first non-blank byte: a
#: JSON array is judged whole).
HEAD_BYTES = 1 << 16


class ContentStream:
    """A text file's content as ``load(path, lines=True, text=True)`` reads it, given a piece
    at a time (``pieces``), never whole: decompressed, cut at the size limit, a UTF-8 byte
    order mark dropped, its UTF-8 checked as it goes. Once the pieces are all read, ``sha``,
    ``size`` and ``failure`` are ``load``'s, and ``head`` holds the text's first
    ``HEAD_BYTES``. UTF-16 text (``load`` re-encodes it whole) is not given: ``utf16`` says
    so, after no piece. Raises ``OSError`` only when the file cannot be opened or read."""

    def __init__(self, path: Path, limits: IngestSettings = INGEST) -> None:
        self.path = path
        self.limits = limits
        self.sha: Any = hashlib.sha256()
        self.size = 0
        self.failure: str | None = None
        self.utf16 = False
        self.head = b""
        #: Bytes of text given (``size`` without a byte order mark).
        self.text_bytes = 0

    def content(self, data: bytes = b"",
                long_lines: list[tuple[int, int, bytes]] | None = None) -> Content:
        """What ``load`` gives (its ``data``: ``data``), once the pieces are read."""
        return Content(data, self.sha, self.size, self.failure, long_lines or [])

    def pieces(self) -> Iterator[bytes]:
        """The text, a piece of at most ``CHUNK_BYTES`` at a time (``load``'s bytes, but for
        the blanking of long lines: ``LineChunks``)."""
        lim = self.limits
        gz = self.path.suffix.lower() == ".gz"
        stored = self.path.stat().st_size
        cap = lim.decompressed_limit(stored) if gz else lim.max_file_bytes
        check = Utf8Check()
        start = bytearray()  # the first bytes, until the encoding is judged on them
        judged = False
        failure: str | None = None
        with open(self.path, "rb") as fh:
            source = _gunzip_pieces(fh, cap) if gz else _read_pieces(fh, cap)
            while True:
                try:
                    piece = next(source)
                except StopIteration as stop:
                    failure = stop.value
                    break
                if self.size + len(piece) > cap:  # a byte past the cap: cut there
                    piece = piece[:cap - self.size]
                    failure = _cut_message(gz, cap, stored, lim)
                self.sha.update(piece)
                self.size += len(piece)
                if not judged:
                    start += piece
                    if len(start) < UTF16_SNIFF_BYTES and failure is None:
                        continue
                    judged = True
                    piece = self._judge(bytes(start))
                    if self.utf16:
                        return
                if piece:
                    check.feed(piece)
                    if len(self.head) < HEAD_BYTES:
                        self.head += piece[:HEAD_BYTES - len(self.head)]
                    self.text_bytes += len(piece)
                    yield piece
                if failure is not None:  # cut: nothing more is read
                    break
        if not judged:  # a file shorter than the sniff
            piece = self._judge(bytes(start))
            if self.utf16:
                return
            if piece:
                check.feed(piece)
                self.head = piece[:HEAD_BYTES]
                self.text_bytes = len(piece)
                yield piece
        bad = check.end()
        self.failure = failure or (None if bad is None else _not_utf8_reason(bad))

    def _judge(self, start: bytes) -> bytes:
        """The file's first bytes as text (a UTF-8 byte order mark dropped); ``utf16`` set
        when ``to_utf8`` would re-encode them as UTF-16."""
        if start.startswith(codecs.BOM_UTF8):
            return start[len(codecs.BOM_UTF8):]
        if (start.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
                or utf16_without_bom(start) is not None):
            self.utf16 = True
        return start


def _read_pieces(fh: BinaryIO, cap: int) -> Generator[bytes, None, str | None]:
    """``_read_capped``'s bytes (up to ``cap + 1``) a piece of ``CHUNK_BYTES`` at a time."""
    total = 0
    while total <= cap:
        piece = fh.read(min(CHUNK_BYTES, cap + 1 - total))
        if not piece:
            break
        total += len(piece)
        yield piece
    return None


class LineChunks:
    """Text given a piece at a time (``ContentStream.pieces``) as ``tabular.line_chunks``
    cuts it whole: (chunk of whole lines of about ``size`` bytes, number of its first line),
    each line over ``limit`` bytes blanked first as ``load`` blanks it (``_blank_long_lines``:
    its number, length and the ``keep`` bytes from its start in ``long_lines``), never held
    whole: a chunk and a piece at a time. ``head``: the blanked text's first ``keep``
    bytes. ``long_lines`` is complete once the chunks are all given."""

    def __init__(self, pieces: Iterable[bytes], size: int, limit: int, keep: int) -> None:
        self.pieces = pieces
        self.size = max(size, 1)
        self.limit = limit
        self.keep = keep
        self.long_lines: list[tuple[int, int, bytes]] = []
        self.head = b""
        self._found: list[list[Any]] = []  # the long lines: [number, length, first bytes]
        self._filling: list[bytearray] = []  # first bytes still short of ``keep``

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        buf = bytearray()  # the text not yet given, from a line's start
        line = 1  # the number of buf's first line
        checked = 0  # buf holds no long line before this line start
        skip: list[Any] | None = None  # a long line whose end is still to come
        for piece in self.pieces:
            self._fill(piece)
            if skip is not None:
                end = piece.find(b"\n")
                skip[1] += len(piece) if end < 0 else end
                if end < 0:
                    continue
                skip = None
                piece = piece[end:]  # its newline ends the blanked line
            buf += piece
            checked, skip = self._blank(buf, checked, line)
            while len(buf) >= self.size:
                cut = buf.find(b"\n", self.size - 1)
                if cut < 0:
                    break
                chunk = _take(buf, cut + 1)
                checked = max(checked - cut - 1, 0)
                yield self._given(chunk), line
                line += chunk.count(b"\n")
        while buf:
            cut = buf.find(b"\n", self.size - 1)
            chunk = _take(buf, len(buf) if cut < 0 else cut + 1)
            yield self._given(chunk), line
            line += chunk.count(b"\n")
        self.long_lines = [(number, length, bytes(first)) for number, length, first
                           in self._found]

    def _given(self, chunk: bytes) -> bytes:
        if len(self.head) < self.keep:
            self.head += chunk[:self.keep - len(self.head)]
        return chunk

    def _fill(self, piece: bytes) -> None:
        """The bytes of ``piece`` added to the long lines' first bytes that are short of
        ``keep`` (``load`` keeps the ``keep`` bytes from a line's start, past its end when
        the line is shorter: the text as read, before any blanking)."""
        if self._filling:
            for first in self._filling:
                first += piece[:self.keep - len(first)]
            self._filling = [f for f in self._filling if len(f) < self.keep]

    def _blank(self, buf: bytearray, pos: int, line: int) -> tuple[int, list[Any] | None]:
        """Each line of ``buf`` from ``pos`` (a line start) over the limit blanked (``buf``
        changed in place; ``_has_long_line``'s search); returns the line start from which
        fewer than ``limit`` bytes are left unchecked, and the long line whose end is still
        to come (its bytes dropped from ``buf``, its length counted on), if any."""
        limit = self.limit
        while len(buf) - pos > limit:
            newline = buf.rfind(b"\n", pos, pos + limit + 1)
            if newline >= 0:
                pos = newline + 1
                continue
            first = bytearray(buf[pos:pos + self.keep])  # as read: nothing after is blanked
            if len(first) < self.keep:
                self._filling.append(first)
            found = [line + buf.count(b"\n", 0, pos), 0, first]
            self._found.append(found)
            end = buf.find(b"\n", pos + limit + 1)
            if end < 0:
                found[1] = len(buf) - pos
                del buf[pos:]
                return pos, found
            found[1] = end - pos
            del buf[pos:end]  # the newline at pos ends the blanked line
            pos += 1
        return pos, None


def _take(buf: bytearray, n: int) -> bytes:
    """The first ``n`` bytes of ``buf``, removed from it (copied once)."""
    with memoryview(buf) as view:
        out = bytes(view[:n])
    del buf[:n]
    return out
