"""Bind a call's arguments the way the torch_npu binding does, from the operator record.

Names, order, keyword-only marks and defaults are read from the record's ``parameters``
(the schema facts), never retyped here: a reference function receives a dict keyed by
schema name with every default filled in.
"""

from __future__ import annotations

import ast
from typing import Any

from kb.catalog.binding import python_name
from kb.reference.errors import ReferenceInputError

Record = dict[str, Any]


def parse_default(literal: str | None) -> Any:
    """The Python value of a schema default literal (``1e-06``, ``'half'``, ``[]``, ``None``)."""
    if literal is None:
        return None
    text = literal.strip()
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    if text.endswith(".") and text[:-1].lstrip("-").isdigit():  # "1." in a schema
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def bind(rec: Record, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Schema name -> value for a call ``op(*args, **kwargs)``; defaults filled in."""
    params = rec.get("parameters") or []
    name = rec["name"]
    positional = [p for p in params if not p.get("keyword_only")]
    if len(args) > len(positional):
        raise ReferenceInputError(
            f"{name} takes at most {len(positional)} positional arguments ({len(args)} given)"
        )
    by_keyword = {python_name(p): p for p in params}
    out: dict[str, Any] = {}
    for p, value in zip(positional, args, strict=False):
        out[p["name"]] = value
    for key, value in kwargs.items():
        p = by_keyword.get(key)
        if p is None:
            raise ReferenceInputError(
                f"{name} has no parameter {key!r}; it takes {', '.join(by_keyword)}"
            )
        if p["name"] in out:
            raise ReferenceInputError(f"{name} got {key!r} twice")
        out[p["name"]] = value
    for p in params:
        if p["name"] in out:
            continue
        if p.get("required", True):
            raise ReferenceInputError(f"{name} needs {python_name(p)!r}")
        out[p["name"]] = parse_default(p.get("default"))
    return out
