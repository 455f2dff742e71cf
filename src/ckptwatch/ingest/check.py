"""What a raw directory holds, per host and day, and which names fail to join (``ckptwatch
check RAW``), before a first ingest.

Files are found and recognised by ``discover`` and read by ``read`` exactly as the ingest
reads them (the same detectors and parsers; nothing is written). Families: ``checkpoints``
(checkpoint records and start markers), ``jobs``, ``smart``, ``fabric``, ``pool``,
``topology``. Hosts are the names the lake joins on: a checkpoint record's ``node`` (a rank's
host: its SMART, fabric counters and leaf switch) and its ``target`` up to ``:`` (a pool
target: its pool telemetry; a local-tier target ``<node>:<device>``: that node's drive).

What is expected, and so reported when absent:

* a rank's host on a day it wrote checkpoints has SMART and fabric rows that day, and a row in
  the topology;
* a pool-tier target on a day it was written to has pool telemetry that day;
* a local-tier target's device is one of its node's SMART devices;
* every job of the checkpoint records has a row in ``jobs``.

A name a family does not hold at all (on no day) is a failed join, with the family's nearest
names as a hint (``node-01`` for ``node01``, a case or domain-suffix difference); a name the
family holds on other days but not that one is a missing family for that host and day. A file
that cannot be recognised or read is a problem too (it would be quarantined).
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from ckptwatch.ingest.discover import discover
from ckptwatch.ingest.read import ParsedFile, load_file, parse_loaded

FAMILIES = ("checkpoints", "jobs", "smart", "fabric", "pool", "topology")
#: The family of each lake table a raw file can fill.
TABLE_FAMILY = {
    "checkpoint_writes": "checkpoints", "checkpoint_starts": "checkpoints",
    "checkpoint_loads": "checkpoints", "jobs": "jobs", "nvme_smart": "smart",
    "fabric_counters": "fabric", "pool_metrics": "pool", "topology": "topology",
}
#: Per-host, per-day families (jobs and topology have no day).
DAILY = ("checkpoints", "smart", "fabric", "pool")
#: Files parsed together (bounded memory on a large raw directory).
_BATCH = 64

ProblemKind = Literal["missing", "join", "unreadable"]


@dataclass(frozen=True)
class Problem:
    """One thing that keeps the data from joining: ``kind`` missing (a family did not arrive),
    join (a name no family row matches) or unreadable (a file the ingest would quarantine)."""

    kind: ProblemKind
    family: str | None
    message: str
    host: str | None = None
    day: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``check --format json``'s ``problems[]``)."""
        return {"kind": self.kind, "family": self.family, "host": self.host, "day": self.day,
                "message": self.message}


@dataclass
class CheckReport:
    """What ``check_raw`` found (see the module docstring)."""

    raw_dir: Path
    files: int = 0
    ignored: int = 0
    rejected_records: int = 0
    #: (host, day) -> family -> rows.
    grid: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    #: family -> rows over the whole directory.
    totals: dict[str, int] = field(default_factory=dict)
    #: node -> leaf switch(es), from the topology.
    leaves: dict[str, str] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)
    checkpoint_jobs: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No family missing, every name joined, every file readable."""
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``check --format json``)."""
        return {
            "raw_dir": str(self.raw_dir), "ok": self.ok, "files": self.files,
            "ignored": self.ignored, "rejected_records": self.rejected_records,
            "families": {f: self.totals.get(f, 0) for f in FAMILIES},
            "hosts": [{"host": host, "day": day,
                       **{f: cells.get(f, 0) for f in DAILY},
                       "leaf_switch": self.leaves.get(host)}
                      for (host, day), cells in sorted(self.grid.items())],
            "jobs": {"with_metadata": sorted(self.jobs & self.checkpoint_jobs),
                     "without_metadata": sorted(self.checkpoint_jobs - self.jobs),
                     "metadata_only": sorted(self.jobs - self.checkpoint_jobs)},
            "problems": [p.as_dict() for p in self.problems],
            "notes": self.notes,
        }


@dataclass
class _Seen:
    """Names per family, gathered while the files are read."""

    rank_days: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    target_days: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    local_targets: set[tuple[str, str]] = field(default_factory=set)
    smart_devices: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    family_hosts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def check_raw(raw_dir: Path, *, ignore: Iterable[str] = ()) -> CheckReport:
    """Read every file under ``raw_dir`` as the ingest would and report what arrived and what
    fails to join. ``ignore``: families not required (a site without fabric counters). Raises
    ``RawDirError`` for a missing or unreadable raw directory."""
    ignored = set(ignore)
    unknown = ignored - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown family {', '.join(sorted(unknown))} (families: "
                         f"{', '.join(FAMILIES)})")
    report = CheckReport(raw_dir)
    files = discover(raw_dir, notes=report.notes)
    seen = _Seen()
    for start in range(0, len(files), _BATCH):
        for pf in parse_loaded([load_file(f) for f in files[start:start + _BATCH]]):
            _take(report, seen, pf)
    _expectations(report, seen, ignored)
    return report


def _take(report: CheckReport, seen: _Seen, pf: ParsedFile) -> None:
    raw = pf.raw
    if raw.kind == "ignored":
        report.ignored += 1
        return
    report.files += 1
    report.rejected_records += len(pf.parsed.rejects)
    why = pf.error or pf.failure or (raw.reason if raw.kind in ("unknown", "refused") else None)
    if why:
        # A failed file's rows go to quarantine only: they do not count as arrived.
        report.problems.append(Problem("unreadable", None, f"{raw.rel}: {why}"))
        return
    for table, frames in pf.parsed.frames.items():
        family = TABLE_FAMILY.get(table)
        if family is None:
            continue
        for frame in frames:
            report.totals[family] = report.totals.get(family, 0) + frame.height
            _take_frame(report, seen, family, frame)


def _day(column: str) -> pl.Expr:
    return pl.col(column).dt.convert_time_zone("UTC").dt.date().cast(pl.String).alias("day")


def _take_frame(report: CheckReport, seen: _Seen, family: str, frame: pl.DataFrame) -> None:
    if family == "jobs":
        report.jobs.update(frame["job_id"].cast(pl.String).to_list())
        return
    if family == "topology":
        for node, leaf in frame.select("node", "leaf_switch").iter_rows():
            leaves = set(filter(None, (report.leaves.get(node) or "").split(",")))
            report.leaves[node] = ",".join(sorted(leaves | {str(leaf)}))
        seen.family_hosts["topology"].update(frame["node"].to_list())
        return
    if family == "checkpoints":
        report.checkpoint_jobs.update(frame["job_id"].to_list())
        ranks = frame.group_by("node", _day("start_ts")).len()
        for node, day, n in ranks.iter_rows():
            _count(report, node, day, "checkpoints", n)
            seen.rank_days[(node, day)] += n
        targets = (frame.filter(pl.col("target").is_not_null())
                   .select("tier", "target", _day("start_ts")).unique())
        for tier, target, day in targets.iter_rows():
            host, _, device = str(target).partition(":")
            if tier == "pool":
                seen.target_days[(host, day)] += 1
            elif device:
                seen.local_targets.add((host, device))
        return
    host_column = "target" if family == "pool" else "node"
    counts = frame.group_by(host_column, _day("ts")).len()
    for host, day, n in counts.iter_rows():
        _count(report, host, day, family, n)
    seen.family_hosts[family].update(counts[host_column].to_list())
    if family == "smart":
        for node, device in frame.select("node", "device").unique().iter_rows():
            seen.smart_devices[node].add(device)


def _count(report: CheckReport, host: str, day: str, family: str, n: int) -> None:
    cells = report.grid.setdefault((host, day), {})
    cells[family] = cells.get(family, 0) + n


def _hint(name: str, names: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``names`` (case, domain suffix, spelling),
    or ``""``."""
    if name == "unknown":
        return " (the log adapters' node when none is given: pass --node)"
    pool = sorted(set(names))
    folded = {n.lower().split(".")[0]: n for n in pool}
    key = name.lower().split(".")[0]
    if key in folded and folded[key] != name:
        return f" (did you mean {folded[key]!r}?)"
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


_WHERE = {"smart": "SMART", "fabric": "fabric counters", "pool": "pool telemetry",
          "topology": "topology.csv"}


def _expectations(report: CheckReport, seen: _Seen, ignored: set[str]) -> None:
    problems = report.problems
    present = {f for f in FAMILIES if report.totals.get(f)}

    def required(family: str, needed: bool, why: str) -> bool:
        """False (and a missing-family problem) when ``family`` is needed but absent."""
        if family in ignored or not needed:
            return family in present
        if family not in present:
            problems.append(Problem("missing", family, f"no {_WHERE.get(family, family)} "
                                    f"rows at all: {why}"))
            return False
        return True

    has_ranks = bool(seen.rank_days)
    if "checkpoints" not in ignored and "checkpoints" not in present:
        problems.append(Problem("missing", "checkpoints", "no checkpoint records at all: "
                                "nothing to analyse (RAW/checkpoints/, see docs/onboarding.md)"))
    if required("jobs", has_ranks, "no job has a checkpoint timeout, so no headroom"):
        for job in sorted(report.checkpoint_jobs - report.jobs):
            problems.append(Problem("join", "jobs", f"job {job!r} of the checkpoint records "
                                    f"has no row in jobs/{_hint(job, report.jobs)}"))
    for family, why in (("smart", "drive evidence (GC, wear) cannot be weighed"),
                        ("fabric", "fabric evidence (pause, congestion) cannot be weighed")):
        if required(family, has_ranks, why):
            _daily(problems, seen.rank_days, seen.family_hosts[family], report.grid, family,
                   "rank host")
    if required("topology", has_ranks, "fabric causes cannot be placed on leaf switches"):
        for node in sorted({n for n, _ in seen.rank_days} - seen.family_hosts["topology"]):
            problems.append(Problem("join", "topology", f"node {node!r} of the checkpoint "
                                    f"records is not in topology.csv"
                                    f"{_hint(node, seen.family_hosts['topology'])}", host=node))
    if required("pool", bool(seen.target_days), "pool-tier checkpoints name targets whose "
                "telemetry (GC, free blocks, metadata latency) is absent"):
        _daily(problems, seen.target_days, seen.family_hosts["pool"], report.grid, "pool",
               "pool target")
    if "smart" not in ignored and "smart" in present:
        for node, device in sorted(seen.local_targets):
            devices = seen.smart_devices.get(node)
            if devices is not None and device not in devices:
                problems.append(Problem(
                    "join", "smart", f"local target '{node}:{device}': {node}'s SMART has no "
                    f"device {device!r} (it has {', '.join(sorted(devices))})"
                    f"{_hint(device, devices)}", host=node))


def _daily(problems: list[Problem], wanted: dict[tuple[str, str], int], hosts: set[str],
           grid: dict[tuple[str, str], dict[str, int]], family: str, role: str) -> None:
    """A join problem per host ``family`` never names, a missing one per host-day it lacks."""
    absent: set[str] = set()
    for host, day in sorted(wanted):
        if host not in hosts:
            if host not in absent:
                absent.add(host)
                problems.append(Problem("join", family, f"{role} {host!r} has no "
                                        f"{_WHERE[family]} on any day{_hint(host, hosts)}",
                                        host=host))
            continue
        if not grid.get((host, day), {}).get(family):
            problems.append(Problem("missing", family, f"{role} {host!r} has checkpoints on "
                                    f"{day} but no {_WHERE[family]} that day", host=host,
                                    day=day))


def summary_line(report: CheckReport) -> str:
    """The last line: what was checked and the verdict."""
    hosts = len({h for h, _ in report.grid})
    days = len({d for _, d in report.grid})
    if report.ok:
        return (f"check: {report.files} file(s), {hosts} host(s) over {days} day(s): every "
                "expected family arrived and every name joins")
    kinds: dict[str, int] = defaultdict(int)
    for p in report.problems:
        kinds[p.kind] += 1
    parts = [f"{n} {label}" for kind, label in (("missing", "missing family(ies)"),
                                                 ("join", "failed join(s)"),
                                                 ("unreadable", "unreadable file(s)"))
             if (n := kinds.get(kind, 0))]
    return f"check: {len(report.problems)} problem(s): {', '.join(parts)}"


def render_table(report: CheckReport, *, max_problems: int = 50) -> Sequence[str]:
    """The text report: the host × day grid, jobs, problems, the summary line."""
    lines = [f"raw directory {report.raw_dir}: {report.files} file(s) read, "
             f"{report.ignored} ignored (documentation, labels), {report.rejected_records} "
             "record(s) the ingest would quarantine"]
    lines += [f"note: {n}" for n in report.notes]
    header = ("host", "day", *DAILY, "leaf_switch")
    rows = [header] + [
        (host, day, *(str(cells.get(f, 0) or "-") for f in DAILY),
         report.leaves.get(host, "-"))
        for (host, day), cells in sorted(report.grid.items())]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines.append("")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    lines.append("")
    without = sorted(report.checkpoint_jobs - report.jobs)
    lines.append(f"jobs: {len(report.jobs)} with metadata; {len(report.checkpoint_jobs)} in "
                 f"the checkpoint records, {len(without)} of them without metadata")
    if report.problems:
        lines.append("")
        lines.append("problems:")
        lines += [f"  {p.kind}: {p.message}" for p in report.problems[:max_problems]]
        if len(report.problems) > max_problems:
            lines.append(f"  … and {len(report.problems) - max_problems} more (--format json "
                         "lists them all)")
    lines.append(summary_line(report))
    return lines
