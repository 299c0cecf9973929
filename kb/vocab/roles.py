"""What a quantization scheme expression means per role, and whether two schemes fit."""

from __future__ import annotations

from kb.vocab.schemes import COMPUTE_DTYPES, SCHEMES
from kb.vocab.spellings import normalize_scheme


def scheme_roles(expr: str) -> dict[str, tuple[str, ...]] | None:
    """Element types per role (weights, activations, kv_cache) of a scheme expression."""
    canon = normalize_scheme(expr)
    if canon is None:
        return None
    head, *mods = canon.split("+")
    base = SCHEMES[head]  # type: ignore[index]
    roles = {"weights": base.weights, "activations": base.activations, "kv_cache": base.kv_cache}
    for mod in mods:
        roles["kv_cache"] = SCHEMES[mod].kv_cache  # type: ignore[index]
    return roles


def _same_timing(model: str, mode: str) -> bool:
    """Static and dynamic activation scales differ; a scheme that does not say fits either."""
    first = SCHEMES.get(model.split("+")[0])
    second = SCHEMES.get(mode.split("+")[0])
    if first is None or second is None or not first.timing or not second.timing:
        return True
    return first.timing == second.timing


def quantized_roles(expr: str) -> set[str]:
    """The roles a scheme expression quantizes (element types other than 16/32-bit float)."""
    roles = scheme_roles(expr) or {}
    plain = {"bfloat16", "float16", "float32"}
    return {r for r, types in roles.items() if not set(types) <= plain}


def schemes_compatible(
    model: str, mode: str, roles: set[str] | list[str] | tuple[str, ...], *, partial: bool = False
) -> bool:
    """Can an operator mode (scheme ``mode``) run in a model quantized as ``model``?

    Only the ``roles`` the operator handles are compared: a gate in a w8a8 model reads
    no quantized tensor, an attention core only the KV cache.  A ``partial`` mode
    quantizes some of its weights and leaves the others 16-bit.
    """
    want, have = scheme_roles(model), scheme_roles(mode)
    if want is None or have is None:
        return False
    if "activations" in roles and not _same_timing(model, mode):
        return False  # a calibrated per-tensor scale is not a per-token one computed at run time
    for role in roles:
        offered = set(have[role])
        if partial and role == "weights":
            offered |= set(COMPUTE_DTYPES)
        if not offered & set(want[role]):
            return False
    return True
