"""Prefect entry point: the nightly flow (``prefect.yaml``: ``nightly``, cron ``30 2 * * *`` UTC).

The flow itself is :mod:`ckptwatch.flows.nightly`; this file only names it for deployments and
runs it as a script: ``python pipelines/nightly.py RAW LAKE [--dask [ADDRESS]]``.
"""

from __future__ import annotations

import sys

from ckptwatch.flows.nightly import main, nightly_flow

__all__ = ["nightly_flow"]

if __name__ == "__main__":
    main(sys.argv[1:])
