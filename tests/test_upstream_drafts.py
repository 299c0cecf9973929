"""Draft records: facts filled, words left as detectable placeholders, all valid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from fixtures.upstream.helpers import FIXTURES, build_wheel

from kb.catalog.store import load_store
from tools.upstream import PLACEHOLDER
from tools.upstream.cli import main
from tools.upstream.drafts import guess_category, needs_words


@pytest.fixture
def drafted(tmp_path: Path) -> Path:
    records = tmp_path / "records"
    records.mkdir()
    code = main(
        [
            "import",
            "--op-plugin",
            str(FIXTURES / "op-plugin"),
            "--wheel",
            str(build_wheel(tmp_path)),
            "--records",
            str(records),
            "--commit",
            "abc1234",
        ]
    )
    assert code == 0
    return records


def _load(root: Path, name: str) -> dict:
    (path,) = root.rglob(f"{name}.yaml")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_page_api_and_undocumented_operator_gets_a_draft(drafted: Path) -> None:
    names = sorted(p.stem for p in drafted.rglob("*.yaml"))
    assert names == [
        "_npu_fake_paged",
        "_npu_fake_paged_get_workspace",
        "fake_limit",
        "get_npu_format",
        "npu_fake_cast",
        "npu_fake_codegen_only",
        "npu_fake_norm",
        "npu_fake_scatter",
        "npu_fake_scatter_",
        "npu_fake_undoc",
    ]
    assert (drafted / "operators" / "norm" / "npu_fake_norm.yaml").is_file()


def test_drafts_validate_together(drafted: Path) -> None:
    result = load_store(drafted)
    assert result.ok, [str(p) for p in result.problems]
    assert len(result.records) == 10


def test_draft_facts_are_exact(drafted: Path) -> None:
    norm = _load(drafted, "npu_fake_norm")
    assert norm["signature"] == (
        "npu_fake_norm(Tensor x, Tensor gamma, *, int mode=0, float epsilon=1e-06) -> (Tensor, Tensor)"
    )
    assert norm["status"] == "stable" and norm["category"] == "norm"
    assert norm["calls"] == ["torch_npu.npu_fake_norm", "torch.ops.npu.npu_fake_norm"]
    params = {p["name"]: p for p in norm["parameters"]}
    assert params["x"] == {
        "name": "x",
        "type": "Tensor",
        "dtypes": ["float16", "bfloat16"],
        "formats": ["ND"],
    }
    assert params["mode"]["allowed"] == [0, 1] and params["mode"]["keyword_only"] is True
    assert params["epsilon"]["default"] == "1e-06"
    assert [r["name"] for r in norm["returns"]] == ["y", "rstd"]
    assert norm["products"] == ["ascend-950", "atlas-a3-training", "atlas-a2"]
    assert norm["unsupported_products"] == ["atlas-inference"]
    assert norm["versions"] == {"pytorch": ["2.2", "2.3", "2.4"]}
    assert norm["upstream"] == {
        "path": "docs/zh/custom_APIs/torch_npu/torch_npu-npu_fake_norm.md",
        "commit": "abc1234",
        "url": "https://gitcode.com/Ascend/op-plugin/blob/master/docs/zh/custom_APIs/torch_npu/"
        "torch_npu-npu_fake_norm.md",
        "schema_source": "op_plugin_functions.yaml",
        "unsupported_products": ["atlas-inference"],
    }


def test_status_and_lineage(drafted: Path) -> None:
    cast = _load(drafted, "npu_fake_cast")
    assert cast["status"] == "deprecated" and cast["superseded_by"] == "npu_fake_norm"
    assert cast["upstream"]["deprecation"] == {
        "listed_in": ["deprecated.yaml", "page"],
        "replace": "torch_npu.npu_fake_norm",
    }
    assert _load(drafted, "npu_fake_scatter_")["parameters"][0]["mutated"] is True
    undoc = _load(drafted, "npu_fake_undoc")
    assert undoc["status"] == "undocumented" and "path" not in undoc["upstream"]
    assert "no official page" in undoc["description"]
    paged = _load(drafted, "_npu_fake_paged")
    assert paged["upstream"]["schema_source"] == "atb_schemas.txt"
    assert "no docstring" in paged["description"]
    limit = _load(drafted, "fake_limit")
    assert "signature" not in limit and limit["calls"] == ["torch.npu.fake_limit"]
    assert [p["name"] for p in limit["parameters"]] == ["device", "cube_num"]


def test_words_are_placeholders_never_upstream_text(drafted: Path) -> None:
    page_text = "".join(
        p.read_text(encoding="utf-8-sig") for p in (FIXTURES / "op-plugin").rglob("*.md")
    )
    runs = set(re.findall(r"[\u4e00-\u9fff，、：]{6,}", page_text))
    for path in drafted.rglob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert needs_words(data)[:3] == ["summary.en", "summary.zh", "description"]
        assert data["summary"]["en"].startswith(PLACEHOLDER)
        text = path.read_text(encoding="utf-8")
        assert not [r for r in runs if r in text], path


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records"
    records.mkdir()
    code = main(
        [
            "import",
            "--op-plugin",
            str(FIXTURES / "op-plugin"),
            "--records",
            str(records),
            "--dry-run",
            "--only",
            "npu_fake_norm",
        ]
    )
    assert code == 0
    assert not list(records.rglob("*.yaml"))
    assert "would write 1 draft(s)" in capsys.readouterr().out


def test_separate_drafts_directory(tmp_path: Path) -> None:
    records, drafts = tmp_path / "records", tmp_path / "drafts"
    records.mkdir()
    assert (
        main(
            [
                "import",
                "--op-plugin",
                str(FIXTURES / "op-plugin"),
                "--records",
                str(records),
                "--drafts",
                str(drafts),
                "--no-undocumented",
            ]
        )
        == 0
    )
    assert not list(records.rglob("*.yaml"))
    assert sorted(p.stem for p in drafts.rglob("*.yaml")) == [
        "fake_limit",
        "npu_fake_cast",
        "npu_fake_norm",
        "npu_fake_scatter",
        "npu_fake_scatter_",
    ]


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("npu_mla_prolog_v3", "mla"),
        ("npu_kv_rmsnorm_rope_cache_v2", "kv-cache"),
        ("npu_moe_distribute_dispatch_v2", "moe"),
        ("npu_mm_all_reduce_base", "communication"),
        ("npu_quant_matmul", "matmul"),
        ("npu_dynamic_mx_quant", "quantization"),
        ("npu_add_rms_norm_cast", "norm"),
        ("_npu_paged_attention", "attention"),
        ("npu_rotary_mul", "rope"),
        ("npu_top_k_top_p_sample", "sampling"),
        ("npu_swiglu", "activation"),
        ("npu_format_cast", "format"),
        ("npu_prefetch", "memory"),
        ("npu_nms_v4", "vision"),
        ("npu_apply_adam", "training"),
        ("npu_something", "utility"),
    ],
)
def test_category_guess(name: str, category: str) -> None:
    assert guess_category(name) == category
