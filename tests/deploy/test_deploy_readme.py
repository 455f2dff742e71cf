"""deploy/README.md: its metrics tables are ckptwatch.live.metrics.METRICS and
ckptwatch.flows.nightly_metrics.METRICS (names, types, labels), and it describes every file under
deploy/."""

from __future__ import annotations

from tests.deploy.promql_names import DEPLOY

from ckptwatch.flows.nightly_metrics import METRICS as NIGHTLY_METRICS
from ckptwatch.live.metrics import METRICS

README = DEPLOY / "README.md"


def metrics_table() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`ckptwatch_"):
            labels = () if cells[2] == "—" else tuple(c.strip() for c in cells[2].split(","))
            rows[cells[0].strip("`")] = (cells[1], labels)
    return rows


def test_the_metrics_table_matches_the_code() -> None:
    assert metrics_table() == {name: (kind, labels)
                               for name, (kind, labels, _) in (METRICS | NIGHTLY_METRICS).items()}


def test_every_deploy_file_is_described() -> None:
    text = README.read_text()
    files = [p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*")
             if p.is_file() and p.name != "README.md"]
    assert files
    missing = [f for f in files if f"`{f}`" not in text]
    assert missing == []
