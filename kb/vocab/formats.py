"""Tensor storage formats: one row per format with its aliases and integer code.

``torch_npu.npu_format_cast(x, 29)`` and ``acl_format=29`` name formats by their
aclFormat code (the codes ``npu_format_cast``'s page lists for ``acl_format``).
``base`` marks the formats a tensor has without a cast: torch_npu treats a format as
a base format when its base format is itself (``FormatHelper::InitializeInfo`` and
``IsBaseFormatType`` in Ascend/pytorch ``torch_npu/csrc/framework/FormatHelper.cpp``
@fac22e95, lines 40-56 and 100-103): ND, NCHW, NHWC and NCDHW.  A tensor no
``npu_format_cast`` touched is in one of them, never in FRACTAL_NZ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class FormatDef(NamedTuple):
    """One storage format: canonical name, the other spellings, its aclFormat code,
    whether it is a base format (one a fresh tensor has)."""

    name: str
    aliases: tuple[str, ...] = ()
    code: int | None = None
    base: bool = False


FORMATS: tuple[FormatDef, ...] = (
    FormatDef("ND", code=2, base=True),
    FormatDef("FRACTAL_NZ", ("nz", "fractal_nz", "acl_format_fractal_nz"), 29),
    FormatDef("NCHW", code=0, base=True),
    FormatDef("NHWC", code=1, base=True),
    FormatDef("NC1HWC0", code=3),
    FormatDef("NCDHW", code=30, base=True),
    FormatDef("NDHWC", code=27),
    FormatDef("NDC1HWC0", code=32),
    FormatDef("FRACTAL_Z", code=4),
    FormatDef("FRACTAL_Z_3D", code=33),
    FormatDef("HWCN", code=16),
    FormatDef("NC", code=35),
    FormatDef("NCL", code=47),
    FormatDef("NC1HWC0_C04", code=12),
)

FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
if TYPE_CHECKING:
    Format = str
else:
    Format = Literal[FORMAT_NAMES]

#: Spellings (aliases and the code as text) → format.
FORMAT_ALIASES: dict[str, Format] = {
    **{a: f.name for f in FORMATS for a in f.aliases},
    **{str(f.code): f.name for f in FORMATS if f.code is not None},
}
#: The formats a tensor has before any cast (see the module docstring).
BASE_FORMATS: frozenset[str] = frozenset(f.name for f in FORMATS if f.base)
#: aclFormat code → format name.
FORMAT_CODES: dict[int, str] = {f.code: f.name for f in FORMATS if f.code is not None}
