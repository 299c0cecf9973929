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

from kb.reference.lowp import NUMPY
from kb.vocab import COMPUTE_DTYPES

#: the 16-bit floats models compute in, and the float dtypes proofs run in
HALVES: tuple[str, ...] = tuple(COMPUTE_DTYPES)
FLOATS: tuple[str, ...] = ("float32", *HALVES)
LOW: dict[str, Any] = {name: NUMPY[name] for name in FLOATS}


def tolerance(dtype: Any) -> tuple[float, float]:
    """(atol, rtol) for results in ``dtype``: two units in the last place of a float
    (at least 1e-5, for float32 sums taken in another order); one step for an 8-bit
    quantized integer; exact for wider integers (indices) and booleans."""
    d = np.dtype(dtype)
    if d.kind in "iub" or d == np.dtype(ml_dtypes.int4):
        return (1.0, 0.0) if d.kind != "b" and d.itemsize == 1 else (0.0, 0.0)
    tol = max(2 * float(ml_dtypes.finfo(d).eps), 1e-5)
    return tol, tol


@dataclass(frozen=True)
class Check:
    what: str
    got: Any
    want: Any
    dtype: str = ""  # the dtype whose tolerance applies; by default that of ``got``

    def error(self) -> str | None:
        """None when within tolerance, else what differs."""
        got, want = np.asarray(self.got), np.asarray(self.want)
        if got.shape != want.shape:
            return f"{self.what}: shape {got.shape} != {want.shape}"
        name = self.dtype or str(got.dtype)
        atol, rtol = tolerance(NUMPY[self.dtype] if self.dtype else got.dtype)
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~np.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
        if bad.any():
            worst = float(np.max(np.abs(g - w)[bad]))
            return f"{self.what} ({name}): {int(bad.sum())} of {bad.size} differ, worst {worst:.3g}"
        return None


def failures(checks: list[Check]) -> list[str]:
    return [e for e in (c.error() for c in checks) if e]


def rounded(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: str, scale: float = 1.0
) -> np.ndarray:
    """Random normal values already representable in ``dtype``."""
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(LOW[dtype])
