"""A tensor whose element type a ``<tensor>_dtype`` argument declares is judged as that type.

op-plugin's wrappers reinterpret such a tensor (same element size) as the declared type,
so MX scales in uint8 tensors with ``scale_dtype=float8_e8m0fnu`` are the normal use,
not a KB107.  A carrier of another size, or no declaration, is still judged as stated.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kb.api.check import check_text
from kb.catalog.compiled import open_catalog
from kb.lint.declared import apply_declared_dtypes
from kb.lint.model import Candidate, TensorSpec

REC = {
    "parameters": [
        {"name": "scale", "type": "Tensor"},
        {"name": "scale_dtype", "type": "int?", "takes": "dtype"},
        {"name": "bias", "type": "Tensor?"},
        {"name": "bias_dtype", "type": "int?"},
    ]
}


def _cand(dtype: str, **args: Any) -> Candidate:
    return Candidate(
        index=0,
        args=dict(args),
        tensors={"scale": TensorSpec(dtype=dtype), "bias": TensorSpec(dtype=dtype)},
    )


@pytest.mark.parametrize(
    ("stored", "declared", "seen"),
    [
        ("uint8", "float8_e8m0fnu", "float8_e8m0fnu"),  # same size: the declared type
        ("uint8", "torch_npu.float8_e8m0fnu", "float8_e8m0fnu"),
        ("uint8", 293, "float8_e8m0fnu"),  # torch_npu's integer code
        ("float32", "float8_e8m0fnu", "float32"),  # 4 bytes cannot hold e8m0
        ("uint8", "no-such-dtype", "uint8"),
    ],
)
def test_a_same_size_carrier_reads_as_the_declared_dtype(
    stored: str, declared: Any, seen: str
) -> None:
    cand = _cand(stored, scale_dtype=declared, bias_dtype="float8_e8m0fnu")
    apply_declared_dtypes(cand, REC)
    apply_declared_dtypes(cand, REC)  # idempotent
    assert cand.tensors["scale"].dtype == seen
    assert cand.tensors["bias"].dtype == stored  # bias_dtype does not take a dtype here


def _check(product: str, declare: bool = True, **tensors: str) -> list[str]:
    cand = {
        "module": "m.down_proj",
        "phase": "decode",
        "operator": "npu_quant_matmul",
        "args": {"output_dtype": "bfloat16", "group_sizes": [1, 1, 32]},
        "tensors": {k: {"dtype": v} for k, v in tensors.items()},
    }
    if declare:
        cand["args"].update(scale_dtype="float8_e8m0fnu", pertoken_scale_dtype="float8_e8m0fnu")
    doc = {"version": 1, "target": {"product": product}, "candidates": [cand]}
    return [
        f.code
        for f in check_text(yaml.safe_dump(doc), catalog=open_catalog())
        if f.severity == "error"
    ]


def test_mxfp8_linear_with_uint8_scales_and_float32_bias_is_clean() -> None:
    """vLLM-Ascend's A5 MXFP8 linear: e8m0 scales stored as uint8, a float32 bias."""
    assert (
        _check(
            "ascend-950",
            x1="float8_e4m3fn",
            x2="float8_e4m3fn",
            scale="uint8",
            pertoken_scale="uint8",
            bias="float32",
        )
        == []
    )


def test_undeclared_uint8_scale_is_still_rejected() -> None:
    cand = _cand("uint8")
    apply_declared_dtypes(cand, REC)
    assert cand.tensors["scale"].dtype == "uint8"
    assert "KB107" in _check(
        "ascend-950", declare=False, x1="float8_e4m3fn", x2="float8_e4m3fn", scale="uint8"
    )
