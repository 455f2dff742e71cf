"""The post-mortem's figures render from its data."""

from __future__ import annotations

from ckptwatch.report import plots as report_plots
from ckptwatch.report import postmortem


def test_figures_render(gc_case: postmortem.StallCase) -> None:
    d = postmortem.rank_durations(gc_case)
    figs = [report_plots.timeline_figure(postmortem.rank_timeline(gc_case), gc_case.title,
                                         d.normal_rank_s),
            report_plots.durations_figure(d),
            report_plots.signals_figure(postmortem.signal_window(gc_case), gc_case.start_ts,
                                        gc_case.end_ts, gc_case.title)]
    for fig in figs:
        assert report_plots.png_bytes(fig).startswith(b"\x89PNG")
    assert len(figs[2].axes) == len(postmortem.SIGNAL_PANELS)
