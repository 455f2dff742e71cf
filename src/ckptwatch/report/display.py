"""How the post-mortem notebook shows a frame: a plain HTML table (:func:`show`)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import polars as pl


@dataclass(frozen=True)
class Table:
    """A frame shown in a notebook as a plain HTML table: no dtypes or shape line, strings
    unquoted and whole, floats rounded, at most ``max_rows`` rows."""

    frame: pl.DataFrame
    digits: int = 2
    max_rows: int = 200

    def _cell(self, value: Any) -> str:
        if value is None:
            return "–"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:,.{self.digits}f}"
        return html.escape(str(value))

    def _repr_html_(self) -> str:
        cols = self.frame.columns
        numeric = {c for c, t in self.frame.schema.items() if t.is_numeric()}
        head = "".join(f'<th style="text-align:{"right" if c in numeric else "left"}">'
                       f"{html.escape(c)}</th>" for c in cols)
        rows = []
        for row in self.frame.head(self.max_rows).iter_rows():
            cells = "".join(f'<td style="text-align:{"right" if c in numeric else "left"}">'
                            f"{self._cell(v)}</td>" for c, v in zip(cols, row, strict=True))
            rows.append(f"<tr>{cells}</tr>")
        more = (f"<p>… {self.frame.height - self.max_rows} more rows</p>"
                if self.frame.height > self.max_rows else "")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"

    def __repr__(self) -> str:
        return repr(self.frame)


def show(frame: pl.DataFrame, digits: int = 2) -> Table:
    """Display ``frame`` as a plain table (the notebook's tables)."""
    return Table(frame, digits)
