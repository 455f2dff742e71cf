-- Session settings every ckptwatch connection runs before the views (ckptwatch.query.connect
-- reads this file; sql/build.sql reads it first in the duckdb CLI).
--
-- Hash joins build on the side the SQL puts on the right. DuckDB otherwise picks the build side
-- from its cardinality estimates, and over a lake those go badly wrong where a large table
-- meets a small list through a join (int_signal_samples meets the 45-row signal catalog: its
-- ~20 M samples of a 512-node day are estimated at a few hundred rows). It then builds hash
-- tables on the 20 M rows: attribution of that day took 32 s and 13 GB instead of 24 s and
-- 5 GB. The views are written with the small side of each join on the right.
set disabled_optimizers = 'build_side_probe_side';
