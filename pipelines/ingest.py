"""Prefect entry point: the on-demand ingest flow (``prefect.yaml``: ``ingest-on-demand``).

The flow itself is :mod:`ckptwatch.flows.ingest`; this file only names it for deployments and
runs it as a script: ``python pipelines/ingest.py RAW LAKE [--dask [ADDRESS]]``.
"""

from __future__ import annotations

import sys

from ckptwatch.flows.ingest import ingest_flow, main

__all__ = ["ingest_flow"]

if __name__ == "__main__":
    main(sys.argv[1:])
