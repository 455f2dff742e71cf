"""The Parquet lake: its tables' schemas (``schema``), writing and locking (``store``), and DuckDB
over it with the views of ``sql/`` (``query``)."""
