"""An expert loop over tokens sorted by expert (DeepSeek-MoE's ``moe_infer`` form): the
method sorts the flattened expert ids, gathers the tokens in that order, runs each expert
module on its contiguous slice, puts the outputs back in the original order and sums them
over the top-k axis, each weighted by its routing weight.

Read from the computation: the expert ids are what ``argsort`` is taken of; the hidden
states what is indexed by that order divided by k; the un-sorting is an assignment into
a subscript by that order; the routing weights the factor of the product summed over
axis 1 (``.mul_(w.unsqueeze(-1)).sum(dim=1)`` or ``(y * w[..., None]).sum(1)``).  The
whole method is then one routed pass (:mod:`kb.port.expertmods` writes it).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.spans import code, dotted


def _root(node: Any, env: dict[str, Any], depth: int = 0) -> str:
    """The name an expression is taken from, through ``env``'s assignments, subscripts,
    attribute and method calls ('' for anything else)."""
    if depth > 12:
        return ""
    if isinstance(node, cst.Name):
        return _root(env[node.value], env, depth + 1) if node.value in env else node.value
    if isinstance(node, cst.Subscript | cst.Attribute):
        return _root(node.value, env, depth + 1)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _root(node.func.value, env, depth + 1)
    return ""


def _summed_weights(node: Any) -> Any:
    """The factor of the product a ``.sum(dim=1)`` call reduces (None: not that shape)."""
    dims = [code(a.value) for a in node.args]
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "sum"):
        return None
    if dims not in (["1"], ["-2"]):
        return None
    inner = node.func.value
    for _ in range(8):
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Multiply):
            return inner
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute):
            if inner.func.attr.value in ("mul", "mul_") and len(inner.args) == 1:
                return inner.args[0].value
            inner = inner.func.value
            continue
        return None
    return None


def read(fn: cst.FunctionDef, env: dict[str, Any]) -> dict[str, str] | str:
    """x, ids and weights of a sorted-token expert method, or why it is not one."""
    params = [p.name.value for p in fn.params.params][1:]
    order, ids = "", ""
    for name, value in env.items():
        if not isinstance(value, cst.Call):
            continue
        if dotted(value.func) == "torch.argsort" and value.args:
            order, ids = name, _root(value.args[0].value, env)
        elif isinstance(value.func, cst.Attribute) and value.func.attr.value == "argsort":
            order, ids = name, _root(value.func.value, env)
    if not order:
        return "the loop neither adds into a tensor nor runs on tokens sorted by argsort"
    x = ""
    unsorted = False

    class _V(cst.CSTVisitor):
        def visit_Subscript(self, s: cst.Subscript) -> None:
            nonlocal x
            index = s.slice[0].slice if len(s.slice) == 1 else None
            if (
                isinstance(index, cst.Index)
                and isinstance(index.value, cst.BinaryOperation)
                and isinstance(index.value.operator, cst.FloorDivide)
                and code(index.value.left) == order
            ):
                # a parameter rebound later (the result kept in its name) is read as given
                x = code(s.value) if code(s.value) in params else _root(s.value, env)

        def visit_Assign(self, a: cst.Assign) -> None:
            nonlocal unsorted
            t = a.targets[0].target
            if isinstance(t, cst.Subscript) and code(t.slice[0].slice) == order:
                unsorted = True

    fn.visit(_V())
    weights: list[str] = []

    class _S(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            factor = _summed_weights(c)
            if isinstance(factor, cst.BinaryOperation):
                roots = [_root(f, env) for f in (factor.left, factor.right)]
                weights.extend(r for r in roots if r in params and r not in (x, ids))
            elif factor is not None:
                weights.append(_root(factor, env))

    fn.visit(_S())
    if not (x in params and ids in params and unsorted):
        return (
            "the sorted tokens are not traced to the method's hidden states and expert ids, "
            "or the outputs are not put back in order"
        )
    if not weights or weights[0] not in params or weights[0] in (x, ids):
        return "no routing weights weight the experts' outputs summed over the top-k axis"
    return {"x": x, "ids": ids, "weights": weights[0]}
