"""Planning inputs from text: config-file mappings, YAML/TOML config files, sweep specifications.

Keys are the flags' names with underscores in display units (``pool_bandwidth_gb_s: 400``) or
the model's field names in SI units (``pool_bandwidth_bytes_s``, as ``plan --format json``
writes them); every value comes out in SI units. Errors are :class:`PlanInputError` naming the
file (or ``command line``) and the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import PARAMETERS, PlanInputs, parameter


def inputs_from_mapping(values: Mapping[str, Any], *, origin: str) -> dict[str, float | int]:
    """Field -> SI value from a mapping keyed by config keys (display units) or field names
    (SI). ``origin`` names the source in error messages."""
    out: dict[str, float | int] = {}
    valid = {p.key for p in PARAMETERS.values()} | {f.name for f in fields(PlanInputs)}
    for key, raw in values.items():
        if key not in valid:
            raise PlanInputError(
                f"{origin}: unknown input {key!r}; valid keys: "
                f"{', '.join(p.key for p in PARAMETERS.values())}")
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise PlanInputError(f"{origin}: {key} must be a number (got {raw!r})")
        p = parameter(key)
        if key == p.key and p.key != p.field:
            out[p.field] = p.to_si(float(raw))
        else:
            out[p.field] = round(raw) if p.integer else float(raw)
        if p.integer and float(raw) != int(raw):
            raise PlanInputError(f"{origin}: {key} must be a whole number (got {raw!r})")
    return out


def load_config(path: Path) -> dict[str, Any]:
    """The mapping of inputs in a YAML or TOML file (``.toml`` by suffix, else YAML).

    A top-level ``inputs:`` mapping is used if present, so ``plan --format json`` output can be
    fed back.
    """
    if not path.is_file():
        raise PlanInputError(f"config file {path} not found; check --config")
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        else:
            data = yaml.safe_load(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanInputError(f"{path}: not valid TOML: {exc}") from exc
    except yaml.YAMLError as exc:
        raise PlanInputError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
        data = data["inputs"]
    if not isinstance(data, dict):
        raise PlanInputError(f"{path}: expected a mapping of inputs, got {type(data).__name__}")
    return data


def parse_sweep(spec: str) -> tuple[str, float, float, int]:
    """``PARAM=LO:HI[:N]`` -> (parameter name, lo, hi, n) with lo/hi in SI units."""
    name, sep, rng = spec.partition("=")
    parts = rng.split(":")
    if not sep or len(parts) not in (2, 3):
        raise PlanInputError(f"--sweep {spec!r}: expected PARAM=LO:HI or PARAM=LO:HI:N, "
                             "e.g. pool_bandwidth=40:4000")
    p = parameter(name.strip())
    try:
        lo, hi = float(parts[0]), float(parts[1])
        n = int(parts[2]) if len(parts) == 3 else 41
    except ValueError as exc:
        raise PlanInputError(f"--sweep {spec!r}: LO and HI must be numbers and N a whole "
                             "number") from exc
    if not lo < hi:
        raise PlanInputError(f"--sweep {spec!r}: LO must be below HI")
    if not 2 <= n <= 1001:
        raise PlanInputError(f"--sweep {spec!r}: N must be in 2..1001")
    return p.name, lo * p.scale, hi * p.scale, n
