"""The planning plot: overhead of every checkpoint strategy along one swept parameter.

One line per strategy (overhead as % of wall time, left axis; lost GPU-hours per year on the
right axis when the job size is fixed), the band underneath coloured by the best strategy, a
dashed line at every flip with its value, and a dotted line at the plan's current value.
matplotlib is imported inside :func:`plot_sweep` (Agg canvas, no pyplot state) so that importing
this module, and the CLI, stay fast.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import HOURS_PER_YEAR, PARAMETERS, STRATEGIES
from ckptwatch.planning.sweep import Plan

#: One colour per strategy, stable across plots (colour-blind safe, Okabe-Ito).
COLOURS: dict[str, str] = {
    "local": "#E69F00",
    "local+replica": "#009E73",
    "pool": "#0072B2",
    "tiered": "#CC79A7",
}
_STYLES: dict[str, str] = {"local": "-", "local+replica": "--", "pool": "-", "tiered": "-."}


def plot_sweep(plan: Plan, path: Path) -> Path:
    """Write the sweep of ``plan`` to ``path`` (.png or .svg) and return the path."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator

    sw = plan.sweep
    if sw is None:
        raise PlanInputError("no sweep to plot: pass --sweep PARAM=LO:HI with --plot")
    p = PARAMETERS[sw.parameter]
    xs = [p.to_display(v) for v in sw.values]
    inputs = plan.inputs

    by_cost = sw.objective == "cost" and sw.total_usd is not None
    # By cost: the total bill in thousands of USD a year; else overhead in % of wall time.
    curves = ({k: tuple(v / 1e3 for v in vals) for k, vals in sw.total_usd.items()}
              if by_cost and sw.total_usd is not None
              else {k: tuple(100.0 * v for v in vals) for k, vals in sw.overhead.items()})
    fig = Figure(figsize=(9.0, 5.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    tops = []
    for name in STRATEGIES:
        ys = list(curves[name])
        tops.append(max(ys))
        ax.plot(xs, ys, _STYLES[name], color=COLOURS[name], lw=2.2, label=name)
    if sw.log_scale:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    ax.set_xlim(xs[0], xs[-1])
    ymin = min(min(v) for v in curves.values())
    if by_cost and sw.log_scale and ymin > 0:
        ax.set_yscale("log")
        ax.set_ylim(ymin * 0.5, max(tops) * 1.5)
    else:
        # Keep the crossing readable when one strategy goes off the chart: clip at 4x the
        # runner-up's peak.
        top = min(max(tops), 4.0 * sorted(tops)[-2])
        ax.set_ylim(max(0.0, ymin * 0.8 - 0.05), top * 1.05)

    # Band along the bottom coloured by the best strategy, split exactly at the flips.
    band = ax.get_ylim()[0]
    height = (ax.get_ylim()[1] - band) * 0.035
    if ax.get_yscale() == "log":
        height = band * (ax.get_ylim()[1] / band) ** 0.035 - band
    edges = [xs[0], *(p.to_display(f.value) for f in plan.flips), xs[-1]]
    owners = [f.from_ for f in plan.flips] + [plan.flips[-1].to if plan.flips else sw.best[0]]
    for x0, x1, owner in zip(edges[:-1], edges[1:], owners, strict=True):
        ax.fill_between([x0, x1], band, band + height, color=COLOURS[owner], alpha=0.6, lw=0)

    for n, flip in enumerate(plan.flips):
        x = p.to_display(flip.value)
        ax.axvline(x, color="black", ls="--", lw=1.2)
        # Label on the side of the line with more room.
        left_half = _axis_fraction(x, xs[0], xs[-1], sw.log_scale) < 0.5
        ax.annotate(f"flip: {flip.from_} → {flip.to}\nat {p.describe(flip.value)}",
                    xy=(x, ax.get_ylim()[1]),
                    xytext=(6 if left_half else -6, -8 - 34 * (n % 3)),
                    textcoords="offset points", va="top", ha="left" if left_half else "right",
                    fontsize=9, bbox={"boxstyle": "round", "fc": "white", "ec": "0.6"})
    current = p.to_display(float(getattr(inputs, p.field)))
    if xs[0] <= current <= xs[-1]:
        ax.axvline(current, color="0.45", ls=":", lw=1.4)
        ax.annotate(f"this plan: {p.describe(float(getattr(inputs, p.field)))}",
                    xy=(current, band + height), xytext=(4, 4), textcoords="offset points",
                    fontsize=8, color="0.3")

    unit = f" [{p.unit}]" if p.unit and p.unit != p.name else ""
    ax.set_xlabel(f"{p.name}{unit}")
    ax.set_ylabel("total bill (thousand USD a year)" if by_cost
                  else "overhead (% of wall time not training)")
    ax.grid(True, which="major", alpha=0.3)
    fig.legend(title="strategy (each at its optimal interval; bottom band = best strategy)",
               loc="outside lower center", ncols=len(STRATEGIES), fontsize=9,
               title_fontsize=9, frameon=False)
    if not by_cost and p.name not in ("ranks", "gpus_per_node"):
        gpu_h = inputs.n_gpus * HOURS_PER_YEAR / 100.0  # GPU-hours/year per % of overhead

        def to_gpu_hours(percent: Any) -> Any:
            return np.asarray(percent) * gpu_h

        def to_percent(gpu_hours: Any) -> Any:
            return np.asarray(gpu_hours) / gpu_h

        right = ax.secondary_yaxis("right", functions=(to_gpu_hours, to_percent))
        right.set_ylabel("lost GPU-hours per year")
        right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_title(
        f"{'Yearly bill' if by_cost else 'Checkpoint overhead'} vs {p.name}\n"
        f"{inputs.ranks:,} ranks on {inputs.n_nodes:,} nodes, "
        f"{inputs.total_bytes / 1e12:.3g} TB per checkpoint, job MTBF "
        f"{inputs.job_mtbf_s / 3600:,.3g} h, pool tail factor {inputs.tail_factor:.3g}",
        fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=130)
    return path


def _axis_fraction(x: float, lo: float, hi: float, log: bool) -> float:
    """Where ``x`` sits between ``lo`` and ``hi`` on a linear or log axis, 0..1."""
    if log:
        return (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (x - lo) / (hi - lo)


def plot_map(plan: Plan, path: Path) -> Path:
    """Write the two-parameter map of ``plan`` (``--sweep2``) to ``path`` (.png or .svg).

    Each grid cell is coloured by its best strategy; the flip boundary (where the best strategy
    changes) is drawn as a black line; the plan's own point is marked with a star.
    """
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    sw2 = plan.sweep2
    if sw2 is None:
        raise PlanInputError("no map to plot: pass --sweep2 P1=LO:HI P2=LO:HI with --plot")
    px, py = PARAMETERS[sw2.x], PARAMETERS[sw2.y]
    xs = np.array([px.to_display(v) for v in sw2.x_values])
    ys = np.array([py.to_display(v) for v in sw2.y_values])
    index = {s: n for n, s in enumerate(STRATEGIES)}
    codes = np.array([[index[b] for b in row] for row in sw2.best], dtype=float)

    fig = Figure(figsize=(8.0, 5.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cmap = ListedColormap([COLOURS[s] for s in STRATEGIES])
    ax.pcolormesh(xs, ys, codes, cmap=cmap, vmin=-0.5, vmax=len(STRATEGIES) - 0.5,
                  shading="nearest", alpha=0.75)
    # The boundary: each row's flips located exactly (as a sweep's), joined into one line per
    # pair of strategies.
    lines: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for y, flip in sw2.boundary:
        key = tuple(sorted((flip.from_, flip.to)))
        lines.setdefault((key[0], key[1]), []).append(
            (px.to_display(flip.value), py.to_display(y)))
    for pts in lines.values():
        pts.sort(key=lambda xy: xy[1])
        ax.plot([x for x, _ in pts], [y for _, y in pts], color="black", lw=2.0,
                marker="." if len(pts) < 3 else None)
    log_x = xs[0] > 0 and xs[-1] / xs[0] >= 10.0
    log_y = ys[0] > 0 and ys[-1] / ys[0] >= 10.0
    fmt = FuncFormatter(lambda v, _: f"{v:,.6g}")
    if log_x:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(fmt)
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(fmt)
    inputs = plan.inputs
    cx = px.to_display(float(getattr(inputs, px.field)))
    cy = py.to_display(float(getattr(inputs, py.field)))
    ax.plot([cx], [cy], marker="*", ms=16, mec="black", mfc="white", ls="none",
            label=f"this plan: {px.describe(float(getattr(inputs, px.field)))}, "
            f"{py.describe(float(getattr(inputs, py.field)))}")
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(ys[0], ys[-1])
    ux = f" [{px.unit}]" if px.unit and px.unit != px.name else ""
    uy = f" [{py.unit}]" if py.unit and py.unit != py.name else ""
    ax.set_xlabel(f"{px.name}{ux}")
    ax.set_ylabel(f"{py.name}{uy}")
    present = sorted({b for row in sw2.best for b in row}, key=index.__getitem__)
    handles: list[Any] = [Patch(color=COLOURS[s], alpha=0.75, label=s) for s in present]
    handles += ax.get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9,
               frameon=False,
               title=f"best strategy by {sw2.objective} (black line = where the verdict flips)",
               title_fontsize=9)
    ax.set_title(
        f"Best checkpoint strategy over {px.name} and {py.name}\n"
        f"{inputs.ranks:,} ranks, {inputs.total_bytes / 1e12:.3g} TB per checkpoint, job MTBF "
        f"{inputs.job_mtbf_s / 3600:,.3g} h, pool tail factor {inputs.tail_factor:.3g}",
        fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=100)
    return path
