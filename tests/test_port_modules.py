"""kb port finds the torch LayerNorm modules a class builds and the GELU a small class
writes out, by what they compute (no torch needed)."""

from __future__ import annotations

import pytest

cst = pytest.importorskip("libcst")

from kb.port import modules  # noqa: E402


@pytest.mark.parametrize(
    ("expr", "mode"),
    [
        (
            "0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))",
            "tanh",
        ),
        ("x * 0.5 * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))", "tanh"),
        ("x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))", "none"),
        ("x * torch.sigmoid(1.702 * x)", None),  # the sigmoid approximation: not npu_gelu's
        ("0.5 * x * (1.0 + torch.tanh(self.c * (x + 0.044715 * x ** 3)))", None),  # reads self
        ("0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))", None),  # not of its input
    ],
)
def test_a_written_gelu_is_recognised_by_its_formula(expr: str, mode: str | None) -> None:
    assert modules.gelu_formula(cst.parse_expression(expr), "x") == mode


def test_layer_norm_modules_a_class_builds() -> None:
    cls = cst.parse_module(
        "class B(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        self.ln_1 = nn.LayerNorm(n)\n"
        "        self.own = MyLayerNorm(n)\n"
        "        self.t = nn.ModuleDict(dict(ln_f=nn.LayerNorm(n), h=nn.Linear(n, n)))\n"
        "        self.u = nn.ModuleDict({'post': torch.nn.LayerNorm(n)})\n"
    ).body[0]
    assert modules.norm_paths(cls, {"MyLayerNorm"}) == {"ln_1", "t.ln_f", "u.post"}
