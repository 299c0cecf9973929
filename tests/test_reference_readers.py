"""Readers see the reference: ``kb show --section reference``, the site's "What it
computes", the MCP tool's bounded runs, and showing or searching never loads numpy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.api.errors import UsageError
from kb.api.reference import semantics, source_url
from kb.catalog.compiled import open_catalog
from kb.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_show_section_reference_prints_formula_and_sources(capsys) -> None:
    assert main(["show", "npu_geglu", "--section", "reference"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "What it computes" in out and "activate_left=False: out = A * gelu(B)" in out
    assert "hicann/ops-nn@e5c3fa9 activation/ge_glu_v2/docs/aclnnGeGluV3.md:28-43" in out
    assert "Left open by the sources" in out


def test_semantics_alias_and_full_view(capsys) -> None:
    assert main(["show", "npu_rms_norm", "--section", "semantics"]) == 0
    assert "What it computes" in capsys.readouterr().out
    assert main(["show", "npu_rms_norm"]) == 0
    assert "What it computes" in capsys.readouterr().out


def test_operator_without_reference_shows_nothing_for_it(capsys) -> None:
    main(["show", "npu_ffn", "--section", "reference"])
    assert "What it computes" not in capsys.readouterr().out


def test_source_links_point_at_the_cited_lines() -> None:
    src = {"repo": "Ascend/op-plugin", "commit": "abc1234", "path": "test/t.py", "lines": "11-24"}
    assert source_url(src) == "https://github.com/Ascend/op-plugin/blob/abc1234/test/t.py#L11-L24"
    assert semantics({"name": "x"}) is None


def test_site_page_has_what_it_computes() -> None:
    from site_plugins.operator_reference import reference_section

    rec = open_catalog().get("npu_swiglu")
    text = reference_section(rec)
    assert text.startswith("## What it computes")
    assert "https://github.com/Ascend/op-plugin/blob/" in text and "#L13-L18" in text
    assert reference_section(open_catalog().get("npu_ffn")) == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "npu_rms_norm", "--section", "reference"],
        ["search", "rms norm"],
        ["show", "npu_swiglu"],
    ],
)
def test_show_and_search_do_not_import_numpy(argv: list[str]) -> None:
    code = (
        f"import sys\nfrom kb.cli import main\nrc = main({argv!r})\n"
        "heavy = sorted(m for m in ('numpy', 'ml_dtypes') if m in sys.modules)\n"
        "print('HEAVY', heavy)\nsys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stdout, proc.stdout[-300:]


np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")


def test_run_json_returns_outputs_in_order_and_mutated_caches() -> None:
    from kb.api.reference import run_json

    doc = run_json(
        "npu_add_rms_norm",
        [
            {"data": [[1, 2]], "dtype": "float16"},
            {"data": [[3, 4]], "dtype": "float16"},
            {"data": [1, 1], "dtype": "float16"},
        ],
    )
    assert doc["returns"] == ["y", "rstd", "x"] and doc["outputs"][2]["data"] == [[4.0, 6.0]]
    doc = run_json(
        "_npu_reshape_and_cache",
        [
            {"data": [[[1, 2]]], "dtype": "float16"},
            {"data": [[[3, 4]]], "dtype": "float16"},
            {"shape": [1, 2, 1, 2], "dtype": "float16"},
            {"shape": [1, 2, 1, 2], "dtype": "float16"},
            {"data": [1], "dtype": "int32"},
        ],
    )
    assert doc["outputs"] == [] and doc["mutated"]["key_cache"]["data"][0][1] == [[1.0, 2.0]]


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ([{"shape": [5000]}], {}, "4096 elements"),
        ([{"shape": [64, 64]}] * 17, {}, "65536 elements in all"),
        ([{"shape": [-1]}], {}, "non-negative integers"),
        ([{"shape": "big"}], {}, "non-negative integers"),
        ([{"data": [[1], [2, 3]]}], {}, "rectangular"),
        ([{"data": ["a"]}], {}, "rectangular"),
        ([{"data": [1, 2], "dtype": "complex128"}], {}, "dtype 'complex128'"),
        ([{"nothing": 1}], {}, "an array is"),
        ([[[1, 2]]], {}, "flat list of scalars"),
        ([{"shape": [1, 2]}, 1, 2, 3, 4, 5], {}, "at most"),
        ([{"data": [[1, 2]]}], {"dim": "x"}, "cannot run"),
        ([{"data": [[1, 2]]}], {"dim": 99}, "outside"),
    ],
)
def test_hostile_json_is_a_usage_error(args, kwargs, fragment: str) -> None:
    from kb.api.reference import run_json

    with pytest.raises(UsageError, match=fragment):
        run_json("npu_swiglu", args, kwargs)


def test_hostile_scalars_cannot_allocate() -> None:
    from kb.api.reference import run_json

    x = {"data": [[0.0, 1.0]], "dtype": "float32"}
    ids = {"data": [[0]], "dtype": "int32"}
    with pytest.raises(UsageError, match="outside the record's range"):
        run_json(
            "npu_moe_init_routing_v2",
            [x, ids],
            {"expert_num": 10**12, "expert_tokens_num_flag": True},
        )
    q = {"shape": [1, 1, 8], "dtype": "float16"}
    cache = {"shape": [1, 128, 8], "dtype": "float16"}
    with pytest.raises(UsageError, match="blocks"):
        run_json(
            "npu_fused_infer_attention_score_v2",
            [q, cache, cache],
            {
                "block_table": {"data": [[0]], "dtype": "int32"},
                "block_size": 128,
                "actual_seq_kvlen": [10**9],
            },
        )


def test_run_json_caps_the_work_not_only_the_inputs() -> None:
    """Issue 35 A: small arrays whose broadcast is huge are refused before they allocate."""
    from kb.api.reference import run_json

    x = {"shape": [4096, 1, 1, 1], "dtype": "float16"}
    cos = {"shape": [1, 4096, 1, 1], "dtype": "float16"}
    with pytest.raises(UsageError, match="cap"):
        run_json("npu_rotary_mul", [x, cos, cos])


@pytest.mark.parametrize("value", [None, []])
def test_run_json_names_a_missing_required_tensor(value) -> None:
    from kb.api.reference import run_json

    with pytest.raises(UsageError, match="'gamma'"):
        run_json("npu_rms_norm", [{"data": [[1.0, 2.0]]}, value])
