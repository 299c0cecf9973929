"""Stages computed by a module the class calls rather than by a span of its own code.

Two forms: a LayerNorm applied through a torch ``LayerNorm`` attribute (``self.ln(x)``,
also one kept in an ``nn.ModuleDict(dict(ln_f=...))``), which becomes
``_kb_layer_norm`` reading the module's normalized shape, weight, bias and eps at run
time; and a GELU written out in the ``forward`` of a small class of the file the planned
class builds (the tanh formula with its 0.044715 cubic term, or the erf formula), whose
returned expression becomes ``npu_gelu`` with the ``approximate`` the plan's stage names.
The formula is recognised by what it computes (one input, a tanh or erf of it, the cubic
coefficient for tanh); ``kb verify`` then measures it against the original.
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from kb.port.norms import bind
from kb.port.spans import Stage, _single_assign, code, dotted, one_arg

GELU_MODES = {"gelu_tanh": "tanh", "gelu": "none"}
#: module names read inside a formula besides its input
_LIBS = {"torch", "math", "np", "numpy", "F"}


def _init(cls: cst.ClassDef) -> cst.FunctionDef | None:
    for st in cls.body.body:
        if isinstance(st, cst.FunctionDef) and st.name.value == "__init__":
            return st
    return None


def norm_paths(cls: cst.ClassDef, local: set[str]) -> set[str]:
    """Attribute paths (``ln_1``, ``transformer.ln_f``) ``__init__`` builds from a
    ``LayerNorm`` that is not a class of the file (``local``): torch's, read at run time."""
    init = _init(cls)
    found: set[str] = set()

    def is_ln(value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        name = dotted(value.func)
        return name.endswith("LayerNorm") and name.rsplit(".", 1)[-1] not in local

    def members(value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
        """(key, value) of ``dict(k=v)`` / ``{'k': v}``, inside a container call."""
        if isinstance(value, cst.Call) and dotted(value.func) == "dict":
            return [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
        if isinstance(value, cst.Dict):
            return [
                (e.key.evaluated_value, e.value)
                for e in value.elements
                if isinstance(e, cst.DictElement)
                and isinstance(e.key, cst.SimpleString)
                and isinstance(e.key.evaluated_value, str)
            ]
        if isinstance(value, cst.Call) and dotted(value.func).endswith("ModuleDict"):
            inner = one_arg(value)
            return members(inner) if inner is not None else []
        return []

    class _V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                name = dotted(t.target)
                if not name.startswith("self."):
                    continue
                if is_ln(node.value):
                    found.add(name[5:])
                for key, v in members(node.value):
                    if is_ln(v):
                        found.add(f"{name[5:]}.{key}")

    if init is not None:
        init.visit(_V())
    return found


def norm_call(node: cst.Call, paths: set[str]) -> tuple[str, str] | None:
    """(module, x) of ``self.<path>(x)`` with ``path`` one of ``paths``."""
    x = one_arg(node)
    callee = dotted(node.func)
    if x is not None and callee.startswith("self.") and callee[5:] in paths:
        return callee, code(x)
    return None


def _one_return(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    body = [
        s
        for s in (fn.body.body if isinstance(fn.body, cst.IndentedBlock) else [])
        if not (
            isinstance(s, cst.SimpleStatementLine)
            and isinstance(s.body[0], cst.Expr)
            and isinstance(s.body[0].value, cst.SimpleString)
        )
    ]
    bound: dict[str, cst.BaseExpression] = {}
    for st in body[:-1]:  # name = expr lines before the return: put in place
        one = _single_assign(st)
        if one is None:
            return None
        bound[one[0]] = bind(one[1], bound)
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1:
        ret = last.body[0]
        if isinstance(ret, cst.Return) and ret.value is not None:
            return bind(ret.value, bound)
    return None


def gelu_formula(expr: cst.BaseExpression, x: str) -> str | None:
    """'tanh' or 'none' when ``expr`` is a GELU of ``x`` written out, None otherwise: it
    reads ``x`` and nothing else but numbers and math libraries, halves ``x`` times
    ``1 + tanh(...)`` (with the 0.044715 cubic term) or ``1 + erf(...)``."""
    text = code(expr)
    names = set(re.findall(r"(?<![.\w])([A-Za-z_]\w*)", text))
    if names - _LIBS - {x} or x not in names:
        return None
    calls = {dotted(n.func).rsplit(".", 1)[-1] for n in _calls(expr)}
    half = re.search(r"\b0\.5\b|/\s*2\b", text) is not None
    if "tanh" in calls and "erf" not in calls and "0.044715" in text and half:
        return "tanh"
    if "erf" in calls and "tanh" not in calls and half:
        return "none"
    return None


def _calls(expr: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            out.append(node)

    expr.visit(_V())
    return out


def builders(classes: dict[str, cst.ClassDef], name: str, planned: set[str]) -> list[str]:
    """The planned classes whose ``__init__`` builds the class ``name``."""
    out = []
    for owner in sorted(planned):
        init = _init(classes[owner]) if owner in classes else None
        if init is not None and any(
            dotted(c.func).rsplit(".", 1)[-1] == name for c in _calls(init)
        ):
            out.append(owner)
    return out


class ModuleSpans:
    """The Porter's part for these two forms (mixed into :class:`kb.port.rewrite.Porter`)."""

    by_module: dict[str, list[Stage]]
    classes: dict[str, cst.ClassDef]
    cls: list[str]
    result: Any
    _emit: Any
    _inside: Any

    def _module_norm(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """``self.ln(x)`` of a torch LayerNorm, in a class the plan gives a layer_norm
        stage and no adaLN (whose own match reads the norm call)."""
        ln = self._inside({"layer_norm"})
        if not ln or self._inside({"adaln_layer_norm"}):
            return None
        found = norm_call(updated, norm_paths(self.classes[self.cls[-1]], set(self.classes)))
        if found is None:
            return None
        m, x = found
        self.result.helpers.append("_kb_layer_norm")
        fused = f"_kb_layer_norm({x}, {m}.normalized_shape, {m}.weight, {m}.bias, {m}.eps)"
        out: cst.BaseExpression = self._emit(ln[0], original, fused, code(updated), eps=f"{m}.eps")
        return out

    def _gelu_class(self, cls: cst.ClassDef) -> cst.ClassDef:
        """A class of the file that no plan names, built by a planned class with a GELU
        stage, whose ``forward(self, x)`` returns a written-out GELU of that stage's mode."""
        name = cls.name.value
        planned = {
            m for m, ss in self.by_module.items() if any(s.mapping in GELU_MODES for s in ss)
        }
        if name in self.by_module or not planned:
            return cls
        owners = builders(self.classes, name, planned)
        body = list(cls.body.body)
        idx = next((i for i, st in enumerate(body) if _forward(st)), None)
        fwd = body[idx] if idx is not None else None
        if not owners or not isinstance(fwd, cst.FunctionDef) or idx is None:
            return cls
        params = [p.name.value for p in fwd.params.params]
        expr = _one_return(fwd)
        mode = gelu_formula(expr, params[1]) if expr is not None and len(params) == 2 else None
        stage = next(
            (s for o in owners for s in self.by_module[o] if GELU_MODES.get(s.mapping) == mode),
            None,
        )
        if stage is None or expr is None:
            return cls
        x = params[1]
        fused = f"torch_npu.npu_gelu({x}, approximate={mode!r})"
        self.cls.append(stage.module)
        call = self._emit(stage, fwd, fused, code(expr), approximate=mode)
        self.cls.pop()
        new = fwd.with_changes(
            body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return(call)])])
        )
        body[idx] = new
        return cls.with_changes(body=cls.body.with_changes(body=body))


def _forward(st: cst.CSTNode) -> bool:
    return isinstance(st, cst.FunctionDef) and st.name.value == "forward"
