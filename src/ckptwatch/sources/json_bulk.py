"""What the bulk parsers of JSON tool outputs share: ``JsonRows`` gathers the values each
envelope's object gives, checks their Python types, and hands them all to polars, which scales,
converts and unpivots them into ``nvme_smart`` rows in one pass (``base.JsonBulkParser``).

``read_envelopes`` has read every envelope with ``json.loads`` already; what is left per
envelope is small: pick the values the format reads out of its object (one list per envelope,
no row dicts). Each format's bulk parser lives beside its reference parser:
``smartctl.parse_smartctl_bulk``, ``nvme_cli.parse_smart_log_bulk`` and
``nvme_cli.parse_ocp_json_bulk``. An envelope is declined to the reference parser, never
guessed, when any value read is other than a JSON integer or float below 2**63 in magnitude
and finite, or a string of 1-18 ASCII digits (all of one kind per envelope), or when its shape
needs one of the reference parser's judgements (each bulk parser lists its own).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ckptwatch.sources.base import INPUT_ERRORS

#: Value kinds read in bulk: numbers (``None``: not given, no row), or digit strings.
_NUMERIC = frozenset({int, float, type(None)})
_TEXTUAL = frozenset({str, type(None)})
#: Numbers at or above this magnitude are declined: below it polars' float of a Python int is
#: the one ``float()`` gives (both round correctly from an exact 64-bit integer).
_LIMIT = 9.2e18
#: A number as text that the bulk path reads: ``int(text)``, exactly, as a float.
_DIGITS = r"^[0-9]{1,18}$"


class JsonRows:
    """``nvme_smart`` rows gathered as flat lists, envelope by envelope, typed in polars."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.scales: list[float] = []
        self.kelvin_at: list[float | None] = []
        self._code: dict[str, int] = {}
        #: per kind (numbers, digit strings): envelope ids, value counts, metric codes, values
        self.batches: dict[bool, tuple[list[int], list[int], list[int], list[Any]]] = {
            True: ([], [], [], []), False: ([], [], [], [])}
        #: per envelope added: its id, device, model, serial, firmware
        self.meta: tuple[list[Any], ...] = ([], [], [], [], [])
        self.declined: list[int] = []

    def metric(self, name: str, scale: float = 1.0, kelvin_at: float | None = None) -> int:
        """The code of metric ``name``: ``float(value) * scale``; ``kelvin_at``: a value at or
        above it is Kelvin, less 273 (as ``nvme_cli.kelvin_to_celsius``)."""
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.names)
            self.names.append(name)
            self.scales.append(float(scale))
            self.kelvin_at.append(kelvin_at)
        return code

    def add(self, env: int, codes: list[int], values: list[Any], device: str,
            model: str | None = None, serial: str | None = None,
            firmware: str | None = None) -> None:
        """One envelope's values (``None``: no row) under metric ``codes``, in row order."""
        kinds = set(map(type, values))
        numeric = kinds <= _NUMERIC
        if not (numeric or kinds <= _TEXTUAL) or not values:
            self.declined.append(env)
            return
        at, counts, all_codes, all_values = self.batches[numeric]
        at.append(len(self.meta[0]))
        counts.append(len(values))
        all_codes.extend(codes)
        all_values.extend(values)
        envs, devices, models, serials, firmwares = self.meta
        envs.append(env)
        devices.append(device)
        models.append(model)
        serials.append(serial)
        firmwares.append(firmware)

    def frames(self) -> tuple[dict[str, pl.DataFrame], pl.Series]:
        """The rows (``base.BulkParser``'s columns) and the envelopes declined."""
        parts = [self._long(numeric) for numeric in (True, False) if self.batches[numeric][0]]
        if not parts:
            return {}, pl.Series(self.declined, dtype=pl.Int64)
        meta = pl.DataFrame(dict(zip(("__env", "device", "model", "serial", "firmware"),
                                     self.meta, strict=True)),
                            schema={"__env": pl.Int64, "device": pl.String, "model": pl.String,
                                    "serial": pl.String, "firmware": pl.String})
        bad = pl.concat([p.filter(pl.col("__bad"))["__k"] for p in parts]).unique()
        declined = pl.concat([pl.Series(self.declined, dtype=pl.Int64),
                              meta["__env"].gather(bad)])
        long = pl.concat([p.filter(pl.col("__value").is_not_null()) for p in parts])
        if len(parts) > 1:
            long = long.sort("__k", maintain_order=True)
        if bad.len():
            long = long.filter(~pl.col("__k").is_in(bad.implode()))
        if not long.height:
            return {}, declined

        def of_code(values: list[Any], dtype: pl.DataType) -> pl.Expr:
            return pl.lit(pl.Series(values, dtype=dtype)).gather(pl.col("__code"))
        scaled = pl.col("__value") * of_code(self.scales, pl.Float64())
        kelvin_at = of_code(self.kelvin_at, pl.Float64())
        value = pl.when(kelvin_at.is_not_null() & (scaled >= kelvin_at)) \
            .then(scaled - 273.0).otherwise(scaled)

        def of_env(name: str) -> pl.Expr:
            return pl.lit(meta[name]).gather(pl.col("__k")).alias(name)
        rows = long.select(
            of_env("__env"), pl.int_range(pl.len(), dtype=pl.Int64).alias("__idx"),
            of_env("device"), of_code(self.names, pl.String()).alias("metric"),
            value.alias("value"), of_env("model"), of_env("serial"), of_env("firmware"))
        return {"nvme_smart": rows}, declined

    def _long(self, numeric: bool) -> pl.DataFrame:
        """One kind's values, long: ``__k`` (the envelope's place in ``meta``), ``__code``,
        ``__value`` (null: no row) and ``__bad`` (true: a value the bulk path does not read;
        its envelope is declined)."""
        at, counts, codes, values = self.batches[numeric]
        if numeric:
            try:
                raw = pl.Series(values, dtype=pl.Float64, strict=True)
            except INPUT_ERRORS:  # OverflowError: an integer beyond any polars type
                if not self._drop_huge():
                    self.declined += [self.meta[0][k] for k in at]
                    self.batches[True] = ([], [], [], [])
                return self._long(numeric)
            value = pl.col("__raw")
            bad = value.is_not_null() & (~value.is_finite() | (value.abs() >= _LIMIT))
        else:
            raw = pl.Series(values, dtype=pl.String)
            value = pl.col("__raw").cast(pl.Int64, strict=False).cast(pl.Float64)
            bad = pl.col("__raw").is_not_null() & ~pl.col("__raw").str.contains(_DIGITS)
        import numpy as np  # only here: a format module imports this without loading numpy

        k = pl.Series("__k", np.repeat(np.asarray(at, dtype=np.uint32),
                                       np.asarray(counts, dtype=np.int64)))
        frame = pl.DataFrame({"__k": k, "__code": pl.Series(codes, dtype=pl.UInt32),
                              "__raw": raw})
        return frame.select("__k", "__code", value.alias("__value"), bad.alias("__bad"))

    def _drop_huge(self) -> bool:
        """Decline the envelopes of numbers with an integer of 2**63 or more in magnitude
        (the rare case ``_long`` meets); False when there was none."""
        at, counts, codes, values = self.batches[True]
        kept: tuple[list[int], list[int], list[int], list[Any]] = ([], [], [], [])
        start = 0
        for k, n in zip(at, counts, strict=True):
            part = values[start:start + n]
            if any(type(v) is int and abs(v) >= 1 << 63 for v in part):
                self.declined.append(self.meta[0][k])
            else:
                kept[0].append(k)
                kept[1].append(n)
                kept[2].extend(codes[start:start + n])
                kept[3].extend(part)
            start += n
        dropped = len(kept[0]) < len(at)
        self.batches[True] = kept
        return dropped


def envelopes(env: pl.DataFrame) -> tuple[list[int], list[str | None]]:
    """A ``JsonBulkParser``'s envelopes: their ids and devices (null: none), in order."""
    return env["__env"].to_list(), env["device"].to_list()
