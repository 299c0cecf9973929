"""The ``max_size`` calculator for ``npu_prefetch``, driven by the prefetch playbook.

Formulas, the conservative factor and the tuning ladder are data in the playbook record
(``kb/records/playbooks/prefetch.yaml``); this module only evaluates them.  Changing a
formula therefore never needs a code change, and the numbers printed by ``kb
prefetch-size`` are the ones the site and the checker show.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PLAYBOOK = "prefetch"

#: Which playbook formula answers which kind of input (ids are stable record data).
FORMULA_SHAPE = "dense"
FORMULA_SQUARE = "dense-square"
FORMULA_HIDDEN_INTERMEDIATE = "dense-hidden-intermediate"
FORMULA_GATE_UP = "dense-gate-up"
FORMULA_GMM = {1: "moe-gmm1", 2: "moe-gmm2"}
#: Optional upper bounds: what the window can move, and what L2 can hold.
CAP_WINDOW = "window-cap"
CAP_L2 = "l2-cap"


class SizeInputError(ValueError):
    """Inputs that cannot be sized; the message says which flag and why."""


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}


def evaluate(formula: str, variables: Mapping[str, float]) -> float:
    """Evaluate an arithmetic formula from a record: numbers, names, + - * / // and ().

    Anything else (calls, attributes, powers) is rejected, so a record can never run code.
    """
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError as exc:
        raise SizeInputError(f"formula {formula!r} does not parse: {exc.msg}") from None

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in variables:
                raise SizeInputError(f"formula {formula!r} needs {node.id!r}, which was not given")
            return variables[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv)) and right == 0:
                raise SizeInputError(f"formula {formula!r} divides by zero")
            result: float = _BINOPS[type(node.op)](left, right)
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise SizeInputError(f"formula {formula!r} uses something other than + - * / // ()")

    return ev(tree)


_SHAPE_SPLIT = re.compile(r"\s*[x×*,]\s*", re.IGNORECASE)


def parse_shape(text: str) -> list[int]:
    """``7168x18432``, ``7168*18432``, ``[7168, 18432]`` → ``[7168, 18432]``."""
    body = text.strip().strip("[]()").strip()
    parts = _SHAPE_SPLIT.split(body) if body else []
    if not parts:
        raise SizeInputError(f"--shape {text!r} is empty; write it like 7168x18432")
    if "" in parts:  # 7168x, x7168, 7168xx18432: a dimension left out
        raise SizeInputError(f"--shape {text!r} has an empty dimension; write it like 7168x18432")
    dims = []
    for part in parts:
        if not part.isdecimal() or len(part) > 15 or int(part) <= 0:
            shown = text if len(text) <= 40 else text[:37] + "..."
            part = part if len(part) <= 20 else part[:17] + "..."
            raise SizeInputError(
                f"--shape {shown!r}: {part!r} is not a positive whole number; write it like 7168x18432"
            )
        dims.append(int(part))
    return dims


def dtype_bytes(name: str) -> tuple[str, float]:
    """Canonical dtype and its bytes per element (aliases such as bf16 or int8 accepted)."""
    from kb.vocab import CANONICAL, DTYPE_BYTES, normalize

    canon = normalize("dtype", name)
    if canon is None or canon not in DTYPE_BYTES:
        common = "bf16, fp16, fp32, int8, int4, fp8"
        raise SizeInputError(
            f"--dtype {name!r} is not a known dtype (e.g. {common}; all: "
            f"{', '.join(CANONICAL['dtype'])})"
        )
    return canon, DTYPE_BYTES[canon]


@dataclass(frozen=True)
class Size:
    """One computed prefetch size: theoretical bytes, the start value and the ladder."""

    label: str
    formula_id: str
    formula: str
    applies_to: str
    inputs: dict[str, float]
    dtype: str
    dtype_bytes: float
    theoretical: int
    factor: float
    max_size: int
    ladder: list[tuple[float, int]] = field(default_factory=list)
    caps: list[Cap] = field(default_factory=list)
    uncapped: int | None = None

    @property
    def limited_by(self) -> str | None:
        """The cap that set max_size, when one is below the factor's size."""
        if self.uncapped is None or not self.caps:
            return None
        low = min(self.caps, key=lambda c: c.bytes)
        return low.formula_id if low.bytes < self.uncapped else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "formula": {
                "id": self.formula_id,
                "expression": self.formula,
                "applies_to": self.applies_to,
            },
            "inputs": {k: _plain(v) for k, v in self.inputs.items()},
            "dtype": self.dtype,
            "dtype_bytes": _plain(self.dtype_bytes),
            "theoretical_bytes": self.theoretical,
            "factor": self.factor,
            "max_size": self.max_size,
            "human": {"theoretical": human(self.theoretical), "max_size": human(self.max_size)},
            "ladder": [{"factor": f, "max_size": b} for f, b in self.ladder],
            "tp": _plain(self.inputs.get("tp", 1)),
            "caps": [c.as_dict() for c in self.caps],
            "uncapped_max_size": self.uncapped if self.uncapped is not None else self.max_size,
            "limited_by": self.limited_by,
        }


@dataclass(frozen=True)
class Cap:
    """An upper bound on max_size from a playbook formula (window time x bandwidth, L2)."""

    formula_id: str
    formula: str
    inputs: dict[str, float]
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.formula_id,
            "expression": self.formula,
            "inputs": {k: _plain(v) for k, v in self.inputs.items()},
            "bytes": self.bytes,
            "human": human(self.bytes),
        }


def _plain(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def _number(n: float, digits: int) -> str:
    text = f"{n:.{digits}f}".rstrip("0").rstrip(".")
    return text or "0"


def human(n: int) -> str:
    """Binary and decimal units side by side: people quote both ("126 MiB", "18 MB")."""
    if n < 1024:
        return f"{n} B"
    binary = next(
        ((n / 1024**i, u) for i, u in ((3, "GiB"), (2, "MiB"), (1, "KiB")) if n >= 1024**i)
    )
    decimal = next(((n / 1000**i, u) for i, u in ((3, "GB"), (2, "MB"), (1, "KB")) if n >= 1000**i))
    return f"{_number(binary[0], 2)} {binary[1]} / {_number(decimal[0], 2)} {decimal[1]}"


def playbook_settings(playbook: Mapping[str, Any]) -> tuple[float, list[float]]:
    return float(playbook["conservative_factor"]), [float(f) for f in playbook["ladder"]]


def _formula(playbook: Mapping[str, Any], formula_id: str) -> Mapping[str, Any]:
    formulas = {f["id"]: f for f in playbook.get("formulas") or []}
    if formula_id not in formulas:
        known = ", ".join(formulas) or "none"
        raise SizeInputError(
            f"the prefetch playbook has no formula {formula_id!r} (it has: {known})"
        )
    return formulas[formula_id]


def _names(formula: str) -> set[str]:
    try:
        return {n.id for n in ast.walk(ast.parse(formula, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()


def cap(playbook: Mapping[str, Any], formula_id: str, inputs: Mapping[str, float]) -> Cap:
    """One upper bound (``window-cap``, ``l2-cap``) evaluated from the playbook."""
    entry = _formula(playbook, formula_id)
    value = math.floor(evaluate(entry["formula"], inputs))
    if value <= 0:
        raise SizeInputError(f"{formula_id}: the formula gives {value} bytes; check the inputs")
    return Cap(formula_id, entry["formula"], dict(inputs), value)


def compute(
    playbook: Mapping[str, Any],
    formula_id: str,
    label: str,
    inputs: Mapping[str, float],
    dtype: str,
    factor: float | None = None,
    caps: list[Cap] | None = None,
) -> Size:
    """Evaluate one playbook formula for ``inputs``, apply the (or a given) factor and caps.

    A ``tp`` input other than 1 must appear in the formula: a sharded weight the formula
    does not divide would be sized for the whole tensor.
    """
    entry = _formula(playbook, formula_id)
    if inputs.get("tp", 1) != 1 and "tp" not in _names(entry["formula"]):
        raise SizeInputError(
            f"formula {formula_id!r} ({entry['formula']}) does not divide by "
            "tp; --tp applies to dense weights only"
        )
    canon, nbytes = dtype_bytes(dtype)
    default_factor, ladder = playbook_settings(playbook)
    use = default_factor if factor is None else factor
    if not (0 < use <= 1):
        raise SizeInputError(f"--factor {use} must be above 0 and at most 1")
    variables = dict(inputs) | {"dtype_bytes": nbytes}
    value = evaluate(entry["formula"], variables)
    theoretical = math.floor(value)
    if theoretical <= 0:
        raise SizeInputError(f"{label}: the formula gives {value!r} bytes; check the inputs")
    steps = sorted(set(ladder) | {use})
    bound = min((c.bytes for c in caps or []), default=None)

    def capped(n: int) -> int:
        return n if bound is None else min(n, bound)

    start = math.floor(theoretical * use)
    return Size(
        label=label,
        formula_id=formula_id,
        formula=entry["formula"],
        applies_to=entry["applies_to"],
        inputs=dict(inputs),
        dtype=canon,
        dtype_bytes=nbytes,
        theoretical=theoretical,
        factor=use,
        max_size=capped(start),
        ladder=[(f, capped(math.floor(theoretical * f))) for f in steps],
        caps=list(caps or []),
        uncapped=start if caps else None,
    )


def render(sizes: list[Size], playbook: Mapping[str, Any]) -> str:
    """Text for people: bytes exact, units for reading, and where to go on the ladder."""
    default_factor, _ = playbook_settings(playbook)
    out: list[str] = []
    for s in sizes:
        shown = ", ".join(f"{k}={_plain(v)}" for k, v in s.inputs.items())
        out.append(f"{s.label}  [formula {s.formula_id}: {s.formula}]")
        out.append(
            f"  inputs       {shown}; {s.dtype} = {_plain(s.dtype_bytes)} byte(s) per element"
        )
        out.append(f"  theoretical  {s.theoretical} bytes  ({human(s.theoretical)})")
        which = "conservative" if s.factor == default_factor else "chosen"
        for c in s.caps:
            given = ", ".join(f"{k}={_plain(v)}" for k, v in c.inputs.items())
            out.append(
                f"  cap          {c.bytes} bytes  ({human(c.bytes)})  "
                f"[{c.formula_id}: {c.formula}; {given}]"
            )
        if s.limited_by:
            out.append(
                f"  max_size     {s.max_size} bytes  ({human(s.max_size)})  "
                f"= {s.limited_by} (the {which} factor {s.factor:g} gives {s.uncapped})"
            )
        else:
            out.append(
                f"  max_size     {s.max_size} bytes  ({human(s.max_size)})  "
                f"= {which} factor {s.factor:g}"
            )
        out.append("  ladder (start at the factor marked *, step up while the target gains and the")
        out.append(
            "          window holds, step down when the window slows"
            + ("; steps above the cap are cut to it):" if s.caps else "):")
        )
        for f, b in s.ladder:
            mark = "*" if f == s.factor else " "
            out.append(f"     {mark} {f:<4g} {b:>14} bytes  ({human(b)})")
        out.append(
            f"  call: torch_npu.npu_prefetch(weight, dependency, {s.max_size})"
            "  # behind a switch that defaults to off"
        )
        out.append("")
    return "\n".join(out)
