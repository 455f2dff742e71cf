"""matplotlib figures of the daily report and of the stall post-mortem notebook.

Figures are drawn on ``matplotlib.figure.Figure`` objects (no pyplot, no global state), so they
are safe in a Prefect task and show inline in a notebook. matplotlib is imported inside each
function: importing this module costs nothing. :func:`png_base64` turns a figure into the
base64 PNG the self-contained HTML report embeds.

Inputs are plain data: the report figure reads a job entry of the report's JSON (so the picture
and the JSON tell the same facts); the post-mortem figures read the frames of
:mod:`ckptwatch.report.postmortem`.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ckptwatch.report.postmortem import RankDurations

#: One colour per attributed cause (the report's badges use the same).
CAUSE_COLORS = {"gc": "#f58518", "metadata": "#8e6bbf", "fabric_pause": "#e45756",
                "saturation": "#b279a2", "unknown": "#7f7f7f", "no_telemetry": "#c7c7c7"}
#: One colour per phase of a rank's write (open/close are metadata: purples).
PHASE_COLORS = {"open": "#8e6bbf", "write": "#4c78a8", "fsync": "#72b7b2",
                "close": "#c9a7e4", "other": "#d0d0d0", "total": "#9d9d9d"}
#: Level lines of the timeout headroom.
LEVEL_STYLE = {"timeout": ("#c0392b", "-"), "critical": ("#e67e22", "--"),
               "warning": ("#d4ac0d", ":")}
#: Distinct colours for the slow hosts in the signal panels.
HOST_COLORS = ("#e45756", "#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#ff9da6",
               "#72b7b2")
ROLE_STYLE = {"same leaf": ("#555555", 0.9, "--"), "this checkpoint": ("#4c78a8", 0.9, "-"),
              "other": ("#b0b0b0", 0.7, "-")}


def _figure(width: float, height: float) -> Figure:
    from ckptwatch.settings.prefect_env import use_cache_for_tool_state

    use_cache_for_tool_state()  # matplotlib's config and font cache: not in the home
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig


def _style(ax: Axes) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, axis="y", color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)


def _time_axis(ax: Axes) -> None:
    import matplotlib.dates as mdates

    loc = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))


def _nan(value: float | None) -> float:
    """``value``, or NaN for a missing one (matplotlib leaves a gap)."""
    return float("nan") if value is None else float(value)


def _ts(values: Sequence[Any]) -> Any:
    """Matplotlib date numbers of datetimes or ISO-8601 strings."""
    import matplotlib.dates as mdates

    return mdates.date2num([v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
                            for v in values])


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    """The figure as a PNG (zlib's default level: the same pixels as PIL's ``optimize``, 2 %
    larger, in a fifth less time per report figure)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


def png_base64(fig: Figure, dpi: int = 100) -> str:
    """``data:image/png;base64,…`` of the figure, for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig, dpi)).decode("ascii")


# -- the daily report -------------------------------------------------------------------------


def barrier_figure(job: Mapping[str, Any]) -> Figure:
    """One job's day: rank p50 / p99 and barrier time per checkpoint against the timeout.

    ``job`` is a job entry of the report JSON (``checkpoints``, ``stalls``, ``timeout_s``,
    ``warning_s``, ``critical_s``). Stalls are marked in their cause's colour.
    """
    from matplotlib.lines import Line2D

    fig = _figure(10.4, 3.5)
    ax = fig.add_subplot()
    _style(ax)
    cps = job["checkpoints"]
    t = _ts([c["start_ts"] for c in cps])
    barrier = [c["barrier_s"] for c in cps]
    ax.plot(t, [c["baseline_s"] for c in cps], color="#9a9a9a", lw=1, ls="--",
            label="job's healthy baseline (stall baseline)")
    # A checkpoint no rank finished has no rank quantiles: a gap in those lines.
    ax.plot(t, [_nan(c["p50_s"]) for c in cps], color="#9ecae9", lw=1.2, marker=".", ms=3,
            label="rank p50")
    ax.plot(t, [_nan(c["p99_s"]) for c in cps], color="#4c78a8", lw=1.2, marker=".", ms=3,
            label="rank p99")
    ax.plot(t, barrier, color="#1f2d3d", lw=1.6, marker="o", ms=3.5,
            label="barrier (slowest rank)")
    top = max([*barrier, 1.0])
    timeout = job.get("timeout_s")
    if timeout:
        for level in ("warning", "critical", "timeout"):
            value = job.get(f"{level}_s") if level != "timeout" else timeout
            if value:
                color, ls = LEVEL_STYLE[level]
                ax.axhline(value, color=color, ls=ls, lw=1.2)
                ax.annotate(f"{level} {value:.3g} s", xy=(1.0, value),
                            xycoords=("axes fraction", "data"), xytext=(3, 0),
                            textcoords="offset points", va="center", fontsize=7.5,
                            color=color)
        top = max(top, float(timeout))
    causes_seen: list[str] = []
    for s in job.get("stalls", []):
        color = CAUSE_COLORS.get(s["cause"], CAUSE_COLORS["unknown"])
        ax.scatter(_ts([s["start_ts"]]), [s["barrier_s"]], s=90, color=color, zorder=5,
                   edgecolor="white", linewidth=1.2)
        ax.annotate(str(s["step"]), (_ts([s["start_ts"]])[0], s["barrier_s"]),
                    xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7,
                    color=color)
        if s["cause"] not in causes_seen:
            causes_seen.append(s["cause"])
    ax.set_ylim(0, top * 1.12)
    ax.set_ylabel("seconds", fontsize=8)
    _time_axis(ax)
    ax.set_xlabel("checkpoint start (UTC)", fontsize=8)
    handles, _labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="", marker="o", ms=8, color=CAUSE_COLORS.get(c, "#7f7f7f"),
                       label=f"stall: {c}") for c in causes_seen]
    fig.legend(handles=handles, fontsize=7.5, loc="outside lower center",
               ncol=min(len(handles), 6), frameon=False)
    n_st = len(job.get("stalls", []))
    ax.set_title(f"{job['job_id']} ({job['tier']}): {len(cps)} checkpoints, "
                 f"{n_st} stall{'s' if n_st != 1 else ''}", fontsize=10, loc="left")
    return fig


def demand_figure(pool: str, minutes: Sequence[Mapping[str, Any]],
                  capacity_source: str = "configured") -> Figure:
    """One shared pool's day: the checkpoints' peak write demand per minute (GB/s) against the
    pool's capacity, minutes with a saturated second shaded, minutes in which a stalled
    checkpoint was being written marked. ``minutes``: the report's ``pools.minutes`` rows of
    the pool; ``capacity_source``: where the capacity comes from (the legend says it)."""
    from matplotlib.lines import Line2D

    fig = _figure(10.4, 3.0)
    ax = fig.add_subplot()
    _style(ax)
    t = _ts([m["minute"] for m in minutes])
    demand = [m["peak_demand_bps"] / 1e9 for m in minutes]
    capacity = float(minutes[0]["capacity_bps"]) / 1e9 if minutes else 0.0
    ax.vlines(t, 0, demand, color="#4c78a8", lw=1.4)
    ax.axhline(capacity, color="#c0392b", ls="--", lw=1.2)
    for when, m in zip(t, minutes, strict=True):
        if m["saturated"]:
            ax.axvspan(when, when, color="#f2b8b5", lw=3, zorder=0)
    stalled = [(w, d) for w, d, m in zip(t, demand, minutes, strict=True) if m["stalled"]]
    if stalled:
        ax.scatter([w for w, _ in stalled], [d for _, d in stalled], s=28, color="#e45756",
                   zorder=5, edgecolor="white", linewidth=0.8)
    ax.set_ylim(0, max([*demand, capacity, 1e-9]) * 1.15)
    ax.set_ylabel("GB/s", fontsize=8)
    _time_axis(ax)
    ax.set_xlabel("minute (UTC)", fontsize=8)
    handles = [Line2D([], [], color="#4c78a8", lw=1.4, label="peak demand of the minute"),
               Line2D([], [], color="#c0392b", ls="--", lw=1.2,
                      label=f"capacity ({capacity_source})"),
               Line2D([], [], ls="", marker="o", ms=6, color="#e45756",
                      label="a stalled checkpoint writing")]
    fig.legend(handles=handles, fontsize=7.5, loc="outside lower center", ncol=3,
               frameon=False)
    ax.set_title(f"{pool}: write demand of the checkpoints against capacity", fontsize=10,
                 loc="left")
    return fig


# -- the post-mortem --------------------------------------------------------------------------


def timeline_figure(timeline: pl.DataFrame, title: str,
                    normal_rank_s: float | None = None) -> Figure:
    """Per-rank timeline of one checkpoint: a bar per rank from its start, coloured by phase.

    ``timeline`` is :func:`ckptwatch.report.postmortem.rank_timeline`. Ranks are grouped by node
    (shaded bands); slow ranks have red labels. The dashed line is the job's normal rank
    duration from the first start.
    """
    from matplotlib.patches import Patch

    ranks = (timeline.select("rank", "node", "leaf_switch", "is_slow", "duration_s")
             .unique("rank").sort("leaf_switch", "node", "rank", nulls_last=True))
    n = ranks.height
    fig = _figure(10.0, min(13.0, max(3.2, 0.24 * n + 1.5)))
    ax = fig.add_subplot()
    _style(ax)
    ax.grid(True, axis="x", color="#e6e6e6", linewidth=0.8)
    ax.grid(False, axis="y")
    y_of = {r: i for i, r in enumerate(ranks["rank"].to_list())}
    prev_node, band, band_start = None, 0, 0
    nodes = ranks["node"].to_list()
    for i, node in enumerate([*nodes, None]):
        if node != prev_node:
            if prev_node is not None and band % 2 == 0:
                ax.axhspan(band_start - 0.5, i - 0.5, color="#f3f3f3", zorder=0)
            if prev_node is not None:
                ax.annotate(str(prev_node), xy=(1.0, (band_start + i - 1) / 2),
                            xycoords=("axes fraction", "data"), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=7.5,
                            color="#555555")
                band += 1
            prev_node, band_start = node, i
    phases = timeline["phase"].unique(maintain_order=True).to_list()
    for phase in phases:
        seg = timeline.filter(pl.col("phase") == phase)
        ax.barh([y_of[r] for r in seg["rank"].to_list()], seg["phase_s"].to_list(),
                left=seg["phase_start_s"].to_list(), height=0.72,
                color=PHASE_COLORS.get(phase, "#999999"), edgecolor="none", zorder=3)
    targets = (timeline.select("rank", "target").unique("rank").sort("rank"))
    target_of = dict(zip(targets["rank"].to_list(), targets["target"].to_list(), strict=True))
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"rank {r}" + (f" → {target_of[r]}" if target_of.get(r) else "")
                        for r in ranks["rank"].to_list()], fontsize=7)
    for label, slow in zip(ax.get_yticklabels(), ranks["is_slow"].to_list(), strict=True):
        if slow:
            label.set_color("#c0392b")
            label.set_fontweight("bold")
    ax.set_ylim(n - 0.5, -0.5)
    if normal_rank_s:
        x0 = float(timeline["phase_start_s"].min() or 0.0)  # type: ignore[arg-type]
        ax.axvline(x0 + normal_rank_s, color="#333333", ls="--", lw=1, zorder=4)
        ax.annotate(f"normal rank {normal_rank_s:.1f} s", xy=(x0 + normal_rank_s, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(3, -2),
                    textcoords="offset points", fontsize=7.5, va="top")
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds since the checkpoint's first rank started", fontsize=8)
    shown, of = n, int(timeline["shown_of"][0]) if "shown_of" in timeline.columns else n
    n_slow = int(ranks["is_slow"].sum())
    sub = f"{n_slow} slow rank{'s' if n_slow != 1 else ''} (red labels)"
    if shown < of:
        sub += f"; {shown} of {of} ranks shown (all slow ranks, then the slowest)"
    ax.set_title(f"{title}: rank timeline by phase — {sub}", fontsize=10, loc="left")
    fig.legend(handles=[Patch(color=PHASE_COLORS.get(p, "#999999"), label=p) for p in phases],
               fontsize=7.5, loc="outside lower center", frameon=False, ncol=len(phases))
    return fig


def durations_figure(d: RankDurations) -> Figure:
    """Histogram of the job's normal rank durations against this checkpoint's ranks."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    fig = _figure(9.0, 3.2)
    ax = fig.add_subplot()
    _style(ax)
    normal = d.normal["duration_s"].to_numpy()
    this = d.this["duration_s"].to_numpy()
    slow = d.this["is_slow"].to_numpy().astype(bool)
    hi = float(max(np.max(this) if this.size else 1.0, np.max(normal) if normal.size else 1.0))
    bins = np.linspace(0.0, hi * 1.05, 60).tolist()
    if normal.size:
        ax.hist(normal, bins=bins, density=True, color="#c7c7c7",
                label=f"normal checkpoints ({d.n_normal_checkpoints}, "
                f"{normal.size:,} rank writes)")
    if this.size:
        ax2 = ax.twinx()
        ax2.hist([this[~slow], this[slow]], bins=bins, stacked=True,
                 color=["#4c78a8", "#e45756"],
                 label=["this checkpoint: ranks", "this checkpoint: slow ranks"])
        ax2.set_ylabel("ranks of this checkpoint", fontsize=8)
        ax2.tick_params(labelsize=8)
        ax2.spines[["top"]].set_visible(False)
        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        fig.legend(h1 + h2, l1 + l2, fontsize=7.5, loc="outside right upper", frameon=False)
    for x, label, ls, y in ((d.normal_rank_s, f"normal {d.normal_rank_s:.1f} s", "--", 0.97),
                            (d.slow_threshold_s, f"slow from {d.slow_threshold_s:.1f} s", ":",
                             0.87)):
        if x:
            ax.axvline(x, color="#333333", ls=ls, lw=1)
            ax.annotate(label, xy=(x, y), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", fontsize=7.5, va="top")
    ax.set_xlim(0, bins[-1])
    ax.set_xlabel("rank duration (s)", fontsize=8)
    ax.set_ylabel("density (normal checkpoints)", fontsize=8)
    ax.set_title("rank durations: this checkpoint against the job's normal", fontsize=10,
                 loc="left")
    return fig


def signals_figure(signals: pl.DataFrame, start: datetime, end: datetime,
                   title: str = "") -> Figure:
    """The signal panels around a stall: slow hosts in colour, the rest as context.

    ``signals`` is :func:`ckptwatch.report.postmortem.signal_window` (``panel, host, role, ts,
    value``). The checkpoint's window is shaded. Rates use a symmetric log scale.
    """
    from matplotlib.lines import Line2D

    from ckptwatch.report.postmortem import SIGNAL_PANELS

    fig = _figure(10.0, 1.85 * len(SIGNAL_PANELS) + 0.6)
    axes = fig.subplots(len(SIGNAL_PANELS), 1, sharex=True)
    slow_hosts = sorted(signals.filter(pl.col("role") == "slow")["host"].unique().to_list())
    color_of = {h: HOST_COLORS[i % len(HOST_COLORS)] for i, h in enumerate(slow_hosts)}
    legend: dict[str, Line2D] = {}
    for ax, (panel, label, unit) in zip(axes, SIGNAL_PANELS, strict=True):
        _style(ax)
        ax.axvspan(start, end, color="#fde2e1", zorder=0)
        data = signals.filter(pl.col("panel") == panel)
        if data.height == 0:
            ax.text(0.5, 0.5, "no samples in this window", transform=ax.transAxes,
                    ha="center", va="center", fontsize=8, color="#888888")
        order = {"other": 0, "this checkpoint": 1, "same leaf": 2, "slow": 3}
        hosts = sorted(data.select("host", "role").unique().rows(),
                       key=lambda hr: (order.get(hr[1], 0), hr[0]))
        for host, role in hosts:
            series = data.filter(pl.col("host") == host).sort("ts")
            x, y = series["ts"].to_list(), series["value"].to_list()
            if role == "slow":
                color, lw, ls, z = color_of[host], 1.8, "-", 4
                key = f"{host} (slow)"
            else:
                color, lw, ls = ROLE_STYLE.get(role, ROLE_STYLE["other"])
                z, key = 2, role
            step = "pre" if panel in ("pause", "xmit_wait") else None
            if step:
                ax.step(x, y, where=step, color=color, lw=lw, ls=ls, zorder=z)
            else:
                ax.plot(x, y, color=color, lw=lw, ls=ls, zorder=z)
            legend.setdefault(key, Line2D([], [], color=color, lw=lw, ls=ls, label=key))
        if panel in ("pause", "xmit_wait") and data.height:
            ax.set_yscale("symlog", linthresh=1.0)
        if panel == "gc_active":
            ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_title(label, fontsize=8.5, loc="left", pad=2)
    _time_axis(axes[-1])
    axes[-1].set_xlabel("time (UTC); shaded: the stalled checkpoint", fontsize=8)
    keys = sorted(legend, key=lambda k: (not k.endswith("(slow)"), k))
    fig.legend(handles=[legend[k] for k in keys], fontsize=7.5, loc="outside right upper",
               frameon=False)
    if title:
        fig.suptitle(f"{title}: signals around the window", fontsize=10, x=0.01,
                     ha="left")
    return fig
