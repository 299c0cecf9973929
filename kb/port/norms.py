"""LayerNorm spans: a functional ``layer_norm`` call and the adaLN modulation around a
LayerNorm module (``norm(x) * (1 + scale) + shift``).

Both become ``npu_layer_norm_eval``.  The adaLN modulation is folded into the operator's
weight and bias (``adaln-modulation-as-norm-weight``): those have the normalized shape, so
the port calls it once per sample (once per row the modulation varies over), with weight
``(1 + scale) * norm.weight`` and bias ``shift + (1 + scale) * norm.bias``.  The norm
module is read at run time (its weight, bias, eps and normalized shape), so the port needs
no copy of its constructor's arguments.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from kb.port.spans import _single_assign, code, dotted, keyword, one_arg

LAYER_NORM_ROWS = {"layer_norm"}
ADALN_ROWS = {"adaln_layer_norm"}
#: what the port writes in place of the prerequisite the adaLN row names
DONE = {
    "adaln-modulation-as-norm-weight": "the modulation folded into npu_layer_norm_eval's "
    "weight and bias, one call per sample"
}


def built_from(cls: cst.ClassDef, suffix: str) -> dict[str, cst.Call]:
    """Attributes ``__init__`` builds by calling a class whose name ends with ``suffix``
    (``LayerNorm``, ``GELU``: torch's or one of the same name), with that call."""
    found: dict[str, cst.Call] = {}

    class _V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            value = node.value
            if not (isinstance(value, cst.Call) and dotted(value.func).endswith(suffix)):
                return
            for t in node.targets:
                name = dotted(t.target)
                if name.startswith("self."):
                    found[name[5:]] = value

    for st in cls.body.body:
        if isinstance(st, cst.FunctionDef) and st.name.value == "__init__":
            st.visit(_V())
    return found


def layer_norm_attrs(cls: cst.ClassDef) -> set[str]:
    """Attributes ``__init__`` builds from a ``*LayerNorm`` class."""
    return set(built_from(cls, "LayerNorm"))


def gelu_call(node: cst.Call, gelus: dict[str, cst.Call]) -> tuple[str, str] | None:
    """(x, approximate) of ``F.gelu(x[, approximate=...])`` or of ``self.act(x)`` with
    ``act`` built from ``nn.GELU(...)`` (``gelus``); approximate 'none' or 'tanh', or the
    module attribute that holds it (``self.approximate``)."""
    x = one_arg(node) if not isinstance(node.func, cst.Name) or node.args else None
    callee = dotted(node.func)
    if callee.startswith("self.") and callee[5:] in gelus and x is not None:
        mode = keyword(gelus[callee[5:]], "approximate", 0) or "'none'"
    elif callee.rsplit(".", 1)[-1] == "gelu" and node.args:
        x = node.args[0].value if node.args[0].keyword is None else None
        mode = keyword(node, "approximate", 1) or "'none'"
    else:
        return None
    # a mode the module keeps (self.approximate) is passed on as it is at run time
    mode = mode if mode.startswith("self.") else mode.strip("'\"")
    known = mode in ("none", "tanh") or mode.startswith("self.")
    return (code(x), mode) if x is not None and known else None


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if hasattr(node, "lpar") else node


def _one_plus(node: cst.BaseExpression) -> str:
    """``s`` of ``(1 + s)`` or ``(s + 1)``, '' otherwise."""
    if isinstance(node, cst.Subscript):  # (1 + s)[:, None]: 1 + s[:, None]
        inner = _one_plus(node.value)
        return f"({inner}){code(node)[len(code(node.value)) :]}" if inner else ""
    node = _bare(node)
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
        return ""
    for one, other in ((node.left, node.right), (node.right, node.left)):
        if isinstance(one, cst.Integer) and one.value == "1":
            return code(other)
        if isinstance(one, cst.Float) and float(one.value) == 1.0:
            return code(other)
    return ""


def _norm_call(node: cst.BaseExpression, norms: set[str]) -> tuple[str, str] | None:
    """(``self.N``, x) of a call ``self.N(x)`` with ``N`` one of ``norms``."""
    x = one_arg(node)
    attr = dotted(node.func) if isinstance(node, cst.Call) else ""
    if x is not None and attr.startswith("self.") and attr[5:] in norms:
        return attr, code(x)
    return None


def adaln_parts(
    node: cst.BaseExpression, norms: set[str], normed: tuple[str, str, str] | None = None
) -> tuple[str, str, str, str] | None:
    """(norm module, x, scale, shift) of ``self.N(x) * (1 + scale) + shift`` with ``N`` one
    of ``norms`` (either order of the sum and of the product); ``normed`` (name, module, x)
    also accepts that name as the normalised factor."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
        return None
    for prod, shift in ((node.left, node.right), (node.right, node.left)):
        prod = _bare(prod)
        if not (isinstance(prod, cst.BinaryOperation) and isinstance(prod.operator, cst.Multiply)):
            continue
        for side, factor in ((prod.left, prod.right), (prod.right, prod.left)):
            found = _norm_call(side, norms)
            if normed and isinstance(side, cst.Name) and side.value == normed[0]:
                found = normed[1], normed[2]
            scale = _one_plus(factor)
            if found and scale:
                return found[0], found[1], scale, code(shift)
    return None


def fold_adaln(body: list[cst.BaseStatement], norms: set[str], emit: Any) -> bool:
    """``y = self.N(x)`` then ``y = y * (1 + scale) + shift`` (diffusers' way of writing
    it) into one statement ``y = emit(statement, (module, x, scale, shift), unfused)``, in
    place.  The scale and shift must not read ``y`` (when ``y`` is ``x``, its device and
    dtype are the same before and after the norm, so those may be read)."""
    out: list[cst.BaseStatement] = []
    changed, i = False, 0
    while i < len(body):
        first = _single_assign(body[i])
        second = _single_assign(body[i + 1]) if i + 1 < len(body) else None
        found = _norm_call(first[1], norms) if first else None
        parts = None
        if first and second and found and first[0] == second[0]:
            y = first[0]
            parts = adaln_parts(second[1], norms, (y, *found))
            if parts and any(_reads(t, y, strict=y != found[1]) for t in parts[2:]):
                parts = None
        if first is None or second is None or parts is None:
            out.append(body[i])
            i += 1
            continue
        unfused = _substitute(second[1], first[0], code(first[1]))
        stmt = cst.parse_statement(f"{first[0]} = {emit(body[i + 1], parts, unfused)}")
        lead = [*getattr(body[i], "leading_lines", ()), *getattr(body[i + 1], "leading_lines", ())]
        out.append(stmt.with_changes(leading_lines=lead))
        changed, i = True, i + 2
    body[:] = out
    return changed


def _reads(text: str, name: str, strict: bool) -> bool:
    """``name`` read in ``text`` (not strict: other than for its device or dtype)."""
    import re

    bare = text if strict else re.sub(rf"\b{re.escape(name)}\.(device|dtype)\b", "", text)
    return re.search(rf"\b{re.escape(name)}\b", bare) is not None


def _substitute(node: cst.BaseExpression, name: str, by: str) -> str:
    """``node``'s code with the factor ``name`` (a bare name operand) replaced by ``by``."""

    class _T(cst.CSTTransformer):
        def leave_BinaryOperation(
            self, original: cst.BinaryOperation, updated: cst.BinaryOperation
        ) -> cst.BinaryOperation:
            if isinstance(updated.operator, cst.Multiply):
                for side in ("left", "right"):
                    v = getattr(updated, side)
                    if isinstance(v, cst.Name) and v.value == name:
                        new = cst.parse_expression(f"({by})")
                        return updated.with_changes(**{side: new})
            return updated

    new = node.visit(_T())
    assert isinstance(new, cst.CSTNode)
    return code(new)


def layer_norm_call(node: cst.Call) -> tuple[str, ...] | None:
    """(x, normalized_shape, weight, bias, eps) of a functional ``layer_norm`` call."""
    x, shape = keyword(node, "input", 0), keyword(node, "normalized_shape", 1)
    if not (x and shape):
        return None
    weight = keyword(node, "weight", 2) or "None"
    bias = keyword(node, "bias", 3) or "None"
    eps = keyword(node, "eps", 4) or "1e-05"
    return x, shape, weight, bias, eps


HELPERS = {
    "_kb_layer_norm": '''

def _kb_layer_norm(x, shape, weight, bias, eps):
    """F.layer_norm in inference as npu_layer_norm_eval (weight and bias in x's dtype)."""
    shape = [int(shape)] if isinstance(shape, int) else [int(d) for d in shape]
    weight = None if weight is None else weight.to(x.dtype)
    bias = None if bias is None else bias.to(x.dtype)
    return torch_npu.npu_layer_norm_eval(x, shape, weight=weight, bias=bias, eps=eps)
''',
    "_kb_adaln": '''

def _kb_adaln(norm, x, scale, shift):
    """norm(x) * (1 + scale) + shift with norm a LayerNorm module: npu_layer_norm_eval once
    per row the modulation varies over, weight (1 + scale) * norm.weight and bias
    shift + (1 + scale) * norm.bias (computed in float32, passed in x's dtype)."""
    import itertools

    if not isinstance(norm, torch.nn.LayerNorm):  # another branch built another norm
        return norm(x) * (1 + scale) + shift
    x = x.expand(torch.broadcast_shapes(x.shape, scale.shape, shift.shape))  # as the sum is
    lead = x.dim()
    scale = scale.reshape((1,) * (lead - scale.dim()) + tuple(scale.shape)).float()
    shift = shift.reshape((1,) * (lead - shift.dim()) + tuple(shift.shape)).float()
    axes = [a for a in range(lead - 1) if scale.shape[a] > 1 or shift.shape[a] > 1]
    weight = 1.0 if norm.weight is None else norm.weight.float()
    bias = 0.0 if getattr(norm, "bias", None) is None else norm.bias.float()
    shape = list(norm.normalized_shape)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    for idx in itertools.product(*(range(x.shape[a]) for a in axes)):
        at = dict(zip(axes, idx))
        pick = tuple(at.get(a, slice(None)) for a in range(lead - 1))
        row = lambda t: t[tuple(at.get(a, 0) if t.shape[a] > 1 else 0 for a in range(lead - 1))]
        s, b = 1 + row(scale), row(shift)
        out[pick] = torch_npu.npu_layer_norm_eval(
            x[pick], shape, weight=(s * weight).to(x.dtype), bias=(b + s * bias).to(x.dtype),
            eps=norm.eps)
    return out
''',
}


def one_return_functions(module: cst.Module) -> dict[str, tuple[list[str], cst.BaseExpression]]:
    """The file's functions whose body is one ``return EXPR`` (a docstring aside):
    name -> (positional parameters, EXPR); DiT's ``modulate(x, shift, scale)``."""
    out: dict[str, tuple[list[str], cst.BaseExpression]] = {}
    for st in module.body:
        if not isinstance(st, cst.FunctionDef) or not isinstance(st.body, cst.IndentedBlock):
            continue
        body = [
            s
            for s in st.body.body
            if not (
                isinstance(s, cst.SimpleStatementLine)
                and isinstance(s.body[0], cst.Expr)
                and isinstance(s.body[0].value, cst.SimpleString)
            )
        ]
        p = st.params
        if p.star_arg is not cst.MaybeSentinel.DEFAULT or p.kwonly_params or p.star_kwarg:
            continue
        if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine):
            ret = body[0].body[0]
            if isinstance(ret, cst.Return) and ret.value is not None:
                out[st.name.value] = ([q.name.value for q in p.params], ret.value)
    return out


def inline(call: cst.Call, fns: dict[str, tuple[list[str], cst.BaseExpression]]) -> Any:
    """The expression a call of one of ``fns`` computes, its parameters replaced by the
    call's arguments (parenthesised); None when the call does not bind every parameter."""
    found = fns.get(dotted(call.func))
    if found is None or any(a.star for a in call.args):
        return None
    params, expr = found
    bound: dict[str, cst.BaseExpression] = {}
    for i, a in enumerate(call.args):
        name = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else "")
        if name not in params or name in bound:
            return None
        bound[name] = a.value
    if set(bound) != set(params):
        return None

    return bind(expr, bound)


def bind(expr: cst.BaseExpression, bound: dict[str, cst.BaseExpression]) -> Any:
    """``expr`` with the names of ``bound`` replaced by their (parenthesised) values."""

    class _T(cst.CSTTransformer):
        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            if updated.value in bound:
                return cst.parse_expression(f"({code(bound[updated.value])})")
            return updated

        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> Any:
            return updated.with_changes(attr=original.attr)  # x.attr: only x is a name

    return expr.visit(_T())
