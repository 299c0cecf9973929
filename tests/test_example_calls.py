"""Every record example is judged by its own record: arguments, values, dtypes, formats.

``kb scan`` binds an example's calls but knows no tensor dtypes, so an example that
builds ``group_index`` as int32 for a parameter that takes int64 passed unnoticed.
Here the example is read with ``ast`` the way a careful reviewer reads it: a tensor
whose constructor states its dtype (``torch.randn(..., dtype=bf16)``, ``.to(torch.int8)``,
``torch.tensor(..., dtype=torch.int64)``) has that dtype, one a ``npu_format_cast(t, 29)``
made has that format (a fresh tensor's format depends on its rank, so it stays unstated);
anything else stays unknown, and unknown is never an error.
Each call of the record's own operator becomes a candidate that ``kb check`` judges on
the record's products; an example that breaks its own record on every product fails.
The record's quantization schemes are judged the same way: a dtype a scheme lists must
take part in some use the record's rules accept.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest
import yaml

from kb.api.check import check_text
from kb.catalog.binding import python_name
from kb.catalog.compiled import open_catalog
from kb.vocab import PRODUCT_IDS, bare_operator, call_path, normalize

#: Constructors that take ``dtype=`` and whose default dtype is known.
_FLOAT_DEFAULT = {"randn", "rand", "zeros", "ones", "empty", "full", "normal"}
_INT_DEFAULT = {"randint", "arange"}
_CAST_METHODS = {
    "half": "float16",
    "float": "float32",
    "bfloat16": "bfloat16",
    "int": "int32",
    "long": "int64",
    "char": "int8",
    "byte": "uint8",
    "double": "float64",
}
#: Methods that keep the dtype and format of the tensor they are called on.
_KEEP = {
    "npu",
    "contiguous",
    "view",
    "reshape",
    "transpose",
    "t",
    "clone",
    "permute",
    "unsqueeze",
    "squeeze",
    "expand",
    "repeat",
    "flatten",
    "detach",
    "cuda",
    "T",
}
_NZ = 29


class _Reader:
    """What an example's straight-line code says about its tensors and dtype names."""

    def __init__(self) -> None:
        # variable -> dtype constant it names (bf16 = torch.bfloat16)
        self.dtypes: dict[str, str] = {}
        self.tensors: dict[str, dict[str, str]] = {}  # variable -> {dtype, format}
        self.options: dict[str, dict[str, ast.expr]] = {}  # opts = dict(dtype=..., device=...)

    def dtype_of(self, node: ast.expr | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Name) and node.id in self.dtypes:
            return self.dtypes[node.id]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("torch", "torch_npu")
        ):
            return normalize("dtype", f"{node.value.id}.{node.attr}")
        return None

    def tensor(self, node: ast.expr) -> dict[str, str] | None:
        """dtype/format of an expression when the code states them, else None."""
        if isinstance(node, ast.Name):
            return self.tensors.get(node.id)
        if not isinstance(node, ast.Call):
            return None
        func, kw = node.func, {k.arg: k.value for k in node.keywords if k.arg}
        for spread in (k.value for k in node.keywords if k.arg is None):  # **opts
            if not (isinstance(spread, ast.Name) and spread.id in self.options):
                return None  # keywords we cannot see: the dtype is unknown
            kw = {**self.options[spread.id], **kw}
        if not isinstance(func, ast.Attribute):
            return None
        name = func.attr
        if isinstance(func.value, ast.Name) and func.value.id == "torch":
            stated = self.dtype_of(kw.get("dtype"))
            if stated:
                return {"dtype": stated, "format": ""}
            if name.endswith("_like"):  # torch.randn_like(k): k's dtype
                like = self.tensor(node.args[0]) if node.args else None
                return {"dtype": like["dtype"], "format": ""} if like else None
            if name in _FLOAT_DEFAULT:
                return {"dtype": "float32", "format": ""}
            if name in _INT_DEFAULT:
                return {"dtype": "int64", "format": ""}
            return None
        if name == "npu_format_cast" and len(node.args) >= 2:
            inner = self.tensor(node.args[0])
            code = node.args[1]
            fmt = (
                "FRACTAL_NZ"
                if isinstance(code, ast.Constant) and code.value == _NZ
                else "ND"
                if isinstance(code, ast.Constant) and code.value == 2
                else None
            )
            return {"dtype": inner["dtype"], "format": fmt} if inner and fmt else None
        base = self.tensor(func.value)
        if name in _CAST_METHODS and base:
            return {"dtype": _CAST_METHODS[name], "format": base["format"]}
        if name == "to":
            stated = self.dtype_of(node.args[0] if node.args else kw.get("dtype"))
            if stated and base:
                return {"dtype": stated, "format": base["format"]}
            return (
                base
                if stated is None
                and node.args
                and not kw.get("dtype")
                and isinstance(node.args[0], ast.Constant)
                else None
            )  # .to("npu")
        if name in _KEEP:
            return base
        return None

    def assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts, strict=False):
                self.assign(t, v)
            return
        if isinstance(target, ast.Tuple):  # unpacking a call's results: unknown
            for t in target.elts:
                if isinstance(t, ast.Name):
                    self.tensors.pop(t.id, None)
            return
        if not isinstance(target, ast.Name):
            return
        self.tensors.pop(target.id, None)
        self.dtypes.pop(target.id, None)
        self.options.pop(target.id, None)
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "dict"
            and all(k.arg for k in value.keywords)
        ):
            self.options[target.id] = {str(k.arg): k.value for k in value.keywords}
            return
        dtype = self.dtype_of(value)
        if dtype:
            self.dtypes[target.id] = dtype
            return
        spec = self.tensor(value)
        if spec:
            self.tensors[target.id] = spec


def _callee(func: ast.expr) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        return ".".join([func.id, *reversed(parts)])
    return None


def _literal(reader: _Reader, node: ast.expr) -> tuple[bool, Any]:
    dtype = reader.dtype_of(node)
    if dtype:
        return True, dtype
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def example_candidates(rec: dict[str, Any], code: str, title: str) -> list[dict[str, Any]]:
    """The calls of ``rec``'s operator in ``code`` as candidate-list entries."""
    params = rec["parameters"]
    positional = [p for p in params if not p.get("keyword_only")]
    by_keyword = {python_name(p): p for p in params} | {p["name"]: p for p in params}
    reader, out = _Reader(), []

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Call):
                    continue
                callee = _callee(node.func)  # the default overload only: .out binds another schema
                if callee and call_path(callee) and bare_operator(callee) == rec["name"]:
                    out.append(candidate(node))
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    reader.assign(target, stmt.value)
            elif isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
                visit(stmt.body)

    def candidate(call: ast.Call) -> dict[str, Any]:
        bound = list(zip(positional, call.args, strict=False))
        bound += [(by_keyword[k.arg], k.value) for k in call.keywords if k.arg in by_keyword]
        args: dict[str, Any] = {}
        tensors: dict[str, dict[str, str]] = {}
        for p, node in bound:
            if isinstance(node, ast.Starred):
                continue
            if p["type"].startswith("Tensor") and not p["type"].startswith("Tensor["):
                spec = reader.tensor(node)
                if spec:
                    tensors[p["name"]] = {k: v for k, v in spec.items() if v}
                continue
            known, value = _literal(reader, node)
            if known and value is not None and not p["type"].startswith("Tensor"):
                args[p["name"]] = value
        return {"module": title, "operator": rec["name"], "args": args, "tensors": tensors}

    visit(ast.parse(code).body)
    return out


def _records() -> list[dict[str, Any]]:
    return [r for r in open_catalog().records("operator") if r.get("examples")]


def _errors(rec: dict[str, Any], cand: dict[str, Any], catalog: Any) -> list[list[str]]:
    per_product = []
    for product in rec["products"] or list(PRODUCT_IDS):
        doc = {"version": 1, "target": {"product": product}, "candidates": [cand]}
        found = check_text(yaml.safe_dump(doc, sort_keys=False), catalog=catalog)
        per_product.append(
            [f"{product}: {f.code} {f.message}" for f in found if f.severity == "error"]
        )
        if not per_product[-1]:
            break
    return per_product


@pytest.mark.parametrize("rec", _records(), ids=lambda r: r["name"])
def test_an_example_keeps_its_own_records_rules(rec: dict[str, Any]) -> None:
    catalog = open_catalog()
    for ex in rec["examples"]:
        for cand in example_candidates(rec, ex["code"], ex["title"]):
            per_product = _errors(rec, cand, catalog)
            assert not per_product[-1], (ex["title"], cand, per_product)


def test_the_reader_sees_what_the_code_states() -> None:
    code = (
        "import torch\nimport torch_npu\nbf16 = torch.bfloat16\n"
        "x = torch.randn(4, 8, dtype=bf16, device='npu')\n"
        "idx = torch.tensor([1, 2], dtype=torch.int32).npu()\n"
        "w = torch_npu.npu_format_cast(torch.randint(-4, 4, (8, 8), dtype=torch.int8), 29)\n"
        "h = x.half()\nu, v = torch.zeros(2), torch.arange(3)\nq, r = f(x)\n"
        "y = torch.randn_like(x)\nopts = dict(dtype=torch.float16, device='npu')\n"
        "z = torch.ones(3, **opts)\nzz = torch.ones(3, **unknown)\n"
    )
    reader = _Reader()
    for stmt in ast.parse(code).body:
        if isinstance(stmt, ast.Assign):
            reader.assign(stmt.targets[0], stmt.value)
    assert reader.tensors["x"] == {"dtype": "bfloat16", "format": ""}
    assert reader.tensors["idx"]["dtype"] == "int32"
    assert reader.tensors["w"] == {"dtype": "int8", "format": "FRACTAL_NZ"}
    assert reader.tensors["h"]["dtype"] == "float16"
    assert reader.tensors["u"]["dtype"] == "float32" and reader.tensors["v"]["dtype"] == "int64"
    assert "q" not in reader.tensors and "r" not in reader.tensors
    assert reader.tensors["y"]["dtype"] == "bfloat16"
    assert reader.tensors["z"]["dtype"] == "float16" and "zz" not in reader.tensors


def test_an_example_that_breaks_its_record_is_caught() -> None:
    """The defect this test exists for: int32 group_index where the record says int64."""
    catalog = open_catalog()
    rec = catalog.get("npu_swiglu_group_quant")
    code = (
        "import torch\nimport torch_npu\n"
        "x = torch.randn(8, 512, dtype=torch.bfloat16, device='npu')\n"
        "g = torch.tensor([8], dtype=torch.int32, device='npu')\n"
        "torch_npu.npu_swiglu_group_quant(x, group_index=g, quant_mode=3)\n"
    )
    (cand,) = example_candidates(rec, code, "bad")
    assert cand["tensors"]["group_index"] == {"dtype": "int32"}
    assert any("KB107" in e for e in _errors(rec, cand, catalog)[-1])


def scheme_variants(mode: dict[str, Any]) -> list[dict[str, str]]:
    """Dtype assignments of a scheme's tensors: the k-th listed dtype of each tensor
    together (lists often pair up, e.g. x and antiquant_scale both float16/bfloat16),
    then each alternative alone beside the first dtype of the others."""
    tensors = {t: d for t, d in (mode.get("tensors") or {}).items() if d}
    if not tensors:
        return []
    width = max(len(d) for d in tensors.values())
    aligned = [{t: d[min(k, len(d) - 1)] for t, d in tensors.items()} for k in range(width)]
    single = [{**aligned[0], t: alt} for t, d in tensors.items() for alt in d[1:]]
    return aligned + [v for v in single if v not in aligned]


@pytest.mark.parametrize(
    "rec", [r for r in _records() if r.get("quantization")], ids=lambda r: r["name"]
)
def test_a_quantization_scheme_keeps_its_own_records_rules(rec: dict[str, Any]) -> None:
    """Every dtype a scheme lists takes part in some use the record's rules accept (the
    W4A8 scheme's int8 x with an int4 weight was rejected by the record's own rule)."""
    catalog = open_catalog()
    for i, mode in enumerate(rec.get("quantization") or []):
        products = mode.get("products") or rec["products"] or list(PRODUCT_IDS)
        args = {k: v for k, v in (mode.get("select") or {}).items() if v is not None}
        unmet, seen = {}, set()
        for v in scheme_variants(mode):
            cand = {
                "module": f"scheme {i} {mode['scheme']}",
                "operator": rec["name"],
                "args": args,
                "tensors": {t: {"dtype": d} for t, d in v.items()},
            }
            errors = _errors({**rec, "products": products}, cand, catalog)[-1]
            for pair in v.items():
                if not errors:
                    seen.add(pair)
                    unmet.pop(pair, None)
                elif pair not in seen:
                    unmet[pair] = errors
        assert not unmet, (mode["scheme"], i, unmet)
