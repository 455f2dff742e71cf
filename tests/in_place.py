"""Samples we may not redistribute (GPL-3.0, licence not determined) are checked in place, by hand.

The suite never reads outside the project. To check those samples where they lie, point
``CKPTWATCH_IN_PLACE_FIXTURES`` at the team's fixture folder, e.g.
``CKPTWATCH_IN_PLACE_FIXTURES=../shared/fixtures/real make test``; without it those few tests
report themselves skipped with this reason.
"""

from __future__ import annotations

import os
from pathlib import Path

IN_PLACE = Path(os.environ.get("CKPTWATCH_IN_PLACE_FIXTURES", "/nonexistent/in-place-fixtures"))
IN_PLACE_REASON = ("non-redistributable samples are checked by hand: set "
                   "CKPTWATCH_IN_PLACE_FIXTURES=../shared/fixtures/real")
