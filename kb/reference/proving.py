"""What a proof is: checks of a fused result against the unfused computation, each held
to the tolerance of its dtype.

Both sides compute in float32 from the same low-precision inputs, so they differ by the
order of float32 operations and the one final rounding: a couple of units in the last
place of the output dtype, and one step for an integer that lands on a rounding edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

#: output dtype -> (atol, rtol)
TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-4),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "int8": (1.0, 0.0),
    "int32": (0.0, 0.0),
    "int64": (0.0, 0.0),
    "bool": (0.0, 0.0),
}
LOW = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@dataclass(frozen=True)
class Check:
    what: str
    got: Any
    want: Any
    dtype: str = ""  # tolerance class; by default the dtype of ``got``

    def error(self) -> str | None:
        """None when within tolerance, else what differs."""
        got, want = np.asarray(self.got), np.asarray(self.want)
        if got.shape != want.shape:
            return f"{self.what}: shape {got.shape} != {want.shape}"
        name = self.dtype or str(got.dtype)
        atol, rtol = TOLERANCE.get(name, (1e-5, 1e-4))
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~np.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
        if bad.any():
            worst = float(np.max(np.abs(g - w)[bad]))
            return f"{self.what} ({name}): {int(bad.sum())} of {bad.size} differ, worst {worst:.3g}"
        return None


def failures(checks: list[Check]) -> list[str]:
    return [e for e in (c.error() for c in checks) if e]


def rounded(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scale: float = 1.0) -> np.ndarray:
    """Random normal values already representable in ``dtype``."""
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(LOW[dtype])
