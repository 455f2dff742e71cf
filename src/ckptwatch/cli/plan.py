"""`ckptwatch plan`: local vs pool vs tiered checkpointing, optimal interval, the yearly bill,
and the flip point.

Input precedence (later wins): model defaults, ``--config`` file, ``--failures`` log (node
MTBF), ``--from-lake`` measurement, explicit flags. The model lives in
:mod:`ckptwatch.planning.model`, the bill in :mod:`ckptwatch.planning.cost`, tails in
:mod:`ckptwatch.planning.tails`, failure logs in :mod:`ckptwatch.planning.failures`, sweeps and
the plan in :mod:`ckptwatch.planning.sweep`, the lake measurement in
:mod:`ckptwatch.planning.measure`, config files and ``--sweep`` specifications in
:mod:`ckptwatch.planning.inputs`; this module declares the flags, merges the inputs and
prints. numpy, scipy, duckdb and matplotlib are
imported only when a plan is computed, so that ``ckptwatch --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.failures import FailureEstimate, read_failures
from ckptwatch.planning.inputs import inputs_from_mapping, load_config, parse_sweep
from ckptwatch.planning.measure import (
    LakeMeasurement,
    calibrate,
    measure_from_lake,
    resolve_timeouts,
)
from ckptwatch.planning.model import PARAMETERS, PRICE_FIELDS, STRATEGIES, PlanInputs
from ckptwatch.planning.sweep import Plan, make_plan
from ckptwatch.settings import default_lake

_DESCRIPTION = """\
Compare checkpoint strategies by expected lost work, not dollars per terabyte: node-local NVMe
(local), local plus a copy on a neighbour (local+replica), the disaggregated NVMe-oF pool (pool),
and frequent local snapshots with every k-th drained to the pool (tiered). For each: checkpoint
time p50/p99, job MTBF, Young's and Daly's intervals, the numerical optimum of Daly's
exponential-failure model (checkpoints that outlast --checkpoint-timeout-s kill the job: their
probability comes from the barrier time's tail), lost work per failure, overhead, lost
GPU-hours per year, and the yearly bill in US dollars: committed (the pool's fixed cost
amortised, and its staff), per-unit (drives, pool capacity and bandwidth), lost work and
timeouts at a GPU-hour price. Then the best strategy (by --objective: cost when any price is
given, overhead otherwise) and the parameter values at which the verdict flips.

Units are in the flag names: GB = 1e9 bytes, GB/s = 1e9 bytes/s, _h hours, _s seconds. A
--config file (YAML or TOML) takes the same keys with underscores (pool_bandwidth_gb_s: 400);
flags override it. JSON output is in SI units (bytes, bytes/s, seconds)."""

_EPILOG = """\
sweep parameters (values in the flag's units): ranks, gpus_per_node, bytes_per_rank (GB),
local_bandwidth, pool_bandwidth, nic_bandwidth (GB/s), node_mtbf (h), drive_loss_fraction,
restart_local, restart_pool (s), fabric_slowdown, tail_factor, local_tail_factor,
offnode_copy_interval (h), checkpoint_timeout (s), gpu_hour_price, pool_fixed_cost,
pool_staff_cost, amortisation (years), pool_capacity_price, pool_bandwidth_price,
local_capacity_price (USD), retained_checkpoints, pool_scale_exponent. Sweeping ranks buys
pool bandwidth in proportion (ranks ratio ** pool_scale_exponent); the committed cost stays.

default prices (USD; set yours): GPU-hour 2 (2025 H100 rental, ~2-3), pool fixed 500,000
and staff 150,000 a year (half a storage engineer), 5-year life, pool 150 per TB and 1,000 per
GB/s, local NVMe 100 per TB. Sources: docs/planning.md, "The yearly bill".

--failures FILE: a CSV with interruption_count per cause (and --failures-days,
--failures-gpus or columns period_days, gpus) or one timestamp per interruption -> node MTBF
with a 95 % confidence interval, used by the model.

examples:
  ckptwatch plan
  ckptwatch plan --config examples/plan.yaml --sweep pool_bandwidth=40:4000 --plot plan.png
  ckptwatch plan --config examples/plan.yaml --sweep2 ranks=64:16384 pool_bandwidth=100:4000 \
      --plot map.png
  ckptwatch plan --failures llama3.csv --failures-days 54 --failures-gpus 16384
  ckptwatch plan --from-lake data/lake --job job-17 --format json
See docs/planning.md for the model and how to read the output."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plan`` command."""
    p = sub.add_parser(
        "plan", help="planning model: lost work, optimal interval, local vs pool, flip point",
        description=_DESCRIPTION, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # `plan stagger --pool P` must reach the stagger action, not be read as an
        # abbreviation of plan's --pool-* flags
        allow_abbrev=False)
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
    lake.add_argument("--checkpoint-interval-s", type=float, metavar="S",
                      help="with --from-lake: the job's checkpoint interval, seconds (default: "
                      "its jobs.checkpoint_interval_s, else the median gap between its "
                      "checkpoint starts)")
    lake.add_argument("--timeouts-per-year", type=float, metavar="X",
                      help="with --from-lake: the job's checkpoint timeouts a year (default: "
                      "its timed-out checkpoints over the span observed, scaled to a year); "
                      "with the interval, the measured tier's timeout probability per "
                      "checkpoint (X x interval / a year)")
    lake.add_argument("--failures", type=Path, metavar="FILE",
                      help="CSV of interruptions (counts per cause, or timestamps) -> node MTBF "
                      "with a confidence interval; overrides --config's node_mtbf_h")
    lake.add_argument("--failures-days", type=float, metavar="D",
                      help="with --failures: the observation period, days (if the file has no "
                      "period_days column)")
    lake.add_argument("--failures-gpus", type=int, metavar="N",
                      help="with --failures: GPUs in the observed fleet (if the file has no "
                      "gpus column)")
    p.add_argument("--objective", choices=("cost", "overhead"), default=None,
                   help="what 'best' minimises: the yearly bill or the overhead (default: "
                   "cost when any price is given in --config or flags, overhead otherwise)")
    p.add_argument("--strategies", metavar="S,S", default=None,
                   help="choose 'best' (and the flips and the map) among these, comma-separated "
                   "(default: all of local, local+replica, pool, tiered); all are still shown")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s)")
    p.add_argument("--sweep", metavar="PARAM=LO:HI[:N]",
                   help="vary one parameter from LO to HI (flag units, N points, default 41) "
                   "and report where the best strategy flips")
    p.add_argument("--sweep2", nargs=2, metavar=("P1=LO:HI[:N]", "P2=LO:HI[:N]"),
                   help="map the best strategy over two parameters (N points each, default "
                   "21); with --plot, coloured regions and the flip boundary")
    p.add_argument("--plot", type=Path, metavar="FILE",
                   help="with --sweep: overhead vs the parameter per strategy; with --sweep2: "
                   "the map of the best strategy (.png or .svg)")
    p.set_defaults(func=run)
    actions = p.add_subparsers(dest="plan_action", metavar="ACTION", required=False,
                               help="stagger: phase offsets for jobs sharing a pool (without "
                               "an action: the planning model above)")
    s = actions.add_parser(
        "stagger", help="phase offsets that spread jobs' checkpoint bursts on a shared pool",
        description="From each pool job's measured checkpoint interval, write window and bytes "
        "(pool_job_schedules), the delays to its checkpoint phase that lower the pool's peak "
        "write demand, the peak before and after against the pool's bandwidth ([pool] "
        "write_bandwidth_gbs, else estimated), and each job's barrier p99 predicted by fluid "
        "sharing of the bandwidth before and after; where the staggered peak is still above "
        "the bandwidth, the jobs whose frequent snapshots belong on node-local drives "
        "(docs/bursts.md).")
    s.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    s.add_argument("--pool", metavar="POOL", help="only this pool")
    s.add_argument("--format", choices=("table", "json", "config"), default="table",
                   help="table (default), json, or config: TOML a scheduler can read")
    s.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="config file for [pool] write_bandwidth_gbs (default: "
                   "$CKPTWATCH_CONFIG, else none)")
    s.set_defaults(func=run_stagger)


def run_stagger(args: argparse.Namespace) -> int:
    """Print the stagger plan of each pool (exit 0; a pool without two jobs has none)."""
    import polars as pl

    from ckptwatch.cli._render import render_table
    from ckptwatch.planning.stagger import config_snippet
    from ckptwatch.planning.stagger_lake import stagger_plans
    from ckptwatch.safetext import escape_controls
    from ckptwatch.settings import load_settings

    plans = stagger_plans(args.lake, load_settings(args.config), pool=args.pool)
    if args.format == "json":
        print(json.dumps([p.to_dict() for p in plans]))
        return 0
    if args.format == "config":
        sys.stdout.write(config_snippet(plans))
        return 0
    if not plans:
        where = f"pool {args.pool}" if args.pool else "any pool"
        print(escape_controls(f"no job checkpoints to {where} in {args.lake} twice or more: "
                              "nothing to stagger"))
        return 0
    gb = 1e9
    for plan in plans:
        print(escape_controls(
            f"{plan.pool}: peak demand {plan.peak_before_bps / gb:.2f} GB/s today -> "
            f"{plan.peak_after_bps / gb:.2f} GB/s staggered, against "
            f"{plan.capacity_bps / gb:.2f} GB/s ({plan.capacity_source}) over a "
            f"{plan.horizon_s / 3600:.1f} h horizon"))
        rows = pl.DataFrame([{
            "job": a.job_id, "interval_s": a.interval_s, "write_s": a.duration_s,
            "GB": a.bytes / gb, "GB/s": a.rate_bps / gb, "advice": a.advice,
            "p99_s": a.barrier_p99_s, "p99_before_s": a.predicted_p99_before_s,
            "p99_after_s": a.predicted_p99_after_s} for a in plan.jobs])
        print(render_table(rows))
        if plan.to_local:
            print(escape_controls(
                f"  staggered, the pool still peaks above its bandwidth: move the frequent "
                f"snapshots of {', '.join(plan.to_local)} to node-local drives (tiering), or "
                f"give the pool {plan.needed_bps / gb:.2f} GB/s"))
    print("(p99_s: measured barrier p99; before / after: predicted by fluid sharing of the "
          "bandwidth with today's phases and with the advice; --format config for a "
          "scheduler)")
    return 0


def _build(args: argparse.Namespace) -> tuple[PlanInputs, LakeMeasurement | None,
                                              FailureEstimate | None, bool]:
    """Inputs, measurement, failure estimate, and whether any price was given."""
    inputs = PlanInputs()
    given: set[str] = set()
    config_timeout = None
    if args.config is not None:
        values = inputs_from_mapping(load_config(args.config), origin=str(args.config))
        given |= set(values)
        inputs = inputs.updated(values)
        config_timeout = values.get("checkpoint_timeout_s")
    failures = None
    if args.failures is None and (args.failures_days is not None
                                  or args.failures_gpus is not None):
        raise PlanInputError("--failures-days and --failures-gpus describe a --failures FILE; "
                             "give the file too")
    if args.failures is not None:
        gpn = args.gpus_per_node if args.gpus_per_node is not None else inputs.gpus_per_node
        failures = read_failures(args.failures, gpus_per_node=gpn,
                                 period_days=args.failures_days, gpus=args.failures_gpus)
        inputs = inputs.updated({"node_mtbf_s": failures.node_mtbf_s})
    measurement = None
    if (args.from_lake is None) != (args.job is None):
        raise PlanInputError("--from-lake LAKE and --job J go together; give both or neither")
    if args.from_lake is None and (args.checkpoint_interval_s is not None
                                   or args.timeouts_per_year is not None):
        raise PlanInputError("--checkpoint-interval-s and --timeouts-per-year override what "
                             "--from-lake measures; give --from-lake LAKE --job J too")
    if args.from_lake is not None:
        measurement = resolve_timeouts(
            measure_from_lake(args.from_lake, args.job),
            timeout_flag=getattr(args, PARAMETERS["checkpoint_timeout"].key),
            config_timeout=config_timeout, interval_flag=args.checkpoint_interval_s,
            per_year_flag=args.timeouts_per_year)
        inputs = calibrate(inputs, measurement)
    flags = {p.key: getattr(args, p.key) for p in PARAMETERS.values()
             if getattr(args, p.key) is not None}
    if flags:
        values = inputs_from_mapping(flags, origin="command line")
        given |= set(values)
        inputs = inputs.updated(values)
    return inputs.validate(), measurement, failures, bool(given & set(PRICE_FIELDS))


def _parse_sweep2(specs: list[str]) -> tuple[tuple[str, float, float, int],
                                             tuple[str, float, float, int]]:
    parsed = []
    for spec in specs:
        name, lo, hi, n = parse_sweep(spec)
        if spec.count(":") < 2:
            n = 21
        parsed.append((name, lo, hi, n))
    return parsed[0], parsed[1]


def run(args: argparse.Namespace) -> int:
    """Evaluate the plan and print it (and write the plot)."""
    if args.plot is not None and args.sweep is None and args.sweep2 is None:
        raise PlanInputError("--plot needs --sweep PARAM=LO:HI (the plot shows overhead along "
                             "that parameter) or --sweep2 P1=LO:HI P2=LO:HI (the map)")
    if args.sweep is not None and args.sweep2 is not None:
        raise PlanInputError("--sweep and --sweep2 go one at a time; give one of them")
    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".svg"):
        raise PlanInputError(f"--plot {args.plot}: use a .png or .svg file name")
    spec = parse_sweep(args.sweep) if args.sweep else None
    spec2 = _parse_sweep2(args.sweep2) if args.sweep2 else None
    inputs, measurement, failures, prices_given = _build(args)
    swept = [spec] if spec else list(spec2 or ())
    prices_given = prices_given or any(PARAMETERS[sp[0]].field in PRICE_FIELDS for sp in swept)
    if args.objective is not None:
        objective, reason = args.objective, "--objective"
    elif prices_given:
        objective, reason = "cost", "prices given"
    else:
        objective, reason = "overhead", "no prices given"
    plan = make_plan(inputs, sweep_spec=spec, measurement=measurement, objective=objective,
                     objective_reason=reason, failures=failures, sweep2_spec=spec2,
                     among=tuple(x.strip() for x in args.strategies.split(","))
                     if args.strategies else STRATEGIES)
    if args.plot is not None:
        from ckptwatch.planning.plot import plot_map, plot_sweep

        try:
            if plan.sweep2 is not None:
                plot_map(plan, args.plot)
            else:
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


def _fmt_rate(per_year: float) -> str:
    if per_year != per_year or per_year == float("inf"):
        return "inf"
    if per_year < 0.001:
        return "0"
    return f"{per_year:,.0f}" if per_year >= 100 else f"{per_year:.3g}"


def _fmt_usd(usd: float) -> str:
    if usd != usd or usd == float("inf"):
        return "inf"
    return f"{usd:,.0f}"


def _render_map(plan: Plan) -> list[str]:
    """The two-parameter map as text: one row per y value, one letter per x value."""
    sw2 = plan.sweep2
    assert sw2 is not None
    px, py = PARAMETERS[sw2.x], PARAMETERS[sw2.y]
    letters = {"local": "L", "local+replica": "R", "pool": "P", "tiered": "T"}
    lines = [f"best strategy by {sw2.objective} over {px.name} (across, "
             f"{px.describe(sw2.x_values[0])} .. {px.describe(sw2.x_values[-1])}) and "
             f"{py.name} (down, {py.describe(sw2.y_values[-1])} .. "
             f"{py.describe(sw2.y_values[0])}):"]
    for yv, row in reversed(list(zip(sw2.y_values, sw2.best, strict=True))):
        lines.append(f"  {py.describe(yv):>14}  " + "".join(letters[b] for b in row))
    lines.append("  (" + ", ".join(f"{v} = {k}" for k, v in letters.items()) + ")")
    return lines


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
        fit = m.tail_fit()
        if fit is None:
            lines.append("  tail: from the measured tail factor (a fit needs 5 or more "
                         "checkpoints)")
        else:
            parts = [f"{c.family} KS {c.ks_distance:.3f} (p {c.ks_p_value:.2f})"
                     for c in fit.candidates if c.ks_distance is not None
                     and c.ks_p_value is not None]
            lines.append(f"  tail fit over {_plural(fit.n, 'checkpoint')}: {'; '.join(parts)}"
                         f" -> {fit.best.family} used for timeouts")
        lines.append(f"  restart cost: {m.restart_source}"
                     + ("" if m.restore_s is None else f" = {m.restore_s:.1f} s"))
        t = m.timeouts
        if t is not None:
            q = t.probability
            lines += [
                f"  checkpoint timeout: {i.checkpoint_timeout_s:g} s ({t.timeout_source})",
                "  checkpoint interval: "
                + ("unknown" if t.interval_s is None else f"{t.interval_s:,.0f} s")
                + f" ({t.interval_source})",
                "  timeouts: " + (t.per_year_source if t.per_year is None
                                  else f"{_fmt_rate(t.per_year)} a year ({t.per_year_source})")
                + ("" if q is None else
                   f" -> {q:.3g} of {m.tier} checkpoints time out (timeouts a year x interval "
                   "/ a year), used instead of the tail's probability")]
    if plan.failures is not None:
        fe = plan.failures
        lo, hi = fe.node_mtbf_ci_s
        lines.append(
            f"failures from {fe.source}: {fe.interruptions:,} interruptions in "
            f"{fe.period_s / 86400:,.4g} days on {fe.gpus:,} GPUs ({fe.nodes:,} nodes): one "
            f"every {fe.fleet_mtbf_s / 3600:.3g} h -> node MTBF {fe.node_mtbf_s / 3600:,.4g} h "
            f"({100 * fe.confidence:.0f} % CI {lo / 3600:,.4g} .. {hi / 3600:,.4g} h)")
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
        f"fabric slowdown {i.fabric_slowdown:.3g}; checkpoint timeout "
        f"{i.checkpoint_timeout_s:.0f} s" + (" (none)" if i.checkpoint_timeout_s <= 0 else ""),
        f"prices: GPU-hour {i.gpu_hour_usd:.3g} USD; pool {i.pool_fixed_usd:,.0f} USD fixed + "
        f"{i.pool_staff_usd_per_year:,.0f} USD/yr staff, {i.pool_usd_per_tb:,.0f} USD/TB, "
        f"{i.pool_usd_per_gb_s:,.0f} USD per GB/s; local {i.local_usd_per_tb:,.0f} USD/TB; "
        f"{i.amortisation_years:.3g}-year life, {i.retained_checkpoints} checkpoints kept",
        "",
    ]
    header = ["strategy", "p50 s", "p99 s", "cost s", "restart s", "Young s", "Daly s",
              "optimal s", "k", "lost/fail s", "timeouts/yr", "overhead", "GPU-h/yr"]
    rows = []
    for s in plan.strategies:
        k = "" if s.durable_every_k is None else f"{s.durable_every_k:,.0f}"
        rows.append([
            s.name + (" *" if s.name == plan.best else ""), f"{s.checkpoint_s_p50:.1f}",
            f"{s.checkpoint_s_p99:.1f}", f"{s.checkpoint_cost_s:.1f}", _fmt_s(s.restart_s),
            _fmt_s(s.young_interval_s), _fmt_s(s.daly_interval_s),
            _fmt_s(s.optimal_interval_s), k, _fmt_s(s.lost_work_per_failure_s),
            _fmt_rate(s.timeouts_per_year),
            f"{100 * s.overhead_fraction:.2f} %", f"{s.lost_gpu_hours_per_year:,.0f}"])
    lines += _table(header, rows)
    bills = plan.bills or {}
    if bills:
        lines += ["", "yearly bill, USD a year:"]
        header = ["strategy", "committed", "per-unit", "lost work", "timeouts", "total"]
        rows = []
        for s in plan.strategies:
            b = bills[s.name]
            rows.append([s.name + (" *" if s.name == plan.best else ""),
                         *(_fmt_usd(v) for v in (
                             b.committed_usd_per_year, b.per_unit_usd_per_year,
                             b.lost_work_usd_per_year, b.timeout_usd_per_year,
                             b.total_usd_per_year))])
        lines += _table(header, rows)
    best = plan.strategy(plan.best)
    total = f", {_fmt_usd(bills[best.name].total_usd_per_year)} USD a year" if bills else ""
    lines += [
        "",
        f"best: {best.name} (by {plan.objective}, {plan.objective_reason}"
        + ("" if len(plan.among) == len(plan.strategies)
           else f"; among {', '.join(plan.among)}")
        + ") — checkpoint every "
        f"{_human(best.optimal_interval_s)} of work; "
        f"{100 * best.overhead_fraction:.2f} % of wall time lost "
        f"({best.lost_gpu_hours_per_year:,.0f} GPU-hours/year), "
        f"{_human(best.lost_work_per_failure_s)} lost per failure{total}",
        "  (p99 = p50 x tail factor; cost = p99 + fabric slowdown x fabric time; k = local "
        "snapshots per durable copy; timeouts = checkpoints a year whose barrier outlasts the "
        "timeout; * = best)",
        "",
    ]
    if plan.sweep2 is not None:
        lines += _render_map(plan)
        return "\n".join(lines)
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
        by_cost = sw.objective == "cost" and sw.total_usd is not None
        values = sw.total_usd if by_cost and sw.total_usd is not None else sw.overhead
        lines += ["", f"total USD a year vs {p.name} (best by cost):" if by_cost
                  else f"overhead (% of wall time) vs {p.name}:"]
        header = [f"{p.name} [{p.unit}]" if p.unit else p.name, *values, "best"]
        rows = []
        for n, v in enumerate(sw.values):
            d = p.to_display(v)
            rows.append([f"{d:,.0f}" if p.integer or d >= 100 else f"{d:.3g}",
                         *(_fmt_usd(values[s][n]) if by_cost else f"{100 * values[s][n]:.2f}"
                           for s in values),
                         sw.best[n]])
        lines += _table(header, rows)
    return "\n".join(lines)
