"""Controlled vocabularies shared by records, the checker and the importer.

Each vocabulary is a ``Literal`` (so pydantic rejects unknown values and the JSON
Schema lists the allowed ones) plus an alias table that maps the spellings people and
upstream pages use to the canonical id.  Records must use canonical ids; user input
(candidate lists, CLI filters) goes through :func:`normalize`.

This module must stay import-light: ``kb show`` and ``kb check`` use it on the hot path.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple, get_args

Product = Literal[
    "ascend-950",
    "ascend-950pr",
    "ascend-950dt",
    "atlas-a3",
    "atlas-a3-training",
    "atlas-a3-inference",
    "atlas-a2",
    "atlas-a2-training",
    "atlas-a2-inference",
    "atlas-inference",
    "atlas-training",
    "atlas-200i-500-a2",
]

#: Sub-series → family.  A record listing the family supports every sub-series; one
#: listing a sub-series says exactly that (the upstream table named only it).
PRODUCT_FAMILY: dict[Product, Product] = {
    "ascend-950pr": "ascend-950",
    "ascend-950dt": "ascend-950",
    "atlas-a3-training": "atlas-a3",
    "atlas-a3-inference": "atlas-a3",
    "atlas-a2-training": "atlas-a2",
    "atlas-a2-inference": "atlas-a2",
}

#: Official product names (the parts of an upstream ``<term>``, which joins several with
#: "/") → id, at the precision the name has.  "Atlas 800I A2" and the A200I A2 Box are
#: members of the Atlas A2 inference series.
PRODUCT_OFFICIAL_NAMES: dict[str, Product] = {
    "Ascend 950PR": "ascend-950pr",
    "Ascend 950DT": "ascend-950dt",
    "Atlas A3 训练系列产品": "atlas-a3-training",
    "Atlas A3 推理系列产品": "atlas-a3-inference",
    "Atlas A2 训练系列产品": "atlas-a2-training",
    "Atlas A2 推理系列产品": "atlas-a2-inference",
    "Atlas 800I A2 推理产品": "atlas-a2-inference",
    "A200I A2 Box 异构组件": "atlas-a2-inference",
    "Atlas 推理系列产品": "atlas-inference",
    "Atlas 推理系列加速卡产品": "atlas-inference",
    "Atlas 训练系列产品": "atlas-training",
    "Atlas 200I/500 A2 推理产品": "atlas-200i-500-a2",
}

PRODUCT_LABELS: dict[Product, str] = {
    "ascend-950": "Ascend 950PR/950DT",
    "ascend-950pr": "Ascend 950PR",
    "ascend-950dt": "Ascend 950DT",
    "atlas-a3": "Atlas A3 training/inference series",
    "atlas-a3-training": "Atlas A3 training series",
    "atlas-a3-inference": "Atlas A3 inference series",
    "atlas-a2": "Atlas A2 training/inference series (800I A2, A200I A2 Box)",
    "atlas-a2-training": "Atlas A2 training series",
    "atlas-a2-inference": "Atlas A2 inference series (800I A2, A200I A2 Box)",
    "atlas-inference": "Atlas inference series (300I Pro/Duo cards)",
    "atlas-training": "Atlas training series (910 first generation)",
    "atlas-200i-500-a2": "Atlas 200I/500 A2 inference",
}

PRODUCT_ALIASES: dict[str, Product] = {
    "a2": "atlas-a2",
    "atlas a2": "atlas-a2",
    "910b": "atlas-a2",
    "ascend910b": "atlas-a2",
    "800i a2": "atlas-a2-inference",
    "atlas 800i a2": "atlas-a2-inference",
    "800t a2": "atlas-a2-training",
    "a2 training": "atlas-a2-training",
    "a2 inference": "atlas-a2-inference",
    "a3": "atlas-a3",
    "atlas a3": "atlas-a3",
    "910c": "atlas-a3",
    "ascend910c": "atlas-a3",
    "910_93": "atlas-a3",
    "a3 training": "atlas-a3-training",
    "a3 inference": "atlas-a3-inference",
    "950": "ascend-950",
    "a5": "ascend-950",
    "ascend 950": "ascend-950",
    "ascend950": "ascend-950",
    "950pr": "ascend-950pr",
    "950dt": "ascend-950dt",
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


def product_family(product: str) -> str:
    """The family id of a product (a family is its own family)."""
    return PRODUCT_FAMILY.get(product, product)  # type: ignore[call-overload,no-any-return]


def product_members(product: str) -> tuple[str, ...]:
    """The sub-series of a family id (empty for a sub-series or a product without any)."""
    return tuple(s for s, fam in PRODUCT_FAMILY.items() if fam == product)


def collapse_products(products: list[str]) -> list[str]:
    """Replace a complete set of sub-series by their family, keeping first-seen order."""
    out: list[str] = []
    for p in products:
        fam = product_family(p)
        members = product_members(fam)
        if fam != p and members and all(m in products or fam in products for m in members):
            p = fam
        if p not in out:
            out.append(p)
    return [p for p in out if not (product_family(p) != p and product_family(p) in out)]


def product_support(target: str, supported: list[str], unsupported: list[str] = ()) -> str:  # type: ignore[assignment]
    """How a record's product lists cover a target product.

    ``yes``: the target (or its family) is listed as supported; ``no``: the target (or
    its family, or every one of its sub-series) is listed as unsupported; ``partial``:
    the target is a family and only some of its sub-series are listed as supported;
    ``undocumented``: none of these — the tables say nothing about it.
    """
    fam = product_family(target)
    if target in supported or fam in supported:
        return "yes"
    members = product_members(target)
    if target in unsupported or fam in unsupported:
        return "no"
    if members and all(m in unsupported for m in members):
        return "no"
    if members and any(m in supported for m in members):
        return "partial"
    return "undocumented"


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
    "qint8",
    "quint8",
    "qint32",
    "complex32",
]

#: Integer codes an ``int`` dtype argument may carry, to the canonical dtype.  Below 256
#: they are c10::ScalarType values (``torch/headeronly/core/ScalarType.h`` of PyTorch);
#: from 256 they are torch_npu's own dtypes, ``aclDataType + 256`` (Ascend/pytorch
#: ``torch_npu/csrc/custom_dtype/Init.h``; the values below are the ones op-plugin's meta
#: registrations name, ``op_plugin/python/meta/_meta_registrations.py`` @517f2e7).
#: This is why ``dst_type=torch.float8_e4m3fn`` (24) and ``dst_type=292`` name one dtype.
DTYPE_CODES: dict[int, Dtype] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 12: "qint8",
    13: "quint8", 14: "qint32", 15: "bfloat16", 16: "quint4x2", 23: "float8_e5m2",
    24: "float8_e4m3fn", 27: "uint16", 28: "uint32", 29: "uint64", 44: "float8_e8m0fnu",
    45: "float4_e2m1fn_x2",
    285: "int4", 290: "hifloat8", 291: "float8_e5m2", 292: "float8_e4m3fn",
    293: "float8_e8m0fnu", 296: "float4_e2m1fn_x2", 297: "float4_e1m2fn_x2",
}  # fmt: skip

#: Python spellings of dtypes that name a constant rather than a torch dtype attribute.
DTYPE_CONSTANT_PREFIXES = ("torch_npu.", "torch.", "tnp.", "npu.")

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
    "float4_e2m1fn": "float4_e2m1fn_x2",
    "mxfp8": "float8_e4m3fn",
    "mxfp4": "float4_e2m1fn_x2",
    "char": "int8",
    "byte": "uint8",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
}

#: Bytes per element, used by the prefetch size calculator (int4 packs two per byte).
DTYPE_BYTES: dict[str, float] = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "int4": 0.5, "float16": 2, "bfloat16": 2, "float32": 4,
    "float64": 8, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e8m0fnu": 1, "hifloat8": 1, "float4_e2m1fn_x2": 1, "float4_e1m2fn_x2": 1,
    "quint4x2": 0.5, "qint8": 1, "quint8": 1, "qint32": 4, "complex32": 4,
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

QuantRole = Literal["weights", "activations", "kv_cache"]
QUANT_ROLES: tuple[QuantRole, ...] = ("weights", "activations", "kv_cache")

_COMPUTE = ("bfloat16", "float16")


class SchemeDef(NamedTuple):
    """One quantization scheme, defined once for every record and candidate list.

    Each role lists the element types it allows; ``mx:`` marks microscaling data (blocks
    of 32 sharing a float8_e8m0 scale), which needs other kernels than per-channel or
    per-token scales of the same element type.  The ``*_scale`` texts say the granularity.
    """

    label: str
    weights: tuple[str, ...]
    weight_scale: str
    activations: tuple[str, ...]
    activation_scale: str
    kv_cache: tuple[str, ...]


SCHEMES: dict[QuantScheme, SchemeDef] = {
    "bf16": SchemeDef("no quantization, bfloat16", ("bfloat16",), "-", ("bfloat16",), "-",
                      ("bfloat16",)),
    "fp16": SchemeDef("no quantization, float16", ("float16",), "-", ("float16",), "-",
                      ("float16",)),
    "fp32": SchemeDef("no quantization, float32", ("float32",), "-", ("float32",), "-",
                      ("float32",)),
    "w8a8": SchemeDef("int8 weights, int8 activations with a static per-tensor scale",
                      ("int8",), "per channel", ("int8",), "per tensor, calibrated offline",
                      _COMPUTE),
    "w8a8-dynamic": SchemeDef("int8 weights, int8 activations quantized per token at run time",
                              ("int8",), "per channel", ("int8",),
                              "per token, computed at run time", _COMPUTE),
    "w8a8c8": SchemeDef("w8a8-dynamic plus an int8 KV cache", ("int8",), "per channel",
                        ("int8",), "per token (or per tensor)", ("int8",)),
    "w8a16": SchemeDef("int8 weights, 16-bit activations (weight-only)", ("int8",),
                       "per channel or per group", _COMPUTE, "-", _COMPUTE),
    "w4a16": SchemeDef("int4 weights, 16-bit activations (weight-only)", ("int4", "quint4x2"),
                       "per group", _COMPUTE, "-", _COMPUTE),
    "w4a8": SchemeDef("int4 weights, int8 activations quantized per token", ("int4", "quint4x2"),
                      "per channel or per group", ("int8",), "per token, at run time", _COMPUTE),
    "w4a4": SchemeDef("int4 weights and int4 activations", ("int4", "quint4x2"), "per channel",
                      ("int4", "quint4x2"), "per token, at run time", _COMPUTE),
    "kv-int8": SchemeDef("16-bit compute with an int8 KV cache", _COMPUTE, "-", _COMPUTE, "-",
                         ("int8",)),
    "kv-fp8": SchemeDef("16-bit compute with a float8 KV cache", _COMPUTE, "-", _COMPUTE, "-",
                        ("float8_e4m3fn", "float8_e5m2")),
    "kv-hif8": SchemeDef("16-bit compute with a HiFloat8 KV cache", _COMPUTE, "-", _COMPUTE, "-",
                         ("hifloat8",)),
    "fp8": SchemeDef("float8 weights and activations with float32 scales",
                     ("float8_e4m3fn", "float8_e5m2"), "per channel (float32)",
                     ("float8_e4m3fn", "float8_e5m2"), "per token (float32)", _COMPUTE),
    "hif8": SchemeDef("HiFloat8 weights and activations", ("hifloat8",), "per channel",
                      ("hifloat8",), "per token", _COMPUTE),
    "mxfp8": SchemeDef("microscaling float8: blocks of 32 share a float8_e8m0 scale",
                       ("mx:float8_e4m3fn", "mx:float8_e5m2"), "block of 32, e8m0",
                       ("mx:float8_e4m3fn", "mx:float8_e5m2"), "block of 32, e8m0", _COMPUTE),
    "mxfp4": SchemeDef("microscaling float4: blocks of 32 share a float8_e8m0 scale",
                       ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2"), "block of 32, e8m0",
                       ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2", "mx:float8_e4m3fn"),
                       "block of 32, e8m0", _COMPUTE),
}  # fmt: skip

#: KV-cache modifiers: ``mxfp8+kv-fp8`` is mxfp8 compute with a float8 cache.
KV_SCHEMES: tuple[QuantScheme, ...] = ("kv-int8", "kv-fp8", "kv-hif8")

QUANT_LABELS: dict[QuantScheme, str] = {k: v.label for k, v in SCHEMES.items()}

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
    "clamp",
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


def products_from_official(name: str) -> list[Product] | None:
    """Ids for an upstream ``<term>`` text ("/"-joined names), None if a part is unknown.

    A complete set of sub-series collapses to the family: "Atlas A2 训练系列产品/Atlas A2
    推理系列产品" is ``[atlas-a2]``, "Atlas A2 训练系列产品" alone is ``[atlas-a2-training]``.
    """
    cleaned = " ".join(name.split())
    if cleaned in PRODUCT_OFFICIAL_NAMES:
        return [PRODUCT_OFFICIAL_NAMES[cleaned]]
    found: list[str] = []
    for part in cleaned.split("/"):
        pid = PRODUCT_OFFICIAL_NAMES.get(part.strip())
        if pid is None:
            return None
        found.append(pid)
    return collapse_products(found)  # type: ignore[return-value]


def product_from_official(name: str) -> Product | None:
    """The single id an upstream ``<term>`` text stands for (None if unknown or several)."""
    found = products_from_official(name)
    if found is None:
        return None
    fams = {product_family(p) for p in found}
    if len(found) == 1:
        return found[0]
    return fams.pop() if len(fams) == 1 else None  # type: ignore[return-value]


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


def quantized_roles(expr: str) -> set[str]:
    """The roles a scheme expression quantizes (element types other than 16/32-bit float)."""
    roles = scheme_roles(expr) or {}
    plain = {"bfloat16", "float16", "float32"}
    return {r for r, types in roles.items() if not set(types) <= plain}


def schemes_compatible(model: str, mode: str, roles: set[str] | list[str] | tuple[str, ...],
                       *, partial: bool = False) -> bool:  # fmt: skip
    """Can an operator mode (scheme ``mode``) run in a model quantized as ``model``?

    Only the ``roles`` the operator handles are compared: a gate in a w8a8 model reads
    no quantized tensor, an attention core only the KV cache.  A ``partial`` mode
    quantizes some of its weights and leaves the others 16-bit.
    """
    want, have = scheme_roles(model), scheme_roles(mode)
    if want is None or have is None:
        return False
    for role in roles:
        offered = set(have[role])
        if partial and role == "weights":
            offered |= set(_COMPUTE)
        if not offered & set(want[role]):
            return False
    return True
