"""kb scan: call resolution, binding rules, fusion opportunities, outputs and bad input.

The Python it reads is written for these tests (tests/fixtures/scan/); the calls are
judged against the shipped records, so the expectations name real operators.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kb.api.check import check_text
from kb.api.scan import ScanOptions, scan_paths
from kb.cli import main
from kb.rules import RULES

HERE = Path(__file__).parent
FIX = HERE / "fixtures" / "scan"
SPELLINGS = FIX / "resolution" / "spellings.py"
DEFECTS = FIX / "resolution" / "defects.py"
MODELS = FIX / "models"


def _scan(*paths: Path | str, **options: object):
    return scan_paths([str(p) for p in paths], ScanOptions(**options))  # type: ignore[arg-type]


def _found(report) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in report.findings]


# -- resolution ---------------------------------------------------------------------------


def test_every_spelling_resolves_to_its_operator() -> None:
    report = _scan(SPELLINGS, fusion=False)
    calls = {(s.line, s.record) for s in report.sites}
    assert calls == {
        (17, "npu_rms_norm"),  # torch_npu.X
        (18, "npu_rms_norm"),  # import torch_npu as tnpu
        (19, "npu_rms_norm"),  # from torch_npu import X as rms
        (20, "npu_swiglu"),  # from torch_npu import X
        (21, "npu_rms_norm"),  # module-level function alias
        (22, "npu_swiglu"),  # functools.partial
        (23, "npu_rms_norm"),  # torch.ops.npu.X.default
        (24, "npu_swiglu"),  # getattr(torch_npu, "X")
        (34, "npu_rms_norm"),  # self.ops = torch.ops.npu if ... else another namespace
        (41, "npu_rms_norm"),  # **kw built with dict(), kw[k] = v, kw.update()
        (47, "npu_mla_prolog_v3"),  # **opts filled in both arms of an if
    }
    by_line = {s.line: s for s in report.sites}
    assert by_line[22].args == {"dim": -1}  # bound by partial
    assert by_line[34].args == {"epsilon": 1e-5}  # from the self.extra dict
    assert by_line[41].args == {"epsilon": 2e-5}  # the last update wins
    assert by_line[17].args == {"epsilon": 1e-6}  # a module constant


def test_a_call_summary_keeps_only_what_every_arm_agrees_on(tmp_path: Path) -> None:
    """The per-call summary (what `seen_in` records) never mixes one arm's value with
    another arm's: a literal that differs between arms is only 'passed'."""
    by_line = {s.line: s for s in _scan(SPELLINGS, fusion=False).sites}
    assert by_line[47].args == {"cache_mode": "BSND"}  # the same in both arms
    assert "weight_quant_mode" in by_line[47].passed  # 1 in one arm, 0 in the other
    code = (
        "import torch_npu\n"
        "def attend(q, k, v, meta, spec):\n"
        "    if spec:\n"
        "        layout = 'TND'\n"
        "        lens = meta.query_lens\n"
        "    else:\n"
        "        layout = 'BNSD'\n"
        "        lens = None\n"
        "    return torch_npu.npu_fused_infer_attention_score(\n"
        "        q, k, v, input_layout=layout, actual_seq_lengths=lens)\n"
    )
    (tmp_path / "attend.py").write_text(code, encoding="utf-8")
    (site,) = _scan(tmp_path, fusion=False).sites
    assert "input_layout" not in site.args and "actual_seq_lengths" not in site.args
    assert {"input_layout", "actual_seq_lengths"} <= set(site.passed)


def test_both_arms_are_checked_and_correlated_arms_stay_together() -> None:
    report = _scan(SPELLINGS, fusion=False)
    # weight_quant_mode 1 (one arm) asks for its scale; mode 0 (the other arm) does not;
    # the graph arm's torch.ops.custom_graph.npu_rms_norm is not torch_npu's (info only)
    assert _found(report) == [(34, "KB507"), (44, "KB110")]
    # cache_mode is PA_BSND exactly when cache_index is added: no "also pass cache_index"
    assert not [f for f in _scan(DEFECTS, fusion=False).findings if f.line in range(28, 36)]


def test_defects_are_found_at_their_lines() -> None:
    report = _scan(DEFECTS, fusion=False)
    assert _found(report) == [
        (8, "KB106"),
        (12, "KB104"),
        (16, "KB503"),
        (20, "KB106"),
        (25, "KB101"),
        (43, "KB104"),
    ]
    by_line = {f.line: f for f in report.findings}
    assert "did you mean epsilon" in by_line[12].message
    assert by_line[20].column == 18  # the value written in the dict, not the call
    assert "npu_rms_norm" in by_line[25].message


def test_ignore_comments_only_in_real_comments() -> None:
    lines = {f.line for f in _scan(DEFECTS, fusion=False).findings}
    assert 39 not in lines  # '# kb: ignore[KB104]' after the call
    assert 43 in lines  # the same text inside a string literal ignores nothing


def test_custom_operators_are_not_judged_against_official_records(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(
        "import torch\nimport torch_npu\n\n"
        "torch_npu.npu_rms_norm = torch.ops.myext.npu_rms_norm\n"
        "for name in dir(torch.ops.custom):\n"
        "    setattr(torch_npu, name, getattr(torch.ops.custom, name))\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch_npu\n\n\ndef f(x):\n"
        "    a = torch_npu.npu_rms_norm(x, eps=1)\n"
        "    return torch_npu.npu_my_fused_thing(x), a\n"
    )
    report = _scan(tmp_path, fusion=False)
    # replacing torch_npu.npu_rms_norm in ops.py changes ops.py only: model.py's call is the
    # real operator and is checked; the names added through setattr are the tree's own
    assert _found(report) == [(5, "KB503"), (5, "KB104")]  # gamma missing, eps unknown
    assert len(report.notes) == 1 and "custom operator" in report.notes[0]
    declared = tmp_path / "declared"
    declared.mkdir()
    (declared / "m.py").write_text(
        "import torch_npu\n\n\ndef f(x):\n    return torch_npu.npu_zz(x)\n"
    )
    assert _found(_scan(declared, fusion=False)) == [(5, "KB101")]
    assert _scan(declared, fusion=False, custom_ops=["npu_zz"]).findings == []


def test_release_schemas_decide_positional_binding(tmp_path: Path) -> None:
    src = tmp_path / "cast.py"
    src.write_text(
        "import torch\nimport torch_npu\n\n\ndef f(w):\n"
        "    return torch_npu.npu_format_cast(w, 29, torch.float8_e4m3fn)\n"
    )
    loose = _scan(src, fusion=False).findings
    assert [(f.code, f.severity) for f in loose] == [("KB502", "warning")]
    assert "accepts the call" in loose[0].message  # some releases take it positionally
    strict = _scan(src, fusion=False, torch_npu="2.14.0").findings
    assert [(f.code, f.severity) for f in strict] == [("KB502", "error")]
    older = _scan(src, fusion=False, torch_npu="2.7.1.post2").findings
    assert older == []


def test_product_hints_keep_device_paths_apart(tmp_path: Path) -> None:
    src = tmp_path / "device.py"
    src.write_text(
        "import torch_npu\n\n\nclass A5Adaptor:\n    def q(self, x):\n"
        "        return torch_npu.npu_apply_rotary_pos_emb(x, x, x, x, rotary_mode='interleave')\n\n\n"
        "class A2Adaptor:\n    def q(self, x):\n"
        "        return torch_npu.npu_apply_rotary_pos_emb(x, x, x, x, rotary_mode='interleave')\n"
    )
    found = [(f.line, f.code) for f in _scan(src, fusion=False, product="atlas-a2").findings]
    assert found == [(11, "KB112")]  # the A5 path is judged as Ascend 950, where it is fine


# -- rule units ---------------------------------------------------------------------------

SCAN_RULES = [r for r in RULES if r.language == "python"]


@pytest.mark.parametrize("rule", SCAN_RULES, ids=[r.code for r in SCAN_RULES])
def test_scan_rule_snippets(rule, tmp_path: Path) -> None:
    bad, good = tmp_path / "fail.py", tmp_path / "fix.py"
    bad.write_text(rule.fail)
    good.write_text(rule.fix)
    codes = {f.code for f in _scan(bad).findings}
    assert rule.code in codes, codes
    assert not {f.code for f in _scan(good).findings} & {rule.code}
    assert rule.summary.endswith(".") and rule.why.endswith(".")


# -- fusion opportunities and candidate lists ---------------------------------------------------


def test_fusion_opportunities_name_fused_operators_from_the_records() -> None:
    report = _scan(MODELS, product="atlas-a3")
    found = {
        (Path(o.file).name, o.code): o.operators[:1] or o.chains[:1] for o in report.opportunities
    }
    assert found[("modeling_llama_style.py", "KB601")] == ["npu_rms_norm"]
    assert found[("modeling_llama_style.py", "KB602")] == ["npu_add_rms_norm"]
    assert found[("modeling_llama_style.py", "KB603")][0] in (
        "npu_apply_rotary_pos_emb",
        "npu_rotary_mul",
    )
    assert found[("modeling_llama_style.py", "KB604")][0] in ("npu_swiglu",)
    assert found[("modeling_llama_style.py", "KB606")] == ["npu_fused_infer_attention_score_v2"]
    assert found[("modeling_llama_style.py", "KB607")] == ["npu_fused_infer_attention_score_v2"]
    assert found[("modeling_llama_style.py", "KB609")][0].startswith("gqa-")
    assert found[("modeling_qwen_moe_style.py", "KB605")] == ["npu_moe_gating_top_k_softmax"]
    assert found[("modeling_deepseek_style.py", "KB605")][0] in (
        "npu_moe_gating_top_k",
        "npu_fused_add_topk_div",
    )
    assert found[("modeling_deepseek_style.py", "KB610")] == ["npu_dynamic_quant"]
    assert ("modeling_deepseek_style.py", "KB608") in found
    assert all(f.severity == "info" for f in report.findings)


def test_emitted_candidate_list_passes_kb_check(tmp_path: Path, capsys) -> None:
    out = tmp_path / "plan.yaml"
    assert main(["scan", str(MODELS), "--product", "atlas-a3", "--emit-candidates", str(out)]) == 0
    plan = yaml.safe_load(out.read_text())
    assert plan["version"] == 1 and plan["target"] == {"product": "atlas-a3"}
    ops = {c["operator"] for c in plan["candidates"]}
    assert {
        "npu_rms_norm",
        "npu_add_rms_norm",
        "npu_fused_infer_attention_score_v2",
        "npu_dynamic_quant",
    } <= ops
    # the softmax router: the dedicated gate kernel or the grouped one in softmax mode
    # (both proven for router_softmax_topk; the plan ranks them)
    assert {"npu_moe_gating_top_k_softmax", "npu_moe_gating_top_k"} & ops
    assert any(c["status"] == "replaced" for c in plan["candidates"])  # the existing NPU call
    findings = check_text(out.read_text(), str(out))
    assert [f for f in findings if f.severity == "error"] == []
    capsys.readouterr()
    assert main(["scan", str(MODELS), "--emit-candidates", str(out)]) == 2  # needs a product


# -- outputs ----------------------------------------------------------------------------------


def test_json_output_has_the_check_shape_plus_calls(capsys) -> None:
    assert main(["scan", str(DEFECTS), "--format", "json", "--no-fusion"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["summary"]) >= {"files", "calls", "ops", "errors", "warnings"}
    assert payload["summary"]["files"] == 1 and payload["summary"]["errors"] == 6
    first = payload["findings"][0]
    assert set(first) == {"file", "line", "column", "code", "severity", "message", "candidate"}


def test_sarif_output_validates_against_the_published_schema(capsys) -> None:
    import jsonschema

    schema = json.loads((HERE / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
    assert main(["scan", str(DEFECTS), str(MODELS), "--format", "sarif"]) == 1
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema)
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "KB104" in ids and "KB601" in ids
    levels = {r["level"] for r in run["results"]}
    assert levels == {"error", "note"}


def test_github_and_text_outputs(capsys) -> None:
    main(["scan", str(DEFECTS), "--format", "github", "--no-fusion"])
    out = capsys.readouterr().out
    assert out.count("::error file=") == 6
    main(["scan", str(DEFECTS), "--no-fusion", "--select", "KB104"])
    out = capsys.readouterr().out
    assert "defects.py:12:41: KB104 error:" in out and "KB106" not in out


# -- configuration ------------------------------------------------------------------------------


def test_pyproject_tool_kb_settings_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kb]\nignore = ["KB104"]\ncustom-ops = ["npu_zz"]\nexclude = ["gen/"]\n\n'
        '[tool.kb.per-file-ignores]\n"legacy/*.py" = ["KB106"]\n\n'
        '[[tool.kb.overrides]]\nfiles = ["strict/*.py"]\nignore = []\nselect = ["KB1"]\n'
    )
    for folder in ("legacy", "strict", "gen"):
        (tmp_path / folder).mkdir()
    body = (
        "import torch_npu\n\n\ndef f(x, g):\n    a = torch_npu.npu_rms_norm(x, g, eps=1)\n"
        "    b = torch_npu.npu_swiglu(x, dim='z')\n    return torch_npu.npu_zz(x), a, b\n"
    )
    for folder in ("legacy", "strict", "gen"):
        (tmp_path / folder / "m.py").write_text(body)
    found = sorted(
        (Path(f.file).parent.name, f.code) for f in _scan(tmp_path, fusion=False).findings
    )
    # legacy: KB104 ignored by the table, KB106 by per-file-ignores; strict: the override
    # clears the ignores; gen/: excluded; npu_zz: a declared custom operator everywhere
    assert found == [("strict", "KB104"), ("strict", "KB106")]
    assert main(["scan", str(tmp_path), "--no-config", "--no-fusion", "--format", "json"]) == 1


def test_bad_configuration_is_a_usage_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kb]\nprodcut = "atlas-a3"\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    assert main(["scan", str(tmp_path)]) == 2
    assert "unknown key 'prodcut'" in capsys.readouterr().err


# -- bad input ------------------------------------------------------------------------------------


def test_bad_files_get_one_finding_each_and_the_scan_goes_on(tmp_path: Path, capsys) -> None:
    (tmp_path / "a_syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "b_binary.py").write_bytes(b"import torch_npu\x00\x01")
    (tmp_path / "c_latin1.py").write_bytes("x = 'caf\u00e9'\n".encode("latin-1"))
    (tmp_path / "d_ok.py").write_text(
        "import torch_npu\n\n\ndef f(x):\n    return torch_npu.npu_swiglu(x)\n"
    )
    (tmp_path / "e_cookie.py").write_bytes(
        "# -*- coding: latin-1 -*-\nx = 'caf\u00e9'\n".encode("latin-1")
    )
    (tmp_path / "loop").symlink_to(tmp_path)
    os.mkfifo(tmp_path / "f_fifo.py")
    report = _scan(tmp_path, fusion=False)
    found = [(Path(f.file).name, f.line, f.code) for f in report.findings]
    assert found == [
        ("a_syntax.py", 1, "KB500"),
        ("b_binary.py", 1, "KB500"),
        ("c_latin1.py", 1, "KB500"),
    ]
    assert report.calls == 1
    assert [Path(s.path).name for s in report.skipped] == ["f_fifo.py"]
    capsys.readouterr()
    assert main(["scan", str(tmp_path / "nowhere")]) == 2


def test_nothing_is_imported_or_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nimport torch_npu\n")
    code = subprocess.run(
        [sys.executable, "-m", "kb", "scan", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert code.returncode == 0 and not marker.exists()
