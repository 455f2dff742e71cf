"""`ckptwatch evaluate` and `ckptwatch train-model`: measured accuracy, reproducible model."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ckptwatch.errors import ModelError, UsageError
from ckptwatch.simulate.config import POOL_FORMATS, TOOL_CLOCKS

if TYPE_CHECKING:
    from ckptwatch.cli._progress import Progress


def parse_seeds(text: str) -> list[int]:
    """``1000-1029`` or ``5,7,9`` or a mix: ``1-3,10``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds += range(lo, hi + 1)
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise UsageError(f"--seeds {text!r}: use a range like 2000-2019 or a list like "
                         "5,7,9") from None
    if not seeds:
        raise UsageError("--seeds names no seed")
    return seeds


def parse_pool_formats(text: str) -> tuple[str, ...]:
    """``csv``, ``all`` (every pool format) or a comma list of ``POOL_FORMATS``."""
    if text.strip() == "all":
        return POOL_FORMATS
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [x for x in names if x not in POOL_FORMATS]
    if bad or not names:
        raise UsageError(f"--pool-formats {text!r}: use all, or names from "
                         f"{', '.join(POOL_FORMATS)}")
    return names


def _scenario_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=16, help="nodes per scenario (default 16)")
    p.add_argument("--hours", type=float, default=6.0, help="hours per scenario (default 6)")
    p.add_argument("--families", default="varied",
                   help="scenario families the seeds cycle through: varied (default: base, "
                   "coarse_smart, local_wa_only, weak, background, no_topology, no_phases, "
                   "no_ocp, no_pool) or a comma list of those, checkpoints_only (checkpoint "
                   "records and jobs, no SMART, fabric, pool or topology: the stalls' label "
                   "is then no_telemetry), burst (correlated checkpoint bursts that saturate "
                   "the pool, on RoCE: label saturation) and the families sampled as clusters "
                   "sample: "
                   "smart_apart (the SMART health and OCP logs read at different moments and "
                   "cadences), skewed_clocks (host clocks off by up to 2 s), as_clusters "
                   "(both, every tool format, two NICs per node)")
    p.add_argument("--tool-clocks", choices=TOOL_CLOCKS, default=None,
                   help="sample every family's scenarios with this: apart (each tool its own "
                   "command and cadence, as clusters run them) or aligned (default: each "
                   "family's own; only smart_apart and as_clusters are apart)")
    p.add_argument("--clock-skew", type=float, default=None, metavar="S",
                   help="every family's host clocks off by up to S seconds (default: each "
                   "family's own; 2 for skewed_clocks and as_clusters, else 0)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _sampling(args: argparse.Namespace) -> dict[str, object]:
    """The sampling options given on the command line, over every family's own."""
    given = {"tool_clocks": args.tool_clocks, "clock_skew_s": args.clock_skew}
    return {k: v for k, v in given.items() if v is not None}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``evaluate`` and ``train-model`` commands."""
    p = sub.add_parser(
        "evaluate", help="score stall detection and attribution on generated scenarios",
        description="Generate scenarios with the given seeds (never the model's training "
        "seeds), run ingest, detection and attribution on each, and print detection "
        "precision/recall, per-cause precision/recall/F1, the confusion matrix, figures per "
        "scenario family and the reliability of the scores (score bin -> how often the top "
        "cause was right).")
    p.add_argument("--seeds", default="2000-2019",
                   help="seeds to evaluate on, e.g. 2000-2019 (default) or 5,7,9")
    p.add_argument("--model", type=Path, default=None,
                   help="model to evaluate (default: data/models/attribution.joblib or "
                   "$CKPTWATCH_MODEL if built; else rules only)")
    p.add_argument("--rules-only", action="store_true", help="ignore any model")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s)")
    p.add_argument("--pool-formats", default="csv", metavar="FORMATS",
                   help="run each seed once per pool format, comma-separated from "
                   f"{', '.join(POOL_FORMATS)} (or all), and print a row per format: the same "
                   "day with its pool reported by that system (default: %(default)s)")
    _scenario_flags(p)
    p.set_defaults(func=run_evaluate)
    t = sub.add_parser(
        "train-model", help="build the attribution model from generated scenarios",
        description="Train the scikit-learn attribution model on labelled simulated "
        "scenarios. Deterministic: the same seeds and version give the same model. The seeds "
        "are recorded in a JSON card next to the model, and `evaluate` refuses them.")
    t.add_argument("--seeds", default="1000-1029",
                   help="training seeds (default: 1000-1029)")
    t.add_argument("--out", type=Path, default=None,
                   help="model file (default: data/models/attribution.joblib or "
                   "$CKPTWATCH_MODEL)")
    _scenario_flags(t)
    t.set_defaults(func=run_train)


def _progress(command: str, args: argparse.Namespace, n: int) -> Progress:
    """The command's progress line: one stage per scenario (``scenario 3/20: seed …``)."""
    from ckptwatch.cli._progress import Progress

    return Progress(command, quiet=args.quiet, total=n)


def _scenario_line(progress: Progress) -> Callable[[str], None]:
    """``scenarios``' progress lines (``scenario 3: seed 2002 (base)``) as stages, counted
    against the run's scenarios."""
    def say(message: str) -> None:
        head, _, rest = message.partition(":")
        progress.stage(f"{head}/{progress.total}" if progress.total else head, rest.strip())
    return say


def run_train(args: argparse.Namespace) -> int:
    """Train and save the model."""
    from ckptwatch.settings import model_path
    from ckptwatch.simulate.evaluation import parse_families, train_model

    seeds = parse_seeds(args.seeds)
    out = args.out or model_path()
    with _progress("train-model", args, len(seeds)) as progress:
        model = train_model(seeds, progress=_scenario_line(progress), nodes=args.nodes,
                            hours=args.hours, families=parse_families(args.families),
                            **_sampling(args))
    model.save(out)
    labels = ", ".join(f"{k} {v}" for k, v in model.meta["labels"].items())
    print(f"model -> {out} (trained on {model.meta['n_train']} stalls from {len(seeds)} "
          f"scenarios: {labels})")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """Evaluate and print the scores."""
    from ckptwatch.analysis.attribution import load_default_model
    from ckptwatch.cli._render import render_table
    from ckptwatch.simulate.evaluation import COMPLETE_FAMILIES, evaluate, parse_families

    seeds = parse_seeds(args.seeds)
    families = parse_families(args.families)
    pool_formats = parse_pool_formats(args.pool_formats)
    model = None if args.rules_only else load_default_model(args.model)
    if args.model is not None and model is None and not args.rules_only:
        raise ModelError(f"model {args.model} not found")
    if model is not None:
        overlap = sorted(set(seeds) & set(model.meta.get("training_seeds", [])))
        if overlap:
            raise ModelError(f"seeds {overlap[:5]} were used to train the model; "
                             "evaluate on unseen seeds")
    with _progress("evaluate", args, len(seeds) * len(pool_formats)) as progress:
        report = evaluate(seeds, model, progress=_scenario_line(progress), nodes=args.nodes,
                          hours=args.hours, families=families, pool_formats=pool_formats,
                          **_sampling(args))
    if args.format == "json":
        print(json.dumps({**report.to_dict(), "model": None if model is None else model.meta},
                         indent=2, default=str))
        return 0
    print(f"evaluation on {len(seeds)} unseen scenarios (seeds {args.seeds}, {args.nodes} "
          f"nodes x {args.hours:g} h, families {args.families}"
          + (f", pool formats {', '.join(pool_formats)}" if pool_formats != ("csv",) else "")
          + "".join(f", {k} {v}" for k, v in _sampling(args).items())
          + "); attribution: "
          f"{'rules + calibrated model' if model else 'rules only'}")
    print(f"stall detection: precision {report.precision:.3f}, recall {report.recall:.3f} "
          f"({report.true_positives} true, {report.false_positives} false, "
          f"{report.false_negatives} missed)")
    print(f"cause attribution (top cause vs the true primary cause): macro-F1 "
          f"{report.macro_f1:.3f}")
    print(render_table(report.per_cause(), float_precision=3))
    print("confusion matrix (rows: true cause, columns: predicted top cause)")
    print(render_table(report.confusion()))
    complete = report.subset(COMPLETE_FAMILIES)
    if complete.truth and len(families) > 1:
        print(f"with every telemetry family present ({', '.join(complete.detection_by_family)})"
              f": detection precision {complete.precision:.3f}, recall {complete.recall:.3f}, "
              f"cause macro-F1 {complete.macro_f1:.3f}")
    print("per scenario family (wrong_cause: given a cause that is not the truth; unknown: "
          "left unknown; no_telemetry: no SMART, fabric or pool telemetry reached the stall)")
    print(render_table(report.per_family(), float_precision=3))
    if pool_formats != ("csv",):
        print("per pool format (the same seeds; unknown / no_telemetry: stalls so labelled; "
              "pool_gc: stalls of GC on pool targets, pool_gc_honest: of them labelled unknown "
              "or no_telemetry, pool_gc_wrong: given another cause)")
        print(render_table(report.per_pool_format(), float_precision=3))
    print("reliability of the top cause's score (accuracy: how often it was the true cause)")
    print(render_table(report.reliability(), float_precision=3))
    for m in report.mistakes[:10]:
        pool = f" (pool {m['pool_format']})" if pool_formats != ("csv",) else ""
        print(f"  miss: seed {m['seed']}{pool} {m['job_id']} step {m['step']}: truth "
              f"{m['truth']}, predicted {m['predicted']}")
    return 0
