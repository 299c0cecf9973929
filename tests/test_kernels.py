"""Kernel facts: the registration reader, the wrapper → aclnn → kernel link, the harvest,
kernel-only products in the checker, and the one family/sub-series rule of product checks.

Every C++ text here is a small fixture written for these tests (same shapes as the
upstream files, none of their code).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kb.api.check import Finding, check_text
from kb.catalog.compiled import Catalog, open_catalog
from kb.catalog.kernelfacts import kernel_products
from kb.catalog.models import Kernel
from kb.vocab import PRODUCT_SOCS, product_support, sub_series_in
from tools.upstream.kernel_facts import KernelRepo, harvest_record
from tools.upstream.kernel_links import (
    aclnn_directories,
    load_wrappers,
    operator_directory,
)
from tools.upstream.kernels import parse_def

DEF_CPP = textwrap.dedent("""\
    // AddConfig("ascend310p") in a comment is not a registration
    #include "register/op_def_registry.h"
    namespace ops {
    static const std::vector<ge::DataType> kGateTypes = {{ge::DT_FLOAT16, ge::DT_BF16}};
    class FixGate : public OpDef {
    public:
        explicit FixGate(const char* name) : OpDef(name)
        {
            this->Input("x")
                .ParamType(REQUIRED)
                .DataType({ge::DT_FLOAT16, ge::DT_BF16})
                .Format({ge::FORMAT_ND, ge::FORMAT_ND});
            this->Input("g").ParamType(OPTIONAL).DataType(kGateTypes).Format({ge::FORMAT_ND, ge::FORMAT_ND});
            this->Output("y").DataType({ge::DT_FLOAT16, ge::DT_BF16}).Format({ge::FORMAT_ND, ge::FORMAT_ND});
            this->Attr("mode").AttrType(OPTIONAL).Int(0);
            this->AICore().AddConfig("ascend910b");
            this->AICore().AddConfig("ascend910_93");
            OpAICoreConfig small;
            small.Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_ND});
            small.DynamicShapeSupportFlag(true);
            this->AICore().AddConfig("ascend310p", small);
            this->AICore().AddConfig("ascend950");
            this->AICore().AddConfig("kirinx90", small);
            this->AICore().AddConfig(socName, small);
        }
    };
    OP_ADD(FixGate, optiling::FixGateInfo);
    }
    """)


def test_registration_reader_reads_socs_lists_and_configs() -> None:
    [kd] = parse_def(DEF_CPP, "gate/fix_gate/op_host/fix_gate_def.cpp")
    assert kd.op_type == "FixGate"
    assert list(kd.socs) == ["ascend910b", "ascend910_93", "ascend310p", "ascend950", "kirinx90"]
    default = {t.name: (t.io, t.dtypes, t.formats) for t in kd.tensors}
    assert default["x"] == ("input", ["FLOAT16", "BF16"], ["ND", "ND"])
    assert default["g"] == ("input", ["FLOAT16", "BF16"], ["ND", "ND"])  # the named vector
    assert default["y"][0] == "output"
    small = kd.tensors_for("ascend310p")
    assert small is not None and [(t.name, t.dtypes) for t in small] == [("x", ["FLOAT16"])]
    assert kd.tensors_for("ascend950") == kd.tensors
    # the SoC held in a variable is reported, never guessed
    assert kd.unreadable == [
        "gate/fix_gate/op_host/fix_gate_def.cpp:24: AddConfig without a literal SoC name"
    ]
    assert kd.first_line == 5 and kd.last_line == 27
    assert not kd.conditional


def test_reader_reports_what_it_cannot_follow() -> None:
    text = textwrap.dedent("""\
        class Odd : public OpDef {
        public:
            explicit Odd(const char* name) : OpDef(name)
            {
                this->Input("x").DataType(TypesFor(version)).Format({ge::FORMAT_ND});
                OpAICoreConfig built = MakeConfig();
                OpAICoreConfig filled;
                Fill(filled);
        #if defined(EXTRA)
                this->AICore().AddConfig("ascend910b", built);
        #endif
                this->AICore().AddConfig("ascend950", filled);
            }
        };
        OP_ADD(Odd);
        """)
    [kd] = parse_def(text, "odd_def.cpp")
    assert kd.conditional
    assert kd.opaque == {"built", "filled"}
    assert kd.tensors_for("ascend950") is None and kd.tensors_for("ascend910b") is None
    said = " | ".join(kd.unreadable)
    assert "DataType is not a literal list" in said and "preprocessor" in said
    assert "config built initialised by code not read" in said
    assert "config filled used by code not read" in said
    assert kd.tensors[0].dtypes is None and kd.tensors[0].formats == ["ND"]


def test_one_config_object_redeclared_between_chips_keeps_each_chips_lists() -> None:
    # one OpAICoreConfig is added for two chips, then its inputs are declared and it is
    # added for a third, then declared again for a fourth: each chip keeps what held when
    # it was added, and a redeclared input replaces the earlier one (never both)
    text = textwrap.dedent("""\
        class Mix : public OpDef {
        public:
            explicit Mix(const char* name) : OpDef(name)
            {
                this->Input("a").DataType({ge::DT_FLOAT16, ge::DT_BF16}).Format({ge::FORMAT_ND, ge::FORMAT_ND});
                this->Input("b").DataType({ge::DT_FLOAT16, ge::DT_BF16}).Format({ge::FORMAT_ND, ge::FORMAT_ND});
                OpAICoreConfig cfg;
                cfg.DynamicShapeSupportFlag(true);
                this->AICore().AddConfig("ascend910b", cfg);
                this->AICore().AddConfig("ascend910_93", cfg);
                cfg.Input("a").DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_FRACTAL_NZ});
                cfg.Input("b").DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_ND});
                this->AICore().AddConfig("ascend310p", cfg);
                cfg.Input("a").DataType({ge::DT_FLOAT, ge::DT_BF16}).Format({ge::FORMAT_ND, ge::FORMAT_ND});
                this->AICore().AddConfig("ascend950", cfg);
            }
        };
        OP_ADD(Mix);
        """)
    [kd] = parse_def(text, "mix_def.cpp")

    def lists(soc: str) -> list[tuple[str, list[str] | None]]:
        got = kd.tensors_for(soc)
        assert got is not None
        return [(t.name, t.dtypes) for t in got]

    both = [("a", ["FLOAT16", "BF16"]), ("b", ["FLOAT16", "BF16"])]
    assert lists("ascend910b") == both and lists("ascend910_93") == both
    assert lists("ascend310p") == [("a", ["FLOAT16"]), ("b", ["FLOAT16"])]
    assert lists("ascend950") == [("a", ["FLOAT", "BF16"]), ("b", ["FLOAT16"])]


def test_reader_is_linear_on_a_large_file() -> None:
    body = "\n".join(
        f'        this->Input("x{i}").DataType({{ge::DT_INT8}}).Format({{ge::FORMAT_ND}});'
        for i in range(4000)
    )
    text = (
        "class Big : public OpDef {\npublic:\n    explicit Big(const char* n) : OpDef(n)\n"
        f'    {{\n{body}\n        this->AICore().AddConfig("ascend910b");\n    }}\n}};\n'
        "OP_ADD(Big);\n"
    )
    [kd] = parse_def(text, "big_def.cpp")
    assert len(kd.tensors) == 4000 and list(kd.socs) == ["ascend910b"]


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture()
def trees(tmp_path: Path) -> tuple[Path, Path]:
    plugin, ops = tmp_path / "plugin", tmp_path / "ops"
    _write(
        plugin,
        "op_plugin/ops/opapi/FixKernelNpuOpApi.cpp",
        """\
        namespace op_api {
        static void launch(const at::Tensor &x, at::Tensor &y)
        {
            EXEC_NPU_CMD(aclnnFixGate, x, y);
        }

        at::Tensor npu_fix_gate_symint(const at::Tensor &x, c10::SymInt n)
        {
            at::Tensor y = x;
            launch(x, y);
            return y;
        }

        at::Tensor npu_fix_refused(const at::Tensor &x)
        {
            TORCH_CHECK(c10_npu::GetSocVersion() != c10_npu::SocVersion::Ascend950,
                "not on this chip", OPS_ERROR(ErrCode::NOT_SUPPORT));
            EXEC_NPU_CMD(aclnnFixGate, x, x);
            return x;
        }

        at::Tensor npu_fix_branching(const at::Tensor &x)
        {
            if (c10_npu::GetSocVersion() >= c10_npu::SocVersion::Ascend950) {
                EXEC_NPU_CMD(aclnnFixGate, x, x);
            }
            return x;
        }

        at::Tensor npu_fix_unknown(const at::Tensor &x)
        {
            EXEC_NPU_CMD(aclnnFixGate, x, x);
            EXEC_NPU_CMD(aclnnElsewhere, x, x);
            return x;
        }
        }
        """,
    )
    _write(
        plugin,
        "op_plugin/config/op_plugin_functions.yaml",
        """\
        custom:
          - func: npu_fix_generated(Tensor self) -> Tensor
            op_api: all_version
            gen_opapi:
              exec: aclnnFixGate
        """,
    )
    _write(ops, "gate/fix_gate/op_host/fix_gate_def.cpp", DEF_CPP)
    _write(ops, "gate/fix_gate/docs/aclnnFixGate.md", "# fixture page\n")
    _write(ops, "experimental/gate/fix_gate/docs/aclnnFixGate.md", "# fixture page\n")
    return plugin, ops


def test_wrapper_links_follow_helpers_symint_and_generated_entries(
    trees: tuple[Path, Path],
) -> None:
    wrappers = load_wrappers(trees[0])
    [link] = wrappers.links("npu_fix_gate")
    assert (link.aclnn, link.gated, link.refuses) == ("aclnnFixGate", False, [])
    [gen] = wrappers.links("npu_fix_generated")
    assert gen.aclnn == "aclnnFixGate" and gen.path.endswith("op_plugin_functions.yaml")
    [refused] = wrappers.links("npu_fix_refused")
    assert refused.refuses == ["Ascend950"] and not refused.gated
    [branch] = wrappers.links("npu_fix_branching")
    assert branch.gated
    assert wrappers.links("npu_no_such_op") == []


def test_aclnn_directory_prefers_the_released_one(trees: tuple[Path, Path]) -> None:
    found = aclnn_directories(trees[1])["aclnnFixGate"]
    assert set(found) == {"gate/fix_gate", "experimental/gate/fix_gate"}
    assert operator_directory(found) == "gate/fix_gate"
    assert operator_directory({"a/x": "doc", "b/x": "doc"}) is None


def _harvest(trees: tuple[Path, Path], api: str) -> list[dict]:
    repo = KernelRepo("example/ops", "abc1234", trees[1])
    repo.load()
    outcome = harvest_record(
        api, load_wrappers(trees[0]), [repo], ("example/plugin", "def5678"), PRODUCT_SOCS
    )
    for block in outcome.kernels:
        Kernel.model_validate(block)
    return outcome.kernels


def test_harvest_builds_validated_blocks_and_kernel_products(trees: tuple[Path, Path]) -> None:
    [block] = _harvest(trees, "npu_fix_gate")
    assert block["op_type"] == "FixGate" and block["lines"] == "5-27"
    assert block["products"] == ["atlas-a2", "atlas-a3", "atlas-inference", "ascend-950"]
    groups = {tuple(g["socs"]): g["inputs"] for g in block["inputs"]}
    assert groups[("ascend310p", "kirinx90")] == [
        {"name": "x", "dtypes": ["FLOAT16"], "formats": ["ND"]}
    ]
    assert groups[("ascend910b", "ascend910_93", "ascend950")][0]["dtypes"] == ["FLOAT16", "BF16"]
    assert kernel_products({"kernels": [block]}) == block["products"]
    [refused] = _harvest(trees, "npu_fix_refused")
    assert refused["wrapper"]["refused_products"] == ["ascend-950"]
    assert "ascend-950" not in kernel_products({"kernels": [refused]})
    [branch] = _harvest(trees, "npu_fix_branching")
    assert kernel_products({"kernels": [branch]}) == []
    # one aclnn API of the wrapper unresolved: no blocks at all (the SoC set would lie)
    assert _harvest(trees, "npu_fix_unknown") == []


def test_kernel_products_intersect_and_skip_conditional_builds() -> None:
    def k(products: list[str], **extra: object) -> dict:
        return {"products": products, "wrapper": {}, **extra}

    assert kernel_products({"kernels": [k(["atlas-a2", "ascend-950"]), k(["atlas-a2"])]}) == [
        "atlas-a2"
    ]
    assert kernel_products({"kernels": [k(["atlas-a2"], conditional=True)]}) == []
    assert kernel_products({}) == []


def test_products_table_maps_soc_names_and_names_sub_series() -> None:
    assert PRODUCT_SOCS["ascend910_93"] == "atlas-a3"
    assert PRODUCT_SOCS["ascend950"] == PRODUCT_SOCS["ascend910_95"] == "ascend-950"
    assert "kirinx90" not in PRODUCT_SOCS
    assert product_support("ascend-950", ["ascend-950dt"]) == "partial"
    assert sub_series_in("ascend-950", ["ascend-950dt", "atlas-a2"]) == ("ascend-950dt",)
    assert product_support("ascend-950dt", ["ascend-950"]) == "yes"  # inherits the family


# -- the checker ------------------------------------------------------------------------

_RECORD = """\
kind: operator
name: {name}
calls: [torch_npu.{name}]
status: stable
category: {category}
summary: {{en: Fixture., zh: 测试记录。}}
description: Fixture for kernel-only products and the family/sub-series rule.
signature: {name}(Tensor x, int mode=0) -> Tensor
parameters:
  - {{name: x, type: Tensor, dtypes: [float16, bfloat16, int8]}}
  - {{name: mode, type: int, required: false, default: "0"}}
products: {products}
unsupported_products: {unsupported}
{extra}"""

_KERNEL = """\
kernels:
  - op_type: FixGate
    aclnn: aclnnFixGate
    repo: example/ops
    commit: "abc1234"
    path: gate/fix_gate/op_host/fix_gate_def.cpp
    lines: 5-27
    socs: [ascend910b, ascend910_93, ascend950]
    products: [atlas-a2, atlas-a3, ascend-950]
    wrapper: {repo: example/plugin, commit: "def5678", path: a.cpp, lines: 1-9}
"""

_REFUSAL = """\
evidence:
  - about: [unsupported_products]
    kind: source
    repo: example/plugin
    commit: "def5678"
    path: a.cpp
    lines: "3"
    says: The fixture wrapper refuses this product.
"""

_MODES = """\
quantization:
  - {scheme: bf16, tensors: {x: [bfloat16]}}
  - {scheme: w8a8-static, select: {mode: 1}, tensors: {x: [int8]}, products: [ascend-950dt]}
  - {scheme: w8a16, select: {mode: 3}, tensors: {x: [bfloat16]}, products: [ascend-950]}
rules:
  - id: mode-2-sub-series
    when: [{arg: mode, equals: 2}]
    products: [ascend-950dt]
    message: Mode 2 is documented on one sub-series.
"""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("records")
    ops = root / "operators"
    ops.mkdir()
    rows = [
        ("npu_fix_kernel", "[atlas-a2]", "[]", _KERNEL),
        ("npu_fix_refused", "[atlas-a2]", "[atlas-a3]", _KERNEL + _REFUSAL),
        ("npu_fix_plain", "[atlas-a2-training]", "[]", ""),
        ("npu_fix_modes", "[ascend-950, atlas-a2]", "[]", _MODES),
    ]
    for name, products, unsupported, extra in rows:
        (ops / f"{name}.yaml").write_text(
            _RECORD.format(
                name=name,
                category="activation",
                products=products,
                unsupported=unsupported,
                extra=extra,
            ),
            encoding="utf-8",
        )
    return open_catalog(root)


def _check(catalog: Catalog, op: str, product: str, extra: str = "") -> list[Finding]:
    text = (
        f"version: 1\ntarget: {{product: {product}}}\ncandidates:\n"
        f"  - module: model.layers.*.mlp\n    operator: {op}\n{extra}"
    )
    return check_text(text, "c.yaml", catalog=catalog)


def _codes(found: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in found]


def test_kernel_only_product_is_kb209_not_kb208(catalog: Catalog) -> None:
    found = _check(catalog, "npu_fix_kernel", "atlas-a3")
    assert _codes(found) == [("KB209", "warning")]
    assert "FixGate" in found[0].message and "example/ops@abc1234" in found[0].message
    # a sub-series of a kernel product inherits it
    assert _codes(_check(catalog, "npu_fix_kernel", "atlas-a3-inference")) == [("KB209", "warning")]
    # what neither the page nor the kernel shows stays as before
    assert _codes(_check(catalog, "npu_fix_kernel", "atlas-inference")) == [("KB208", "warning")]
    assert _codes(_check(catalog, "npu_fix_plain", "atlas-a3")) == [("KB208", "warning")]
    assert _check(catalog, "npu_fix_kernel", "atlas-a2") == []


def test_a_page_refusal_beats_the_kernel(catalog: Catalog) -> None:
    assert _codes(_check(catalog, "npu_fix_refused", "atlas-a3")) == [("KB201", "error")]


def test_kb203_family_target_warns_naming_the_sub_series(catalog: Catalog) -> None:
    family = _check(catalog, "npu_fix_modes", "ascend-950", "    quantization: w8a8-static\n")
    assert _codes(family) == [("KB203", "warning")]
    assert "ascend-950dt of ascend-950" in family[0].message
    assert _check(catalog, "npu_fix_modes", "ascend-950dt", "    quantization: w8a8-static\n") == []
    other = _check(catalog, "npu_fix_modes", "ascend-950pr", "    quantization: w8a8-static\n")
    assert _codes(other) == [("KB203", "error")]
    # a sub-series inherits a mode documented for its family
    assert _check(catalog, "npu_fix_modes", "ascend-950pr", "    quantization: w8a16\n") == []


def test_kb109_family_target_warns_and_sub_series_inherits(catalog: Catalog) -> None:
    args = "    args: {mode: 2}\n"
    family = _check(catalog, "npu_fix_modes", "ascend-950", args)
    assert _codes(family) == [("KB109", "warning")]
    assert "ascend-950dt of ascend-950" in family[0].message
    assert _check(catalog, "npu_fix_modes", "ascend-950dt", args) == []
    # a sub-series target is judged by its family's listing, so the rule speaks
    assert _codes(_check(catalog, "npu_fix_modes", "ascend-950pr", args)) == [("KB109", "error")]


def test_a_partly_documented_family_stays_silent_in_kb208_and_kb209(catalog: Catalog) -> None:
    # the page's list is no restriction: a family target whose page lists one of its
    # sub-series is not warned about (the restricting facts of KB203/KB109 are)
    assert _check(catalog, "npu_fix_plain", "atlas-a2") == []
    assert _check(catalog, "npu_fix_plain", "atlas-a2-training") == []
    assert _codes(_check(catalog, "npu_fix_plain", "atlas-a2-inference")) == [("KB208", "warning")]


def test_harvest_script_writes_blocks_in_place(
    trees: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "harvest_kernels", Path(__file__).parent.parent / "scripts" / "harvest_kernels.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    records = tmp_path / "records" / "operators"
    records.mkdir(parents=True)
    text = _RECORD.format(
        name="npu_fix_gate",
        category="activation",
        products="[atlas-a2]",
        unsupported="[]",
        extra="# a curated comment stays\n",
    )
    (records / "npu_fix_gate.yaml").write_text(text, encoding="utf-8")
    argv = [
        "--records",
        str(tmp_path / "records"),
        "--kernels",
        f"example/ops@abc1234={trees[1]}",
        "--op-plugin",
        f"example/plugin@def5678={trees[0]}",
    ]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert "records matched to kernels: 1" in out and "ascend-950 1" in out
    written = (records / "npu_fix_gate.yaml").read_text(encoding="utf-8")
    assert written.startswith(text.rstrip("\n").rsplit("\n", 1)[0])
    assert "# a curated comment stays" in written and "op_type: FixGate" in written
    # a second run changes nothing
    assert script.main(argv) == 0
    assert (records / "npu_fix_gate.yaml").read_text(encoding="utf-8") == written
