"""Hand-written pipelines from each pool format's raw files to ``pool_metrics`` rows.

``bench/formats.py`` sets each beside ``ckptwatch.ingest`` of the same files: plain polars
(and ``re``/``json`` of the standard library where polars cannot read the text), the files of
one format to the long frame ``ts, pool, target, metric, value`` (``pool_metrics`` without
its provenance columns) with the rows the lake gets, written as one zstd Parquet file: the
fair "pipeline that makes rows of the same kind by hand" (issue 44: ingest of each pool format
within 2x it). What each reads and writes is the reader's (``ckptwatch.sources``: ``lustre``,
``daos``, ``spdk``, ``storage_scale``), for the files the simulator writes
(``ckptwatch simulate --pool-format``):

- ``lustre``: ``pool/<server>/lctl_get_param.txt`` (``obdfilter.*.stats``,
  ``ost.OSS.ost_io.stats``, ``mdt.*.md_stats``, ``mds.MDS.mdt.stats``): each block's
  ``snapshot_time``, its counters' samples, max and sum, as ``sources.lustre`` names them;
- ``daos``: ``pool/<server>/daos_metrics.jsonl`` (``daos_metrics -C`` text in envelopes: update
  latency per target summed over the I/O sizes, scheduler cycles, RPCs in flight summed over
  the contexts, the pool's update ops and bytes per target, its pool-service operations and
  their sum, the metadata object RPCs' latency and count per target, their sums and peak)
  and ``pool/daos-admin/dmg_pool_query.jsonl`` (the rebuild state);
- ``spdk``: ``pool/<server>/bdev_get_iostat.jsonl`` (the JSON-RPC response in envelopes: per
  bdev its written bytes and ops, write latency ticks as µs, the queue depth when sampled);
- ``gpfs``: ``pool/<node>/mmpmon_fs_io_s.txt`` (per line: written bytes and calls, opens,
  closes, readdirs, inode updates and their sum), ``pool/<server>/<fs>_mmlsqos.txt`` (per
  storage pool and interval: the queue over the classes, the maintenance class's share of the
  IOPS; the file system from the file's name) and ``pool/<server>/mmdiag_waiters.jsonl`` (per
  output: rebuild waiters or not, NSD I/O waiters and the longest wait).

The rows are the lake's, the same count (``formats.py`` prints both), and the same values
(checked when written: ``python bench/pool_hand.py --check RAW LAKE``). Where they may differ:
the times are rounded to the microsecond by polars' float arithmetic, not by ``datetime``
(a microsecond apart at most, where a float's decimals fall on half a microsecond); and a
pipeline by hand reads only the forms these files have: none of the readers' other
spellings (a Lustre parameter's value on its name's line, ``brw_stats``, ``job_stats``,
``daos_metrics``' tree form, a bare ``rpc.py`` result, ``max_write_latency_ticks``, another
mmpmon request's replies), none of their checks (a line that does not parse is skipped, never
quarantined), no provenance, no partitions, no transaction.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl

TS = pl.Datetime("us", "UTC")
COLUMNS = ["ts", "pool", "target", "metric", "value"]
#: The object RPCs ``sources.daos`` reads as metadata (its ``METADATA_OPS``).
METADATA_RPCS = ["key_query", "obj_punch", "dkey_punch", "akey_punch", "dkey_enum", "akey_enum",
                 "recx_enum", "obj_enum", "obj_sync"]
#: md_stats' data (Data-on-MDT) operations, which are not metadata (``sources.lustre``).
DATA_OPS = ["read", "write", "read_bytes", "write_bytes", "punch", "fallocate"]


def _lines(path: Path) -> pl.Series:
    """A text file's lines (as ``str.split`` gives them)."""
    return pl.Series("line", path.read_text(encoding="utf-8").split("\n"), dtype=pl.String)


def _epoch_us(seconds: pl.Expr) -> pl.Expr:
    """Epoch seconds (float) as a UTC time, to the microsecond."""
    return (seconds * 1e6).round().cast(pl.Int64).cast(TS)


def _per_1000(df: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """``df`` with ``columns`` divided by 1000 (µs to ms) as Python divides: by a Series of
    1000s (polars divides by a number as a multiplication by its reciprocal, 1 ulp off at
    times: 15559 / 1000 = 15.559000000000001)."""
    by = pl.repeat(1000.0, df.height, eager=True)
    return df.with_columns(df[c] / by for c in columns)


def _long(df: pl.DataFrame, metrics: list[str], index: list[str] | None = None) -> pl.DataFrame:
    """``df``'s ``metrics`` columns as rows (nulls dropped), in ``COLUMNS``."""
    return (df.unpivot(metrics, index=index or ["ts", "pool", "target"], variable_name="metric")
            .drop_nulls("value").select(*COLUMNS[:3], "metric",
                                        pl.col("value").cast(pl.Float64)))


# -- Lustre ----------------------------------------------------------------------------------
_STAT = (r"^(?<op>\S+)\s+(?<n>\d+)\s+samples\s+\[(?<unit>[^\]]*)\]"
         r"(?:\s+(?<min>-?\d+)\s+(?<max>-?\d+)\s+(?<sum>-?\d+))?")


def lustre(root: Path) -> pl.DataFrame:
    """``lctl get_param`` of every OSS and MDS."""
    parts = []
    for f in sorted(root.glob("pool/*/*.txt")):
        lines = _lines(f)
        parts.append(pl.DataFrame([lines]).with_columns(pl.lit(f.parent.name).alias("node")))
    df = pl.concat(parts)
    line = pl.col("line")
    head = line.str.contains(r"^[A-Za-z][\w.\-@:*\[\]]*=$")
    df = df.with_columns(head.cum_sum().alias("block"))
    blocks = (df.filter(head).select("block", "node", line.str.strip_suffix("=").alias("param"))
              .join(df.filter(line.str.starts_with("snapshot_time")).select(
                  "block", _epoch_us(line.str.extract(r"^snapshot_time\s+(\d+(?:\.\d+)?)")
                                     .cast(pl.Float64)).alias("ts")), on="block", how="left"))
    stats = (df.select("block", line.str.extract_groups(_STAT).alias("s")).unnest("s")
             .drop_nulls("n")
             .select("block", "op", pl.col("n").cast(pl.Float64), "unit",
                     pl.col("max").cast(pl.Float64), pl.col("sum").cast(pl.Float64)))
    timed = stats.filter(pl.col("unit").is_in(["usec", "usecs"]) & pl.col("sum").is_not_null())

    def op(name: str, **cols: pl.Expr) -> pl.DataFrame:
        return stats.filter(pl.col("op") == name).select("block", **cols)

    def write(frame: pl.DataFrame, name: str) -> pl.DataFrame:
        w = timed.filter(pl.col("op") == name).select(
            "block", write_ops=pl.col("n"), write_latency_us_total=pl.col("sum"),
            write_latency_peak_ms=pl.col("max"))
        return _per_1000(frame.join(w, on="block", how="left").with_columns(
            pl.col("write_ops", "write_latency_us_total").fill_null(0.0)),
            "write_latency_peak_ms")

    def queue(frame: pl.DataFrame) -> pl.DataFrame:
        for name, cols in (("req_qdepth", {"queue_requests_total": pl.col("n"),
                                           "queue_depth_total": pl.col("sum")}),
                           ("req_waittime", {"queue_wait_us_total": pl.col("sum")}),
                           ("req_active", {"active_requests_total": pl.col("sum")})):
            frame = frame.join(op(name, **cols), on="block", how="left")
        return frame.with_columns(pl.col("queue_requests_total", "queue_depth_total",
                                         "queue_wait_us_total", "active_requests_total")
                                  .fill_null(0.0))

    def metadata(frame: pl.DataFrame, ops: pl.DataFrame) -> list[pl.DataFrame]:
        keys = frame.select("block", "ts", "pool", "target")
        per_op = _per_1000(ops.join(keys, on="block").with_columns(pl.col("max").alias("peak")),
                           "peak")
        out = [per_op.select(*COLUMNS[:3], (pfx + "." + pl.col("op")).alias("metric"),
                             value.alias("value"))
               for pfx, value in (("metadata_ops_total", pl.col("n")),
                                  ("metadata_latency_us_total", pl.col("sum")),
                                  ("metadata_latency_peak_ms", pl.col("peak")))]
        sums = ops.group_by("block").agg(
            metadata_ops_total=pl.col("n").sum(), metadata_latency_us_total=pl.col("sum").sum(),
            metadata_latency_peak_ms=pl.col("max").filter(pl.col("n") > 0).max())
        agg = _per_1000(keys.join(sums, on="block", how="left").with_columns(
            pl.col("metadata_ops_total", "metadata_latency_us_total").fill_null(0.0)),
            "metadata_latency_peak_ms")
        out.append(_long(agg, ["metadata_ops_total", "metadata_latency_us_total",
                               "metadata_latency_peak_ms"]))
        return out

    param, out = pl.col("param"), []
    fs = pl.col("target").str.replace(r"-(?:OST|MDT)[0-9a-fA-F]{4}$", "")
    ost = (blocks.filter(param.str.contains(r"^obdfilter\.[^.]+\.stats$"))
           .with_columns(param.str.extract(r"^obdfilter\.([^.]+)\.stats$").alias("target"))
           .with_columns(fs.alias("pool")))
    ost = write(ost, "write").join(op("write_bytes", write_bytes=pl.col("sum")), on="block",
                                   how="left").with_columns(pl.col("write_bytes").fill_null(0.0))
    out.append(_long(ost, ["write_ops", "write_latency_us_total", "write_latency_peak_ms",
                           "write_bytes"]))
    oss = queue(blocks.filter(param == "ost.OSS.ost_io.stats").with_columns(
        pl.lit("lustre").alias("pool"), (pl.col("node") + "/ost_io").alias("target")))
    out.append(_long(write(oss, "ost_write"), [
        "queue_requests_total", "queue_depth_total", "queue_wait_us_total",
        "active_requests_total", "write_ops", "write_latency_us_total",
        "write_latency_peak_ms"]))
    mdt = (blocks.filter(param.str.contains(r"^mdt\.[^.]+\.md_stats$"))
           .with_columns(param.str.extract(r"^mdt\.([^.]+)\.md_stats$").alias("target"))
           .with_columns(fs.alias("pool")))
    out += metadata(mdt, timed.filter(~pl.col("op").is_in(DATA_OPS)
                                      & pl.col("block").is_in(mdt["block"].implode())))
    mds = queue(blocks.filter(param == "mds.MDS.mdt.stats").with_columns(
        pl.lit("lustre").alias("pool"), (pl.col("node") + "/mdt").alias("target")))
    out.append(_long(mds, ["queue_requests_total", "queue_depth_total", "queue_wait_us_total",
                           "active_requests_total"]))
    out += metadata(mds, timed.filter(pl.col("op").str.starts_with("mds_")
                                      & pl.col("block").is_in(mds["block"].implode())))
    return pl.concat(out)


# -- DAOS ------------------------------------------------------------------------------------
def _envelopes(files: list[Path]) -> pl.DataFrame:
    """JSON Lines envelopes of text output: node, ts (``collected_at``), output, and ``env``
    (the envelope's number)."""
    env = pl.concat([pl.read_ndjson(f, schema={"node": pl.String, "collected_at": pl.String,
                                                "output": pl.String}) for f in files])
    return env.select(pl.int_range(pl.len()).alias("env"), "node",
                      pl.col("collected_at").str.to_datetime("%Y-%m-%dT%H:%M:%SZ",
                                                             time_unit="us", time_zone="UTC")
                      .alias("ts"), "output")


def daos(root: Path) -> pl.DataFrame:
    """``daos_metrics -C`` of every server and ``dmg pool query`` of the admin node."""
    env = _envelopes(sorted(root.glob("pool/*/daos_metrics.jsonl")))
    rows = (env.select("env", "ts", "node", pl.col("output").str.split("\n").alias("line"))
            .explode("line")
            .with_columns(pl.col("line").str.extract_groups(
                r"^ID: (?<engine>\d+)/(?<path>[^,]+),(?<rest>.*)$").alias("m"))
            .unnest("m").drop_nulls("path")
            .with_columns(("engine" + pl.col("engine")).alias("engine"),
                          pl.col("rest").str.split(",").alias("f"))
            .with_columns(pl.col("f").list.get(0).cast(pl.Float64, strict=False).alias("value"),
                          pl.col("f").list.get(2, null_on_oob=True)
                          .cast(pl.Float64, strict=False).alias("max"),
                          pl.col("f").list.get(4, null_on_oob=True)
                          .cast(pl.Float64, strict=False).alias("samples"),
                          pl.col("f").list.get(5, null_on_oob=True)
                          .cast(pl.Float64, strict=False).alias("sum"))
            .drop_nulls("value"))
    path, host = pl.col("path"), pl.col("node") + "/" + pl.col("engine")
    out = []
    lat = (rows.filter(path.str.contains(r"(?:^|/)latency/update/[^/]+/tgt_\d+$")
                       & pl.col("samples").is_not_null() & pl.col("sum").is_not_null())
           .group_by("env", "ts", host.alias("host"),
                     path.str.extract(r"(tgt_\d+)$").alias("tgt"))
           .agg(write_latency_us_total=pl.col("sum").sum(), write_ops=pl.col("samples").sum(),
                write_latency_peak_ms=pl.col("max").filter(pl.col("samples") > 0).max())
           .pipe(_per_1000, "write_latency_peak_ms")
           .with_columns(pl.lit("daos").alias("pool"),
                         (pl.col("host") + "/" + pl.col("tgt")).alias("target")))
    out.append(_long(lat, ["write_latency_us_total", "write_ops", "write_latency_peak_ms"]))
    cyc = rows.filter(path.str.contains(r"(?:^|/)cycle_(?:duration|size)/xs_\d+$")).select(
        "ts", pl.lit("daos").alias("pool"),
        (host + "/" + path.str.extract(r"(xs_\d+)$")).alias("target"),
        pl.when(path.str.contains("cycle_duration/")).then(pl.lit("queue_wait_ms"))
        .otherwise(pl.lit("queue_depth")).alias("metric"), "value")
    out.append(cyc)
    tgt = rows.filter(path.str.contains(r"^pool/[^/]+/(?:ops|xferred)/update/tgt_\d+$")).select(
        "ts", path.str.extract(r"^pool/([^/]+)/").alias("pool"),
        (host + "/" + path.str.extract(r"(tgt_\d+)$")).alias("target"),
        pl.when(path.str.contains("/ops/update/")).then(pl.lit("write_ops"))
        .otherwise(pl.lit("write_bytes")).alias("metric"), "value")
    out.append(tgt)
    ops = rows.filter(path.str.contains(r"^pool/[^/]+/ops/(?:pool|cont)_[a-z_]+$")).select(
        "env", "ts", path.str.extract(r"^pool/([^/]+)/").alias("pool"), host.alias("target"),
        ("metadata_ops_total." + path.str.extract(r"/ops/([a-z_]+)$")).alias("metric"),
        "value")
    out.append(ops.drop("env"))
    out.append(ops.group_by("env", "ts", "pool", "target").agg(pl.col("value").sum())
               .select(*COLUMNS[:3], pl.lit("metadata_ops_total").alias("metric"), "value"))
    meta = (rows.filter(path.str.extract(r"(?:^|/)ops/([a-z_]+)/latency/tgt_\d+$").is_in(
                METADATA_RPCS) & pl.col("samples").is_not_null() & pl.col("sum").is_not_null())
            .select("env", "ts", (host + "/" + path.str.extract(r"(tgt_\d+)$")).alias("target"),
                    path.str.extract(r"/ops/([a-z_]+)/latency/").alias("op"),
                    "max", "samples", "sum"))
    out.append(meta.select("ts", pl.lit("daos").alias("pool"), "target",
                           ("metadata_latency_us_total." + pl.col("op")).alias("metric"),
                           pl.col("sum").alias("value")))
    out.append(meta.select("ts", pl.lit("daos").alias("pool"), "target",
                           ("metadata_ops_total." + pl.col("op")).alias("metric"),
                           pl.col("samples").alias("value")))
    msum = (meta.group_by("env", "ts", "target")
            .agg(metadata_latency_us_total=pl.col("sum").sum(),
                 metadata_ops_total=pl.col("samples").sum(),
                 metadata_latency_peak_ms=pl.col("max").filter(pl.col("samples") > 0).max())
            .pipe(_per_1000, "metadata_latency_peak_ms")
            .with_columns(pl.lit("daos").alias("pool")))
    out.append(_long(msum, ["metadata_latency_us_total", "metadata_ops_total",
                            "metadata_latency_peak_ms"]))
    out.append(rows.filter(path.str.contains(r"(?:^|/)hg/active_rpcs/ctx_\d+$"))
               .group_by("env", "ts", host.alias("target")).agg(pl.col("value").sum())
               .select("ts", pl.lit("daos").alias("pool"), "target",
                       pl.lit("active_requests").alias("metric"), "value"))
    query = _envelopes(sorted(root.glob("pool/*/dmg_pool_query.jsonl")))
    if query.height:
        pool = pl.col("output").str.extract(r"(?m)^Pool\s+([0-9a-fA-F-]{36}),\s*ntarget=")
        state = pl.col("output").str.extract(r"(?m)^\s*-?\s*Rebuild\s+([a-z]+)\b")
        out.append(query.select("ts", pool.alias("pool"), pool.alias("target"),
                                pl.lit("background_active.rebuild").alias("metric"),
                                (state == "busy").cast(pl.Float64).alias("value"))
                   .drop_nulls())
    return pl.concat([f.select(*COLUMNS[:4], pl.col("value").cast(pl.Float64)) for f in out])


# -- SPDK ------------------------------------------------------------------------------------
def spdk(root: Path) -> pl.DataFrame:
    """``bdev_get_iostat`` of every NVMe-oF target host."""
    env = pl.concat([pl.read_ndjson(f) for f in sorted(root.glob("pool/*/*.jsonl"))],
                    how="diagonal_relaxed")
    result = pl.col("output").struct.field("result")
    bdevs = (env.select("node", pl.col("collected_at").str.to_datetime(
                            "%Y-%m-%dT%H:%M:%SZ", time_unit="us", time_zone="UTC").alias("ts"),
                        result.struct.field("tick_rate").alias("tick_rate"),
                        result.struct.field("bdevs").alias("bdev"))
             .explode("bdev").unnest("bdev"))
    wide = bdevs.select(
        "ts", pl.lit("spdk").alias("pool"),
        (pl.col("node") + "/" + pl.col("name").str.strip_chars()).alias("target"),
        pl.col("bytes_written").alias("write_bytes"), pl.col("num_write_ops").alias("write_ops"),
        (pl.col("write_latency_ticks") * 1e6 / pl.col("tick_rate"))
        .alias("write_latency_us_total"),
        pl.when(pl.col("queue_depth_polling_period") > 0).then(pl.col("queue_depth"))
        .alias("queue_depth.disk"))
    return _long(wide, ["write_bytes", "write_ops", "write_latency_us_total",
                        "queue_depth.disk"])


# -- IBM Storage Scale -----------------------------------------------------------------------
_MMPMON = {"_bw_": "write_bytes", "_wc_": "write_ops", "_oc_": "metadata_ops_total.open",
           "_cc_": "metadata_ops_total.close", "_dir_": "metadata_ops_total.readdir",
           "_iu_": "metadata_ops_total.inode_update"}


def gpfs(root: Path) -> pl.DataFrame:
    """``mmpmon fs_io_s`` of every node, ``mmlsqos -Y`` and ``mmdiag --waiters -Y``."""
    out = []
    lines = pl.concat([_lines(f) for f in sorted(root.glob("pool/*/mmpmon_fs_io_s.txt"))])
    line = pl.col("line")
    io = (pl.DataFrame([lines]).filter(line.str.starts_with("_fs_io_s_ ")
                                       & line.str.contains(" _rc_ 0 "))
          .select(_epoch_us(line.str.extract(r" _t_ (\d+)").cast(pl.Float64)
                            + line.str.extract(r" _tu_ (\d+)").cast(pl.Float64) / 1e6)
                  .alias("ts"),
                  line.str.extract(r" _fs_ (\S+)").alias("pool"),
                  line.str.extract(r" _nn_ (\S+)").alias("target"),
                  *[line.str.extract(f" {k} (\\d+)").cast(pl.Float64).alias(m)
                    for k, m in _MMPMON.items()])
          .with_columns(pl.sum_horizontal(m for m in list(_MMPMON.values())[2:])
                        .alias("metadata_ops_total")))
    out.append(_long(io, [*_MMPMON.values(), "metadata_ops_total"]))
    for f in sorted(root.glob("pool/*/*_mmlsqos.txt")):
        fs = f.name.split(".", 1)[0].split("_", 1)[0]
        stats = (pl.DataFrame([_lines(f)]).filter(line.str.starts_with("mmlsqos:stats:0:"))
                 .select(line.str.split(":").alias("f"))
                 .select(*[pl.col("f").list.get(i).alias(k) for i, k in
                           ((6, "pool"), (8, "class"))],
                         *[pl.col("f").list.get(i).str.replace(",", ".", literal=True)
                           .cast(pl.Float64).alias(k) for i, k in
                           ((7, "epoch"), (9, "iops"), (10, "ioql"), (11, "qsdl"), (12, "et"))]))
        qos = (stats.group_by(pl.col("pool").alias("target"),
                              (pl.col("epoch") + pl.col("et")).alias("end"))
               .agg(queue_depth=(pl.col("ioql") + pl.col("qsdl")).sum(),
                    iops=pl.col("iops").sum(),
                    maint=pl.col("iops").filter(pl.col("class") == "maintenance").sum())
               .select(_epoch_us(pl.col("end")).alias("ts"), pl.lit(fs).alias("pool"),
                       "target", "queue_depth",
                       pl.when(pl.col("iops") > 0).then(pl.col("maint") / pl.col("iops"))
                       .otherwise(0.0).alias("background_active.restripe")))
        out.append(_long(qos, ["queue_depth", "background_active.restripe"]))
    env = _envelopes(sorted(root.glob("pool/*/mmdiag_waiters.jsonl")))
    waits = (env.select("env", "ts", "node", pl.col("output").str.split("\n").alias("line"))
             .explode("line").filter(line.str.starts_with("mmdiag:waiters:0:"))
             .select("env", pl.col("line").str.split(":").alias("f"))
             .select("env", pl.col("f").list.get(8).alias("thread"),
                     pl.col("f").list.get(10).cast(pl.Float64).alias("wait"),
                     pl.col("f").list.get(17).alias("reason"))
             .group_by("env").agg(
                 rebuild=(pl.col("thread") == "RebuildWorkThread").any(),
                 nsd=pl.col("wait").filter((pl.col("thread") == "NSDThread")
                                           & pl.col("reason").str.contains("for I/O completion"))))
    w = (env.join(waits, on="env", how="left")
         .select("ts", pl.lit("gpfs").alias("pool"), pl.col("node").alias("target"),
                 pl.col("rebuild").fill_null(False).cast(pl.Float64)
                 .alias("background_active.rebuild"),
                 pl.col("nsd").list.len().fill_null(0).cast(pl.Float64)
                 .alias("queue_depth.disk"),
                 (pl.col("nsd").list.max() * 1000).alias("write_latency_max_ms")))
    out.append(_long(w, ["background_active.rebuild", "queue_depth.disk",
                         "write_latency_max_ms"]))
    return pl.concat(out)


PIPELINES: dict[str, Callable[[Path], pl.DataFrame]] = {
    "lustre": lustre, "daos": daos, "spdk": spdk, "gpfs": gpfs}


def hand_ingest(fmt: str, root: Path, out: Path) -> int:
    """The ``fmt`` pipeline over the raw directory ``root`` (its ``pool/``), written to
    ``out`` as zstd Parquet; the rows written."""
    df = PIPELINES[fmt](root)
    out.mkdir(parents=True, exist_ok=True)
    df.write_parquet(out / "pool_metrics.parquet", compression="zstd")
    return df.height


def check(fmt: str, root: Path, lake: Path) -> int:
    """Compare the pipeline's rows with the lake's ``pool_metrics`` (row for row, sorted);
    print what differs. Exit status 0 when they are the same."""
    ours = (pl.read_parquet(sorted(lake.glob("pool_metrics/date=*/part-*.parquet")))
            .select(COLUMNS).sort(COLUMNS))
    hand = PIPELINES[fmt](root).sort(COLUMNS)
    print(f"{fmt}: lake {ours.height:,} rows, by hand {hand.height:,}")
    only = {"lake": ours.join(hand, on=COLUMNS, how="anti", nulls_equal=True),
            "hand": hand.join(ours, on=COLUMNS, how="anti", nulls_equal=True)}
    for side, rows in only.items():
        if rows.height:
            print(f"  {rows.height:,} rows only in the {side}, e.g.:")
            print(json.dumps(rows.head(5).rows(), default=str, indent=1))
    return 0 if ours.height == hand.height and not any(r.height for r in only.values()) else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", nargs=3, metavar=("FORMAT", "RAW", "LAKE"), required=True,
                    help="compare the pipeline's rows of RAW with LAKE's pool_metrics")
    a = ap.parse_args()
    sys.exit(check(a.check[0], Path(a.check[1]), Path(a.check[2])))
