"""Tensor element types: one row per dtype with its codes, size, and every spelling.

Records name dtypes by their canonical name; Python code names them as ``torch.X`` or
``torch_npu.X`` attributes or by integer code; people type short forms (``bf16``).
The lookup tables used elsewhere (codes, sizes, aliases, the attribute names torch and
torch_npu define) are all derived from :data:`DTYPES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class DtypeDef(NamedTuple):
    """One element type.

    ``codes`` are the integers an ``int`` dtype argument may carry.  Below 256 they are
    c10::ScalarType values (``torch/headeronly/core/ScalarType.h`` of PyTorch); from 256
    they are torch_npu's own dtypes, ``aclDataType + 256`` (Ascend/pytorch
    ``torch_npu/csrc/custom_dtype/Init.h``; the values are the ones op-plugin's meta
    registrations name, ``op_plugin/python/meta/_meta_registrations.py`` @517f2e7).
    This is why ``dst_type=torch.float8_e4m3fn`` (24) and ``dst_type=292`` name one dtype.

    ``size`` is bytes per element (int4 packs two per byte).  ``in_torch`` and
    ``in_torch_npu`` say whether ``torch.<name>`` / ``torch_npu.<name>`` is a dtype
    constant (torch_npu: ``torch_npu/csrc/custom_dtype/Init.cpp``); ``torch_aliases``
    are torch's other attribute names for it (``torch.half``), ``aliases`` the other
    spellings people type.  ``short`` is the compact label advice prints.  A dtype
    with ``recorded=False`` is a constant torch_npu defines that no record names yet:
    the scanner recognises it, records and candidate lists may not use it.
    """

    name: str
    size: float
    codes: tuple[int, ...] = ()
    in_torch: bool = True
    in_torch_npu: bool = True
    torch_aliases: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    short: str | None = None
    recorded: bool = True


DTYPES: tuple[DtypeDef, ...] = (
    DtypeDef("bool", 1, (11,)),
    DtypeDef("uint8", 1, (0,), aliases=("byte",)),
    DtypeDef("int8", 1, (1,), aliases=("char",)),
    DtypeDef("int16", 2, (2,), torch_aliases=("short",)),
    DtypeDef("uint16", 2, (27,)),
    DtypeDef("int32", 4, (3,), torch_aliases=("int",)),
    DtypeDef("uint32", 4, (28,)),
    DtypeDef("int64", 8, (4,), torch_aliases=("long",)),
    DtypeDef("uint64", 8, (29,)),
    DtypeDef("int4", 0.5, (285,), in_torch=False, aliases=("w4", "int4pack")),
    DtypeDef("float16", 2, (5,), torch_aliases=("half",), aliases=("fp16",), short="fp16"),
    DtypeDef("bfloat16", 2, (15,), aliases=("bf16",), short="bf16"),
    DtypeDef(
        "float32", 4, (6,), torch_aliases=("float",), aliases=("fp32", "single"), short="fp32"
    ),
    DtypeDef("float64", 8, (7,), torch_aliases=("double",), aliases=("fp64",), short="fp64"),
    DtypeDef("complex64", 8, (9,), torch_aliases=("cfloat",)),
    DtypeDef("complex128", 16, (10,), torch_aliases=("cdouble",)),
    DtypeDef(
        "float8_e4m3fn",
        1,
        (24, 292),
        aliases=("fp8", "fp8_e4m3", "e4m3", "float8_e4m3", "mxfp8"),
        short="fp8e4m3",
    ),
    DtypeDef("float8_e5m2", 1, (23, 291), aliases=("fp8_e5m2", "e5m2"), short="fp8e5m2"),
    DtypeDef("float8_e8m0fnu", 1, (44, 293), aliases=("float8_e8m0", "e8m0"), short="e8m0"),
    DtypeDef("hifloat8", 1, (290,), in_torch=False, aliases=("hif8",), short="hif8"),
    DtypeDef(
        "float4_e2m1fn_x2", 1, (45, 296), aliases=("fp4", "float4_e2m1", "float4_e2m1fn", "mxfp4")
    ),
    DtypeDef("float4_e1m2fn_x2", 1, (297,), in_torch=False, aliases=("float4_e1m2",)),
    DtypeDef("quint4x2", 0.5, (16,), in_torch_npu=False),
    DtypeDef("qint8", 1, (12,), in_torch_npu=False),
    DtypeDef("quint8", 1, (13,), in_torch_npu=False),
    DtypeDef("qint32", 4, (14,), in_torch_npu=False),
    DtypeDef("complex32", 4, (8,), torch_aliases=("chalf",)),
    DtypeDef("uint1", 0.125, in_torch=False, recorded=False),
    DtypeDef("float6_e3m2", 0.75, in_torch=False, recorded=False),
    DtypeDef("float6_e2m3", 0.75, in_torch=False, recorded=False),
)

DTYPE_NAMES: tuple[str, ...] = tuple(d.name for d in DTYPES if d.recorded)
if TYPE_CHECKING:
    Dtype = str
else:
    Dtype = Literal[DTYPE_NAMES]

#: Integer code of a dtype argument → canonical dtype (see :class:`DtypeDef`).
DTYPE_CODES: dict[int, Dtype] = dict(sorted((c, d.name) for d in DTYPES for c in d.codes))
#: Python spellings of dtypes that name a constant rather than a torch dtype attribute.
DTYPE_CONSTANT_PREFIXES = ("torch_npu.", "torch.", "tnp.", "npu.")
DTYPE_ALIASES: dict[str, Dtype] = {
    a: d.name for d in DTYPES if d.recorded for a in (*d.torch_aliases, *d.aliases)
}
#: Bytes per element, used by the prefetch size calculator (int4 packs two per byte).
DTYPE_BYTES: dict[str, float] = {d.name: d.size for d in DTYPES if d.recorded}
#: The compact label advice prints for a dtype (``bf16``); absent: print the name.
DTYPE_SHORT: dict[str, str] = {d.name: d.short for d in DTYPES if d.short}
#: ``torch.<attr>`` names that are dtypes (canonical names plus torch.half, torch.float …).
TORCH_DTYPE_ATTRS: frozenset[str] = frozenset(
    n for d in DTYPES for n in ((d.name,) if d.in_torch else ()) + d.torch_aliases
)
#: ``torch_npu.<attr>`` names that are dtype constants.
TORCH_NPU_DTYPE_ATTRS: frozenset[str] = frozenset(d.name for d in DTYPES if d.in_torch_npu)
