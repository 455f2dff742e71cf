"""`ckptwatch adapt megatron|torchtitan|dcp|slurm …`: turn what training frameworks and the
scheduler already print into ckptwatch's raw files (checkpoint records for
``RAW/checkpoints/``, job metadata for ``RAW/jobs/``). docs/onboarding.md shows where each runs.

The adapters themselves live in ``ckptwatch.collect`` (stdlib only, so that they run in a
training image too); this module is their command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

_OUT_HELP = ("JSON Lines file to append to (write one file per run or day, then ship it to "
             "RAW/{place}/; a file that grows after it was ingested is read again)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``adapt`` command and its four sources."""
    from ckptwatch.collect.recorder import TIERS

    p = sub.add_parser(
        "adapt", help="turn framework logs and scheduler output into ckptwatch raw files",
        description="Turn what clusters already produce into ckptwatch's raw files: "
        "Megatron-LM and torchtitan training logs and captured PyTorch DCP events into "
        "checkpoint records (RAW/checkpoints/), sacct/squeue --json into job metadata "
        "(RAW/jobs/). See docs/onboarding.md.")
    kinds = p.add_subparsers(dest="adapt_source", metavar="SOURCE", required=True,
                             help="megatron, torchtitan, dcp (checkpoint records) or slurm "
                             "(job metadata)")

    def records_options(q: argparse.ArgumentParser, node_help: str) -> None:
        q.add_argument("--job-id", required=True,
                       help="job id written into every record (the scheduler's: "
                       "SLURM_JOB_ID, as the recorder and `adapt slurm` write it)")
        q.add_argument("--tier", choices=TIERS, required=True,
                       help="storage tier the checkpoints went to")
        q.add_argument("--node", default=None, help=node_help)
        q.add_argument("--target", default=None,
                       help="pool target, or <node>:<device> for the local tier (optional)")
        q.add_argument("--out", type=Path, required=True,
                       help=_OUT_HELP.format(place="checkpoints"))

    m = kinds.add_parser(
        "megatron", help="a Megatron-LM training log -> one record per completed save",
        description="Megatron-LM's save lines and save-checkpoint timer -> one record per "
        "completed save (rank 0, duration = the max across ranks: the barrier time), a start "
        "marker per save that never completed. A log without timestamps ends its saves at "
        "the file's mtime (with a warning). docs/collecting.md, 'Megatron-LM logs'.")
    m.add_argument("log", type=Path, help="the training log (rank 0's and the last rank's "
                   "output)")
    records_options(m, "node of rank 0 (default: 'unknown')")
    m.add_argument("--bytes-per-rank", type=int, default=0,
                   help="bytes each rank writes (Megatron does not log it; default 0)")
    m.set_defaults(func=run_megatron)

    t = kinds.add_parser(
        "torchtitan", help="a torchtitan training log -> one record per rank per save",
        description="torchtitan's 'Saving the checkpoint' / 'Finished saving the checkpoint "
        "in X seconds' lines -> one record per rank per finished save (the time the save "
        "blocked training: with async checkpointing the staging only), a start marker per "
        "save that never finished. Ranks from [rankN]: (torchrun --tee) or 'N: ' (srun "
        "--label) prefixes; the step from the save lines or the last 'step: N' line.")
    t.add_argument("log", type=Path, help="the training log (torchrun's output)")
    records_options(t, "node the log's ranks ran on (default: 'unknown')")
    t.add_argument("--rank", type=int, default=0,
                   help="rank of a log without rank prefixes (default: %(default)s)")
    t.add_argument("--interval", type=int, default=None, metavar="STEPS",
                   help="checkpoint.interval: a save's step is the last logged step rounded "
                   "up to a multiple of it (needed when the log frequency does not divide it)")
    t.add_argument("--bytes-per-rank", type=int, default=0,
                   help="bytes each rank writes (torchtitan does not log it; default 0)")
    t.set_defaults(func=run_torchtitan)

    d = kinds.add_parser(
        "dcp", help="captured PyTorch DCP logger events -> one record per rank per save",
        description="PyTorch Distributed Checkpoint events kept as JSON Lines (a FileHandler "
        "on DCP's logger writing json.dumps(record.msg)) -> the records the live "
        "DCPCheckpointHandler writes: one per rank per save, write_s and close_s from "
        "write_data and finish_checkpoint.")
    d.add_argument("events", type=Path, help="JSON Lines of DCP event dicts")
    records_options(d, "node the events came from (default: 'unknown')")
    d.add_argument("--stat-bytes", action="store_true",
                   help="size each rank's __<rank>_<n>.distcp files (the checkpoint "
                   "directories must be reachable from here); else bytes are 0")
    d.set_defaults(func=run_dcp)

    s = kinds.add_parser(
        "slurm", help="sacct --json / squeue --json -> the jobs table",
        description="Slurm's job JSON (sacct --json, squeue --json, scontrol show job "
        "--json) -> job metadata: job_id, n_ranks, checkpoint_timeout_s, gpus_per_node. "
        "Slurm does not know the checkpoint timeout: give at least one source "
        "(--timeout-comment-key, --timeout-env, --timeout-s), tried in that order. A job "
        "none of them covers is left out and named (exit 1). Host lists such as "
        "gpu[001-004,010] are expanded to count nodes.")
    s.add_argument("json", type=Path, help="the JSON file, or - for standard input "
                   "(e.g. sacct --json -X -S now-1day | ckptwatch adapt slurm - …)")
    s.add_argument("--timeout-comment-key", default=None, metavar="KEY",
                   help="read KEY=SECONDS (or 10m, 1h) from the job's comment "
                   "(sbatch --comment 'ckpt_timeout=600')")
    s.add_argument("--timeout-env", default=None, metavar="VAR",
                   help="read the job's environment variable VAR (the JSON carries it with "
                   "sacct --env-vars and AccountingStoreFlags=job_env)")
    s.add_argument("--timeout-s", type=float, default=None, metavar="SECONDS",
                   help="the timeout for jobs no other source covers (your watchdog's, e.g. "
                   "NCCL's 600)")
    s.add_argument("--ranks", choices=("gpus", "tasks"), default="gpus",
                   help="n_ranks = allocated GPUs (one rank per GPU: torchrun) or the "
                   "largest task count of the job's steps (srun one rank per task) "
                   "(default: %(default)s)")
    s.add_argument("--ranks-per-node", type=int, default=None, metavar="N",
                   help="n_ranks = nodes × N instead (overrides --ranks)")
    s.add_argument("--tier", choices=TIERS, default=None,
                   help="storage tier the jobs checkpoint to (optional column)")
    s.add_argument("--job-id-format", default="{job_id}", metavar="FORMAT",
                   help="job id as the checkpoint records spell it: {job_id} (SLURM_JOB_ID, "
                   "default), {array_job_id}, {array_task_id}, {name}; e.g. 'slurm-{job_id}'")
    s.add_argument("--out", type=Path, required=True, help=_OUT_HELP.format(place="jobs"))
    s.set_defaults(func=run_slurm)


def _fail(args: argparse.Namespace, message: str) -> int:
    from ckptwatch.safetext import escape_controls

    print(f"ckptwatch adapt {args.adapt_source}: error: {escape_controls(message)}",
          file=sys.stderr)
    return 2


def _write(args: argparse.Namespace, records: list[dict[str, Any]], what: str) -> int:
    """Append ``records`` to ``--out``; one summary line; exit 1 when there were none."""
    from ckptwatch.collect.recorder import write_records

    if not records:
        print(f"ckptwatch adapt {args.adapt_source}: no {what} found in {args.source_path}; "
              f"nothing written to {args.out}", file=sys.stderr)
        return 1
    try:
        n = write_records(args.out, records)
    except OSError as exc:
        return _fail(args, f"cannot write {args.out}: {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(args, f"{args.source_path}: {exc}")
    markers = sum(1 for r in records if r.get("status") == "started")
    detail = f" ({markers} start marker(s) of saves that never finished)" if markers else ""
    print(f"{n} checkpoint record(s){detail} appended to {args.out}")
    return 0


def _read_lines(args: argparse.Namespace, path: Path) -> list[str] | int:
    args.source_path = path
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return _fail(args, f"cannot read {path}: {exc.strerror or exc}")


def run_megatron(args: argparse.Namespace) -> int:
    """``adapt megatron``."""
    from ckptwatch.collect.adapters import read_megatron_file

    args.source_path = args.log
    try:
        records, warning = read_megatron_file(
            args.log, job_id=args.job_id, tier=args.tier, node=args.node, target=args.target,
            bytes_per_rank=args.bytes_per_rank)
    except OSError as exc:
        return _fail(args, f"cannot read {args.log}: {exc.strerror or exc}")
    except ValueError as exc:
        return _fail(args, f"{args.log}: {exc}")
    if warning:
        print(f"ckptwatch adapt megatron: warning: {warning}", file=sys.stderr)
    return _write(args, records, "Megatron checkpoint saves")


def run_torchtitan(args: argparse.Namespace) -> int:
    """``adapt torchtitan``."""
    from ckptwatch.collect.torchtitan import parse_torchtitan_log

    lines = _read_lines(args, args.log)
    if isinstance(lines, int):
        return lines
    try:
        parsed = parse_torchtitan_log(
            lines, job_id=args.job_id, tier=args.tier, node=args.node, rank=args.rank,
            target=args.target, bytes_per_rank=args.bytes_per_rank, interval=args.interval)
    except ValueError as exc:
        return _fail(args, str(exc))
    for note in parsed.notes:
        print(f"ckptwatch adapt torchtitan: {args.log}: {note}", file=sys.stderr)
    code = _write(args, parsed.records, "torchtitan checkpoint saves")
    return 1 if code == 0 and parsed.notes else code


def run_dcp(args: argparse.Namespace) -> int:
    """``adapt dcp``."""
    from ckptwatch.collect.dcp_events import replay_dcp_events
    from ckptwatch.collect.recorder import CheckpointRecorder

    lines = _read_lines(args, args.events)
    if isinstance(lines, int):
        return lines
    if args.out.suffix != ".jsonl":
        return _fail(args, f"--out {args.out}: give a .jsonl file")
    try:
        recorder = CheckpointRecorder(args.out, job_id=args.job_id, node=args.node or "unknown",
                                      tier=args.tier, target=args.target, rank=0,
                                      flush_every=1_000_000)
    except ValueError as exc:
        return _fail(args, str(exc))
    before = _line_count(args.out)
    try:
        replay = replay_dcp_events(lines, recorder, stat_bytes=args.stat_bytes,
                                   origin=str(args.events))
        recorder.close()
    except OSError as exc:
        return _fail(args, f"cannot write {args.out}: {exc.strerror or exc}")
    for problem in replay.problems:
        print(f"ckptwatch adapt dcp: {problem}", file=sys.stderr)
    written = _line_count(args.out) - before
    if not written:
        print(f"ckptwatch adapt dcp: no DCP save found in {args.events} ({replay.events} "
              f"event(s) read); nothing written to {args.out}", file=sys.stderr)
        return 1
    print(f"{written} checkpoint record(s) from {replay.events} DCP event(s) appended to "
          f"{args.out}")
    return 1 if replay.problems else 0


def _line_count(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def run_slurm(args: argparse.Namespace) -> int:
    """``adapt slurm``."""
    from ckptwatch.collect.recorder import append_lines, dumps_record
    from ckptwatch.collect.slurm import (
        SlurmInputError,
        TimeoutSource,
        jobs_from_slurm,
        read_slurm_json,
        summarise,
    )

    source = TimeoutSource(comment_key=args.timeout_comment_key, env_var=args.timeout_env,
                           fixed_s=args.timeout_s)
    if source.comment_key is None and source.env_var is None and source.fixed_s is None:
        return _fail(args, "no checkpoint timeout source: give --timeout-comment-key, "
                     "--timeout-env and/or --timeout-s (Slurm does not know the timeout)")
    if args.timeout_s is not None and args.timeout_s < 0:
        return _fail(args, f"--timeout-s must be >= 0, got {args.timeout_s:g}")
    if args.ranks_per_node is not None and args.ranks_per_node < 1:
        return _fail(args, f"--ranks-per-node must be >= 1, got {args.ranks_per_node}")
    origin = "standard input" if str(args.json) == "-" else str(args.json)
    try:
        text = sys.stdin.read() if str(args.json) == "-" else args.json.read_text(
            encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(args, f"cannot read {origin}: {getattr(exc, 'strerror', None) or exc}")
    try:
        doc = read_slurm_json(text, origin)
        jobs = jobs_from_slurm(doc, timeout=source, ranks=args.ranks,
                               ranks_per_node=args.ranks_per_node, tier=args.tier,
                               job_id_format=args.job_id_format)
    except (SlurmInputError, ValueError) as exc:
        return _fail(args, str(exc))
    for line in summarise(jobs):
        print(f"ckptwatch adapt slurm: {line}", file=sys.stderr)
    if jobs.rows:
        try:
            append_lines(args.out, [dumps_record(r) for r in jobs.rows])
        except OSError as exc:
            return _fail(args, f"cannot write {args.out}: {exc.strerror or exc}")
    left = f", {len(jobs.skipped)} left out (named above)" if jobs.skipped else ""
    pending = f", {len(jobs.pending)} not started (no nodes yet)" if jobs.pending else ""
    written = f"written to {args.out}" if jobs.rows else "nothing written"
    print(f"{len(jobs.rows)} job(s) from {jobs.layout} --json {written}{left}{pending}; "
          f"timeout from {source.describe()}")
    return 1 if jobs.skipped else 0
