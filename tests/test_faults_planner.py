"""Issue 35, class G: the scanner and the planner on adversarial code.

``self.attr`` belongs to its own class (and the classes it derives from or that derive
from it), never to every class of the file: two classes sharing an attribute name must
not lend each other their operators (a false KB104 on a correct call), and a file of
many classes must not look every attribute up in all of them.  A plan that finds no
module says why when a file could not be read: too large, not a regular file, a syntax
error, or an import the reader meant to follow and refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kb.api.scan import ScanOptions, scanner
from kb.cli import main

TWO_CLASSES = """import torch
import torch_npu


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.op = torch_npu.npu_rms_norm

    def forward(self, x, w):
        return self.op(x, w, epsilon=1e-6)[0]


class Act(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.op = torch_npu.npu_swiglu

    def forward(self, x):
        return self.op(x, dim=-1)
"""


def _findings(text: str) -> list[tuple[str, int]]:
    report = scanner(None, ScanOptions(product="atlas-a3", use_config=False)).scan_text(
        text, "m.py"
    )
    return [(f.code, f.line) for f in report.findings if f.severity == "error"]


def test_an_attribute_name_shared_by_two_classes_does_not_leak_a_call_across() -> None:
    assert _findings(TWO_CLASSES) == []


def test_an_attribute_set_by_a_base_class_still_binds_in_the_subclass() -> None:
    """The scope is the class and its relatives: a subclass calling what its base class
    assigned is still judged (a keyword npu_swiglu does not take is KB104)."""
    text = (
        TWO_CLASSES
        + """

class Wrong(Act):
    def forward(self, x):
        return self.op(x, epsilon=1.0)
"""
    )
    assert [code for code, _ in _findings(text)] == ["KB104"]


class _Counting(dict):  # type: ignore[type-arg]
    """The class-attribute table, counting the tables a lookup touches."""

    touched = 0

    def values(self) -> Any:
        _Counting.touched += len(self)
        return super().values()

    def get(self, key: Any, default: Any = None) -> Any:
        _Counting.touched += 1
        return super().get(key, default)


def test_attribute_lookups_touch_only_the_related_classes() -> None:
    """400 unrelated classes, each calling its own ``self.op``: a lookup reads a handful
    of tables, not 400 (the quadratic walk took 22 s on 16,000 modules)."""
    import ast

    from kb.scan.interp import FileScan, Interpreter

    classes = 400
    text = "import torch_npu\n\n" + "".join(
        f"class C{i}:\n    def __init__(self):\n        self.op = torch_npu.npu_rms_norm\n\n"
        f"    def forward(self, x, w):\n        return self.op(x, w)\n\n"
        for i in range(classes)
    )
    scan = FileScan("m.py", lines=text.splitlines())
    interp = Interpreter(scan, ast.parse(text))
    interp.class_attrs = _Counting()
    _Counting.touched = 0
    interp.run()
    assert len(scan.calls) == classes
    assert _Counting.touched < 10 * classes


@pytest.fixture()
def unreadable(tmp_path: Path) -> Path:
    (tmp_path / "broken.py").write_text("class Block(nn.Module:\n    pass\n", encoding="utf-8")
    with open(tmp_path / "huge.py", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB that cost nothing on disk
    return tmp_path


def test_the_plan_says_why_a_scanned_file_gave_no_modules(unreadable: Path, capsys: Any) -> None:
    main(
        [
            "scan",
            str(unreadable / "broken.py"),
            str(unreadable / "huge.py"),
            "--plan",
            "--no-config",
        ]
    )
    out = capsys.readouterr().out
    assert "broken.py:1: not read: Python syntax error" in out
    assert "huge.py:1: not read: file is 52428800 bytes" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_the_plan_names_imports_it_did_not_follow(tmp_path: Path, capsys: Any) -> None:
    """A model whose blocks live in files the reader refuses (too large, a FIFO, a syntax
    error) gets a plan that names each of them with the reason."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    with open(pkg / "blocks.py", "wb") as fh:
        fh.truncate(3 * 1024 * 1024)
    os.mkfifo(pkg / "norms.py")
    (pkg / "acts.py").write_text("def gelu(x:\n", encoding="utf-8")
    (pkg / "model.py").write_text(
        "import torch\nfrom pkg.blocks import Block\nfrom .norms import Norm\nfrom pkg.acts import gelu\n\n\n"
        "class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.block = Block()\n        self.norm = Norm()\n\n"
        "    def forward(self, x):\n        return gelu(self.norm(self.block(x)))\n",
        encoding="utf-8",
    )
    main(["scan", str(pkg / "model.py"), "--plan", "--no-config"])
    out = capsys.readouterr().out
    assert "blocks.py: not followed: larger than the" in out
    assert "norms.py: not followed: is a FIFO" in out
    assert "acts.py: not followed: Python syntax error at line 1" in out
    made = scanner(None, ScanOptions(use_config=False, inventory=True))
    from kb.api.scan import document

    doc = document(made.scan([str(pkg / "model.py")]))
    assert {Path(u["path"]).name for u in doc["not_followed"]} == {
        "blocks.py",
        "norms.py",
        "acts.py",
    }
