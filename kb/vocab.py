"""Controlled vocabularies shared by records, the checker and the importer.

Each vocabulary is a ``Literal`` (so pydantic rejects unknown values and the JSON
Schema lists the allowed ones) plus an alias table that maps the spellings people and
upstream pages use to the canonical id.  Records must use canonical ids; user input
(candidate lists, CLI filters) goes through :func:`normalize`.

This module must stay import-light: ``kb show`` and ``kb check`` use it on the hot path.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Product = Literal[
    "ascend-950",
    "atlas-a3",
    "atlas-a2",
    "atlas-inference",
    "atlas-training",
    "atlas-200i-500-a2",
]

#: Official product names (the parts of an upstream ``<term>``, which joins several with
#: "/") → id.  Sub-series ("Atlas A3 推理系列产品") map to their family.
PRODUCT_OFFICIAL_NAMES: dict[str, Product] = {
    "Ascend 950PR": "ascend-950",
    "Ascend 950DT": "ascend-950",
    "Atlas A3 训练系列产品": "atlas-a3",
    "Atlas A3 推理系列产品": "atlas-a3",
    "Atlas A2 训练系列产品": "atlas-a2",
    "Atlas A2 推理系列产品": "atlas-a2",
    "Atlas 800I A2 推理产品": "atlas-a2",
    "A200I A2 Box 异构组件": "atlas-a2",
    "Atlas 推理系列产品": "atlas-inference",
    "Atlas 推理系列加速卡产品": "atlas-inference",
    "Atlas 训练系列产品": "atlas-training",
    "Atlas 200I/500 A2 推理产品": "atlas-200i-500-a2",
}

PRODUCT_LABELS: dict[Product, str] = {
    "ascend-950": "Ascend 950PR/950DT",
    "atlas-a3": "Atlas A3 training/inference series",
    "atlas-a2": "Atlas A2 training/inference series (800I A2, A200I A2 Box)",
    "atlas-inference": "Atlas inference series (300I Pro/Duo cards)",
    "atlas-training": "Atlas training series (910 first generation)",
    "atlas-200i-500-a2": "Atlas 200I/500 A2 inference",
}

PRODUCT_ALIASES: dict[str, Product] = {
    "a2": "atlas-a2",
    "atlas a2": "atlas-a2",
    "910b": "atlas-a2",
    "ascend910b": "atlas-a2",
    "800i a2": "atlas-a2",
    "atlas 800i a2": "atlas-a2",
    "a3": "atlas-a3",
    "atlas a3": "atlas-a3",
    "910c": "atlas-a3",
    "ascend910c": "atlas-a3",
    "910_93": "atlas-a3",
    "950": "ascend-950",
    "950pr": "ascend-950",
    "950dt": "ascend-950",
    "ascend 950": "ascend-950",
    "310p": "atlas-inference",
    "300i": "atlas-inference",
    "300i duo": "atlas-inference",
    "300i pro": "atlas-inference",
    "atlas 300i duo": "atlas-inference",
    "910": "atlas-training",
    "910a": "atlas-training",
    "ascend910": "atlas-training",
    "310b": "atlas-200i-500-a2",
}

Dtype = Literal[
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "int4",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "hifloat8",
    "float4_e2m1fn_x2",
    "float4_e1m2fn_x2",
    "quint4x2",
]

DTYPE_ALIASES: dict[str, Dtype] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
    "single": "float32",
    "double": "float64",
    "fp64": "float64",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "w4": "int4",
    "int4pack": "int4",
    "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "e4m3": "float8_e4m3fn",
    "float8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "e5m2": "float8_e5m2",
    "float8_e8m0": "float8_e8m0fnu",
    "e8m0": "float8_e8m0fnu",
    "hif8": "hifloat8",
    "fp4": "float4_e2m1fn_x2",
    "float4_e2m1": "float4_e2m1fn_x2",
    "float4_e1m2": "float4_e1m2fn_x2",
}

#: Bytes per element, used by the prefetch size calculator (int4 packs two per byte).
DTYPE_BYTES: dict[str, float] = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "int4": 0.5, "float16": 2, "bfloat16": 2, "float32": 4,
    "float64": 8, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e8m0fnu": 1, "hifloat8": 1, "float4_e2m1fn_x2": 1, "float4_e1m2fn_x2": 1,
    "quint4x2": 0.5,
}  # fmt: skip

Format = Literal[
    "ND",
    "FRACTAL_NZ",
    "NCHW",
    "NHWC",
    "NC1HWC0",
    "NCDHW",
    "NDHWC",
    "NDC1HWC0",
    "FRACTAL_Z",
    "FRACTAL_Z_3D",
    "HWCN",
    "NC",
    "NCL",
    "NC1HWC0_C04",
]

FORMAT_ALIASES: dict[str, Format] = {
    "nz": "FRACTAL_NZ",
    "fractal_nz": "FRACTAL_NZ",
    "acl_format_fractal_nz": "FRACTAL_NZ",
    "29": "FRACTAL_NZ",
    "2": "ND",
    "0": "NCHW",
    "1": "NHWC",
    "3": "NC1HWC0",
    "4": "FRACTAL_Z",
}

QuantScheme = Literal[
    "bf16",
    "fp16",
    "fp32",
    "w8a8",
    "w8a8-dynamic",
    "w8a8c8",
    "w8a16",
    "w4a16",
    "w4a8",
    "w4a4",
    "kv-int8",
    "kv-fp8",
    "kv-hif8",
    "fp8",
    "hif8",
    "mxfp8",
    "mxfp4",
]

QUANT_LABELS: dict[QuantScheme, str] = {
    "bf16": "no quantization, bfloat16 activations and weights",
    "fp16": "no quantization, float16 activations and weights",
    "fp32": "no quantization, float32",
    "w8a8": "int8 weights and int8 activations (static or per-token scales)",
    "w8a8-dynamic": "int8 weights, activations quantized per token at run time",
    "w8a8c8": "w8a8 plus an int8 KV cache",
    "w8a16": "int8 weights, 16-bit activations (weight-only)",
    "w4a16": "int4 weights, 16-bit activations (weight-only)",
    "w4a8": "int4 weights, int8 activations",
    "w4a4": "int4 weights and int4 activations",
    "kv-int8": "16-bit compute with an int8 KV cache",
    "kv-fp8": "16-bit compute with a float8 KV cache",
    "kv-hif8": "16-bit compute with a HiFloat8 KV cache",
    "fp8": "float8 (e4m3/e5m2) weights and activations",
    "hif8": "HiFloat8 weights and activations",
    "mxfp8": "microscaling float8 with e8m0 block scales",
    "mxfp4": "microscaling float4 with e8m0 block scales",
}

QUANT_ALIASES: dict[str, QuantScheme] = {
    "none": "bf16",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "w8a8_dynamic": "w8a8-dynamic",
    "w8a8dynamic": "w8a8-dynamic",
    "a8w8": "w8a8",
    "w8a8_c8": "w8a8c8",
    "w8a8-c8": "w8a8c8",
    "c8": "kv-int8",
    "kv_int8": "kv-int8",
    "a16w8": "w8a16",
    "a16w4": "w4a16",
    "hifloat8": "hif8",
    "float8": "fp8",
    "mx_fp8": "mxfp8",
    "mx_fp4": "mxfp4",
}

Phase = Literal["prefill", "decode", "training"]

PHASE_ALIASES: dict[str, Phase] = {
    "context": "prefill",
    "encode": "prefill",
    "incremental": "decode",
    "generate": "decode",
    "train": "training",
}

Status = Literal["stable", "beta", "deprecated", "undocumented"]

Category = Literal[
    "attention",
    "mla",
    "moe",
    "communication",
    "quantization",
    "matmul",
    "norm",
    "activation",
    "rope",
    "kv-cache",
    "sampling",
    "loss",
    "linear-attention",
    "memory",
    "format",
    "training",
    "vision",
    "utility",
]

#: The primitive computation steps an operator can fuse.  ``fuses`` lists them so that
#: "which operator fuses X + Y" is answerable from data.
Step = Literal[
    "add",
    "residual_add",
    "mul",
    "rms_norm",
    "layer_norm",
    "group_norm",
    "batch_norm",
    "rope",
    "mrope",
    "q_projection",
    "kv_projection",
    "down_projection",
    "up_projection",
    "matmul",
    "batch_matmul",
    "grouped_matmul",
    "transpose",
    "reshape",
    "concat",
    "attention",
    "flash_attention",
    "paged_attention",
    "sparse_attention",
    "linear_attention",
    "softmax",
    "masked_softmax",
    "mask",
    "dropout",
    "top_k",
    "top_p",
    "sampling",
    "gating",
    "sigmoid",
    "bias_add",
    "expert_routing",
    "token_permute",
    "token_unpermute",
    "expert_token_count",
    "finalize_routing",
    "shared_expert",
    "swiglu",
    "gelu",
    "silu",
    "activation",
    "quantize",
    "dynamic_quantize",
    "dequantize",
    "kv_cache_write",
    "kv_cache_read",
    "scatter",
    "gather",
    "index",
    "lightning_indexer",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "dispatch",
    "combine",
    "prefetch",
    "format_cast",
    "cross_entropy",
    "convolution",
    "nms",
    "iou",
    "roi",
    "optimizer",
    "state_update",
    "copy",
]

Kind = Literal["operator", "chain", "tree", "playbook"]

ALIAS_TABLES: dict[str, dict[str, str]] = {
    "product": dict(PRODUCT_ALIASES),
    "dtype": dict(DTYPE_ALIASES),
    "format": dict(FORMAT_ALIASES),
    "quantization": dict(QUANT_ALIASES),
    "phase": dict(PHASE_ALIASES),
}

CANONICAL: dict[str, tuple[str, ...]] = {
    "product": get_args(Product),
    "dtype": get_args(Dtype),
    "format": get_args(Format),
    "quantization": get_args(QuantScheme),
    "phase": get_args(Phase),
    "status": get_args(Status),
    "category": get_args(Category),
    "step": get_args(Step),
}

_FOLD = re.compile(r"[\s]+")


def _fold(value: str) -> str:
    text = value.strip().lower()
    if text.startswith("torch."):
        text = text[len("torch.") :]
    return _FOLD.sub(" ", text)


def normalize(vocab: str, value: object) -> str | None:
    """Return the canonical id for ``value`` in ``vocab``, or None when unknown.

    Case, surrounding space, a ``torch.`` prefix and ``-``/``_`` differences are
    ignored, so ``torch.bfloat16``, ``BF16`` and ``atlas_a3`` all resolve.
    """
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        return None
    text = str(value)
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


def product_from_official(name: str) -> Product | None:
    """Map an upstream ``<term>`` text to its id; every "/"-joined part must agree."""
    cleaned = " ".join(name.split())
    if cleaned in PRODUCT_OFFICIAL_NAMES:
        return PRODUCT_OFFICIAL_NAMES[cleaned]
    found = {PRODUCT_OFFICIAL_NAMES.get(part.strip()) for part in cleaned.split("/")}
    if len(found) == 1 and None not in found:
        return found.pop()
    return None
