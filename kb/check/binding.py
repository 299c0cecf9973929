"""How a call binds to an operator's schema: Python keyword names and dtype values.

The torch_npu Python binding is generated from the schema but not identical to it: a
schema ``self`` is the keyword ``input`` (PyTorch's code generator renames it for
functions), and an ``int`` dtype argument accepts a ``torch.dtype``, a torch_npu dtype
constant or the integer code.  Binding a candidate rewrites what it states into the
record's terms once, so every rule compares like with like; positions keep pointing at
what the user wrote (``Document.aliases``).
"""

from __future__ import annotations

from typing import Any

from kb.catalog.binding import dtype_value, python_name, takes_dtype
from kb.lint.model import Candidate, Document

__all__ = ["bind", "dtype_value", "python_name", "takes_dtype"]


def bind(doc: Document, cand: Candidate, record: dict[str, Any]) -> None:
    """Rewrite ``cand``'s argument names and dtype values into the record's schema terms."""
    params = {p["name"]: p for p in record.get("parameters") or []}
    if not params:
        return
    by_python = {python_name(p): name for name, p in params.items() if python_name(p) != name}
    for section in ("args", "tensors"):
        given: dict[str, Any] = getattr(cand, section)
        for written in list(given):
            schema = by_python.get(written)
            if written in params or schema is None or schema in given:
                continue
            given[schema] = given.pop(written)
            doc.aliases[cand.path + (section, schema)] = cand.path + (section, written)
    cand.passed = {n if n in params else by_python.get(n, n) for n in cand.passed}
    for name, value in cand.args.items():
        param = params.get(name)
        if takes_dtype(param):
            cand.args[name] = dtype_value(param, value)  # type: ignore[arg-type]
