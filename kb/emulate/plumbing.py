"""The device plumbing a port calls around the fused operators, as CPU identities.

``npu_format_cast`` returns a copy and remembers the format it asked for (per storage,
so ``w.data = npu_format_cast(w.data, 29)`` and views keep it); ``npu_format_cast_``
remembers it on the tensor itself; ``get_npu_format`` reads it back (ND for a tensor
never cast); ``empty_with_format`` allocates on the CPU; the graph-capture workspace
helpers return a one-element tensor, since the emulated kernels need no workspace.
Which operators these are is :data:`kb.emulate.names.PLUMBING`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from kb.catalog.signature import Schema
from kb.emulate.names import PLUMBING

if TYPE_CHECKING:
    from kb.emulate.runtime import Runtime

#: What get_npu_format reports for a tensor never cast (a base format; see kb.vocab).
ND = 2


def handles(name: str) -> bool:
    return name in PLUMBING


def _code(value: Any) -> int:
    return int(value)


def _format_cast(rt: Runtime, schema: Schema, a: dict[str, Any]) -> torch.Tensor:
    src = a["self"]
    code = rt.formats.code(a["dst"]) if schema.overload == "Tensor" else _code(a["acl_format"])
    out = src.detach().clone()
    rt.formats.remember(out, code if code is not None else ND)
    return out


def _format_cast_(rt: Runtime, schema: Schema, a: dict[str, Any]) -> torch.Tensor:
    t = a["self"]
    code = _code(a["acl_format"]) if schema.overload == "acl_format" else rt.formats.code(a["src"])
    rt.formats.remember(t, code if code is not None else ND)
    return t  # type: ignore[no-any-return]


def _get_format(rt: Runtime, schema: Schema, a: dict[str, Any]) -> Any:
    from kb.emulate.module import Format

    code = rt.formats.code(a["self"])
    code = ND if code is None else code
    return Format(code) if code in Format._value2member_map_ else code


def _empty(rt: Runtime, schema: Schema, a: dict[str, Any]) -> torch.Tensor:
    dtype = a.get("dtype")
    out = torch.empty(list(a["size"]), dtype=_torch_dtype(dtype))
    rt.formats.remember(out, _code(a.get("acl_format", ND)))
    return out


def _torch_dtype(value: Any) -> torch.dtype | None:
    if value is None or isinstance(value, torch.dtype):
        return value
    named = getattr(torch, str(value).removeprefix("torch."), None)
    return named if isinstance(named, torch.dtype) else None


def _workspace(rt: Runtime, schema: Schema, a: dict[str, Any]) -> torch.Tensor:
    query = a.get("query")
    dtype = query.dtype if isinstance(query, torch.Tensor) else torch.uint8
    return torch.zeros(1, dtype=dtype)


_HANDLERS = {
    "npu_format_cast": _format_cast,
    "npu_format_cast_": _format_cast_,
    "get_npu_format": _get_format,
    "empty_with_format": _empty,
}


def run(rt: Runtime, rec: dict[str, Any], schema: Schema, args: dict[str, Any]) -> Any:
    """The plumbing operator ``rec`` on bound ``args`` (schema name → value)."""
    handler = _HANDLERS.get(rec["name"], _workspace)
    return handler(rt, schema, args)
