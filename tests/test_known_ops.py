"""Operators torch_npu defines without a record: the data step, the lookup, KB120 in
check and scan, ``kb show``, and KB121 (values vendor code is cited for)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.api.check import check_text
from kb.api.scan import ScanOptions, scan_paths
from kb.catalog.compiled import open_catalog
from kb.catalog.knownops import KNOWN_FILE, KnownOperators, role_of
from kb.catalog.releases import ReleaseData
from kb.catalog.releases import load as load_releases
from kb.cli import main
from tools.upstream import knownops

HERE = Path(__file__).parent
UPSTREAM = HERE / "fixtures" / "upstream"
FIXTURE_RECORDS = HERE / "fixtures" / "check_records"
HEAD = "version: 1\ntarget: {product: atlas-a2}\ncandidates:\n"


def _releases(ops: dict[str, str]) -> ReleaseData:
    """Two harvested releases; every operator in both with one schema."""
    return ReleaseData(
        {
            "format": 1,
            "releases": ["9.8.0", "9.9.0"],
            "operators": {
                k: {"runs": [["9.8.0", "9.9.0", 0]], "schemas": [v]} for k, v in ops.items()
            },
        }
    )


# -- the maintainer step ------------------------------------------------------------------


def test_step_writes_only_what_the_harvest_lacks() -> None:
    harvested = _releases(
        {
            "npu_fake_codegen_only": "npu_fake_codegen_only(Tensor x, int n=2) -> Tensor",
            "npu_fake_scatter": "npu_fake_scatter(Tensor self, Tensor indices, Tensor updates) -> Tensor",
        }
    )
    report = knownops.build(
        UPSTREAM / "op-plugin", UPSTREAM / "wheel", "abc1234", harvested, "9.9.0"
    )
    ops = report.data["operators"]
    assert report.covered == 1  # npu_fake_codegen_only: same schema in releases.json
    assert "npu_fake_codegen_only" not in ops and "npu_fake_scatter" not in ops
    assert ops["_npu_fake_codegen_only"] == {
        "namespace": "npu",
        "source": "wheel 9.9.0",
        "schemas": ["_npu_fake_codegen_only(Tensor x) -> Tensor"],
    }
    assert any("_npu_fake_codegen_only" in w for w in report.warnings)
    # op-plugin's own sections; ATen ("official") and .out overloads are left out
    assert ops["npu_fake_cast"]["source"] == "op_plugin_functions.yaml"
    assert ops["npu_fake_undoc_backward"]["schemas"] == [
        "npu_fake_undoc_backward(Tensor grad, Tensor x) -> Tensor"
    ]
    assert "add" not in ops and "npu_fake_outonly" not in ops
    # ATB: schema from atb_schemas.txt, names of atb_ops.yaml without one, _out left out
    assert ops["_npu_fake_paged"]["namespace"] == "atb"
    assert ops["_npu_fake_paged"]["schemas"][0].startswith("_npu_fake_paged(Tensor query")
    assert ops["npu_fake_noschema"] == {"namespace": "atb", "source": "atb_ops.yaml", "schemas": []}
    assert "npu_fake_noschema_out" not in ops
    assert report.data["sources"]["op-plugin"]["commit"] == "abc1234"


def test_step_output_is_deterministic(tmp_path: Path) -> None:
    harvested = _releases({})
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    knownops.write(
        knownops.build(UPSTREAM / "op-plugin", UPSTREAM / "wheel", "abc1234", harvested, "9.9.0"), a
    )
    knownops.write(
        knownops.build(UPSTREAM / "op-plugin", UPSTREAM / "wheel", "abc1234", harvested, "9.9.0"), b
    )
    assert a.read_bytes() == b.read_bytes()


def test_step_refuses_a_tree_without_config(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        knownops.build(tmp_path, None, "abc1234", _releases({}))


def test_step_cli_reports_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.upstream.cli import main as upstream_main

    assert upstream_main(["known-ops", "--op-plugin", str(tmp_path), "--commit", "abc1234"]) == 2
    assert "op_plugin_functions.yaml" in capsys.readouterr().err


# -- the lookup ---------------------------------------------------------------------------


def test_lookup_folds_overloads_and_strips_call_paths() -> None:
    known = KnownOperators(
        _releases(
            {
                "npu_x": "npu_x(Tensor a) -> Tensor",
                "npu_x.Tensor": "npu_x.Tensor(Tensor a, Tensor b) -> Tensor",
            }
        ),
        {
            "format": 1,
            "sources": {"op-plugin": {"commit": "abc1234def567"}},
            "operators": {
                "_npu_y": {
                    "namespace": "atb",
                    "source": "atb_schemas.txt",
                    "schemas": ["_npu_y(Tensor q, int n) -> ()"],
                }
            },
        },
    )
    x = known.get("torch.ops.npu.npu_x")
    assert x is not None and len(x.schemas) == 2 and x.arg_names() == {"a", "b"}
    assert x.origin == "the torch_npu 9.9.0 wheel"
    y = known.get("torch_npu.atb._npu_y")
    assert (
        y is not None
        and y.namespace == "atb"
        and y.origin == "op-plugin atb_schemas.txt at abc1234def56"
    )
    assert known.get("npu_z") is None


def test_roles() -> None:
    assert role_of("npu_fusion_attention_grad") == "backward"
    assert role_of("npu_conv2d_backward") == "backward"
    assert role_of("npu_deformable_conv2dbk") == "backward"
    assert role_of("_npu_dtype_cast") == "internal"
    assert role_of("npu_gelu") == "forward"


def test_shipped_data_adds_to_releases_json_without_repeating_it() -> None:
    data = json.loads(KNOWN_FILE.read_text(encoding="utf-8"))
    harvested = {k.split(".", 1)[0] for k in load_releases().operators()}
    assert data["operators"] and not set(data["operators"]) & harvested
    from kb.catalog.signature import parse_schema

    for name, entry in data["operators"].items():
        for schema in entry["schemas"]:
            assert parse_schema(schema).name == name


# -- the checker, the scanner and kb show ------------------------------------------------


def test_check_known_operator_is_info_with_its_schema_and_binds_keywords() -> None:
    text = HEAD + (
        "  - module: a\n    operator: _npu_dtype_cast\n    args: {dtype: 1, bogus: 2}\n"
        "  - module: b\n    operator: npu_not_a_real_op_zz\n"
    )
    found = {(f.code, f.severity, f.line) for f in check_text(text, "c.yaml")}
    assert ("KB120", "info", 5) in found
    assert ("KB104", "error", 6) in found
    assert ("KB101", "error", 8) in found
    assert not any(c == "KB101" and line == 5 for c, _, line in found)
    msg = next(f.message for f in check_text(text, "c.yaml") if f.code == "KB120")
    assert "_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor" in msg and "2.14.0" in msg


def test_scan_binds_a_known_operator_to_its_schema(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch_npu\n\n\ndef f(x):\n"
        "    a = torch.ops.npu._npu_dtype_cast(x, torch.float16, 3)\n"
        "    return torch_npu.npu_not_a_real_op_zz(a)\n",
        encoding="utf-8",
    )
    report = scan_paths([str(tmp_path)], ScanOptions(fusion=False, use_config=False))
    got = {(f.code, f.line) for f in report.findings}
    assert {("KB120", 6), ("KB501", 6), ("KB101", 7)} <= got


def test_show_prints_the_schema_and_exits_as_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "_npu_dtype_cast"]) == 1
    out, err = capsys.readouterr()
    assert "_npu_dtype_cast(Tensor self, ScalarType dtype) -> Tensor" in out
    assert "no record" in err
    assert main(["show", "torch.ops.npu._npu_dtype_cast", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["record"] is None and doc["role"] == "internal" and doc["schemas"]


# -- KB121: values the vendor's code is cited for -------------------------------------


def test_vendor_evidence_turns_the_value_error_into_a_warning() -> None:
    catalog = open_catalog(FIXTURE_RECORDS)
    cand = (
        "  - module: a\n    phase: prefill\n    operator: npu_fused_infer_attention_score_v2\n"
        "    args: {{query_quant_mode: {}}}\n"
    )
    cited = check_text(HEAD + cand.format(7), "v.yaml", catalog=catalog)
    assert [(f.code, f.severity) for f in cited] == [("KB121", "warning")]
    assert "Ascend/MindIE-SD" in cited[0].message
    uncited = check_text(HEAD + cand.format(5), "v.yaml", catalog=catalog)
    assert [(f.code, f.severity) for f in uncited] == [("KB106", "error")]
