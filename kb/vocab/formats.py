"""Tensor storage formats: one row per format with its aliases and integer code.

``torch_npu.npu_format_cast(x, 29)`` and ``acl_format=29`` name formats by their
aclFormat code; only the codes operator records and candidate lists use are listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class FormatDef(NamedTuple):
    """One storage format: canonical name, the other spellings, its aclFormat code."""

    name: str
    aliases: tuple[str, ...] = ()
    code: int | None = None


FORMATS: tuple[FormatDef, ...] = (
    FormatDef("ND", code=2),
    FormatDef("FRACTAL_NZ", ("nz", "fractal_nz", "acl_format_fractal_nz"), 29),
    FormatDef("NCHW", code=0),
    FormatDef("NHWC", code=1),
    FormatDef("NC1HWC0", code=3),
    FormatDef("NCDHW"),
    FormatDef("NDHWC"),
    FormatDef("NDC1HWC0"),
    FormatDef("FRACTAL_Z", code=4),
    FormatDef("FRACTAL_Z_3D"),
    FormatDef("HWCN"),
    FormatDef("NC"),
    FormatDef("NCL"),
    FormatDef("NC1HWC0_C04"),
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
