"""Extension records (kb/records/extensions/): the model, the shipped records, the harvester."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from kb.catalog.compiled import open_catalog
from kb.catalog.models import Extension
from kb.catalog.signature import parse_schema
from tools.upstream.extensions import dump, record, registrations

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _body(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "kind": "extension",
        "name": "my-kernels",
        "summary": {"en": "Kernels.", "zh": "算子。"},
        "imports": ["my_kernels"],
        "namespaces": ["myk"],
        "repo": "me/my-kernels",
        "commit": COMMIT,
        "licence": "MIT",
        "operators": [
            {
                "name": "blend",
                "namespace": "myk",
                "schema": "blend(Tensor a) -> Tensor",
                "path": "csrc/ops.cpp",
                "lines": "3",
            }
        ],
    }
    body.update(changes)
    return body


def test_the_model_accepts_a_record_and_refuses_inconsistent_ones() -> None:
    Extension.model_validate(_body())
    op = {"name": "blend", "namespace": "myk", "path": "p", "lines": "1"}
    bad = [
        _body(operators=[{**op, "schema": "mix(Tensor a) -> Tensor"}]),  # schema of another op
        _body(operators=[{**op, "namespace": "other"}]),  # namespace not declared
        _body(operators=[op, op]),  # listed twice
        _body(commit="abc"),
        _body(imports=["not a module"]),
    ]
    for body in bad:
        with pytest.raises(ValidationError):
            Extension.model_validate(body)


def test_shipped_extension_records_load_and_their_schemas_parse() -> None:
    records = {r["name"]: r for r in open_catalog().records("extension")}
    assert {"sgl-kernel-npu", "vllm-ascend", "mie-ops", "mindiesd", "dlinfer"} <= set(records)
    for rec in records.values():
        for op in rec["operators"]:
            if op.get("schema"):
                assert parse_schema(op["schema"]).name == op["name"]
    assert records["vllm-ascend"]["namespaces"] == ["_C_ascend"]
    assert "npu" in records["sgl-kernel-npu"]["namespaces"]


def test_the_harvester_reads_cpp_and_python_registrations(tmp_path: Path) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text(
        'TORCH_LIBRARY(myk, m) {\n  m.def("blend(Tensor a, *, float w=0.5) -> Tensor");\n}\n'
        'TORCH_LIBRARY(NS_MACRO(x), ops) {\n  ops.def("joined(Tensor x) -> Tensor");\n}\n'
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "defs.py").write_text(
        'import torch\n\ntorch.library.define("myk::halve", "(Tensor x) -> Tensor")\n'
    )
    (tmp_path / "tests").mkdir()  # tests register throw-away operators: not harvested
    (tmp_path / "tests" / "t.py").write_text(
        'import torch\ntorch.library.define("myk::t", "() -> ()")\n'
    )
    regs = registrations(tmp_path)
    body = record(
        regs,
        name="my-kernels",
        repo="me/my-kernels",
        commit=COMMIT,
        licence="MIT",
        imports=["my_kernels"],
        summary_en="Kernels.",
        summary_zh="算子。",
        macro_namespace="myk_ext",
    )
    ops = {(o["namespace"], o["name"]): o for o in body["operators"]}
    assert set(ops) == {("myk", "blend"), ("myk", "halve"), ("myk_ext", "joined")}
    assert ops[("myk", "halve")]["schema"] == "halve(Tensor x) -> Tensor"
    assert ops[("myk", "blend")] == {
        "name": "blend",
        "namespace": "myk",
        "schema": "blend(Tensor a, *, float w=0.5) -> Tensor",
        "path": "csrc/ops.cpp",
        "lines": "2",
    }
    text = dump(body)
    assert yaml.safe_load(text)["namespaces"] == ["myk", "myk_ext"]
    only = record(
        regs,
        name="my-kernels",
        repo="me/my-kernels",
        commit=COMMIT,
        licence="MIT",
        imports=["my_kernels"],
        summary_en="Kernels.",
        summary_zh="算子。",
        namespaces=["myk"],
    )
    assert {o["namespace"] for o in only["operators"]} == {"myk"}


BUILD = """
string(TOLOWER "${SOC_VERSION}" soc)
if(soc MATCHES "^ascend950")
  set(NEW_CHIP ON)
else()
  set(NEW_CHIP OFF)
endif()
if(NOT NEW_CHIP)
  add_compile_definitions(OLD_CHIPS_ONLY)
endif()
option(WITH_TEMPLATES "the builder's choice" OFF)
option(WITH_LOGGING "on unless turned off" ON)
if(WITH_TEMPLATES)
  add_compile_definitions(WITH_TEMPLATES)
endif()
if(WITH_LOGGING)
  add_compile_definitions(WITH_LOGGING)
endif()
"""

OPS_CPP = """TORCH_LIBRARY(myk, m) {
  m.def("always(Tensor a) -> Tensor");
#ifdef OLD_CHIPS_ONLY
  m.def("older(Tensor a) -> Tensor");
#endif
#ifdef WITH_TEMPLATES
  m.def("templated(Tensor a) -> Tensor");
#ifdef OLD_CHIPS_ONLY
  m.def("templated_old(Tensor a) -> Tensor");
#endif
#endif
#ifdef WITH_LOGGING
  m.def("logged(Tensor a) -> Tensor");
#endif
}
"""


def test_off_by_default_options_are_told_apart_from_chips() -> None:
    from tools.upstream.buildconds import off_by_default

    assert off_by_default([BUILD], ("WITH_TEMPLATES",)) is True  # option(... OFF)
    assert off_by_default([BUILD], ("WITH_TEMPLATES", "OLD_CHIPS_ONLY")) is True
    assert off_by_default([BUILD], ("WITH_LOGGING",)) is False  # option(... ON)
    assert off_by_default([BUILD], ("OLD_CHIPS_ONLY",)) is False  # decided per chip
    assert off_by_default([BUILD], ("X > 1",)) is False  # an #if expression is not read


def test_every_conditional_registration_carries_its_condition(tmp_path: Path) -> None:
    """A registration under an option (sgl-kernel-npu's catlass operators) records the
    condition even where no product is known to lack it, and says when the default build
    leaves it out everywhere; a chip condition also names the products without it."""
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text(OPS_CPP)
    (tmp_path / "CMakeLists.txt").write_text(BUILD)
    body = record(
        registrations(tmp_path),
        name="my-kernels",
        repo="me/my-kernels",
        commit=COMMIT,
        licence="MIT",
        imports=["my_kernels"],
        summary_en="Kernels.",
        summary_zh="算子。",
        root=tmp_path,
    )
    got = {
        o["name"]: (o.get("condition"), o.get("not_built"), o.get("off_by_default"))
        for o in body["operators"]
    }
    assert got == {
        "always": (None, None, None),
        "older": ("OLD_CHIPS_ONLY", ["ascend-950"], None),
        "templated": ("WITH_TEMPLATES", None, True),
        "templated_old": ("WITH_TEMPLATES && OLD_CHIPS_ONLY", ["ascend-950"], True),
        "logged": ("WITH_LOGGING", None, None),
    }
    Extension.model_validate(yaml.safe_load(dump(body)))
    op = {"name": "blend", "namespace": "myk", "path": "p", "lines": "1"}
    for loose in ({"not_built": ["ascend-950"]}, {"off_by_default": True}):
        with pytest.raises(ValidationError):  # what decides it must be said
            Extension.model_validate(_body(operators=[{**op, **loose}]))


def test_sgl_kernel_npu_says_which_operators_need_a_build_option() -> None:
    rec = next(r for r in open_catalog().records("extension") if r["name"] == "sgl-kernel-npu")
    ops = {o["name"]: o for o in rec["operators"]}
    assert ops["catlass_matmul_basic"]["condition"] == "BUILD_CATLASS_MODULE"
    assert ops["catlass_matmul_basic"]["off_by_default"] is True
    a3_only = [o for o in ops.values() if "ascend-950" in (o.get("not_built") or [])]
    assert len(a3_only) == 13 and all(o.get("condition") for o in a3_only)


def test_kb_show_says_which_builds_have_an_operator() -> None:
    from kb.text.render import record_text

    records = {r["name"]: r for r in open_catalog().records("extension")}
    text = " ".join(record_text(records["vllm-ascend"]).split())
    assert "compiled only under ASCEND_PLATFORM_310P; the builds for ascend-950" in text
    text = " ".join(record_text(records["sgl-kernel-npu"]).split())
    assert "compiled only under BUILD_CATLASS_MODULE; a build option it needs is OFF" in text
