"""``kb show`` on first contact: English by default, a brief card, one section, gaps."""

from __future__ import annotations

import json
import re

import pytest

from kb.api.recordview import brief, section_key
from kb.catalog.compiled import open_catalog
from kb.cli import main

_CJK = re.compile(r"[\u4e00-\u9fff]")


def show(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["show", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_english_by_default_chinese_on_request(capsys) -> None:
    code, out, _ = show(capsys, "npu_mla_prolog_v3")
    assert code == 0 and not _CJK.search(out)
    code, out, _ = show(capsys, "npu_rms_norm", "--lang", "zh")
    rec = open_catalog().get("npu_rms_norm")
    assert rec is not None
    assert rec["summary"]["zh"] in out and rec["description_zh"] in out
    assert rec["summary"]["en"] not in out


def test_brief_card_is_short_and_has_the_essentials(capsys) -> None:
    code, out, _ = show(capsys, "npu_mla_prolog_v3", "--brief")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 16, out
    assert lines[1].startswith("  MLA preprocessing")
    text = " ".join(out.split())
    assert "call: torch_npu.npu_mla_prolog_v3(token_x, weight_dq," in text
    assert "products: ascend-950, atlas-a3, atlas-a2" in text
    assert "schemes: bf16, w8a8-dynamic" in text
    assert re.search(r"torch_npu: \S+, \S+", text), "a release range with its gaps"


def test_release_ranges_show_the_gap(capsys) -> None:
    """FIA v2 ships in 2.1.0.post17 and again from 2.6.0.post3: not '2.1.0.post17 ..'."""
    _, out, _ = show(capsys, "npu_fused_infer_attention_score_v2")
    assert "torch_npu: 2.1.0.post17, 2.6.0.post3+" in out
    assert "2.1.0.post17 .." not in out
    card = brief(open_catalog().get("npu_fused_infer_attention_score_v2") or {})
    assert card["torch_npu"] == "2.1.0.post17, 2.6.0.post3+"
    assert card["ranges"] == [["2.1.0.post17", "2.1.0.post17"], ["2.6.0.post3", None]]


def test_section_prints_only_that_part(capsys) -> None:
    code, out, _ = show(capsys, "npu_rms_norm", "--section", "parameters")
    assert code == 0
    assert out.splitlines()[1] == "Parameters"
    assert "gamma: Tensor" in out and "Constraints" not in out and "Example" not in out
    code, out, _ = show(capsys, "npu_rms_norm", "--section", "graph-mode")
    assert code == 0 and "aclgraph: supported" in out


def test_section_json_is_the_record_field(capsys) -> None:
    code, out, _ = show(capsys, "npu_rms_norm", "--section", "constraints", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and set(doc) == {"kind", "name", "constraints"}
    assert doc["constraints"] == (open_catalog().get("npu_rms_norm") or {})["constraints"]


def test_unknown_section_is_a_usage_error_listing_the_sections(capsys) -> None:
    code, _, err = show(capsys, "npu_rms_norm", "--section", "nonsense")
    assert code == 2
    assert "no section 'nonsense'" in err and "parameters" in err and "Traceback" not in err


def test_brief_and_section_exclude_each_other(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["show", "npu_rms_norm", "--brief", "--section", "parameters"])
    assert exc.value.code == 2


@pytest.mark.parametrize("name", ["moe-tp-routing", "attention", "prefetch"])
def test_brief_works_for_every_kind(name: str, capsys) -> None:
    code, out, _ = show(capsys, name, "--brief", "--format", "json")
    card = json.loads(out)
    assert code == 0 and card["name"] == name and card["summary"]


def test_section_aliases() -> None:
    rec = open_catalog().get("npu_rms_norm") or {}
    assert section_key(rec, "params") == "parameters"
    assert section_key(rec, "History") == "versions"
    assert section_key(rec, "stages") is None  # a chain's section, not an operator's


def test_tree_prints_answers_under_a_shared_question(capsys) -> None:
    """attention: gqa and mha both lead to the sinks question; both show its answers."""
    assert main(["tree", "attention"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    mha = next(i for i, line in enumerate(lines) if line.strip().startswith("- mha:"))
    block = []
    for line in lines[mha + 1 :]:
        if line.startswith("    - "):  # the next answer of the root question
            break
        block.append(line.strip())
    assert "? Does the layer add learnable attention sinks (GPT-OSS)? (--sinks)" in block
    assert "- prefill: Prefill - the prompt tokens" in block
    assert any(line.startswith("- paged:") for line in block)
