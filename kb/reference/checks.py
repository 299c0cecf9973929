"""Hold a bound call to its record: tensor dtypes, closed value sets and ranges.

The messages name the record's constraint, so a wrong dtype in an example or a mapping
fails with the fact it contradicts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kb.catalog.binding import dtype_value, python_name
from kb.reference.errors import ReferenceInputError
from kb.reference.lowp import name_of


def _tensor_check(rec: dict[str, Any], p: dict[str, Any], value: Any) -> None:
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if item is None:
            continue
        if not isinstance(item, np.ndarray):
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)} must be a numpy array, not {type(item).__name__}"
            )
        dtypes = p.get("dtypes") or []
        if dtypes and not p.get("any_dtype"):
            have = name_of(item)
            if have not in dtypes:
                raise ReferenceInputError(
                    f"{rec['name']}: {python_name(p)} dtype {have} is not "
                    f"one the record lists ({', '.join(dtypes)})"
                )


def _value_check(rec: dict[str, Any], p: dict[str, Any], value: Any) -> None:
    allowed = p.get("allowed")
    shown = dtype_value(p, value) if p.get("takes") == "dtype" else value
    if allowed is not None and value is not None:
        values = (
            shown
            if isinstance(shown, list) and not any(isinstance(a, list) for a in allowed)
            else [shown]
        )
        bad = [v for v in values if v not in allowed]
        if bad:
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)}={shown!r} is outside the "
                f"record's allowed values {allowed}"
            )
    rng = p.get("range")
    if rng and isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = rng.get("min"), rng.get("max")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ReferenceInputError(
                f"{rec['name']}: {python_name(p)}={value} is outside the "
                f"record's range [{lo}, {hi}]"
            )


def check(rec: dict[str, Any], bound: dict[str, Any]) -> None:
    """ReferenceInputError when a bound argument contradicts the record."""
    for p in rec.get("parameters") or []:
        value = bound.get(p["name"])
        if p["type"].startswith("Tensor"):
            _tensor_check(rec, p, value)
        else:
            _value_check(rec, p, value)
