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
