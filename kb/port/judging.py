"""How kb verify judges what it measured: the tolerance of a run's dtype, and the modules
whose error is inherited rather than started there (a choice among near ties made on
inputs close to, but not equal to, the original's)."""

from __future__ import annotations

from typing import Any


def routes_near_tie(module: dict[str, Any], routers: set[str]) -> bool:
    """A module whose inputs differ (within tolerance) and inside which a router ran."""
    if module.get("inputs_equal", True):
        return False
    return any(c.get("op") in routers for c in module.get("calls", []))


def chose_on_close_inputs(module: dict[str, Any]) -> bool:
    """A module of the original's code (no fused call ran in it) whose ids differ after
    inputs close to but not equal to the original's: a choice among near ties, inherited."""
    return (
        not module.get("inputs_equal", True)
        and not module.get("calls")
        and "integer outputs differ" in module.get("note", "")
    )


def tolerance(dtype: Any) -> dict[Any, tuple[float, float]]:
    """The dtype's tolerance table, no tighter than the run's dtype: a float32 result
    computed from bfloat16 activations (a router's softmax) carries bfloat16's error."""
    from kb.emulate.comparison import TOLERANCE

    floor = TOLERANCE.get(dtype, (0.0, 0.0))
    return {k: (max(v[0], floor[0]), max(v[1], floor[1])) for k, v in TOLERANCE.items()}
