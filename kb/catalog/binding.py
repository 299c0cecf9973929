"""How the torch_npu Python binding names a schema's parameters and reads dtype values.

The binding is generated from the schema but not identical to it: a schema ``self`` is
the keyword ``input`` (PyTorch's code generator renames it for functions), and an
``int`` dtype argument accepts a ``torch.dtype``, a torch_npu dtype constant or the
integer code.  Record validation, the candidate-list checker and the scanner all ask
these questions, so they live beside the record contract.
"""

from __future__ import annotations

from typing import Any

from kb.vocab import normalize


def python_name(param: dict[str, Any]) -> str:
    """The keyword the torch_npu binding accepts for a schema parameter."""
    explicit = param.get("python_name")
    if explicit:
        return str(explicit)
    return "input" if param.get("name") == "self" else str(param.get("name"))


def takes_dtype(param: dict[str, Any] | None) -> bool:
    return bool(param) and param.get("takes") == "dtype"  # type: ignore[union-attr]


def dtype_value(param: dict[str, Any], value: object) -> object:
    """The canonical dtype a value names for a dtype argument, else the value unchanged."""
    if value is None or isinstance(value, (list, bool)):
        return value
    canon = normalize("dtype", value)
    return canon if canon is not None else value
