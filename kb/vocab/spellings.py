"""Spellings → canonical ids, over every vocabulary.

Records must use canonical ids; user input (candidate lists, CLI filters) goes
through :func:`normalize`, scheme expressions through :func:`normalize_scheme`.
"""

from __future__ import annotations

import functools
import re
from typing import get_args

from kb.vocab.dtypes import DTYPE_ALIASES, DTYPE_CODES, Dtype
from kb.vocab.formats import FORMAT_ALIASES, Format
from kb.vocab.parallel import PARALLEL_ALIASES, ParallelMode
from kb.vocab.phases import PHASE_ALIASES, Phase
from kb.vocab.products import PRODUCT_ALIASES, Product, product_from_official
from kb.vocab.schemes import AMBIGUOUS_SCHEMES, KV_SCHEMES, QUANT_ALIASES, SCHEMES, QuantScheme
from kb.vocab.statuses import Status
from kb.vocab.taxonomy import Category, Step

ALIAS_TABLES: dict[str, dict[str, str]] = {
    "product": dict(PRODUCT_ALIASES),
    "dtype": dict(DTYPE_ALIASES),
    "format": dict(FORMAT_ALIASES),
    "quantization": dict(QUANT_ALIASES),
    "phase": dict(PHASE_ALIASES),
    "parallel": dict(PARALLEL_ALIASES),
}

CANONICAL: dict[str, tuple[str, ...]] = {
    "product": get_args(Product),
    "dtype": get_args(Dtype),
    "format": get_args(Format),
    "quantization": get_args(QuantScheme),
    "phase": get_args(Phase),
    "parallel": get_args(ParallelMode),
    "status": get_args(Status),
    "category": get_args(Category),
    "step": get_args(Step),
}

_FOLD = re.compile(r"[\s]+")


def _fold(value: str) -> str:
    text = value.strip().lower()
    for prefix in ("torch_npu.", "torch."):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return _FOLD.sub(" ", text)


def normalize(vocab: str, value: object) -> str | None:
    """Return the canonical id for ``value`` in ``vocab``, or None when unknown.

    Case, surrounding space, a ``torch.`` or ``torch_npu.`` prefix and ``-``/``_``
    differences are ignored, so ``torch.bfloat16``, ``BF16``, ``torch_npu.hifloat8`` and
    ``atlas_a3`` all resolve; a dtype may also be given by its integer code
    (:data:`DTYPE_CODES`: ``15`` and ``torch.bfloat16`` are the same dtype).
    """
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        return None
    return _normalize(vocab, value)


@functools.lru_cache(maxsize=4096, typed=True)
def _normalize(vocab: str, value: str | int) -> str | None:
    """:func:`normalize` of a text or an integer, remembered: a long candidate list spells
    the same few dtypes and formats thousands of times (typed: ``1`` is not ``True``)."""
    if vocab == "dtype":
        code = value if isinstance(value, int) else None
        if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 6:
            code = int(value.strip())
        if code is not None:
            return DTYPE_CODES.get(code)
    text = str(value)
    if len(text) > 200:
        return None
    if vocab == "product":
        official = product_from_official(text)
        if official is not None:
            return official
    folded = _fold(text)
    canon = CANONICAL[vocab]
    for candidate in (folded, folded.replace("_", "-"), folded.replace("-", "_")):
        for item in canon:
            if item.lower() == candidate:
                return item
    table = ALIAS_TABLES.get(vocab, {})
    for candidate in (folded, folded.replace("-", "_"), folded.replace("_", " ")):
        if candidate in table:
            return table[candidate]
    return None


def normalize_scheme(value: object) -> str | None:
    """Canonical form of a quantization scheme expression, or None when unknown.

    An expression is one scheme, optionally followed by KV-cache modifiers joined with
    ``+``: ``w8a8_dynamic`` → ``w8a8-dynamic``, ``MXFP8 + kv_fp8`` → ``mxfp8+kv-fp8``.
    """
    if not isinstance(value, str) or len(value) > 100:
        return normalize("quantization", value)
    parts = [p.strip() for p in value.split("+")]
    canon = [normalize("quantization", p) for p in parts]
    if any(c is None for c in canon):
        return None
    head, mods = canon[0], canon[1:]
    if any(m not in KV_SCHEMES for m in mods) or len(set(mods)) != len(mods):
        return None
    return "+".join([head, *mods])  # type: ignore[list-item]


def scheme_meanings(value: object) -> tuple[str, ...]:
    """Every canonical scheme expression ``value`` may name: one, several or none.

    A spelling shared by several schemes (``w8a8``: static or per-token dynamic
    activations) gives all of them, so callers can say so instead of picking one;
    ``w8a8+kv-int8`` gives each meaning with the modifier.
    """
    canon = normalize_scheme(value)
    if canon is not None:
        return (canon,)
    if not isinstance(value, str) or len(value) > 100:
        return ()
    head, *rest = (p.strip() for p in value.split("+"))
    mods = [normalize_scheme(m) for m in rest]
    if any(m is None or m not in KV_SCHEMES for m in mods):
        return ()
    folded = _fold(head)
    for candidate in (folded, folded.replace("-", "_"), folded.replace("_", "-")):
        if candidate in AMBIGUOUS_SCHEMES:
            return tuple("+".join([m, *mods]) for m in AMBIGUOUS_SCHEMES[candidate])  # type: ignore[list-item]
    return ()


def ambiguous_scheme_message(value: object) -> str | None:
    """Why ``value`` names no single scheme, naming each it may mean; None when it is not shared."""
    meanings = scheme_meanings(value)
    if len(meanings) < 2:
        return None
    told = "; ".join(f"{m} ({SCHEMES[m.split('+')[0]].label})" for m in meanings)  # type: ignore[index]
    return f"{value!r} names more than one quantization scheme: {told}. Write the one you mean"


def scheme_family(value: object) -> tuple[str, tuple[str, ...]] | None:
    """``(family, members)`` when ``value`` names a scheme family, else None.

    A family is a spelling shared by schemes that store the same element types in every
    role and differ only in when the activation scale is made (``timing``): ``w8a8`` (or
    ``a8w8``) is w8a8-static or w8a8-dynamic, ``w8a8+kv-int8`` the same with an int8 KV
    cache.  A spelling shared by schemes that quantize different things (``int8``: also
    the weight-only w8a16) is no family: it stays a question.  The family is written with
    the first spelling every member shares, so ``A8W8`` reads back as ``w8a8``.
    """
    meanings = scheme_meanings(value)
    if len(meanings) < 2:
        return None
    heads = [SCHEMES[m.split("+")[0]] for m in meanings]  # type: ignore[index]
    stored = {(h.weights, h.activations, h.kv_cache) for h in heads}
    if len(stored) != 1 or len({h.timing for h in heads}) != len(heads):
        return None
    common = [a for a in heads[0].shared if all(a in h.shared for h in heads)]
    mods = meanings[0].split("+")[1:]
    return "+".join([common[0], *mods]), meanings


def scheme_members(scheme: str) -> tuple[str, ...]:
    """The schemes a canonical expression or a family stands for: itself, or every member."""
    if normalize_scheme(scheme) is not None:
        return (scheme,)
    family = scheme_family(scheme)
    return family[1] if family else (scheme,)
