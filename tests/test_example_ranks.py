"""Every record example passes tensors of a rank its wrapper accepts.

The wrapper's rank checks (``wrapper_checks`` with ``kind: rank``, harvested from
``TORCH_CHECK(x.dim() == …)``) are what runs; an example that builds ``x`` 4-D where the
wrapper wants 2-D or 3-D fails on the device before the kernel sees it.  The example is
read with ``ast``: a tensor's rank is known when a constructor states its sizes
(``torch.randn(4, 1, 4096)``, ``torch.zeros((B, S, H))``) or a ``view``/``reshape``
restates them; anything else is unknown, and unknown is never an error.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from kb.catalog.binding import python_name
from kb.catalog.compiled import open_catalog
from kb.catalog.models import WrapperCheck

_SIZED = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "normal"}
#: Methods that keep the rank of the tensor they are called on.
_KEEP = {
    "npu",
    "to",
    "contiguous",
    "clone",
    "half",
    "float",
    "bfloat16",
    "int",
    "long",
    "char",
    "byte",
    "detach",
    "cuda",
    "abs",
    "neg",
    "exp",
    "sigmoid",
}


def _sizes(node: ast.Call) -> list[ast.expr] | None:
    """The size arguments of a ``torch`` constructor: varargs, one tuple, or ``size=``."""
    keyword = next((k.value for k in node.keywords if k.arg == "size"), None)
    if isinstance(keyword, (ast.Tuple, ast.List)):
        return list(keyword.elts)
    name = node.func.attr  # type: ignore[attr-defined]
    if name == "randint":  # randint([low,] high, size)
        last = node.args[-1] if node.args else None
        return list(last.elts) if isinstance(last, (ast.Tuple, ast.List)) else None
    args = node.args[:1] if name == "full" else node.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return list(args[0].elts)
    if args and not any(isinstance(a, (ast.Starred, ast.Tuple, ast.List)) for a in args):
        return list(args)
    return None


def _rank_of(node: ast.expr, ranks: dict[str, int]) -> int | None:
    if isinstance(node, ast.Name):
        return ranks.get(node.id)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    name, owner = node.func.attr, node.func.value
    if isinstance(owner, ast.Name) and owner.id == "torch" and name in _SIZED:
        sizes = _sizes(node)
        return None if sizes is None else len(sizes)
    if name in ("view", "reshape") and node.args:
        if len(node.args) == 1 and isinstance(node.args[0], (ast.Tuple, ast.List)):
            return len(node.args[0].elts)
        return None if any(isinstance(a, ast.Starred) for a in node.args) else len(node.args)
    if name in _KEEP:
        return _rank_of(owner, ranks)
    return None


def example_ranks(rec: dict[str, Any], code: str) -> list[tuple[str, int]]:
    """(parameter, rank) of every tensor argument of ``rec``'s operator whose rank the code states."""
    params = rec["parameters"]
    positional = [p for p in params if not p.get("keyword_only")]
    by_keyword = {python_name(p): p for p in params} | {p["name"]: p for p in params}
    ranks: dict[str, int] = {}
    out: list[tuple[str, int]] = []
    for stmt in ast.walk(ast.parse(code)):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            rank = _rank_of(stmt.value, ranks)
            if rank is None:
                ranks.pop(stmt.targets[0].id, None)
            else:
                ranks[stmt.targets[0].id] = rank
        if not (isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Attribute)):
            continue
        if stmt.func.attr != rec["name"]:
            continue
        bound = list(zip(positional, stmt.args, strict=False))
        bound += [(by_keyword[k.arg], k.value) for k in stmt.keywords if k.arg in by_keyword]
        for p, node in bound:
            rank = _rank_of(node, ranks) if p["type"].startswith("Tensor") else None
            if rank is not None:
                out.append((p["name"], rank))
    return out


def refused(rec: dict[str, Any], code: str) -> list[str]:
    checks = [WrapperCheck.model_validate(c) for c in rec.get("wrapper_checks") or []]
    ranks = [c for c in checks if c.kind == "rank"]
    bad = []
    for name, rank in example_ranks(rec, code):
        for check in ranks:
            if check.param == name and check.admits(rank) is False:
                bad.append(
                    f"{name} is {rank}-D; the wrapper needs {check.condition} ({check.path}:{check.lines})"
                )
    return bad


def _records() -> list[dict[str, Any]]:
    return [
        r
        for r in open_catalog().records("operator")
        if r.get("examples") and r.get("wrapper_checks")
    ]


@pytest.mark.parametrize("rec", _records(), ids=lambda r: r["name"])
def test_examples_pass_ranks_the_wrapper_accepts(rec: dict[str, Any]) -> None:
    for ex in rec["examples"]:
        assert refused(rec, ex["code"]) == [], ex["title"]


def test_a_four_dimensional_x_where_the_wrapper_wants_three_is_caught() -> None:
    rec = {
        "name": "npu_fix_pack",
        "parameters": [
            {"name": "x", "type": "Tensor"},
            {"name": "w", "type": "Tensor"},
            {"name": "scale", "type": "Tensor?", "keyword_only": True},
        ],
        "wrapper_checks": [
            {
                "param": "x",
                "kind": "rank",
                "values": [3, 2],
                "condition": "x.dim() == 3 || x.dim() == 2",
                "repo": "Ascend/op-plugin",
                "commit": "517f2e7d0f20",
                "path": "Fix.cpp",
                "lines": "7",
            },
        ],
    }
    bad = (
        "import torch\nimport torch_npu\n"
        "x = torch.randint(-9, 9, (2, 1, 48, 128), dtype=torch.int32).npu()\n"
        "y = torch_npu.npu_fix_pack(x, torch.ones(4, 4), scale=torch.ones(3))\n"
    )
    assert refused(rec, bad) == [
        "x is 4-D; the wrapper needs x.dim() == 3 || x.dim() == 2 (Fix.cpp:7)"
    ]
    good = bad.replace("(2, 1, 48, 128)", "(2, 1, 6144)")
    assert refused(rec, good) == []
    viewed = good + "z = torch_npu.npu_fix_pack(x.view(2, 1, 48, 128), x)\n"
    assert len(refused(rec, viewed)) == 1
    unknown = "y = torch_npu.npu_fix_pack(make(), w)\n"
    assert refused(rec, unknown) == []
