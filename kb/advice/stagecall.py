"""A chain stage as the call a port writes: every required argument, and what is set.

A stage names literal values (``args``) and runtime expressions (``passed``); the
operator record knows the signature.  Together they give a call line such as
``torch_npu.npu_rms_norm(x, gamma, epsilon=eps)``: required positional parameters in
schema order (a parameter the stage does not spell is shown by its own name), then
every other argument the stage sets, by keyword.  Works on the plain record dicts of
:mod:`kb.catalog.compiled` (no pydantic) so ``kb advise`` stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Text values that are Python names rather than strings (``torch.int32``).
_PYTHON_NAME = re.compile(r"^(torch|torch_npu)(\.[A-Za-z_][A-Za-z0-9_]*)+$")


@dataclass(frozen=True)
class Argument:
    """One argument of the call line; ``given`` says where its value comes from."""

    name: str
    value: str
    given: str  # "literal" | "expression" | "placeholder"
    positional: bool

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "given": self.given}


def literal(value: Any) -> str:
    """A YAML literal as Python source: strings quoted, torch names bare, lists bracketed."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, str):
        return value if _PYTHON_NAME.match(value) else repr(value)
    return repr(value)


def _required(param: Mapping[str, Any]) -> bool:
    return bool(param.get("required", True)) and not str(param.get("type", "")).endswith("?")


def arguments(stage: Mapping[str, Any], record: Mapping[str, Any] | None) -> list[Argument]:
    """The call's arguments: required ones in schema order, then the ones the stage sets."""
    args: Mapping[str, Any] = stage.get("args") or {}
    passed: Mapping[str, str] = stage.get("passed") or {}
    params = list((record or {}).get("parameters") or [])
    out: list[Argument] = []
    seen: set[str] = set()
    positional_open = True
    for p in params:
        name = p["name"]
        if name in args:
            value, given = literal(args[name]), "literal"
        elif name in passed:
            value, given = passed[name], "expression"
        elif _required(p) and p.get("default") is None:
            value, given = name, "placeholder"
        else:
            if not p.get("keyword_only"):
                positional_open = False  # a skipped positional ends the positional run
            continue
        positional = positional_open and not p.get("keyword_only") and _required(p)
        positional_open = positional
        out.append(Argument(name, value, given, positional))
        seen.add(name)
    # names the record does not know (the cross-check reports them)
    for name, value in args.items():
        if name not in seen:
            out.append(Argument(name, literal(value), "literal", False))
    for name, expr in passed.items():
        if name not in seen and name not in args:
            out.append(Argument(name, expr, "expression", False))
    return out


def call_path(stage: Mapping[str, Any], record: Mapping[str, Any] | None) -> str:
    """The record's first call path, with the overload the stage names (``op.out``)."""
    calls = list((record or {}).get("calls") or [])
    path = str(calls[0]) if calls else f"torch_npu.{stage['operator']}"
    return f"{path}.{stage['overload']}" if stage.get("overload") else path


def call_line(stage: Mapping[str, Any], record: Mapping[str, Any] | None) -> str:
    """``torch_npu.op(pos, …, key=value, …)`` for an operator stage; the torch code otherwise."""
    if stage.get("operator") == "plain-torch":
        return str(stage.get("torch") or "")
    parts = [a.value if a.positional else f"{a.name}={a.value}" for a in arguments(stage, record)]
    return f"{call_path(stage, record)}({', '.join(parts)})"
