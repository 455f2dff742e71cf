"""The notebook's tables: a frame as plain HTML."""

from __future__ import annotations

from ckptwatch.report import postmortem
from ckptwatch.report.display import show


def test_show_draws_the_evidence_as_a_plain_html_table(gc_case: postmortem.StallCase) -> None:
    ev = postmortem.evidence_table(gc_case)
    html = show(ev)._repr_html_()
    assert "<th" in html and "targets (pool0-tgt03): 0.95 of the window" in html
