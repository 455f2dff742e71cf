"""`ckptwatch plan`: local vs pool vs tiered checkpointing, optimal interval, and the flip point.

Input precedence (later wins): model defaults, ``--config`` file, ``--from-lake`` measurement,
explicit flags. The model lives in :mod:`ckptwatch.planning.model`, sweeps and the plan in
:mod:`ckptwatch.planning.sweep`, the lake measurement in :mod:`ckptwatch.planning.measure`,
config files and ``--sweep`` specifications in :mod:`ckptwatch.planning.inputs`; this module
declares the flags, merges the inputs and prints. numpy, scipy, duckdb and matplotlib are
imported only when a plan is computed, so that ``ckptwatch --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.inputs import inputs_from_mapping, load_config, parse_sweep
from ckptwatch.planning.measure import LakeMeasurement, calibrate, measure_from_lake
from ckptwatch.planning.model import PARAMETERS, PlanInputs
from ckptwatch.planning.sweep import Plan, make_plan

_DESCRIPTION = """\
Compare checkpoint strategies by expected lost work, not dollars per terabyte: node-local NVMe
(local), local plus a copy on a neighbour (local+replica), the disaggregated NVMe-oF pool (pool),
and frequent local snapshots with every k-th drained to the pool (tiered). For each: checkpoint
time p50/p99, job MTBF, Young's and Daly's intervals, the numerical optimum of Daly's
exponential-failure model, lost work per failure, overhead and lost GPU-hours per year; then the
best strategy and the parameter values at which the verdict flips.

Units are in the flag names: GB = 1e9 bytes, GB/s = 1e9 bytes/s, _h hours, _s seconds. A
--config file (YAML or TOML) takes the same keys with underscores (pool_bandwidth_gb_s: 400);
flags override it. JSON output is in SI units (bytes, bytes/s, seconds)."""

_EPILOG = """\
sweep parameters (values in the flag's units): ranks, gpus_per_node, bytes_per_rank (GB),
local_bandwidth, pool_bandwidth, nic_bandwidth (GB/s), node_mtbf (h), drive_loss_fraction,
restart_local, restart_pool (s), fabric_slowdown, tail_factor, local_tail_factor,
offnode_copy_interval (h).

examples:
  ckptwatch plan
  ckptwatch plan --config examples/plan.yaml --sweep pool_bandwidth=40:4000 --plot plan.png
  ckptwatch plan --from-lake data/lake --job job-17 --format json
See docs/planning.md for the model and how to read the output."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plan`` command."""
    p = sub.add_parser(
        "plan", help="planning model: lost work, optimal interval, local vs pool, flip point",
        description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="YAML or TOML file of inputs (keys as the flags, with underscores)")
    model = p.add_argument_group("model inputs (override --config and --from-lake)")
    defaults = PlanInputs()
    for prm in PARAMETERS.values():
        default = prm.describe(float(getattr(defaults, prm.field))).replace(",", "")
        model.add_argument(f"--{prm.flag}", dest=prm.key, type=int if prm.integer else float,
                           default=None, metavar="N" if prm.integer else "X",
                           help=f"{prm.help} [default {default}]")
    lake = p.add_argument_group("measured inputs")
    lake.add_argument("--from-lake", type=Path, metavar="LAKE",
                      help="take ranks, GPUs per node, bytes per rank, the p50 barrier time "
                      "and the tail factor (p99/p50) of --job from LAKE's checkpoint writes "
                      "(the plan_measurements view)")
    lake.add_argument("--job", metavar="J", help="job_id to read with --from-lake")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s)")
    p.add_argument("--sweep", metavar="PARAM=LO:HI[:N]",
                   help="vary one parameter from LO to HI (flag units, N points, default 41) "
                   "and report where the best strategy flips")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with --sweep: write overhead vs the parameter per strategy "
                   "(.png or .svg)")
    p.set_defaults(func=run)


def build_inputs(args: argparse.Namespace) -> tuple[PlanInputs, LakeMeasurement | None]:
    """(PlanInputs, LakeMeasurement | None) from defaults, config, lake and flags."""
    inputs = PlanInputs()
    if args.config is not None:
        values = inputs_from_mapping(load_config(args.config), origin=str(args.config))
        inputs = inputs.updated(values)
    measurement = None
    if (args.from_lake is None) != (args.job is None):
        raise PlanInputError("--from-lake LAKE and --job J go together; give both or neither")
    if args.from_lake is not None:
        measurement = measure_from_lake(args.from_lake, args.job)
        inputs = calibrate(inputs, measurement)
    flags = {p.key: getattr(args, p.key) for p in PARAMETERS.values()
             if getattr(args, p.key) is not None}
    if flags:
        inputs = inputs.updated(inputs_from_mapping(flags, origin="command line"))
    return inputs.validate(), measurement


def run(args: argparse.Namespace) -> int:
    """Evaluate the plan and print it (and write the plot)."""
    if args.plot is not None and args.sweep is None:
        raise PlanInputError("--plot needs --sweep PARAM=LO:HI (the plot shows overhead along "
                             "that parameter)")
    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".svg"):
        raise PlanInputError(f"--plot {args.plot}: use a .png or .svg file name")
    spec = parse_sweep(args.sweep) if args.sweep else None
    inputs, measurement = build_inputs(args)
    plan = make_plan(inputs, sweep_spec=spec, measurement=measurement)
    if args.plot is not None:
        from ckptwatch.planning.plot import plot_sweep

        try:
            plot_sweep(plan, args.plot)
        except OSError as exc:
            raise PlanInputError(f"--plot {args.plot}: cannot write it ({exc.strerror or exc}); "
                                 "check the directory exists and is writable") from exc
    if args.format == "json":
        json.dump(plan.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_plan(plan))
        if args.plot is not None:
            print(f"\nplot: {args.plot}")
    return 0


# --------------------------------------------------------------------------------------------
# Text rendering


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _fmt_s(seconds: float) -> str:
    return f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.1f}"


def _human(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for n, r in enumerate([header, *rows]):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:],
                                                                       strict=True)]
        out.append("  " + "  ".join(cells))
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def render_plan(plan: Plan) -> str:
    """The plan as text: inputs, one row per strategy, the verdict, the flips, the sweep."""
    i = plan.inputs
    lines = []
    if plan.measurement is not None:
        m = plan.measurement
        lines.append(
            f"measured: job {m.job_id} ({m.tier} tier), {_plural(m.checkpoints, 'checkpoint')} "
            f"in {m.source}: barrier p50 {m.p50_s:.1f} s, p99 {m.p99_s:.1f} s, tail factor "
            f"{m.tail_factor:.2f}")
        if m.checkpoints < 20:
            lines.append(f"  (only {_plural(m.checkpoints, 'checkpoint')}: the p99 is close to "
                         "the maximum; the tail factor firms up with more history)")
    lines += [
        f"job: {_plural(i.ranks, 'rank')} on {_plural(i.n_nodes, 'node')} "
        f"({i.gpus_per_node} GPUs/node), "
        f"{i.bytes_per_rank / 1e9:.3g} GB/rank = {i.total_bytes / 1e12:.3g} TB per checkpoint",
        f"storage: local {i.local_bandwidth_bytes_s / 1e9:.3g} GB/s per node, pool "
        f"{i.pool_bandwidth_bytes_s / 1e9:,.4g} GB/s aggregate, NIC "
        f"{i.nic_bandwidth_bytes_s / 1e9:.3g} GB/s per node; tail factor "
        f"{i.tail_factor:.3g} (pool), {i.local_tail_factor:.3g} (local)",
        f"failures: node MTBF {i.node_mtbf_s / 3600:,.4g} h -> job MTBF "
        f"{i.job_mtbf_s / 3600:,.4g} h; {i.drive_loss_fraction:.3g} of failures lose the "
        f"drive; restart {i.restart_local_s:.0f} s local, {i.restart_pool_s:.0f} s pool; "
        f"fabric slowdown {i.fabric_slowdown:.3g}",
        "",
    ]
    header = ["strategy", "p50 s", "p99 s", "cost s", "restart s", "Young s", "Daly s",
              "optimal s", "k", "lost/fail s", "overhead", "GPU-h/yr"]
    rows = []
    for s in plan.strategies:
        k = "" if s.durable_every_k is None else f"{s.durable_every_k:,.0f}"
        rows.append([
            s.name + (" *" if s.name == plan.best else ""), f"{s.checkpoint_s_p50:.1f}",
            f"{s.checkpoint_s_p99:.1f}", f"{s.checkpoint_cost_s:.1f}", _fmt_s(s.restart_s),
            _fmt_s(s.young_interval_s), _fmt_s(s.daly_interval_s),
            _fmt_s(s.optimal_interval_s), k, _fmt_s(s.lost_work_per_failure_s),
            f"{100 * s.overhead_fraction:.2f} %", f"{s.lost_gpu_hours_per_year:,.0f}"])
    lines += _table(header, rows)
    best = plan.strategy(plan.best)
    lines += [
        "",
        f"best: {best.name} — checkpoint every {_human(best.optimal_interval_s)} of work; "
        f"{100 * best.overhead_fraction:.2f} % of wall time lost "
        f"({best.lost_gpu_hours_per_year:,.0f} GPU-hours/year), "
        f"{_human(best.lost_work_per_failure_s)} lost per failure",
        "  (p99 = p50 x tail factor; cost = p99 + fabric slowdown x fabric time; k = local "
        "snapshots per durable copy; * = best)",
        "",
    ]
    if plan.sweep is not None:
        p = PARAMETERS[plan.sweep.parameter]
        lines.append(f"where the verdict flips (sweep of {p.name}, "
                     f"{p.describe(plan.sweep.values[0])} .. "
                     f"{p.describe(plan.sweep.values[-1])}):")
    else:
        lines.append("where the verdict flips (each parameter alone, 0.1x..10x its value; "
                     "ranks 1/16x..16x; drive_loss_fraction 0..1):")
    if not plan.flips:
        lines.append("  no flip in range: the best strategy is the same throughout")
    for f in plan.flips:
        p = PARAMETERS[f.parameter]
        now = p.describe(float(getattr(i, p.field)))
        lines.append(f"  {f.parameter} = {p.describe(f.value)}: {f.from_} -> {f.to}"
                     f"   (now {now})")
    if plan.sweep is not None:
        sw = plan.sweep
        p = PARAMETERS[sw.parameter]
        lines += ["", f"overhead (% of wall time) vs {p.name}:"]
        header = [f"{p.name} [{p.unit}]" if p.unit else p.name, *sw.overhead, "best"]
        rows = []
        for n, v in enumerate(sw.values):
            d = p.to_display(v)
            rows.append([f"{d:,.0f}" if p.integer or d >= 100 else f"{d:.3g}",
                         *(f"{100 * sw.overhead[s][n]:.2f}" for s in sw.overhead),
                         sw.best[n]])
        lines += _table(header, rows)
    return "\n".join(lines)
