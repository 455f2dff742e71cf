"""Ingest: raw files -> canonical rows -> lake parts, in process, in batches of files.

The steps are separate so that the Prefect flow (``ckptwatch.flows.ingest``) can run them as
tasks: ``discover.discover`` -> ``ingest_files`` (``read.load_file`` and ``read.parse_loaded``,
the envelope files of up to ``IngestSettings.batch_files`` files parsed together, ->
``write.write_files`` per batch). ``ingest`` runs them here, in order. The run's settings
(``settings.IngestSettings``: limits, batch sizes, workers) are given to ``discover``, which
puts them on each ``RawFile``; every later step takes them from there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ckptwatch.errors import LakeError
from ckptwatch.ingest.discover import RawFile, discover
from ckptwatch.ingest.parallel import Parsing, workers_for
from ckptwatch.ingest.read import LoadedFile, ParsedFile, large_table, load_file, skip_known
from ckptwatch.ingest.stream import ingest_stream
from ckptwatch.ingest.write import FileResult, FileStatus, prepare_lake, to_ingest, write_files
from ckptwatch.lake.schema import ENVELOPE_SOURCES
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST, IngestSettings, ingest_settings, parse_workers, sql_dir
from ckptwatch.sources.base import safe_text


@dataclass
class IngestReport:
    """The outcome of one ingest run."""

    raw_dir: Path
    lake: Path
    files: list[FileResult]
    recovered: int
    elapsed_s: float
    #: Remarks on the run as a whole (a lake skipped under the raw directory), shown once.
    notes: list[str] = field(default_factory=list)

    def count(self, status: FileStatus) -> int:
        """Files with this status."""
        return sum(f.status == status for f in self.files)

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per table in this run."""
        out: dict[str, int] = {}
        for f in self.files:
            for t, n in f.rows.items():
                out[t] = out.get(t, 0) + n
        return out

    @property
    def quarantined(self) -> int:
        """Records quarantined in this run."""
        return sum(f.quarantined for f in self.files)

    @property
    def unused_metrics(self) -> list[UnusedMetrics]:
        """The metric names of this run's files that no analysis reads
        (:func:`unused_metric_names`; read from the lake once, when first asked)."""
        if self._unused is None:
            self._unused = unused_metric_names(self.lake, self.files)
        return self._unused

    _unused: list[UnusedMetrics] | None = field(default=None, repr=False, compare=False)


#: The lake tables of named metrics, and the column naming them: a name the signal catalog
#: (sql/intermediate/int_signal_catalog.sql) does not map is kept but read by no analysis. A pool
#: name whose base (before the first dot) is in the pool vocabulary
#: (sql/staging/stg_pool_vocabulary.sql: what the pool readers write, docs/formats.md) is mapped,
#: not listed; any other pool name is the unmapped name of a feed no reader knows.
METRIC_TABLES = {"fabric_counters": "counter", "nvme_smart": "metric",
                 "pool_metrics": "metric"}


#: The sources whose names are the tool's own fixed vocabulary (``lake.schema.ENVELOPE_SOURCES``:
#: smartctl's health fields, perfquery's error counters, a driver's ethtool names): such a name
#: that no analysis reads is a field the tool always prints, not a misnamed feed, so the
#: summary does not list it every night (the report's JSON keeps it). Names from a canonical
#: long file (pool metrics, a user's CSV) are the user's spelling: each unread one is listed.
TOOL_VOCABULARY_SOURCES = ENVELOPE_SOURCES


@dataclass(frozen=True)
class UnusedMetrics:
    """One ingested file's metric names that no analysis reads (rows per name), and how many of
    its names are read. ``tool_vocabulary``: every unread name came from a tool's own output
    (``TOOL_VOCABULARY_SOURCES``), not from a name the user spelled."""

    file: str
    table: str
    names: dict[str, int]
    n_used: int
    tool_vocabulary: bool = False

    def to_dict(self) -> dict[str, object]:
        """JSON form (the report's ``ingest.unused_metrics``)."""
        return {"file": self.file, "table": self.table, "names": dict(self.names),
                "n_used": self.n_used, "tool_vocabulary": self.tool_vocabulary}


def unused_metric_names(lake_root: Path, files: Sequence[FileResult]) -> list[UnusedMetrics]:
    """Per file ingested with rows of ``METRIC_TABLES``: the names of its rows that match no
    rule of the signal catalog (``int_signal_catalog``, the one list of the names the analysis
    reads) nor, for pool metrics, the pool vocabulary (``stg_pool_vocabulary``), counted.
    Reads the name column of those files' own parts only: ~0.1 s per million telemetry rows
    (a simulated 64-node, 8-hour day's 983 k rows in 168 files: 0.26-0.36 s)."""
    import duckdb

    rels = {f.rel for f in files
            if f.status == "ingested" and any(f.rows.get(t) for t in METRIC_TABLES)}
    if not rels:
        return []
    root = Path(lake_root)
    parts: dict[str, dict[str, None]] = {}  # (a part the files of a batch share: once)
    for entry in Lake(root).manifest():
        if entry.path in rels:
            for rel in entry.parts:
                table = rel.split("/", 1)[0]
                if table in METRIC_TABLES:
                    parts.setdefault(table, {})[str(root / rel)] = None
    out: list[UnusedMetrics] = []
    con = duckdb.connect()
    try:
        con.execute((sql_dir() / "intermediate" / "int_signal_catalog.sql").read_text())
        con.execute((sql_dir() / "staging" / "stg_pool_vocabulary.sql").read_text())
        for table, paths in sorted(parts.items()):
            # pool_metrics has no source column: its names are always the user's spelling.
            tool_named = ("false" if table == "pool_metrics"
                          else "bool_and(list_contains($tools, source))")
            # The column name and tool_named are constants of this module, not input.
            rows = con.execute(f"""
                with names as (
                    select
                        source_file,
                        "{METRIC_TABLES[table]}" as name,
                        count(*) as n,
                        {tool_named} as tool_named,
                    from read_parquet($paths, union_by_name = true)
                    group by source_file, name
                )
                select
                    names.source_file,
                    names.name,
                    names.n,
                    names.tool_named,
                    exists (
                        select 1 from int_signal_catalog as catalog
                        where catalog.source_table = $table
                            and regexp_full_match(names.name, catalog.signal_pattern)
                    ) or (
                        $table = 'pool_metrics' and split_part(names.name, '.', 1) in (
                            select metric from stg_pool_vocabulary
                        )
                    ) as used,
                from names
                order by names.source_file, names.name
            """, {"paths": list(paths), "table": table,
                  **({"tools": list(TOOL_VOCABULARY_SOURCES)} if table != "pool_metrics"
                     else {})}).fetchall()
            per_file: dict[str, tuple[dict[str, int], int, bool]] = {}
            for source_file, name, n, tool_named, used in rows:
                names, n_used, tool = per_file.get(source_file, ({}, 0, True))
                if used:
                    n_used += 1
                else:
                    names[name] = int(n)
                    tool = tool and bool(tool_named)
                per_file[source_file] = (names, n_used, tool)
            out += [UnusedMetrics(safe_text(f), table, names, n_used, tool)
                    for f, (names, n_used, tool) in per_file.items() if names]
    finally:
        con.close()
    return out


def unused_metrics_lines(unused: Sequence[UnusedMetrics], *, max_names: int = 8,
                         max_files: int = 5) -> list[str]:
    """The summary lines: first, every file whose names are all unused (a misnamed feed:
    nothing of it reaches the analysis); then per table, each unused name the user spelled
    (not a tool's own vocabulary: ``UnusedMetrics.tool_vocabulary``) once (rows over the run)
    and the files with such names (how many of each file's names are unused)."""
    lines = [f"{u.file}: none of its {len(u.names)} {u.table} name(s) is read by the analysis, "
             "a misnamed feed? (its rows are kept; docs/attribution.md lists the names each "
             "signal is read from)" for u in unused if u.n_used == 0]
    spelled = [u for u in unused if not u.tool_vocabulary]
    for table in sorted({u.table for u in spelled}):
        of = [u for u in spelled if u.table == table]
        rows: dict[str, int] = {}
        for u in of:
            for name, n in u.names.items():
                rows[name] = rows.get(name, 0) + n
        names = sorted(rows, key=lambda k: (-rows[k], k))
        shown = ", ".join(f"{k} ({rows[k]:,})" for k in names[:max_names]) + (
            f" +{len(names) - max_names} more" if len(names) > max_names else "")
        files = ", ".join(f"{u.file} {len(u.names)}" for u in of[:max_files]) + (
            f" +{len(of) - max_files} more" if len(of) > max_files else "")
        lines.append(f"{table}: {len(names)} name(s) no analysis reads, rows kept: {shown}; "
                     f"in {len(of)} file(s): {files}")
    return lines


def ingest(raw_dir: Path, lake_root: Path, *,
           progress: Callable[[int, int, str], None] | None = None,
           lock_wait_s: float = 600.0, limits: IngestSettings | None = None,
           workers: int | str | None = None) -> IngestReport:
    """Ingest every new raw file under ``raw_dir`` into the lake at ``lake_root``.

    Each file is committed by its own manifest entry, written in batches of up to
    ``limits.batch_files`` files (``batch_rows`` rows; ``write.write_files``). A write failure
    (disk full, permission denied) stops the run with one ``LakeError`` naming the file (and
    how many were written with it); that batch is rolled back and the files committed before it
    stay, so a rerun finishes the job. ``limits``: the run's settings (``IngestSettings``; a
    command passes those it loaded; None: loaded here, the built-in ones and the
    ``CKPTWATCH_*`` variables). The lake, when it lies under ``raw_dir``, is not read
    (``IngestReport.notes`` says so). ``workers``: processes that parse (``parallel``;
    ``auto`` or a number), over ``limits.workers``.
    """
    run = ingest_settings() if limits is None else limits
    if workers is not None:
        run = replace(run, workers=parse_workers(workers))
    t0 = time.monotonic()
    notes: list[str] = []
    files = discover(raw_dir, lake=lake_root, notes=notes, limits=run)
    lake = Lake(lake_root)
    with lake.lock(wait_s=lock_wait_s), Parsing(workers_for(files, run.workers)) as parsing:
        lake, recovered = prepare_lake(lake_root)
        known = lake.manifest_keys()
        now = datetime.now(UTC)
        results: list[FileResult] = []
        ingest_files(lake, files, known, now, results, progress, parsing)
        notes += parsing.notes
    return IngestReport(raw_dir, lake_root, results, recovered, time.monotonic() - t0,
                        notes=[safe_text(n) for n in notes])


def ingest_files(lake: Lake, files: Sequence[RawFile], known: set[str], now: datetime,
                 results: list[FileResult],
                 progress: Callable[[int, int, str], None] | None = None,
                 parsing: Parsing | None = None) -> None:
    """Parse and write ``files`` in order (the caller holds the lake lock), in batches of up to
    ``batch_files`` files and ``batch_rows`` rows (the files' ``RawFile.limits``;
    ``write.write_files``); a file that failed to read is written on its own, at once. Files
    are loaded, then parsed in groups of up to ``batch_files`` files and ``parse_bytes`` bytes
    (``read.parse_loaded``: the envelope files of a group through each bulk parser at once;
    each file's rows as it gives them alone). A JSON Lines table over ``table_chunk_bytes``
    is ingested here, in this process, a chunk at a time (``stream.ingest_stream``: memory
    bounded by the chunk, not the file), once the files before it are written.
    Appends each file's result to ``results`` (the run's results so far: a failure's message
    counts the files committed before it) and each ingested key to ``known`` (a second copy
    of that content later in the run is skipped). ``parsing``: where the groups are parsed
    (``parallel.Parsing``, kept by the caller across calls); by default one made for these
    files (``parallel.workers_for``: worker processes for a large run), closed on return.
    Raises ``run_stopped``'s ``LakeError`` when a batch cannot be written (rolled back)."""
    if parsing is None:
        with Parsing(workers_for(files, _limits(files).workers)) as own:
            ingest_files(lake, files, known, now, results, progress, own)
        return
    try:
        _ingest_files(lake, files, known, now, results, progress, parsing)
    finally:
        parsing.forget()


def _ingest_files(lake: Lake, files: Sequence[RawFile], known: set[str], now: datetime,
                  results: list[FileResult], progress: Callable[[int, int, str], None] | None,
                  parsing: Parsing) -> None:
    limits = _limits(files)
    batch: list[ParsedFile] = []
    #: files loaded, to be parsed together (``read.parse_loaded``), and their keys and bytes
    loaded: list[ParsedFile | LoadedFile] = []
    loaded_keys: set[str] = set()
    loaded_bytes = 0

    def flush() -> None:
        try:
            results.extend(write_files(lake, batch, now))
        except LakeError as exc:
            raise run_stopped(exc, [pf.raw for pf in batch if _to_ingest(pf)]
                              or [pf.raw for pf in batch if pf.failure], results) from exc
        batch.clear()

    def add(pf: ParsedFile) -> None:
        # the batches as the parse marked them (``write.plan_batches``: at most batch_files
        # files and about batch_rows rows; a file that failed to read on its own)
        batch.append(pf)
        if _to_ingest(pf):
            known.add(pf.key)
        if pf.ends_batch:
            flush()

    def parse_loaded_files(wait: bool = False) -> None:
        nonlocal loaded_bytes
        for pf in parsing.submit(loaded, lake, now):
            add(pf)
        if wait:
            for pf in parsing.drain():
                add(pf)
        loaded.clear()
        loaded_keys.clear()
        loaded_bytes = 0

    for i, raw in enumerate(files, start=1):
        if progress:
            progress(i, len(files), safe_text(raw.rel))
        if large_table(raw):  # a large JSON Lines table: read, typed and written chunk by chunk
            parse_loaded_files(wait=True)  # the files before it are written first, in order
            flush()
            try:
                streamed = ingest_stream(lake, raw, known, now)
            except LakeError as exc:
                raise run_stopped(exc, raw, results) from exc
            if streamed is not None:
                results.append(streamed.result)
                if streamed.ingested:
                    known.add(streamed.key)
                continue
        item = load_file(raw, known)
        if isinstance(item, LoadedFile) and (item.key in loaded_keys
                                             or item.key in parsing.keys):
            # a copy of a file loaded: skipped when that one went in
            parse_loaded_files(wait=True)
            item = skip_known(item, known)
        if isinstance(item, LoadedFile):
            loaded_keys.add(item.key)
            loaded_bytes += item.content.size
        loaded.append(item)
        if len(loaded) >= limits.batch_files or loaded_bytes >= limits.parse_bytes:
            parse_loaded_files()
    parse_loaded_files(wait=True)
    flush()


def _limits(files: Sequence[RawFile]) -> IngestSettings:
    """The run's settings, which ``discover`` gave every file."""
    return files[0].limits if files else INGEST


_to_ingest = to_ingest


def run_stopped(exc: LakeError, raw: RawFile | list[RawFile],
                done: list[FileResult]) -> LakeError:
    """The error that stops a run: the write failure, which file (or batch of files), and what
    was kept."""
    raws = raw if isinstance(raw, list) else [raw]
    n = sum(r.status == "ingested" for r in done)
    what = safe_text(raws[0].rel) if raws else "the lake"
    if len(raws) > 1:
        what += f" and {len(raws) - 1} other file(s) written with it, which were rolled back"
    else:
        what += ", which was rolled back"
    return LakeError(f"{exc} (while writing {what}; "
                     f"{n} file(s) committed earlier in this run are kept; rerun to finish)")
