"""Job metadata (the ``jobs`` table) from what Slurm already prints: ``sacct --json`` and
``squeue --json`` (stdlib only).

The jobs table needs ``job_id, n_ranks, checkpoint_timeout_s`` (optional ``gpus_per_node``,
``tier``). Slurm knows the job id, its nodes and its GPUs; it does not know the checkpoint
timeout (the collective watchdog the training code sets), so the timeout comes from a source
the site chooses, tried in order (``TimeoutSource``): a ``key=value`` in the job's comment, a
variable of the job's environment, a fixed number given on the command line. A job that none
of them gives a timeout is left out and named, never given a made-up one.

Both JSON layouts are read: ``sacct --json`` (slurmdbd: ``nodes`` a host list string,
``allocation_nodes``, ``tres.allocated`` [{type, name, count}], ``steps[]`` with
``tasks.count``, ``comment.job``) and ``squeue --json`` / ``scontrol show job --json``
(slurmctld: ``nodes``, ``node_count``, ``tasks``, ``tres_alloc_str``, ``comment``). Numbers are
plain or ``{"set", "infinite", "number"}`` objects (Slurm 23.02+).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: How ``n_ranks`` is derived (``--ranks``): one rank per allocated GPU, the largest task count
#: of the job's steps (``srun`` launching one rank per task), or a number of ranks per node.
RANK_SOURCES = ("gpus", "tasks")
#: Step names that are not the training launch (sacct lists them as steps too).
_NON_LAUNCH_STEPS = {"batch", "extern", "interactive"}


class SlurmInputError(ValueError):
    """The input is not ``sacct --json`` / ``squeue --json`` output (the message says why)."""


# --------------------------------------------------------------------------- host lists


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list syntax expanded: ``gpu[001-004,010],login1`` -> gpu001 … gpu004,
    gpu010, login1. Zero padding follows the range's first bound (``[01-10]`` -> 01 … 10);
    several bracket groups multiply (``r[1-2]n[1-2]`` -> r1n1, r1n2, r2n1, r2n2).

    Raises ``SlurmInputError`` for an unbalanced bracket or a range that is not ``a-b`` with
    ``a <= b``.
    """
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        if item:
            hosts.extend(_expand_one(item))
    return hosts


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts: list[str] = []
    depth = start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SlurmInputError(f"host list {text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SlurmInputError(f"host list {text!r}: '[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_one(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1:close_at], item[close_at + 1:]
    tails = _expand_one(rest) if rest else [""]
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise SlurmInputError(f"host list {item!r}: {part!r} is not a number or a range a-b")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise SlurmInputError(f"host list {item!r}: range {part!r} runs backwards")
        if hi - lo > 100_000:
            raise SlurmInputError(f"host list {item!r}: range {part!r} is over 100,000 hosts")
        width = len(lo_text)
        out.extend(f"{prefix}{n:0{width}d}{tail}" for n in range(lo, hi + 1) for tail in tails)
    return out


# --------------------------------------------------------------------------- timeout sources


@dataclass(frozen=True)
class TimeoutSource:
    """Where a job's checkpoint timeout comes from, tried in order: ``comment_key`` (a
    ``key=value`` in the job's comment; separators space, comma or semicolon), ``env_var`` (the
    job's environment, when the JSON carries it), then ``fixed_s`` (a number the site gives).
    Values are seconds, or a number with ``s``, ``m`` or ``h``."""

    comment_key: str | None = None
    env_var: str | None = None
    fixed_s: float | None = None

    def describe(self) -> str:
        """The sources in order, for messages."""
        parts = []
        if self.comment_key:
            parts.append(f"comment key {self.comment_key!r}")
        if self.env_var:
            parts.append(f"environment variable {self.env_var}")
        if self.fixed_s is not None:
            parts.append(f"the fixed {self.fixed_s:g} s")
        return ", then ".join(parts) or "no source"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration_s(text: str) -> float | None:
    """Seconds from ``600``, ``600s``, ``10m``, ``1.5h``; None when ``text`` is none of these."""
    m = _DURATION.match(text)
    if not m:
        return None
    return float(m.group(1)) * _UNIT_S[(m.group(2) or "").lower() or None]


def _comment_value(comment: str, key: str) -> str | None:
    for token in re.split(r"[\s,;]+", comment):
        name, sep, value = token.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None


# --------------------------------------------------------------------------- jobs


@dataclass
class SlurmJobs:
    """What ``jobs_from_slurm`` made of one input: the jobs-table rows, every job left out for
    a reason the site must fix (``skipped``: (job id, reason)), and the jobs not started yet
    (``pending``: no nodes, nothing to say about them yet)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    layout: str = ""


def _number(value: Any) -> float | None:
    """A plain number, or Slurm's ``{"set": true, "infinite": false, "number": n}``."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _gpus_from_tres_list(entries: Any) -> int | None:
    if not isinstance(entries, list):
        return None
    total = 0
    seen = False
    for e in entries:
        if isinstance(e, Mapping) and e.get("type") == "gres" \
                and str(e.get("name") or "").split(":")[0] == "gpu":
            count = _number(e.get("count"))
            if count is not None:
                total += int(count)
                seen = True
    return total if seen else None


def _gpus_from_tres_str(text: Any) -> int | None:
    """GPUs in ``cpu=1,mem=62.50G,node=1,billing=1,gres/gpu=8`` (typed entries
    ``gres/gpu:a100=8`` are a breakdown of the same GPUs: counted once, via the untyped one
    when present)."""
    if not isinstance(text, str) or not text:
        return None
    untyped, typed = None, 0
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name == "gres/gpu" and value.isdigit():
            untyped = int(value)
        elif name.startswith("gres/gpu:") and value.isdigit():
            typed += int(value)
    return untyped if untyped is not None else (typed or None)


def _comment_text(job: Mapping[str, Any]) -> str:
    comment = job.get("comment")
    if isinstance(comment, Mapping):  # sacct: {administrator, job, system}
        return " ".join(str(comment.get(k) or "") for k in ("job", "system", "administrator"))
    return str(comment or "")


def _environment(job: Mapping[str, Any]) -> dict[str, str]:
    env = job.get("environment")
    if isinstance(env, Mapping):
        return {str(k): str(v) for k, v in env.items()}
    if isinstance(env, list):
        out = {}
        for item in env:
            name, sep, value = str(item).partition("=")
            if sep:
                out[name] = value
        return out
    return {}


def _max_step_tasks(job: Mapping[str, Any]) -> int | None:
    best = None
    for step in job.get("steps") or []:
        if not isinstance(step, Mapping):
            continue
        info = step.get("step")
        if not isinstance(info, Mapping):
            info = {}
        name = str(info.get("name") or "")
        step_id = str(info.get("id") or "")
        if name in _NON_LAUNCH_STEPS or step_id.rsplit(".", 1)[-1] in _NON_LAUNCH_STEPS:
            continue
        tasks = step.get("tasks")
        count = _number(tasks.get("count") if isinstance(tasks, Mapping) else tasks)
        if count is not None and (best is None or count > best):
            best = int(count)
    return best


def _layout(doc: Any) -> str:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("jobs"), list):
        raise SlurmInputError("not sacct/squeue --json output: no top-level 'jobs' list")
    plugin = doc.get("meta", {}).get("plugin", {}) if isinstance(doc.get("meta"), Mapping) \
        else {}
    kind = str(plugin.get("type", "")) if isinstance(plugin, Mapping) else ""
    if "db" in kind:
        return "sacct"
    if kind:
        return "squeue"
    jobs = doc["jobs"]
    first = jobs[0] if jobs and isinstance(jobs[0], Mapping) else {}
    return "sacct" if "allocation_nodes" in first or "steps" in first else "squeue"


def jobs_from_slurm(doc: Any, *, timeout: TimeoutSource, ranks: str = "gpus",
                    ranks_per_node: int | None = None, tier: str | None = None,
                    job_id_format: str = "{job_id}") -> SlurmJobs:
    """``sacct --json`` / ``squeue --json`` (parsed) -> jobs-table rows.

    ``ranks``: ``gpus`` (n_ranks = the job's allocated GPUs: one rank per GPU, the torchrun
    layout), ``tasks`` (the largest task count of its launch steps: ``srun`` one rank per task;
    squeue: the job's task count) or, with ``ranks_per_node``, nodes × that number.
    ``gpus_per_node`` is GPUs / nodes when that divides. ``job_id_format`` names the job as the
    checkpoint records do (``{job_id}`` by default, which is ``SLURM_JOB_ID``, what the recorder
    writes; ``{array_job_id}_{array_task_id}``, ``{name}`` are there too).

    Jobs without ranks by the chosen rule, or without a timeout from ``timeout``, are left out,
    each in ``skipped`` with its reason; jobs without nodes (not started) in ``pending``.
    """
    if ranks not in RANK_SOURCES and ranks_per_node is None:
        raise ValueError(f"ranks must be one of {', '.join(RANK_SOURCES)} (or give "
                         "ranks_per_node)")
    layout = _layout(doc)
    out = SlurmJobs(layout=layout)
    seen: set[str] = set()
    for n, job in enumerate(doc["jobs"]):
        if not isinstance(job, Mapping) or "job_id" not in job:
            out.skipped.append((f"#{n + 1}", "not a job object (no job_id)"))
            continue
        array = job.get("array")
        if not isinstance(array, Mapping):
            array = {}
        fields = {
            "job_id": job.get("job_id"),
            "name": job.get("name", ""),
            "array_job_id": _int_text(array.get("job_id", job.get("array_job_id"))),
            "array_task_id": _int_text(array.get("task_id", job.get("array_task_id"))),
        }
        try:
            job_id = job_id_format.format(**fields)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"job id format {job_id_format!r}: {exc} (fields: "
                             f"{', '.join(fields)})") from None
        nodes_text = job.get("nodes")
        if isinstance(job.get("job_resources"), Mapping) and not nodes_text:
            nodes_text = job["job_resources"].get("nodes")
        if not isinstance(nodes_text, str) or not nodes_text.strip() \
                or nodes_text.strip() == "None assigned":
            out.pending.append(job_id)
            continue
        hosts = expand_hostlist(nodes_text)
        n_nodes = len(hosts)
        if layout == "sacct":
            gpus = _gpus_from_tres_list((job.get("tres") or {}).get("allocated"))
            tasks = _max_step_tasks(job)
        else:
            gpus = _gpus_from_tres_str(job.get("tres_alloc_str"))
            task_count = _number(job.get("tasks"))
            tasks = int(task_count) if task_count else None
        if ranks_per_node is not None:
            n_ranks: int | None = n_nodes * ranks_per_node
            how = f"{ranks_per_node} per node"
        elif ranks == "gpus":
            n_ranks, how = gpus, "allocated GPUs"
        else:
            n_ranks, how = tasks, "tasks"
        if not n_ranks:
            out.skipped.append((job_id, f"no ranks from {how} (pass --ranks or "
                                        "--ranks-per-node)"))
            continue
        timeout_s, problem = _timeout(job, timeout)
        if timeout_s is None:
            out.skipped.append((job_id, problem))
            continue
        if job_id in seen:  # sacct lists a requeued job once per run: the last one wins
            out.rows = [r for r in out.rows if r["job_id"] != job_id]
        seen.add(job_id)
        row: dict[str, Any] = {"job_id": job_id, "n_ranks": int(n_ranks),
                               "checkpoint_timeout_s": timeout_s}
        if gpus and n_nodes and gpus % n_nodes == 0:
            row["gpus_per_node"] = gpus // n_nodes
        if tier is not None:
            row["tier"] = tier
        out.rows.append(row)
    return out


def _int_text(value: Any) -> str:
    number = _number(value)
    return "" if number is None else str(int(number))


def _timeout(job: Mapping[str, Any], source: TimeoutSource) -> tuple[float | None, str]:
    """The job's checkpoint timeout (s) from ``source``, or None and why not."""
    tried = []
    if source.comment_key:
        raw = _comment_value(_comment_text(job), source.comment_key)
        if raw is not None:
            value = parse_duration_s(raw)
            if value is None:
                return None, (f"comment {source.comment_key}={raw!r} is not a duration "
                              "(seconds, or a number with s, m or h)")
            return value, ""
        tried.append(f"no {source.comment_key}= in its comment")
    if source.env_var:
        env = _environment(job)
        if source.env_var in env:
            value = parse_duration_s(env[source.env_var])
            if value is None:
                return None, (f"environment {source.env_var}={env[source.env_var]!r} is not "
                              "a duration")
            return value, ""
        tried.append(f"no {source.env_var} in its environment" if env else
                     "no environment in the input (sacct --env-vars needs "
                     "AccountingStoreFlags=job_env)")
    if source.fixed_s is not None:
        return source.fixed_s, ""
    return None, "no checkpoint timeout: " + "; ".join(tried or ["no source given"])


def read_slurm_json(text: str, origin: str) -> Any:
    """The parsed document, or ``SlurmInputError`` naming ``origin`` and the problem."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SlurmInputError(f"{origin}: not JSON ({exc}); run sacct or squeue with "
                              "--json") from None
    _layout_checked(doc, origin)
    return doc


def _layout_checked(doc: Any, origin: str) -> None:
    try:
        _layout(doc)
    except SlurmInputError as exc:
        raise SlurmInputError(f"{origin}: {exc}") from None
    errors = doc.get("errors") if isinstance(doc, Mapping) else None
    if isinstance(errors, list) and errors:
        first = errors[0]
        text = first.get("description") or first.get("error") if isinstance(first, Mapping) \
            else first
        raise SlurmInputError(f"{origin}: Slurm reported {len(errors)} error(s), the first: "
                              f"{text}")


def summarise(jobs: SlurmJobs, *, limit: int = 10) -> Sequence[str]:
    """Lines naming the skipped jobs (at most ``limit``, then a count)."""
    lines = [f"job {job_id}: left out: {why}" for job_id, why in jobs.skipped[:limit]]
    if len(jobs.skipped) > limit:
        lines.append(f"… and {len(jobs.skipped) - limit} more job(s) left out")
    return lines
