"""What a person reads: the daily report (facts, HTML, plots) and the post-mortem of one stall
(its data, and the notebook that shows it)."""
