"""The daily report as one self-contained HTML page: :func:`render_html` draws the facts of
:func:`ckptwatch.report.facts.build_report` (figures from :mod:`ckptwatch.report.plots`,
embedded as base64 PNG, so the page is one file that opens anywhere, offline)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ckptwatch.safetext import shell_command

#: The lake tables of the data section, in the order shown.
TABLES = ("checkpoint_writes", "checkpoint_starts", "checkpoint_loads", "jobs", "nvme_smart",
          "fabric_counters", "pool_metrics", "topology", "quarantine")

_CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 color:#1f2d3d;background:#f6f7f9;margin:0}
main{max-width:1120px;margin:0 auto;padding:20px 28px 40px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:30px 0 8px;border-bottom:1px solid
 #dde1e6;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.sub{color:#5b6b7c;margin:0 0 14px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:22px}.card span{color:#5b6b7c;font-size:12px}
.panel{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px 16px;margin:10px 0}
table{border-collapse:collapse;width:100%;font-size:12.5px;background:#fff}
td:first-child{white-space:nowrap}
th,td{padding:5px 8px;border-bottom:1px solid #eceff2;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:10px;padding:1px 8px;color:#fff;font-size:11.5px;
 font-weight:600;white-space:nowrap}
.ok{background:#54a24b}.warning{background:#d4ac0d}.critical{background:#c0392b}
.none{background:#9aa5b1}ul.ev{margin:2px 0;padding-left:16px}ul.ev li{margin:1px 0}
.small{font-size:11.5px;color:#5b6b7c}code{font-size:11.5px;background:#f0f2f5;padding:1px 4px;
 border-radius:3px;word-break:break-all}.err{border-color:#e6b0aa;background:#fdf2f1}
img{max-width:100%;height:auto;display:block}.alert{font-family:ui-monospace,Menlo,monospace;
 font-size:12px;white-space:pre-wrap;background:#f8f9fb;border-left:3px solid #c0392b;
 padding:6px 10px;margin:6px 0}.alert.resolved{border-left-color:#54a24b}
footer{margin-top:30px;color:#8795a1;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _s(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    v = float(value)
    return f"{0.0 if round(v, digits) == 0 else v:,.{digits}f}"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _time(ts: str | None) -> str:
    return "–" if not ts else datetime.fromisoformat(ts).strftime("%H:%M:%S")


def _cause_badge(cause: str, score: float | None = None) -> str:
    from ckptwatch.report.plots import CAUSE_COLORS

    color = CAUSE_COLORS.get(cause, CAUSE_COLORS["unknown"])
    text = cause if score is None else f"{cause} {score:.2f}"
    return f'<span class="badge" style="background:{color}">{_e(text)}</span>'


def _level_badge(level: str | None) -> str:
    level = level or "none"
    return f'<span class="badge {_e(level)}">{_e(level if level != "none" else "–")}</span>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           numeric: Sequence[int] = ()) -> str:
    head = "".join(f'<th class="{"n" if i in numeric else ""}">{h}</th>'
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="{"n" if i in numeric else ""}">{c}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary_html(r: Mapping[str, Any]) -> str:
    s = r["summary"]
    causes = ", ".join(f"{n} {c}" for c, n in s["stalls_by_cause"].items()) or "none"
    cards = [(s["jobs"], "jobs"), (s["checkpoints"], "checkpoints"), (s["stalls"], "stalls"),
             (s.get("checkpoints_timed_out", 0), "timed out"),
             (s["jobs_critical"], "jobs critical"), (s["jobs_warning"], "jobs warning"),
             (s["alerts"], "alerts sent" if r["alerts"]["sent"] else
              "alerts undelivered" if r["alerts"]["failures"] else "alerts due"),
             (r["data"]["quarantined"], "quarantined records")]
    return ('<div class="cards">' + "".join(
        f'<div class="card"><b>{_e(n)}</b><span>{_e(label)}</span></div>'
        for n, label in cards) + "</div>"
        + f'<p class="small">stalls by cause: {_e(causes)}; attribution: '
        f'{_e(r["attribution"])}</p>')


def _jobs_html(r: Mapping[str, Any]) -> str:
    from ckptwatch.report.plots import barrier_figure, png_base64

    if not r["jobs"]:
        return '<p class="panel">No checkpoints on this day.</p>'
    head = {(h["job_id"], h["tier"]): h for h in r["headroom"]}
    parts = []
    for job in r["jobs"]:
        fig = barrier_figure(job)
        h = head.get((job["job_id"], job["tier"]))
        hr = ("" if h is None else
              f' · headroom {_s(h["headroom_s"])} s ({h["tail_stat"]} of last '
              f'{h["n_checkpoints"]}) {_level_badge(h["level"])}')
        parts.append(
            f'<div class="panel"><h3>{_e(job["job_id"])} <span class="small">'
            f'{_e(job["tier"])} tier · {job["n_ranks"]} ranks · timeout '
            f'{_s(job["timeout_s"])} s</span></h3>'
            f'<p class="small">barrier over the day\'s {job["n_checkpoints"]} checkpoints: '
            f'p50 {_s(job["barrier_p50_s"])} s · p99 {_s(job["barrier_p99_s"])} s · max '
            f'{_s(job["barrier_max_s"])} s (step {job["worst_step"]}) · '
            f'{job["n_stalls"]} stall(s)'
            + (f', {job["n_timed_out"]} timed out' if job.get("n_timed_out") else "")
            + f'{hr}</p>'
            f'<img alt="barrier time of {_e(job["job_id"])}" src="{png_base64(fig)}"></div>')
    return "".join(parts)


def _stalls_html(r: Mapping[str, Any]) -> str:
    if not r["stalls"]:
        return '<p class="panel">No stalls on this day.</p>'
    rows = []
    for s in r["stalls"]:
        hung = ([s["why_timed_out"]] if s.get("why_timed_out") else []) + (
            [s["never_finished"]] if s.get("never_finished") else [])
        mark = ('<div><span class="badge critical" title="'
                f'{_e(s.get("why_timed_out") or "")}">timed out</span></div>'
                if s.get("timed_out") else "")
        ev = "".join(f"<li>{_e(line)}</li>" for line in [*hung, *s["evidence"][:3]])
        bound = "≥ " if s.get("barrier_is_lower_bound") else ""
        others = [c for c in s["causes"][1:] if c["supported"]]
        more = ("" if not others else '<div class="small">also: ' + ", ".join(
            f'{_e(c["cause"])} {c["score"]:.2f}' for c in others) + "</div>")
        rows.append([
            _e(s["job_id"]), str(s["step"]), _time(s["start_ts"]),
            f'{bound}{_s(s["barrier_s"])} s{mark}', f'{_s(s["baseline_s"])} s',
            f'×{_s(s["ratio_to_baseline"])}', f'{s["n_slow"]}/{s["n_ranks"]}',
            _cause_badge(s["cause"], s["score"]) + _telemetry_html(s),
            f'<ul class="ev">{ev}</ul>{more}<code>{_e(s["postmortem"])}</code>'])
    return _table(["job", "step", "start (UTC)", "barrier", "baseline", "", "slow ranks",
                   "cause", "evidence · post-mortem"], rows, numeric=(1, 3, 4, 5, 6))


def _telemetry_html(s: Mapping[str, Any]) -> str:
    """Which telemetry reached the stall, under its cause (nothing when every family did)."""
    missing = s.get("missing_telemetry") or []
    if not missing:
        return ""
    seen = ", ".join(s.get("telemetry") or []) or "none"
    return (f'<div class="small">telemetry: {_e(seen)}; missing: '
            f'{_e(", ".join(missing))}</div>')


def _alerts_html(r: Mapping[str, Any]) -> str:
    a = r["alerts"]
    out = []
    if a["error"]:
        out.append(f'<div class="panel err"><b>Alerts were not evaluated:</b> '
                   f'{_e(a["error"])}</div>')
    if r["headroom"]:
        rows = [[_e(h["job_id"]), _e(h["tier"]), str(h["n_checkpoints"]), _s(h["p50_s"]),
                 _s(h["p99_s"]), _s(h["max_s"]), _s(h["timeout_s"]), _s(h["headroom_s"]),
                 _level_badge(h["level"]), _level_badge(h["alert"]),
                 f'<span class="small">{_e(h["forecast"])}</span>'] for h in r["headroom"]]
        out.append(_table(["job", "tier", "window", "p50 s", "p99 s", "max s", "timeout s",
                           "headroom s", "level", "alert", "forecast"], rows,
                          numeric=(2, 3, 4, 5, 6, 7)))
    for sk in r["headroom_skipped"]:
        out.append(f'<p class="small">not evaluated: {_e(sk["job_id"])} ({_e(sk["tier"])}): '
                   f'{_e(sk["reason"])}</p>')
    if a["evaluated"]:
        jsonl = f' · JSON Lines file: <code>{_e(a["jsonl"])}</code>' if a["jsonl"] else ""
        out.append(f'<p>This run: {_e(a["summary"])}. {len(a["firing"])} firing{jsonl}</p>')
        from ckptwatch.alerts.sinks import render_alert

        for alert in a["alerts"]:
            cls = "alert resolved" if alert.get("status") == "resolved" else "alert"
            out.append(f'<div class="{cls}">{_e(render_alert(alert))}</div>')
        if not a["alerts"] and a["firing"]:
            out.append('<p class="small">Firing alerts were sent on an earlier run and are '
                       'not repeated: ' + ", ".join(
                           f'{_e(f["job_id"])} ({_e(f["severity"])} since {_e(f["since"])})'
                           for f in a["firing"]) + "</p>")
    for f in a["failures"]:
        out.append(f'<div class="panel err"><b>Sink failed:</b> {_e(f)} — the alerts stay '
                   "pending and are retried on the next run.</div>")
    return "".join(out)


def _plans_html(r: Mapping[str, Any]) -> str:
    if not r["plans"]:
        return '<p class="panel">No planning verdicts (no jobs on this day).</p>'
    rows = []
    for p in r["plans"]:
        if p["error"]:
            rows.append([_e(p["job_id"]), "", "", "", "", f'<span class="small">'
                         f'{_e(p["error"])}</span>', "", ""])
            continue
        m, b, cur = p["measured"], p["best"], p["current"]
        cur_text = ("–" if cur is None else
                    f'{_e(cur["name"])}: {100 * cur["overhead_fraction"]:.2f} %')
        ranked = sorted(p["flips"], key=lambda f: f["parameter"] != "pool_bandwidth")
        flips = [f'{_e(f["parameter"])} = {_e(f["display"])}: {_e(f["from"])} → '
                 f'{_e(f["to"])} (now {_e(f["now"])})' for f in ranked[:3]]
        if p["tail_flip"]:
            t = p["tail_flip"]
            flips.insert(0, f'<b>{_e(t["from"])}</b> would win with a tail factor below '
                         f'{_e(t["display"])} (measured {m["tail_factor"]:.2f})')
        rows.append([
            _e(p["job_id"]), _e(p["tier"]),
            f'{_s(m["p50_s"])} / {_s(m["p99_s"])} s (×{m["tail_factor"]:.2f}, '
            f'{m["checkpoints"]} ckpts)',
            f'<b>{_e(b["name"])}</b>', _dur(b["optimal_interval_s"]),
            f'{_dur(b["lost_work_per_failure_s"])} · {100 * b["overhead_fraction"]:.2f} %',
            cur_text,
            "<br>".join(flips) or '<span class="small">no flip in range</span>'])
    return (_table(["job", "tier", "measured barrier p50 / p99", "best strategy",
                    "checkpoint every", "lost per failure · overhead", "current tier",
                    "verdict flips at"], rows)
            + '<p class="small">Model defaults for failure rates, restart and bandwidths of '
            'the tier not measured; details and sweeps: <code>'
            f'{_e(shell_command(["ckptwatch", "plan", "--from-lake", r["lake"]]))} --job JOB'
            '</code> (docs/planning.md).</p>')


def _data_html(r: Mapping[str, Any]) -> str:
    d = r["data"]
    rows = [[_e(t), f"{d['rows'].get(t, 0):,}"] for t in TABLES]
    out = ['<div style="display:flex;gap:16px;flex-wrap:wrap"><div style="flex:1;'
           'min-width:260px">' + _table(["lake table", "rows"], rows, numeric=(1,)) + "</div>"]
    side = []
    ing = d["ingest"]
    if ing:
        side.append(f'<p>This run ingested {ing["ingested"]} of {ing["files_seen"]} files from '
                    f'<code>{_e(ing["raw_dir"])}</code> ({ing["skipped"]} already in the lake, '
                    f'{ing["ignored"]} ignored, {ing["failed"]} failed) and quarantined '
                    f'{ing["quarantined"]:,} record(s).</p>')
        for f in ing["failed_files"]:
            side.append(f'<p class="small">failed: {_e(f["file"])}: {_e(f["error"])}</p>')
        for line in ing.get("unused_metrics_lines") or []:
            side.append(f'<p class="small">unused metric names: {_e(line)}</p>')
    side.append(f'<p>{d["quarantined"]:,} record(s) in quarantine in total. See why: '
                f'<code>{_e(d["quarantine_query"])}</code></p>')
    if d["quarantine_by_file"]:
        side.append(_table(["file", "records", "first reason"], [
            [_e(q["source_file"]), str(q["n"]), _e(q["example_reason"])]
            for q in d["quarantine_by_file"]], numeric=(1,)))
    days = ", ".join(f'{x["day"]} ({x["checkpoints"]})' for x in d["days"])
    side.append(f'<p class="small">days with checkpoints (newest first): {_e(days)}</p>')
    out.append('<div style="flex:2;min-width:320px">' + "".join(side) + "</div></div>")
    return "".join(out)


def _slow_hosts_html(r: Mapping[str, Any]) -> str:
    hosts = r.get("slow_hosts") or []
    if not hosts:
        return ('<p class="panel">No host is consistently slower than the rest of its job\'s '
                "checkpoints.</p>")
    rows = [[_e(h["job_id"]), _e(h["node"]), f'{h["n_slowest"]} / {h["n_checkpoints"]}',
             f'{h["n_above_median"]} / {h["n_checkpoints"]}', _s(h["median_excess_pct"]),
             _s(h["median_excess_s"], 2), f'{h["p_value"]:.2g}'] for h in hosts]
    return ('<p class="small">Hosts whose ranks are slower than their checkpoints\' median in '
            "checkpoint after checkpoint (sign test p-value), even when no checkpoint is a "
            "stall: among the slowest = the host's slowest rank at or above the checkpoint's "
            "rank p90; excess = the host's median rank over the checkpoint's median, median "
            "over checkpoints (docs/slow-hosts.md).</p>"
            + _table(["job", "host", "among the slowest", "above the median", "excess %",
                      "excess s", "p"], rows))


def _pools_html(r: Mapping[str, Any]) -> str:
    from ckptwatch.report.bursts import jobs_text
    from ckptwatch.report.plots import demand_figure, png_base64

    pools = r.get("pools") or {}
    days = pools.get("days") or []
    if not days:
        return '<p class="panel">No checkpoint wrote to a shared pool this day.</p>'
    out = ['<p class="small">Per shared pool: the write demand the checkpoint ranks put on it '
           "(each rank's bytes spread over its write, summed per second), its peak against "
           "the pool's write bandwidth (configured: <code>[pool] write_bandwidth_gbs</code>; "
           "else estimated from the lake, the most it was seen to take), the seconds at or "
           "above 90 % of it, and the stall seconds among them; then the bursts, two or more "
           "jobs writing at once (docs/bursts.md).</p>",
           _table(["pool", "seconds written", "peak jobs", "peak GB/s", "capacity GB/s",
                   "capacity from", "saturated s", "stalled s", "stalled while saturated s",
                   "bursts"],
                  [[_e(d["pool"]), f'{d["written_s"]:,}', str(d["peak_jobs"]),
                    _s(d["peak_demand_bps"] / 1e9, 2), _s(d["capacity_bps"] / 1e9, 2),
                    _e(d["capacity_source"]), f'{d["saturated_s"]:,}', f'{d["stalled_s"]:,}',
                    f'{d["stalled_saturated_s"]:,}', str(d["n_bursts"])] for d in days],
                  numeric=(1, 2, 3, 4, 6, 7, 8, 9))]
    minutes = pools.get("minutes") or []
    for d in days:
        mine = [m for m in minutes if m["pool"] == d["pool"]]
        if mine:
            fig = demand_figure(d["pool"], mine, d["capacity_source"])
            out.append(f'<div class="panel"><img alt="write demand on {_e(d["pool"])}" '
                       f'src="{png_base64(fig)}"></div>')
    bursts = pools.get("bursts") or []
    if bursts:
        out.append(_table(
            ["pool", "start", "s", "jobs (share of bytes)", "peak ranks", "TB", "peak GB/s",
             "peak % of capacity", "saturated s", "stalled while saturated s"],
            [[_e(b["pool"]), _e(b["start_ts"]), _s(b["duration_s"], 0), _e(jobs_text(b["jobs"])),
              f'{b["peak_ranks"]:,}', _s(b["bytes"] / 1e12, 2),
              _s(b["peak_demand_bps"] / 1e9, 2), _s(100 * (b["peak_utilisation"] or 0), 0),
              f'{b["saturated_s"]:,}', f'{b["stalled_saturated_s"]:,}'] for b in bursts],
            numeric=(2, 4, 5, 6, 7, 8, 9)))
    else:
        out.append('<p class="small">No burst: no two jobs wrote to one pool at once.</p>')
    return "".join(out)


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (figures embedded as base64 PNG)."""
    title = f"ckptwatch daily report {report['date']}"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">Checkpoints that started {_e(report["date"])} 00:00–24:00 UTC in '
        f'<code>{_e(report["lake"])}</code>. Headroom and alerts as of the run '
        f'({_e(report["generated_at"])}). Same facts as JSON: '
        '<a href="report.json">report.json</a>.</p>',
        _summary_html(report),
        "<h2>Barrier time per job</h2>",
        '<p class="small">Per checkpoint: rank p50 and p99 (over its ranks) and the barrier '
        "time (its slowest rank: training waits for it), against the job's checkpoint timeout "
        "and the warning and critical levels. Dots: stalls (barrier far above the job's "
        "healthy baseline), coloured by attributed cause, labelled by step.</p>",
        _jobs_html(report),
        "<h2>Stalls and their causes</h2>", _stalls_html(report),
        "<h2>Timeout headroom and alerts</h2>",
        '<p class="small">Tail of each job\'s last checkpoints against its timeout (warning '
        "and critical are fractions of it); a rising trend forecast to cross also warns.</p>",
        _alerts_html(report),
        "<h2>Planning: local, pool or tiered, from the measured tail</h2>",
        _plans_html(report),
        "<h2>Chronic slow hosts</h2>", _slow_hosts_html(report),
        "<h2>Shared pools: demand, capacity and bursts</h2>", _pools_html(report),
        "<h2>Data</h2>", _data_html(report),
        f'<footer>ckptwatch {_e(report["ckptwatch_version"])} · report version '
        f'{report["report_version"]} · generated {_e(report["generated_at"])}</footer>',
    ]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")

