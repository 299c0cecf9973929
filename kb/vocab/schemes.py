"""Quantization schemes: one row per scheme, defined once for records and candidate lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple

QuantRole = Literal["weights", "activations", "kv_cache"]
QUANT_ROLES: tuple[QuantRole, ...] = ("weights", "activations", "kv_cache")

#: The 16-bit compute dtypes a quantized scheme keeps for what it does not quantize.
COMPUTE_DTYPES = ("bfloat16", "float16")


class SchemeDef(NamedTuple):
    """One quantization scheme, defined once for every record and candidate list.

    Each role lists the element types it allows; ``mx:`` marks microscaling data (blocks
    of 32 sharing a float8_e8m0 scale), which needs other kernels than per-channel or
    per-token scales of the same element type.  The ``*_scale`` texts say the granularity;
    ``timing`` says when the activation scale is made: ``static`` (calibrated offline,
    one value per tensor or channel) or ``dynamic`` (computed per token at run time), the
    one difference between ``w8a8-static`` and ``w8a8-dynamic``.
    ``aliases`` are the other spellings people type for this scheme alone; ``shared`` are
    spellings people use for this scheme *and* another one (``w8a8``: vLLM-Ascend's
    checkpoint type ``W8A8`` is the static scheme, ``W8A8_DYNAMIC`` the per-token one -
    vllm-project/vllm-ascend@182b75ea84 vllm_ascend/quantization/methods/w8a8_static.py:32,
    w8a8_dynamic.py:51 - while port write-ups say W8A8 for either), so they resolve
    to no scheme and the message names every scheme that lists them.  A ``kv_modifier``
    only changes the KV cache and may follow another scheme: ``mxfp8+kv-fp8``.
    """

    label: str
    weights: tuple[str, ...]
    weight_scale: str
    activations: tuple[str, ...]
    activation_scale: str
    kv_cache: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    kv_modifier: bool = False
    timing: Literal["static", "dynamic", ""] = ""
    shared: tuple[str, ...] = ()


SCHEMES: dict[str, SchemeDef] = {
    "bf16": SchemeDef(
        "no quantization, bfloat16",
        ("bfloat16",),
        "-",
        ("bfloat16",),
        "-",
        ("bfloat16",),
        ("none", "bfloat16"),
    ),
    "fp16": SchemeDef(
        "no quantization, float16", ("float16",), "-", ("float16",), "-", ("float16",), ("float16",)
    ),
    "fp32": SchemeDef(
        "no quantization, float32", ("float32",), "-", ("float32",), "-", ("float32",), ("float32",)
    ),
    "w8a8-static": SchemeDef(
        "int8 weights, int8 activations with a calibrated (static) scale",
        ("int8",),
        "per channel",
        ("int8",),
        "per tensor (or per channel), calibrated offline",
        COMPUTE_DTYPES,
        ("w8a8_static", "w8a8static", "w8a8-per-tensor"),
        timing="static",
        shared=("w8a8", "a8w8", "int8"),
    ),
    "w8a8-dynamic": SchemeDef(
        "int8 weights, int8 activations quantized per token at run time",
        ("int8",),
        "per channel",
        ("int8",),
        "per token, computed at run time",
        COMPUTE_DTYPES,
        ("w8a8_dynamic", "w8a8dynamic", "w8a8-per-token"),
        timing="dynamic",
        shared=("w8a8", "a8w8", "int8"),
    ),
    "w8a8c8": SchemeDef(
        "w8a8-dynamic plus an int8 KV cache",
        ("int8",),
        "per channel",
        ("int8",),
        "per token, computed at run time",
        ("int8",),
        ("w8a8_c8", "w8a8-c8"),
        timing="dynamic",
    ),
    "w8a16": SchemeDef(
        "int8 weights, 16-bit activations (weight-only)",
        ("int8",),
        "per channel or per group",
        COMPUTE_DTYPES,
        "-",
        COMPUTE_DTYPES,
        ("a16w8",),
        shared=("int8",),
    ),
    "w4a16": SchemeDef(
        "int4 weights, 16-bit activations (weight-only)",
        ("int4", "quint4x2"),
        "per group",
        COMPUTE_DTYPES,
        "-",
        COMPUTE_DTYPES,
        ("a16w4",),
    ),
    "w4a8": SchemeDef(
        "int4 weights, int8 activations quantized per token",
        ("int4", "quint4x2"),
        "per channel or per group",
        ("int8",),
        "per token, at run time",
        COMPUTE_DTYPES,
        timing="dynamic",
    ),
    "w4a4": SchemeDef(
        "int4 weights and int4 activations",
        ("int4", "quint4x2"),
        "per channel",
        ("int4", "quint4x2"),
        "per token, at run time",
        COMPUTE_DTYPES,
    ),
    "kv-int8": SchemeDef(
        "16-bit compute with an int8 KV cache",
        COMPUTE_DTYPES,
        "-",
        COMPUTE_DTYPES,
        "-",
        ("int8",),
        ("c8", "kv_int8"),
        kv_modifier=True,
    ),
    "kv-fp8": SchemeDef(
        "16-bit compute with a float8 KV cache",
        COMPUTE_DTYPES,
        "-",
        COMPUTE_DTYPES,
        "-",
        ("float8_e4m3fn", "float8_e5m2"),
        kv_modifier=True,
    ),
    "kv-hif8": SchemeDef(
        "16-bit compute with a HiFloat8 KV cache",
        COMPUTE_DTYPES,
        "-",
        COMPUTE_DTYPES,
        "-",
        ("hifloat8",),
        kv_modifier=True,
    ),
    "fp8": SchemeDef(
        "float8 weights and activations with float32 scales",
        ("float8_e4m3fn", "float8_e5m2"),
        "per channel (float32)",
        ("float8_e4m3fn", "float8_e5m2"),
        "per token (float32)",
        COMPUTE_DTYPES,
        ("float8",),
    ),
    "hif8": SchemeDef(
        "HiFloat8 weights and activations",
        ("hifloat8",),
        "per channel",
        ("hifloat8",),
        "per token",
        COMPUTE_DTYPES,
        ("hifloat8",),
    ),
    "mxfp8": SchemeDef(
        "microscaling float8: blocks of 32 share a float8_e8m0 scale",
        ("mx:float8_e4m3fn", "mx:float8_e5m2"),
        "block of 32, e8m0",
        ("mx:float8_e4m3fn", "mx:float8_e5m2"),
        "block of 32, e8m0",
        COMPUTE_DTYPES,
        ("mx_fp8",),
    ),
    "mxfp4": SchemeDef(
        "microscaling float4: blocks of 32 share a float8_e8m0 scale",
        ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2"),
        "block of 32, e8m0",
        ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2", "mx:float8_e4m3fn"),
        "block of 32, e8m0",
        COMPUTE_DTYPES,
        ("mx_fp4",),
    ),
}

SCHEME_NAMES: tuple[str, ...] = tuple(SCHEMES)
#: The decision-tree key (``kb advise TREE --quant``) whose option values are scheme ids.
SCHEME_FLAG = "quant"
if TYPE_CHECKING:
    QuantScheme = str
else:
    QuantScheme = Literal[SCHEME_NAMES]

#: KV-cache modifiers: ``mxfp8+kv-fp8`` is mxfp8 compute with a float8 cache.
KV_SCHEMES: tuple[QuantScheme, ...] = tuple(k for k, s in SCHEMES.items() if s.kv_modifier)
QUANT_LABELS: dict[QuantScheme, str] = {k: v.label for k, v in SCHEMES.items()}
QUANT_ALIASES: dict[str, QuantScheme] = {a: k for k, s in SCHEMES.items() for a in s.aliases}
#: Spellings that name more than one scheme (``w8a8``) → every scheme they may mean.
AMBIGUOUS_SCHEMES: dict[str, tuple[QuantScheme, ...]] = {
    a: tuple(k for k, s in SCHEMES.items() if a in s.shared)
    for a in dict.fromkeys(a for s in SCHEMES.values() for a in s.shared)
}
