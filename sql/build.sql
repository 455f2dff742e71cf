-- Build every ckptwatch view in the duckdb CLI, from the project root:
--   .venv/bin/duckdb -cmd "SET VARIABLE lake = 'data/lake'" -cmd ".read sql/build.sql"
-- Order: layer (lake, staging, intermediate, marts), then dependencies: the same order as
-- ckptwatch.lake.query.view_files() (tests/sql/test_marts.py checks it). Regenerate the list with
--   .venv/bin/python -c "from ckptwatch.lake.query import view_files; [print(f'.read sql/{f.parent.name}/{f.name}') for f in view_files()]"
.read sql/session.sql
.read sql/lake/checkpoint_loads.sql
.read sql/lake/checkpoint_starts.sql
.read sql/lake/checkpoint_writes.sql
.read sql/lake/derived_counter_deltas.sql
.read sql/lake/fabric_counters.sql
.read sql/lake/jobs.sql
.read sql/lake/nvme_smart.sql
.read sql/lake/pool_metrics.sql
.read sql/lake/quarantine.sql
.read sql/lake/topology.sql
.read sql/staging/stg_checkpoint_loads.sql
.read sql/staging/stg_checkpoint_starts.sql
.read sql/staging/stg_checkpoint_writes.sql
.read sql/staging/stg_fabric_counters.sql
.read sql/staging/stg_jobs.sql
.read sql/staging/stg_pool_vocabulary.sql
.read sql/staging/stg_quarantine.sql
.read sql/staging/stg_topology.sql
.read sql/staging/stg_metric_names.sql
.read sql/staging/stg_nvme_smart.sql
.read sql/staging/stg_pool_metrics.sql
.read sql/staging/stg_metric_samples.sql
.read sql/staging/stg_counter_deltas.sql
.read sql/intermediate/int_checkpoint_hosts.sql
.read sql/intermediate/int_lake_skipped_rows.sql
.read sql/intermediate/int_lake_table_rows.sql
.read sql/intermediate/int_node_leaves.sql
.read sql/intermediate/int_pool_interval_means.sql
.read sql/intermediate/int_signal_catalog.sql
.read sql/intermediate/int_window_samples.sql
.read sql/intermediate/int_pool_jobs.sql
.read sql/intermediate/int_signal_counters.sql
.read sql/intermediate/int_unfinished_ranks.sql
.read sql/intermediate/int_signal_counter_deltas.sql
.read sql/intermediate/int_signal_samples.sql
.read sql/intermediate/int_signal_write_amplification.sql
.read sql/intermediate/int_signal_noise.sql
.read sql/marts/checkpoint_latency.sql
.read sql/marts/postmortem_signals.sql
.read sql/marts/slow_hosts.sql
.read sql/marts/counter_windows.sql
.read sql/marts/job_latency.sql
.read sql/marts/stragglers.sql
.read sql/marts/tier_latency.sql
.read sql/marts/plan_measurements.sql
.read sql/marts/stalls.sql
.read sql/marts/report_checkpoints.sql
.read sql/marts/stall_pool_jobs.sql
.read sql/marts/stall_ranks.sql
.read sql/marts/checkpoint_ranks.sql
.read sql/marts/stall_coverage.sql
.read sql/marts/stall_signals.sql
