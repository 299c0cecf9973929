"""Which keys a chain's attention stage lets each query see, read from its arguments.

A bidirectional module (an encoder, cross-attention over encoder states) must not be
planned with a causal or banded stage: the arguments would compute another function.
The question is answered by the reference semantics of the mask modes
(:func:`kb.reference.masks.sees`, numpy-free) on the chain's fixed arguments, with the
operator record's defaults for what the chain leaves out - never by chain names.
"""

from __future__ import annotations

from typing import Any

from kb.lint.context import Context
from kb.reference.errors import NotModelled, ReferenceInputError
from kb.reference.masks import sees

_ATTENTION_STEPS = frozenset({"attention", "flash_attention"})
_PROBE = 4  # rows and columns of the probe score matrix: enough to tell a band from full


def _defaults(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        str(p.get("name")): p.get("default") for p in rec.get("parameters") or [] if "default" in p
    }


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None  # a symbol the engine fills in (sliding_window): not a fixed visibility


def sees_every_key(ctx: Context, chain: dict[str, Any]) -> bool:
    """True when each attention stage of the chain lets every query row see every key
    (no causal corner, no band); False for a causal, banded or undecidable stage."""
    found = False
    for stage in chain.get("stages") or []:
        rec = ctx.operator(stage.get("operator"))
        if rec is None or not (_ATTENTION_STEPS & set(rec.get("fuses") or ())):
            continue
        found = True
        args = {**_defaults(rec), **(stage.get("args") or {})}
        mode, pre, nxt = (
            _int(args.get(k, d))
            for k, d in (("sparse_mode", 0), ("pre_tokens", 0), ("next_tokens", 0))
        )
        if mode is None or pre is None or nxt is None:
            return False
        masked = "atten_mask" in (stage.get("args") or {}) or "atten_mask" in (
            stage.get("passed") or {}
        )
        # a padding/packing mask lets every entry through: only the band can hide one
        unmasked = True if masked and mode == 0 else None
        try:
            if not all(
                sees(i, j, _PROBE, _PROBE, mode, pre, nxt, unmasked)
                for i in range(_PROBE)
                for j in range(_PROBE)
            ):
                return False
        except (NotModelled, ReferenceInputError):
            return False  # a mode that takes its visibility from the caller's mask
    return found
