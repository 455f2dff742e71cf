"""`ckptwatch stalls` and `ckptwatch explain`: stalls, their causes, and the evidence."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ckptwatch.settings import default_lake

if TYPE_CHECKING:
    from ckptwatch.analysis.detection import DetectionSettings
    from ckptwatch.analysis.findings import StallFindings


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--model", type=Path, default=None,
                   help="attribution model (default: data/models/attribution.joblib or "
                   "$CKPTWATCH_MODEL; rules only when absent — build it with "
                   "`ckptwatch train-model`)")
    p.add_argument("--stall-factor", type=float, default=None,
                   help="a stall: barrier >= this x the job's healthy baseline (default: "
                   "stall_factor of sql/session.sql, 2)")
    p.add_argument("--stall-min-excess", type=float, default=None, metavar="SECONDS",
                   help="… and at least this many seconds over it (default: stall_min_excess_s "
                   "of sql/session.sql, 1)")
    p.add_argument("--clock-skew", type=float, default=None, metavar="SECONDS",
                   help="how far apart hosts' clocks may be: telemetry that misses a stall's "
                   "window by at most this still counts (default: clock_skew_s of "
                   "sql/session.sql, 5)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stalls`` and ``explain`` commands."""
    p = sub.add_parser(
        "stalls", help="checkpoints that stalled, and why (gc | metadata | fabric_pause)",
        description="Detect stalls (barrier time far above the job's healthy baseline) and "
        "attribute each to garbage collection, metadata or a fabric pause, with evidence in "
        "numbers; `unknown` when no signal supports a cause. A checkpoint whose ranks never "
        "finished is judged on a lower bound of its barrier, and one that outlasted the job's "
        "timeout is a stall whatever the ratio; JSON keys n_started, n_unfinished, timed_out, "
        "barrier_is_lower_bound and never_finished say so. A checkpoint that timed out is a "
        "stall too; timeout_reason says why (status: a rank's record says timeout, counted in "
        "n_timed_out; unfinished: ranks open at the job's timeout; barrier: the barrier "
        "reached it) and why_timed_out in words.")
    _common(p)
    p.add_argument("--job", help="only this job")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s)")
    p.set_defaults(func=run_stalls)
    e = sub.add_parser(
        "explain", help="one stall's full evidence",
        description="Everything behind one stall's attribution: the barrier against the "
        "baseline, the slow ranks, each cause's score and its evidence, and the features.")
    _common(e)
    e.add_argument("--job", required=True, help="job id")
    e.add_argument("--step", type=int, required=True, help="checkpoint step")
    e.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default: %(default)s)")
    e.set_defaults(func=run_explain)


def detection_settings(args: argparse.Namespace) -> DetectionSettings:
    """The thresholds of a ``stalls`` / ``explain`` run: the configured ones
    (``sql/session.sql``), each flag given (not None) in place of its own."""
    from ckptwatch.analysis.detection import DetectionSettings

    flags = {"stall_factor": args.stall_factor, "stall_min_excess_s": args.stall_min_excess,
             "clock_skew_s": args.clock_skew}
    return replace(DetectionSettings(), **{k: v for k, v in flags.items() if v is not None})


def _findings(args: argparse.Namespace, job: str | None) -> StallFindings:
    from ckptwatch.analysis.findings import find_stalls

    if args.model is not None and not args.model.exists():
        from ckptwatch.errors import ModelError

        raise ModelError(f"model {args.model} not found (build it with "
                         "`ckptwatch train-model --out PATH`)")
    return find_stalls(args.lake, job=job, model_path=args.model,
                       settings=detection_settings(args))


def render_stalls(findings: StallFindings) -> str:
    """The stalls as a text table, one line per stall with its top cause and evidence (times
    to the 0.1 s, scores to the 0.001 they are shown with; control characters escaped)."""
    import polars as pl

    from ckptwatch.analysis.timeouts import timeout_mark
    from ckptwatch.cli._render import render_table
    from ckptwatch.safetext import escape_controls

    if not findings.stalls:
        return "no stalls"
    rows = [{
        "job_id": r.job_id, "step": r.step, "tier": r.tier,
        "barrier_s": r.barrier_s, "baseline_s": r.baseline_s,
        "x": r.ratio_to_baseline, "slow": f"{r.n_slow}/{r.n_ranks + r.n_unfinished}",
        "unfinished": _unfinished_cell(r.n_unfinished, r.timed_out),
        "timed_out": timeout_mark(r.timed_out, r.timeout_reason),
        "cause": r.cause, "score": r.top.score,
        "evidence": (r.top.evidence or [""])[0][:160],
    } for r in findings.stalls]
    how = "rules + model" if findings.with_model else "rules only (no model built: make model)"
    table = render_table(pl.DataFrame(rows), float_precision=1, digits={"score": 3})
    hung = [escape_controls(r.never_finished) for r in findings.stalls if r.n_unfinished]
    note = ("\nbarrier_s is a lower bound where ranks are unfinished:\n  " + "\n  ".join(hung)
            if hung else "")
    timed_out = [escape_controls(f"{r.job_id} step {r.step} {r.why_timed_out}")
                 for r in findings.stalls if r.timed_out]
    if timed_out:
        note += (f"\n{len(timed_out)} timed out (status: a rank's record says timeout; "
                 "unfinished: ranks open at the timeout; barrier: the barrier reached it):\n  "
                 + "\n  ".join(timed_out))
    return table + f"\n{len(findings.stalls)} stall(s); attribution: {how}" + note


def _unfinished_cell(n_unfinished: int, timed_out: bool) -> str:
    """``2 timed out``, ``2 open`` or empty: the stall table's unfinished ranks."""
    if n_unfinished == 0:
        return ""
    return f"{n_unfinished} {'timed out' if timed_out else 'open'}"


def _unknown_job(lake: Path, job: str) -> str | None:
    """None when the lake has checkpoints of ``job``, else a message saying it has not."""
    from ckptwatch.lake.query import connect
    from ckptwatch.report.postmortem import unknown_job

    con = connect(lake, views=("checkpoint_latency",))
    try:
        return unknown_job(con, lake, job)
    finally:
        con.close()


def run_stalls(args: argparse.Namespace) -> int:
    """Print the stalls; exit 0, or 1 when ``--job`` names a job the lake has no checkpoint
    of."""
    from ckptwatch.safetext import escape_controls, shell_command

    findings = _findings(args, args.job)
    unknown = _unknown_job(args.lake, args.job) if args.job and not findings.stalls else None
    if args.format == "json":
        print(json.dumps([s.to_dict() for s in findings.stalls], indent=2, default=str))
    elif not unknown:
        print(render_stalls(findings))
        if findings.stalls:
            job = ["--job", args.job] if args.job else []
            command = shell_command(["ckptwatch", "explain", "--lake", args.lake, *job])
            print(escape_controls(f"Details: {command}{'' if job else ' --job JOB'} "
                                  "--step STEP"))
    if unknown:
        print(f"ckptwatch stalls: {unknown}", file=sys.stderr)
        return 1
    return 0


def run_explain(args: argparse.Namespace) -> int:
    """Print one stall's evidence (every value from the data with its control characters
    escaped)."""
    from ckptwatch.analysis.stalls import FEATURE_DOCS
    from ckptwatch.errors import StallNotFoundError
    from ckptwatch.safetext import escape_controls

    findings = _findings(args, args.job)
    with_model = findings.with_model
    found = next((r for r in findings.stalls if r.step == args.step), None)
    if found is None:
        unknown = None if findings.stalls else _unknown_job(args.lake, args.job)
        steps = ", ".join(str(r.step) for r in findings.stalls[:20]) or "none"
        raise StallNotFoundError(unknown or escape_controls(
            f"job {args.job} step {args.step} is not a stall (stalls of this job: {steps})"))
    rec = found.to_dict()
    if args.format == "json":
        print(json.dumps(rec, indent=2, default=str))
        return 0
    bound = ">= " if rec["barrier_is_lower_bound"] else ""
    ranks = ("no rank finished" if rec["p50_s"] is None else
             f"rank p50 {rec['p50_s']:.1f} s, p99 {rec['p99_s']:.1f} s")
    lines = [
        f"stall {rec['job_id']} step {rec['step']} ({rec['tier']} tier), "
        f"{rec['start_ts']} -> {rec['end_ts']}",
        f"  barrier {bound}{rec['barrier_s']:.1f} s = x{rec['ratio_to_baseline']:.1f} the "
        f"job's healthy baseline {rec['baseline_s']:.1f} s; {ranks}; {rec['n_slow']} of "
        f"{rec['n_ranks'] + rec['n_unfinished']} ranks slow",
        *([f"  {rec['never_finished']}"] if rec["never_finished"] else []),
        *([f"  {rec['why_timed_out']}"] if rec["why_timed_out"] else []),
        f"  attribution: {'rules + model' if with_model else 'rules only'}",
    ]
    for i, c in enumerate(rec["causes"], start=1):
        model = "" if c["model_score"] is None else f", model {c['model_score']:.2f}"
        lines.append(f"  {i}. {c['cause']}  score {c['score']:.2f} (rules "
                     f"{c['rule_score']:.2f}{model})")
        lines += [f"       - {ev}" for ev in c["evidence"]]
    lines.append("  features:")
    lines += [f"    {k:<24} {v:>10.3f}   {FEATURE_DOCS[k]}" for k, v in rec["features"].items()]
    print("\n".join(escape_controls(line) for line in lines))
    return 0
