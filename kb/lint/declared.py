"""Tensors whose element type a ``<tensor>_dtype`` argument declares.

op-plugin's wrappers hand such a tensor to the kernel as the declared type, checking
only that the element sizes match (``make_wrapper`` in ``op_plugin/utils/op_api_common.h``
@517f2e7, lines 814-836): MX scales live in uint8 tensors declared
``scale_dtype=float8_e8m0fnu``, FP4 weights in int8/uint8 ones declared
``x2_dtype=float4_e2m1fn_x2``.  Rules judge the type the kernel sees, so a candidate's
carrier dtype is read as the declared one before any rule looks at it.
"""

from __future__ import annotations

from typing import Any

from kb.lint.model import Candidate
from kb.vocab import DTYPE_BYTES, normalize

_SUFFIX = "_dtype"


def apply_declared_dtypes(cand: Candidate, rec: dict[str, Any] | None) -> None:
    """Read each same-size carrier tensor as the dtype its ``<tensor>_dtype`` declares.

    Only a ``takes: dtype`` parameter named after a tensor parameter of the record
    declares; a carrier of another size is left as stated (the wrapper rejects it).
    Idempotent, so every rule may call it.
    """
    if rec is None or not any(k.endswith(_SUFFIX) for k in cand.args):
        return
    params = {p["name"]: p for p in rec.get("parameters") or []}
    for arg, value in cand.args.items():
        tensor = arg[: -len(_SUFFIX)]
        p, tp = params.get(arg), params.get(tensor)
        if not arg.endswith(_SUFFIX) or p is None or tp is None or p.get("takes") != "dtype":
            continue
        spec = cand.tensors.get(tensor)
        declared = normalize("dtype", value) if isinstance(value, (str, int)) else None
        if (
            spec is None
            or spec.dtype is None
            or declared is None
            or spec.dtype == declared
            or not str(tp.get("type", "")).startswith("Tensor")
        ):
            continue
        if DTYPE_BYTES.get(spec.dtype) == DTYPE_BYTES.get(declared):
            spec.dtype = declared
