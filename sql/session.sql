-- Session settings every ckptwatch connection runs before the views (ckptwatch.lake.query.connect
-- reads this file; sql/build.sql reads it first in the duckdb CLI).
--
-- Hash joins build on the side the SQL puts on the right. DuckDB otherwise picks the build side
-- from its cardinality estimates, and over a lake those go badly wrong where a large table
-- meets a small list through a join (int_signal_samples meets the 45-row signal catalog: its
-- ~20 M samples of a 512-node day are estimated at a few hundred rows). It then builds hash
-- tables on the 20 M rows, which costs attribution more than twice the memory and a third
-- more time. The views are written with the small side of each join on the right.
-- DuckDB 2.0's projection pull-up pass is disabled too, by ckptwatch.lake.query.connect (the
-- duckdb CLI of the pins, 1.5, has no such pass and refuses its name here).
set disabled_optimizers = 'build_side_probe_side';

-- Parquet footers are read once per connection. Each lake view reads its table's files with
-- union_by_name, and binding a view re-binds every view it reads, so without the cache a
-- connection building every view reads each file's footer dozens of times (over a day of
-- about a thousand files, a third of the views' build time). A connection lives for
-- one command or step; the cache checks each file's modification time.
set parquet_metadata_cache = true;

-- As-of joins run as as-of joins. Below asof_loop_join_threshold estimated rows on the left,
-- DuckDB runs one as a nested loop over every pair and picks the match afterwards; behind the
-- CTEs of int_signal_write_amplification() the estimate is a few rows where a day has tens of
-- thousands per drive side, and the loop made 24 M pairs of a 96-node day's 190 k SMART byte
-- samples (11.7 s against 0.5 s for the same rows).
set asof_loop_join_threshold = 0;

-- Detection thresholds (docs/concepts.md): their one definition. ckptwatch reads these
-- defaults (ckptwatch.analysis.detection.DetectionSettings) and sets its overrides (CLI flags)
-- as the same variables; in the duckdb CLI, SET VARIABLE stall_factor = 3; after this file.
-- A stall: barrier >= stall_factor x the job's healthy baseline (stalls.sql) and >=
-- stall_min_excess_s over it.
set variable stall_factor = 2.0;
set variable stall_min_excess_s = 1.0;
-- A slow rank of a stall: duration >= slow_rank_factor x the job's normal rank duration and
-- >= slow_rank_min_excess_s over it.
set variable slow_rank_factor = 1.5;
set variable slow_rank_min_excess_s = 0.5;
-- A straggler: duration >= straggler_factor x its checkpoint's p50 and
-- >= straggler_min_excess_s over it.
set variable straggler_factor = 2.0;
set variable straggler_min_excess_s = 1.0;
-- A chronic slow host (slow_hosts, docs/slow-hosts.md): its median rank above the checkpoint's
-- p50 consistently (one-sided sign test p <= slow_host_max_p_value), by at least
-- slow_host_min_excess_pct % (median over checkpoints), over >= slow_host_min_checkpoints.
set variable slow_host_max_p_value = 0.05;
set variable slow_host_min_excess_pct = 2.0;
set variable slow_host_min_checkpoints = 5;
-- Telemetry coverage of a stall (stall_coverage): a series reached the stall when the time it
-- spans comes within this many seconds of the window (or within its own sampling interval, if
-- longer). Each tool keeps its own clock: coverage is never judged by equal timestamps.
set variable coverage_tolerance_s = 60.0;
-- Clock skew between hosts (NTP keeps them milliseconds to a few seconds apart): checkpoint
-- records carry the compute nodes' clocks, telemetry its collectors', exporters' and storage
-- servers'. A series whose samples miss a stall's window by at most this many seconds still
-- reaches it (int_window_samples, stall_signals), so a clock a few seconds off hides no
-- evidence; coverage (stall_coverage) widens by at least as much. Weights stay on the window.
set variable clock_skew_s = 5.0;

-- Identifier fields (job_id, node, device, …) longer than this are not read by the views: the
-- ingest quarantines them (CKPTWATCH_MAX_FIELD_CHARS, RELIABILITY.md "Limits"), but a lake
-- written by an older version may hold some, and one 300 MB job_id made every later analysis
-- run out of memory. ckptwatch sets the active limit; int_lake_skipped_rows names such rows.
set variable max_field_chars = 256;
-- ids_over_limit(greatest(length(a), length(b), …)): true when the longest of the identifiers is
-- longer than max_field_chars (greatest skips nulls; a list and a lambda per row cost 4x more).
create or replace macro ids_over_limit(longest) as
    coalesce(longest, 0) > getvariable('max_field_chars');

-- interval_seconds(interval_us): microseconds between two samples as seconds, as epoch(ts -
-- prev_ts) gives it (whole days, then the rest) without building the interval, which costs 25x
-- more (0.5 s of CPU per 2 M samples). One formula for stg_counter_deltas and the materialised
-- derived_counter_deltas (which stores interval_us), so both give the same doubles.
create or replace macro interval_seconds(interval_us) as
    (interval_us // 86400000000) * 86400 + (interval_us % 86400000000) / 1000000.0;
-- counter_rate(delta, interval_us): a counter's rate per second over its interval (null for a
-- zero interval), for the same two readers.
create or replace macro counter_rate(delta, interval_us) as
    delta / nullif(interval_seconds(interval_us), 0);

-- pool_target(name): the target a name stands for, the key that joins a checkpoint record's
-- target to the pool telemetry's (docs/formats.md, "Pool target identity"): trimmed, and a Lustre
-- target as <fsname>-OSTxxxx / <fsname>-MDTxxxx whichever spelling a tool printed (fs-OST0003,
-- fs-OST0003_UUID from lfs, the client's device fs-OST0003-osc-ffff…, any case); any other name
-- as it is. The pool readers write these names already (ckptwatch.sources.pool_common.
-- pool_target, the same rule: tests/sql/test_pool_target.py holds the two equal); here for lakes
-- and writers that did not. A name already canonical passes after one match.
create or replace macro pool_target_pattern() as
    '([A-Za-z0-9_]{1,8})-([Oo][Ss][Tt]|[Mm][Dd][Tt])([0-9A-Fa-f]{4})'
    || '(?:_UUID|_uuid|-(?:osc|mdc)-[^\t\n\x0B\f\r ]*)?';
-- What the rule could change: a Lustre kind and index, or whitespace at either end. Any other
-- name (nearly every row of a pool that is not Lustre) is itself after this one match.
create or replace macro pool_target_changes(name) as
    regexp_matches(name, '[Oo][Ss][Tt][0-9A-Fa-f]{4}|[Mm][Dd][Tt][0-9A-Fa-f]{4}'
        || '|^[\t\n\x0B\f\r ]|[\t\n\x0B\f\r ]$');
-- A Lustre name's parts joined (<fsname>-<kind><index>), then its last seven characters (the
-- kind and the index) upper case: one regular expression for the whole rewrite.
create or replace macro pool_target_lustre(joined) as
    left(joined, length(joined) - 7) || upper(right(joined, 7));
create or replace macro pool_target_of(name) as
    case
        when regexp_full_match(name, pool_target_pattern())
            then pool_target_lustre(regexp_replace(name, '^' || pool_target_pattern() || '$',
                '\1-\2\3'))
        else name
    end;
create or replace macro pool_target(name) as
    case
        when regexp_full_match(name, '[A-Za-z0-9_]{1,8}-(?:OST|MDT)[0-9A-F]{4}') then name
        when not pool_target_changes(name) then name
        else pool_target_of(trim(name, chr(32) || chr(9) || chr(10) || chr(11) || chr(12)
            || chr(13)))
    end;
-- pool_targets(targets): a record's targets (a striped write names several, joined by commas),
-- each as pool_target spells it.
create or replace macro pool_targets(targets) as
    case
        when not contains(targets, ',') then pool_target(targets)
        else array_to_string(
            list_transform(string_split(targets, ','), lambda t: pool_target(t)), ',')
    end;

-- Lustre job_stats name a job by Lustre's own job id (jobid_var: SLURM_JOB_ID gives 1234; a
-- jobid_name pattern: SLURM_JOB%j:%u:%H gives SLURM_JOB10:0:node01, %e.%u gives python.1001).
-- int_pool_jobs joins it to the checkpoint records' job_id by the scheduler's job id inside
-- each: the first group of pool_job_key_pattern in Lustre's id (default: the digits ending its
-- first field, so python.1001, an executable and a uid, names no job) and of
-- record_job_key_pattern in a record's job_id (default: its trailing digits: job-1234 and 1234
-- alike). Ids equal as text always join. In the duckdb CLI, SET VARIABLE to change them.
set variable pool_job_key_pattern = '^[^0-9:.]*([0-9]+)(?:[:.]|$)';
set variable record_job_key_pattern = '([0-9]+)$';

-- The shared pools' write bandwidth where it is known (pool_demand's capacity): a list of
-- {pool, gbs} (GB/s); ckptwatch sets it from ckptwatch.toml's [pool] write_bandwidth_gbs. Empty:
-- each pool's capacity is estimated from the lake (pool_demand.capacity_source says how).
set variable pool_write_bandwidth = cast([] as struct(pool varchar, gbs double)[]);
-- Correlated bursts (pool_bursts): jobs writing to one pool within burst_gap_s of each other
-- are one burst; a second at or above saturation_utilisation of the pool's capacity is
-- saturated.
set variable burst_gap_s = 5.0;
set variable saturation_utilisation = 0.9;

-- canonical_status(status): a finished rank's status as the lake's canonical value: the
-- accepted spellings of the input contract (ckptwatch.lake.schema.STATUS_SPELLINGS, any case,
-- trimmed; tests/sql/test_timeouts.py holds the two lists equal). The ingest writes
-- the canonical value; staging reads lakes written before through this, so a rank killed or
-- aborted at its timeout reads as 'timeout' either way. An unknown spelling stays lowercased.
create or replace macro canonical_status(status) as
    case lower(trim(status))
        when 'timed_out' then 'timeout'
        when 'killed' then 'timeout'
        when 'aborted' then 'timeout'
        else lower(trim(status))
    end;
