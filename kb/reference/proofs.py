"""Run the equivalence proof of a mapping: ``verify(id)`` -> the checks that failed.

The registry is read from the pattern table (each row's ``pattern.proof`` names its
function), so a proof is never listed twice.  :func:`reprove` runs a row's proof with one
module's facts and the arguments a plan writes for it: a plan whose arguments compute
something else than the module (the other GLU half, a causal mask on a bidirectional
module, a renormalisation the router does not do) fails it and is not emitted.  Results
are kept per (row, facts, arguments) for the process.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from kb.reference import proofs_dense, proofs_mla, proofs_more, proofs_planned, proofs_sparse
from kb.reference.errors import ReferenceInputError
from kb.reference.mappings import BY_ID, MAPPINGS
from kb.reference.proving import Check, failures

Proof = Callable[..., list[Check]]

_MODULES: dict[str, ModuleType] = {
    "dense": proofs_dense,
    "sparse": proofs_sparse,
    "more": proofs_more,
    "mla": proofs_mla,
    "planned": proofs_planned,
}


def _literal(text: str) -> object:
    return {"True": True, "False": False}.get(text, text)


def _resolve(spec: str) -> Proof:
    """``module.function`` or ``module.function:arg:arg`` (leading arguments bound)."""
    name, *bound = spec.split(":")
    module, function = name.split(".", 1)
    fn = getattr(_MODULES[module], function)
    return functools.partial(fn, *(_literal(b) for b in bound)) if bound else fn  # type: ignore[no-any-return]


PROOFS: dict[str, Proof] = {
    m.id: _resolve(m.pattern.proof) for m in MAPPINGS if m.pattern is not None and m.pattern.proof
}


def _arity(proof: Proof) -> int:
    """Parameters left after the bound ones: 1 (rng), 3 (+ facts, args), 4 (+ operator)."""
    target = proof.func if isinstance(proof, functools.partial) else proof
    bound = len(proof.args) if isinstance(proof, functools.partial) else 0
    return len(inspect.signature(target).parameters) - bound


def verify(mapping_id: str, seed: int = 0) -> list[str]:
    """What differs between the unfused computation and the mapped call (empty: proven)."""
    if mapping_id not in BY_ID:
        raise KeyError(f"no mapping {mapping_id!r}")
    proof = PROOFS.get(mapping_id)
    if proof is None:
        return [f"{mapping_id}: no proof"]
    try:
        return failures(proof(np.random.default_rng(seed)))
    except ReferenceInputError as exc:  # the mapped call is refused: not proven
        return [f"{mapping_id}: the mapped call is refused: {exc}"]


_REPROVED: dict[tuple[str, tuple[Any, ...], tuple[Any, ...], str], tuple[str, ...]] = {}


def _key(values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, repr(v)) for k, v in values.items()))


def reprove(
    mapping_id: str, facts: dict[str, Any], args: dict[str, Any], operator: str = ""
) -> list[str]:
    """What differs when the unfused side is written with ``facts`` (the module's) and
    the fused call (``operator``, else the row's own) made with ``args`` (the plan's); a
    proof that reads neither is the mapping's own (:func:`verify`)."""
    key = (mapping_id, _key(facts), _key(args), operator)
    if key not in _REPROVED:
        proof = PROOFS.get(mapping_id)
        if proof is None:
            _REPROVED[key] = (f"{mapping_id}: no proof",)
        else:
            rng = np.random.default_rng(0)
            arity = _arity(proof)
            try:
                if arity >= 4:
                    checks = proof(rng, dict(facts), dict(args), operator)
                elif arity == 3:
                    checks = proof(rng, dict(facts), dict(args))
                else:
                    checks = proof(rng)
                _REPROVED[key] = tuple(failures(checks))
            except ReferenceInputError as exc:  # the reference refuses the plan's arguments
                _REPROVED[key] = (f"the reference refuses these arguments: {exc}",)
    return list(_REPROVED[key])
