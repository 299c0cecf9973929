"""Find, in a libcst tree, the spans that compute a planned stage, and write their fused
replacement.

A span is recognised by the computation it writes, never by a model's names: RoPE is
``x * cos + f(x) * sin`` with ``f`` a one-argument call of that same ``x``; a GLU is a
product one of whose factors is an activation call on a projection (the line the reader
proved); attention is a ``scaled_dot_product_attention`` call; a softmax router is a
top-k of a softmax's result.  What each replacement passes comes from the plan's stage
(``rotary_mode``, ``approximate``, the causality the reader proved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

#: torch's own softmax-attention entry point (any spelling that ends with it)
SDPA = "scaled_dot_product_attention"


@dataclass
class Stage:
    """One planned stage of one module, as the port needs it."""

    module: str
    kind: str
    mapping: str
    operator: str
    args: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    glu_line: int = 0  # the line the reader proved the GLU at (0: unknown)


def dotted(node: cst.BaseExpression) -> str:
    """``torch.nn.functional.silu`` for an attribute chain, '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def one_arg(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The argument of a call with exactly one positional argument."""
    if (
        isinstance(node, cst.Call)
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return node.args[0].value
    return None


def rope_parts(node: cst.BinaryOperation) -> tuple[str, str, str] | None:
    """(x, cos, sin) of ``x * cos + f(x) * sin`` (either order of the sum or products)."""
    if not isinstance(node.operator, cst.Add):
        return None
    terms = [node.left, node.right]
    if not all(
        isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply) for t in terms
    ):
        return None
    for plain, rotated in (terms, terms[::-1]):
        assert isinstance(plain, cst.BinaryOperation) and isinstance(rotated, cst.BinaryOperation)
        for x, c in ((plain.left, plain.right), (plain.right, plain.left)):
            for fx, s in ((rotated.left, rotated.right), (rotated.right, rotated.left)):
                inner = one_arg(fx)
                if inner is not None and code(inner) == code(x) and code(c) != code(s):
                    return code(x), code(c), code(s)
    return None


def glu_parts(node: cst.BinaryOperation, linears: set[str]) -> tuple[cst.Call, str] | None:
    """(the activated factor, the other factor's code) of ``act(gate) * up``: the activated
    factor is the one-argument call that is not a projection of the class."""
    if not isinstance(node.operator, cst.Multiply):
        return None
    found = []
    for a, b in ((node.left, node.right), (node.right, node.left)):
        inner = one_arg(a)
        if inner is None or not isinstance(a, cst.Call):
            continue
        callee = dotted(a.func)
        if callee.startswith("self.") and callee[5:] in linears:
            continue
        found.append((a, code(b)))
    return found[0] if len(found) == 1 else None


def projection(node: cst.BaseExpression, linears: set[str]) -> tuple[str, str] | None:
    """(attribute, input code) of ``self.<linear>(x)``."""
    inner = one_arg(node)
    if inner is None or not isinstance(node, cst.Call):
        return None
    callee = dotted(node.func)
    if callee.startswith("self.") and callee[5:] in linears:
        return callee[5:], code(inner)
    return None


def keyword(call: cst.Call, name: str, position: int) -> str | None:
    """The code of an argument given by keyword or at ``position``."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == name:
            return code(a.value)
        if a.keyword is None and not a.star and i == position:
            return code(a.value)
    return None


def lam(text: str) -> str:
    return f"lambda: {text}"


def _single_assign(st: cst.BaseStatement) -> tuple[str, cst.BaseExpression] | None:
    """(name, value) of a statement that is one ``name = value``."""
    if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1):
        return None
    a = st.body[0]
    if (
        isinstance(a, cst.Assign)
        and len(a.targets) == 1
        and isinstance(a.targets[0].target, cst.Name)
    ):
        return a.targets[0].target.value, a.value
    return None


def _passing(params: cst.Parameters) -> list[str]:
    """The call that hands a function's own parameters on unchanged (self left out)."""
    out = [p.name.value for p in params.posonly_params] + [p.name.value for p in params.params]
    out = out[1:]
    if isinstance(params.star_arg, cst.Param):
        out.append("*" + params.star_arg.name.value)
    out += [f"{p.name.value}={p.name.value}" for p in params.kwonly_params]
    if params.star_kwarg is not None:
        out.append("**" + params.star_kwarg.name.value)
    return out


def _init_facts(cls: cst.ClassDef) -> tuple[set[str], list[str], list[str]]:
    """(linear attributes, 1-D parameter attributes, eps-like attributes) from __init__."""
    linears: set[str] = set()
    params: list[str] = []
    eps: list[str] = []
    for stmt in cls.body.body:
        if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__"):
            continue
        for node in _assigns(stmt):
            target, value = node
            if not target.startswith("self."):
                continue
            attr = target[5:]
            callee = dotted(value.func) if isinstance(value, cst.Call) else ""
            if callee.endswith("Linear"):
                linears.add(attr)
            elif callee.endswith("Parameter"):
                params.append(attr)
            if "eps" in attr.lower():
                eps.append(attr)
    return linears, params, eps


def _assigns(fn: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    out: list[tuple[str, cst.BaseExpression]] = []

    class _V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                name = dotted(t.target)
                if name:
                    out.append((name, node.value))

    fn.visit(_V())
    return out
