"""Which score entries a sparse mode lets the softmax see, as one rule for plain
integers and numpy arrays alike (numpy-free: the scanner's planner asks it too).

``i`` is the query row and ``j`` the key column (ints, or arrays that broadcast);
``unmasked`` is None without an atten_mask, else True where the mask lets an entry
through.  The numbers mean what :mod:`kb.reference.attention` states for each mode.
"""

from __future__ import annotations

from typing import Any

from kb.reference.errors import NotModelled, ReferenceInputError


def sees(
    i: Any, j: Any, sq: int, skv: int, mode: int, pre: int, nxt: int, unmasked: Any = None
) -> Any:
    """True (elementwise) where query row ``i`` sees key column ``j``."""
    if mode == 0:
        if unmasked is None:
            return (i >= 0) & (j >= 0)  # everything, in the shape of i and j
        return (j - i <= nxt) & (i - j <= pre) & unmasked
    if mode == 1:
        if unmasked is None:
            raise ReferenceInputError("sparse_mode=1 (allMask) needs the full atten_mask")
        return unmasked & (i >= 0) & (j >= 0)
    if mode == 2:
        return j <= i
    if mode == 3:
        return j <= i + (skv - sq)
    if mode == 4:
        d = j - i - (skv - sq)
        return (d <= nxt) & (-d <= pre)
    raise NotModelled(f"sparse_mode={mode} is not modelled (0, 1, 2, 3, 4)")
