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
    per-token scales of the same element type.  The ``*_scale`` texts say the granularity.
    ``aliases`` are the other spellings people type; a ``kv_modifier`` only changes the
    KV cache and may follow another scheme: ``mxfp8+kv-fp8``.
    """

    label: str
    weights: tuple[str, ...]
    weight_scale: str
    activations: tuple[str, ...]
    activation_scale: str
    kv_cache: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    kv_modifier: bool = False


SCHEMES: dict[str, SchemeDef] = {
    "bf16": SchemeDef("no quantization, bfloat16", ("bfloat16",), "-", ("bfloat16",), "-",
                      ("bfloat16",), ("none", "bfloat16")),
    "fp16": SchemeDef("no quantization, float16", ("float16",), "-", ("float16",), "-",
                      ("float16",), ("float16",)),
    "fp32": SchemeDef("no quantization, float32", ("float32",), "-", ("float32",), "-",
                      ("float32",), ("float32",)),
    "w8a8": SchemeDef("int8 weights, int8 activations with a static per-tensor scale",
                      ("int8",), "per channel", ("int8",), "per tensor, calibrated offline",
                      COMPUTE_DTYPES, ("a8w8",)),
    "w8a8-dynamic": SchemeDef("int8 weights, int8 activations quantized per token at run time",
                              ("int8",), "per channel", ("int8",),
                              "per token, computed at run time", COMPUTE_DTYPES,
                              ("w8a8_dynamic", "w8a8dynamic")),
    "w8a8c8": SchemeDef("w8a8-dynamic plus an int8 KV cache", ("int8",), "per channel",
                        ("int8",), "per token (or per tensor)", ("int8",),
                        ("w8a8_c8", "w8a8-c8")),
    "w8a16": SchemeDef("int8 weights, 16-bit activations (weight-only)", ("int8",),
                       "per channel or per group", COMPUTE_DTYPES, "-", COMPUTE_DTYPES, ("a16w8",)),
    "w4a16": SchemeDef("int4 weights, 16-bit activations (weight-only)", ("int4", "quint4x2"),
                       "per group", COMPUTE_DTYPES, "-", COMPUTE_DTYPES, ("a16w4",)),
    "w4a8": SchemeDef("int4 weights, int8 activations quantized per token", ("int4", "quint4x2"),
                      "per channel or per group", ("int8",), "per token, at run time", COMPUTE_DTYPES),
    "w4a4": SchemeDef("int4 weights and int4 activations", ("int4", "quint4x2"), "per channel",
                      ("int4", "quint4x2"), "per token, at run time", COMPUTE_DTYPES),
    "kv-int8": SchemeDef("16-bit compute with an int8 KV cache", COMPUTE_DTYPES, "-", COMPUTE_DTYPES, "-",
                         ("int8",), ("c8", "kv_int8"), kv_modifier=True),
    "kv-fp8": SchemeDef("16-bit compute with a float8 KV cache", COMPUTE_DTYPES, "-", COMPUTE_DTYPES, "-",
                        ("float8_e4m3fn", "float8_e5m2"), kv_modifier=True),
    "kv-hif8": SchemeDef("16-bit compute with a HiFloat8 KV cache", COMPUTE_DTYPES, "-", COMPUTE_DTYPES, "-",
                         ("hifloat8",), kv_modifier=True),
    "fp8": SchemeDef("float8 weights and activations with float32 scales",
                     ("float8_e4m3fn", "float8_e5m2"), "per channel (float32)",
                     ("float8_e4m3fn", "float8_e5m2"), "per token (float32)", COMPUTE_DTYPES,
                     ("float8",)),
    "hif8": SchemeDef("HiFloat8 weights and activations", ("hifloat8",), "per channel",
                      ("hifloat8",), "per token", COMPUTE_DTYPES, ("hifloat8",)),
    "mxfp8": SchemeDef("microscaling float8: blocks of 32 share a float8_e8m0 scale",
                       ("mx:float8_e4m3fn", "mx:float8_e5m2"), "block of 32, e8m0",
                       ("mx:float8_e4m3fn", "mx:float8_e5m2"), "block of 32, e8m0", COMPUTE_DTYPES,
                       ("mx_fp8",)),
    "mxfp4": SchemeDef("microscaling float4: blocks of 32 share a float8_e8m0 scale",
                       ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2"), "block of 32, e8m0",
                       ("mx:float4_e2m1fn_x2", "mx:float4_e1m2fn_x2", "mx:float8_e4m3fn"),
                       "block of 32, e8m0", COMPUTE_DTYPES, ("mx_fp4",)),
}  # fmt: skip

SCHEME_NAMES: tuple[str, ...] = tuple(SCHEMES)
if TYPE_CHECKING:
    QuantScheme = str
else:
    QuantScheme = Literal[SCHEME_NAMES]

#: KV-cache modifiers: ``mxfp8+kv-fp8`` is mxfp8 compute with a float8 cache.
KV_SCHEMES: tuple[QuantScheme, ...] = tuple(k for k, s in SCHEMES.items() if s.kv_modifier)
QUANT_LABELS: dict[QuantScheme, str] = {k: v.label for k, v in SCHEMES.items()}
QUANT_ALIASES: dict[str, QuantScheme] = {a: k for k, s in SCHEMES.items() for a in s.aliases}
