"""Compare two lakes' content (every table, ``ingested_ts`` left out, rows sorted).

Used to check that a faster ingest (or a Dask run) writes exactly the rows of a reference run.

Run:  .venv/bin/python bench/compare_lakes.py LAKE_A LAKE_B
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake


def table_digest(lake_root: Path, table: str) -> tuple[int, str]:
    """(rows, order-independent digest of the rows without ``ingested_ts``) of one table."""
    con = duckdb.connect()
    glob = Lake(lake_root).glob(table)
    cols = [c for c in TABLES[table].schema.names if c != "ingested_ts"]
    select = ", ".join(f'"{c}"' for c in cols)  # names from the schema module, not input
    n, digest = con.execute(
        f"select count(*), coalesce(sum(hash(({select}))::hugeint), 0)::varchar "
        f"from read_parquet('{glob}', union_by_name = true)").fetchone() or (0, "0")
    return int(n), str(digest)


def main() -> int:
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    same = True
    for table in TABLES:
        da, db = table_digest(a, table), table_digest(b, table)
        mark = "same" if da == db else "DIFFERENT"
        same &= da == db
        print(f"{table:18} {da[0]:>12,} {db[0]:>12,}  {mark}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
