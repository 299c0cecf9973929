"""kb scan on operators that are not torch_npu's, mounts, decoding and product guards.

Every input is written here (small C++ and Python sources of our own); the extension
records read are the shipped ones under kb/records/extensions/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.api.scan import ScanOptions, scan_paths
from kb.scan.hints import products
from kb.scan.registrations import native_registrations
from kb.scan.sources import SourceError, decode


def _scan(*paths: Path, **options: object):
    return scan_paths(
        [str(p) for p in paths], ScanOptions(fusion=False, use_config=False, **options)
    )  # type: ignore[arg-type]


def _found(report) -> list[tuple[str, int, str, str]]:
    return [(Path(f.file).name, f.line, f.code, f.severity) for f in report.findings]


# -- reading C++ registrations ------------------------------------------------------------

CPP = r"""
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
// m.def("commented_out(Tensor x) -> Tensor");
TORCH_LIBRARY_FRAGMENT(myk, m)
{
    m.def("blend(Tensor a, Tensor b, *, float w=0.5) -> Tensor");  /* m.def("nope() -> ()") */
    m.def(
        "scatter_rows(Tensor(a!) dst, "
        "Tensor idx, \
int axis=0) -> ()");
    m.def("by_name_only", &by_name_only);
    m.class_<Holder>("Holder").def("method", &Holder::method);
}
TORCH_LIBRARY_IMPL(myk, PrivateUse1, m) { m.impl("blend", &blend_npu); }
TORCH_LIBRARY_EXPAND(CONCAT(_k, _ext), ops) { ops.def(TORCH_SELECTIVE_SCHEMA("joined(Tensor x) -> Tensor")); }
"""


def test_native_registrations_read_defs_not_comments_impls_or_class_methods() -> None:
    regs = {(r.namespace, r.name): r for r in reversed(native_registrations(CPP, "k.cpp"))}
    assert set(regs) == {
        ("myk", "blend"),
        ("myk", "scatter_rows"),
        ("myk", "by_name_only"),
        (None, "joined"),
    }
    assert [r.schema for r in native_registrations(CPP, "k.cpp") if r.name == "blend"] == [
        "blend(Tensor a, Tensor b, *, float w=0.5) -> Tensor",
        None,
    ]  # the def, then the impl
    assert regs[("myk", "blend")].schema == "blend(Tensor a, Tensor b, *, float w=0.5) -> Tensor"
    assert (
        regs[("myk", "scatter_rows")].schema
        == "scatter_rows(Tensor(a!) dst, Tensor idx, int axis=0) -> ()"
    )
    assert regs[("myk", "blend")].line == 6
    assert regs[("myk", "by_name_only")].parameters() is None
    params = regs[("myk", "blend")].parameters()
    assert params is not None and [(p["name"], p["keyword_only"]) for p in params] == [
        ("a", False),
        ("b", False),
        ("w", True),
    ]


@pytest.mark.parametrize(
    "body", ['m.def(R"x(' * 20000, '"\\' * 100000, "/*" * 100000, 'm.def("' * 20000]
)
def test_native_reader_is_linear_on_hostile_input(body: str) -> None:
    found = native_registrations("TORCH_LIBRARY(a, m) {" + body, "x.cpp")
    assert all(r.schema is None for r in found)


# -- the tree's own operators ---------------------------------------------------------------


def test_tree_registrations_are_checked_against_their_schema(tmp_path: Path) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text(CPP)
    (tmp_path / "defs.py").write_text(
        'import torch\n\nlib = torch.library.Library("pyk", "FRAGMENT")\n'
        'lib.define("twice(Tensor x, int n) -> Tensor")\n\n\n'
        '@torch.library.custom_op("pyk::halve", mutates_args=())\n'
        "def halve(x: torch.Tensor, *, exact: bool = False) -> torch.Tensor:\n"
        "    return x\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch\n\n\ndef f(a, b, x):\n"
        "    y = torch.ops.myk.blend(a, b, w=0.1)\n"  # 5 fine
        "    z = torch.ops.myk.blend(a, b, 0.1)\n"  # 6 w is keyword-only
        "    torch.ops.myk.scatter_rows(a, b, axis=1, mode=2)\n"  # 7 no parameter mode
        "    u = torch.ops.pyk.twice(x)\n"  # 8 n missing
        "    v = torch.ops.pyk.halve(x, exact=True)\n"  # 9 fine
        "    w = torch.ops._k_ext.joined(x)\n"  # 10 fine (namespace through a macro)
        "    return torch.ops.myk.by_name_only(x, 1, 2, q=3), y, z, u, v, w\n"  # 11 not checkable
    )
    report = _scan(tmp_path)
    assert _found(report) == [
        ("model.py", 6, "KB502", "error"),
        ("model.py", 7, "KB104", "error"),
        ("model.py", 8, "KB503", "error"),
    ]
    assert "schema registered at" in report.findings[0].message
    assert any("registered by this tree" in n and "ops.cpp" in n for n in report.notes)


def test_a_custom_op_decorated_in_torch_npus_namespace_is_the_trees(tmp_path: Path) -> None:
    (tmp_path / "ext_ops.py").write_text(
        "import torch\nfrom torch import Tensor\n\n\n"
        '@torch._custom_op.impl.custom_op("atb::fused_mix")\n'
        "def fused_mix(a: Tensor, b: Tensor, flag: bool) -> Tensor: ...\n"
    )
    (tmp_path / "use.py").write_text(
        "import torch\n\n\ndef f(a, b):\n    return torch.ops.atb.fused_mix.default(a, b, False)\n"
    )
    report = _scan(tmp_path)
    assert report.findings == []
    assert [s.custom for s in report.sites] == [True]


# -- namespaces that are not torch_npu's --------------------------------------------------------


def test_foreign_namespaces_are_info_and_never_judged_as_torch_npu(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch\n\n\ndef f(x, g):\n"
        "    a = torch.ops.custom.npu_rms_norm(x, g, eps=1)\n"  # shadows a recorded name
        "    b = torch.ops.someone.thing(x)\n"
        "    c = torch.ops.aten.mm.default(x, g)\n"  # PyTorch's own: nothing to say
        "    return a, b, c\n"
    )
    report = _scan(tmp_path)
    assert _found(report) == [("m.py", 5, "KB507", "info"), ("m.py", 6, "KB507", "info")]
    assert "torch_npu's npu_rms_norm is another operator" in report.findings[0].message
    assert "code outside the scanned tree?" in report.findings[1].message


def test_unknown_npu_names_are_info_when_the_file_loads_an_extension(tmp_path: Path) -> None:
    (tmp_path / "with_ext.py").write_text(
        "import torch\nimport my_kernels_npu  # noqa: F401\n\n\n"
        "def f(x, s):\n    return torch.ops.npu.fused_gate_mix(x, s, 1.0)\n"
    )
    (tmp_path / "plain.py").write_text(
        "import numpy as np\nimport torch\n\n\n"
        "def f(x, s):\n    return torch.ops.npu.fused_gate_mix(x, s, np.float32(1))\n"
    )
    report = _scan(tmp_path)
    by_file = {Path(f.file).name: f for f in report.findings}
    assert (by_file["with_ext.py"].code, by_file["with_ext.py"].severity) == ("KB507", "info")
    assert "registered by my_kernels_npu?" in by_file["with_ext.py"].message
    assert (by_file["plain.py"].code, by_file["plain.py"].severity) == ("KB101", "error")


def test_did_you_mean_names_only_operators_whose_schema_takes_the_call(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch_npu\n\n\ndef f(x, g):\n"
        "    a = torch_npu.npu_rms_nrom(x, g, epsilon=1e-6)\n"
        "    return torch_npu.npu_rms_nrom(x, gamma_typo=g), a\n"
    )
    fits, misfits = _scan(tmp_path).findings
    assert fits.code == misfits.code == "KB101"
    assert "did you mean npu_rms_norm" in fits.message
    assert "npu_rms_norm" not in misfits.message  # npu_rms_norm has no gamma_typo


def test_extension_records_name_the_package_and_check_its_schema(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch\nimport sgl_kernel_npu  # noqa: F401\n\n\ndef f(x, y):\n"
        "    a = torch.ops.npu.helloworld(x, y)\n"
        "    return torch.ops.npu.helloworld(x, y, x), a\n"
    )
    report = _scan(tmp_path)
    assert _found(report) == [
        ("m.py", 6, "KB507", "info"),
        ("m.py", 7, "KB507", "info"),
        ("m.py", 7, "KB501", "warning"),
    ]
    assert "the sgl-kernel-npu package registers npu::helloworld" in report.findings[0].message


# -- mounts are the mounting file's --------------------------------------------------------------


def test_a_mock_in_a_test_file_switches_off_checking_there_only(tmp_path: Path) -> None:
    (tmp_path / "test_thing.py").write_text(
        "from unittest.mock import MagicMock\nimport torch_npu\n\n"
        "torch_npu.npu_rms_norm = MagicMock()\n\n\n"
        "def test_it(x):\n    torch_npu.npu_rms_norm(x, eps=1)\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch_npu\n\n\ndef f(x, g):\n    return torch_npu.npu_rms_norm(x, g, eps=1)\n"
    )
    assert _found(_scan(tmp_path)) == [("model.py", 5, "KB104", "error")]


# -- decoding as CPython imports ------------------------------------------------------------------


def test_undecodable_comment_bytes_compile_as_cpython_does() -> None:
    comment = b"# coding=utf-8\nx = 1  # " + "注释".encode("gbk") + b"\n"
    assert decode(comment).startswith("# coding=utf-8\nx = 1  # ")
    with pytest.raises(SourceError):
        decode(b"# coding=utf-8\nx = '" + "字符".encode("gbk") + b"'\n")
    assert "字符" in decode(b"# -*- coding: gbk -*-\nx = '" + "字符".encode("gbk") + b"'\n")


# -- product guards -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("atom", "truth", "only", "never"),
    [
        ("SocVersion.is_Ascend310P()", True, {"atlas-inference"}, set()),
        ("SocVersion.is_Ascend910()", True, {"atlas-training", "atlas-a2", "atlas-a3"}, set()),
        ("torch_npu.npu.get_soc_version() in (220, 223)", True, {"atlas-a2"}, set()),
        ("220 <= soc_version <= 225", False, set(), {"atlas-a2"}),
        (
            "self.soc_version >= 250 and self.soc_version < 260 and tp > 4",
            True,
            {"atlas-a3"},
            set(),
        ),
        ("soc_version == 260", True, {"ascend-950"}, set()),
        ("use_mxfp8", True, {"ascend-950"}, set()),
        ("use_mxfp8", False, set(), set()),  # a path taken without MX runs anywhere
        ("count >= 250", True, set(), set()),  # not a SoC id
    ],
)
def test_product_guards(atom: str, truth: bool, only: set[str], never: set[str]) -> None:
    assert products(frozenset({(atom, truth)}), []) == (only, never)


def test_a_path_for_several_products_is_not_judged_on_one_of_them(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch_npu\n\n\ndef f(x, w, h, soc):\n"
        "    if soc in (100, 101, 200, 201):\n"
        "        return torch_npu.npu_mm_all_reduce_base(x, w, h)\n"
        "    return torch_npu.npu_mm_all_reduce_base(x, w, h)\n"
    )
    found = _found(_scan(tmp_path, product="atlas-a3"))
    assert [line for _f, line, code, _s in found if code == "KB201"] == [7]
