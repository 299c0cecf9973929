"""A model package scanned where it is installed (a virtual environment's site-packages)
has torch's own source beside it: the reader still reads torch by its documented
behaviour, never by that source (a norm's nn.Parameter stays the module's weight)."""

from __future__ import annotations

from pathlib import Path

from kb.api.scan import scanner
from kb.scan.engine import ScanOptions

_NORM = """
import torch
from torch import nn

from .helpers import unused


class TinyRMSNorm(nn.Module):
    def __init__(self, size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        kept = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(kept)
"""

#: a stand-in for torch's source: classes the reader must not read in place of its own
_TORCH_NN = """
class Module:
    pass


class Parameter:
    def __new__(cls, data=None, requires_grad=True):
        return object.__new__(cls)
"""


def test_torch_source_beside_the_scanned_package_is_not_read(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "torch" / "nn").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("from . import nn\n")
    (site / "torch" / "nn" / "__init__.py").write_text(_TORCH_NN)
    (site / "tinylm").mkdir()
    (site / "tinylm" / "__init__.py").write_text("")
    (site / "tinylm" / "helpers.py").write_text("unused = None\n")
    (site / "tinylm" / "modeling.py").write_text(_NORM)
    options = ScanOptions(product="atlas-a3", use_config=False)
    report = scanner(options=options).scan([str(site / "tinylm" / "modeling.py")])
    (norm,) = [m for m in report.inventory if m.name == "TinyRMSNorm"]
    assert dict(norm.facts)["weight"] == "weight"
