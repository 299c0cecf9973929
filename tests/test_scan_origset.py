"""The original-code development set of ``kb scan --plan`` (issue 29).

The manifest is consistent (every file pinned to a repository, commit and path; every family
cited by a port line; configs that parse and say where each value comes from; module facts in
the harness's vocabulary; nothing reserved for judging), the harness's semantic checks fire
on stages that compute something else and stay quiet on faithful ones, and, when
``KB_SCAN_ORIGSET`` names a folder the files are laid out in (``scripts/fetch_origset.py``),
the plan meets the issue's bar.  The model code itself is never stored in the project.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent / "scripts"
MANIFEST = yaml.safe_load((HERE / "data" / "scan-origset.yaml").read_text(encoding="utf-8"))
CORPUS = HERE.parent.parent / "shared" / "corpus"
CITE = re.compile(r"^([\w-]+):([\w./-]+\.py):(\d+)$")
SHA = re.compile(r"^[0-9a-f]{40}$")

#: Repositories reserved for judging (the team's RESERVED.md): never in the set, as a model
#: or as a port.  The two lists keep the layout they were written in (``fmt: skip``): the
#: judged names are never rewritten by a reformat.
RESERVED_REPOS = {
    "deepseek-ai/deepseek-v3", "deepseek-ai/deepseek-v3.2-exp", "openai/gpt-oss", "mistralai/mistral-inference",
    "google/gemma_pytorch", "allenai/olmo", "baichuan-inc/baichuan-7b", "pytorch-labs/gpt-fast",
    "wan-video/wan2.1", "black-forest-labs/flux", "lightricks/ltx-video", "stepfun-ai/step-video-t2v",
    "genmoai/mochi", "stability-ai/sd3.5", "omni-ai-npu/omni-infer", "ascend/sglang", "ascend/modelzoo-pytorch",
    "ascend/torchair", "flashserve/flash-linear-attention-npu", "ascend/mindspeed-mm", "modeltc/lightx2v",
}  # fmt: skip
#: Reserved files wherever they are copied (ChatGLM's modelling files, the wheels' files).
RESERVED_NAMES = {
    "transformer_cogvideox.py", "cogvideox_transformer_3d.py", "sana_transformer.py", "transformer_hidream_image.py",
    "unet_2d_condition.py", "modeling_mistral.py", "modeling_granitemoe.py", "modeling_cohere.py", "modeling_olmo2.py",
}  # fmt: skip
RESERVED_WORDS = (
    "chatglm",
    "modelzoo",
    "gpt-oss",
    "gpt_oss",
    "wan2.1",
    "wan2_1",
    "ltx-video",
    "step-video",
    "mochi",
)

FACTS: dict[str, Any] = {
    "kind": {"attention", "mlp", "norm", "router", "moe", "adaln", "block"},
    "causal": {True, False, "caller"},
    "cache": {True, False},
    "rope": {"half", "interleave", "none"},
    "activation": {"silu", "gelu", "gelu_tanh", "quick_gelu", "relu", "sigmoid"},
    "glu": {"first", "second", "none"},
    "norm": {"rms", "layer"},
    "qk_norm": {"rms", "layer"},
    "scoring": {"softmax", "sigmoid"},
    "order": {"score_then_topk", "topk_then_score"},
    "bias": {True, False},
    "renormalize": {True, False},
    "sinks": {True, False},
    "linear": {True},
    "topk": int,
    "groups": int,
    "topk_groups": int,
    "window": int,
    "scale": float,
}


def _script(name: str) -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_manifest_pins_enough_files_of_both_kinds() -> None:
    files = MANIFEST["files"]
    names = [f["name"] for f in files]
    assert len(names) == len(set(names))
    assert len(files) >= 24
    assert sum(f["kind"] == "diffusion" for f in files) >= 8
    assert sum(f["kind"] == "llm" for f in files) >= 12
    for item in files:
        assert item["kind"] in ("llm", "diffusion"), item["name"]
        assert re.match(r"^[\w.-]+/[\w.-]+$", item["repo"]) and SHA.match(item["commit"]), item[
            "name"
        ]
        assert item["path"].endswith(".py") and not item["path"].startswith("/"), item["name"]
        assert all(not t.startswith("/") and ".." not in t for t in item.get("tree") or []), item[
            "name"
        ]


def test_nothing_reserved_for_judging() -> None:
    repos = [f["repo"] for f in MANIFEST["files"]] + [p["repo"] for p in MANIFEST["ports"].values()]
    for repo in repos:
        assert repo.lower() not in RESERVED_REPOS, repo
        assert not any(word in repo.lower() for word in RESERVED_WORDS), repo
    for item in MANIFEST["files"]:
        for path in [item["path"], *(item.get("tree") or [])]:
            assert Path(path).name not in RESERVED_NAMES, (item["name"], path)
            assert not any(word in path.lower() for word in RESERVED_WORDS), (item["name"], path)
            assert "flux" not in Path(path).parts, (item["name"], path)


def test_every_family_is_known_and_cited_by_a_port() -> None:
    families, ports = MANIFEST["families"], MANIFEST["ports"]
    for port in ports.values():
        assert re.match(r"^[\w.-]+/[\w.-]+$", port["repo"]) and SHA.match(port["commit"]), port
    for item in MANIFEST["files"]:
        assert item["families"], item["name"]
        for family, cites in item["families"].items():
            assert family in families, (item["name"], family)
            assert cites, (item["name"], family)
            for cite in cites:
                match = CITE.match(cite)
                assert match and match.group(1) in ports, (item["name"], cite)


def test_module_facts_use_the_vocabulary() -> None:
    for item in MANIFEST["files"]:
        blocks = [item.get("all_modules") or {}, *(item.get("modules") or {}).values()]
        assert item.get("modules"), item["name"]
        for facts in blocks:
            for key, value in facts.items():
                allowed = FACTS.get(key)
                assert allowed is not None, (item["name"], key)
                ok = isinstance(value, allowed) if isinstance(allowed, type) else value in allowed
                assert ok, (item["name"], key, value)


def test_configs_parse_and_name_their_sources() -> None:
    for item in MANIFEST["files"]:
        if not item.get("model_config"):
            continue
        path = HERE.parent / item["model_config"]
        assert path.parent == HERE / "data" / "origset-configs", item["name"]
        config = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(config.get("_source"), str) and len(config["_source"]) > 20, item["name"]
        for key, value in config.items():
            assert isinstance(value, (int, float, str, bool, list, type(None))), (item["name"], key)


def _cited_text(port: str, path: str) -> str | None:
    """The cited port file: the shared corpus for vllm-ascend, else a mirror when one is here."""
    if port == "vllm-ascend" and (CORPUS / "vllm-ascend" / path).is_file():
        return (CORPUS / "vllm-ascend" / path).read_text(encoding="utf-8")
    mirrors = os.environ.get("KB_ORIGSET_MIRRORS")
    if not mirrors:
        return None
    fetch = _script("fetch_origset")
    info = MANIFEST["ports"][port]
    gitdir = fetch.git_dir(Path(mirrors), info["repo"])
    if gitdir is None:
        return None
    out = subprocess.run(
        ["git", f"--git-dir={gitdir}", "show", f"{info['commit']}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout if out.returncode == 0 else None


def test_cited_port_lines_call_the_family() -> None:
    checked = 0
    for item in MANIFEST["files"]:
        for family, cites in item["families"].items():
            for cite in cites:
                port, path, line = CITE.match(cite).groups()  # type: ignore[union-attr]
                text = _cited_text(port, path)
                if text is None:
                    continue
                lines = text.splitlines()
                near = "\n".join(lines[max(int(line) - 3, 0) : int(line) + 2])
                assert any(
                    re.search(rf"\b{re.escape(op)}\b", near) for op in MANIFEST["families"][family]
                ), (item["name"], cite, family)
                checked += 1
    if not checked:
        pytest.skip("neither ../shared/corpus nor KB_ORIGSET_MIRRORS is here")


@pytest.fixture(scope="module")
def facts_module() -> ModuleType:
    return _script("scan_origset_facts")


def _entry(
    module: str, phase: str, *stages: dict[str, Any], notes: list[str] | None = None
) -> dict[str, Any]:
    return {"module": module, "phase": phase, "stages": list(stages), "notes": notes or []}


def test_bidirectional_module_refuses_decode_and_causal_masks(facts_module: ModuleType) -> None:
    check = facts_module.wrong_stages
    facts = {"causal": False, "cache": False}
    dense = {"operator": "npu_fusion_attention", "args": {"input_layout": "BSND"}}
    assert check(_entry("Block", "prefill", dense), facts) == []
    assert check(_entry("Block", "decode", dense), facts)
    assert check(
        _entry(
            "Block", "prefill", {"operator": "npu_fusion_attention", "args": {"sparse_mode": 3}}
        ),
        facts,
    )
    assert check(
        _entry(
            "Block", "prefill", dense, notes=["mask so each query sees only the keys before it"]
        ),
        facts,
    )
    assert check(_entry("Block", "prefill", {"operator": "npu_scatter_pa_kv_cache"}), facts)
    assert check(_entry("Block", "decode", dense), {"causal": True, "cache": True}) == []


def test_glu_half_and_activation_are_held_to_the_module(facts_module: ModuleType) -> None:
    check = facts_module.wrong_stages
    swiglu = {"operator": "npu_swiglu"}
    assert check(_entry("Mlp", "both", swiglu), {"activation": "silu", "glu": "first"}) == []
    assert check(_entry("Mlp", "both", swiglu), {"activation": "silu", "glu": "second"})
    assert check(_entry("Mlp", "both", swiglu), {"activation": "gelu_tanh", "glu": "none"})
    geglu_left = {"operator": "npu_geglu", "args": {"activate_left": True, "approximate": 1}}
    assert (
        check(_entry("Mlp", "both", geglu_left), {"activation": "gelu_tanh", "glu": "first"}) == []
    )
    assert check(
        _entry("Mlp", "both", {"operator": "npu_geglu"}),
        {"activation": "gelu_tanh", "glu": "first"},
    )
    assert check(_entry("Mlp", "both", geglu_left), {"activation": "gelu", "glu": "first"})
    assert check(
        _entry("Mlp", "both", {"operator": "npu_fast_gelu"}),
        {"activation": "gelu_tanh", "glu": "none"},
    )
    tanh = {"operator": "npu_gelu", "args": {"approximate": "tanh"}}
    assert check(_entry("Mlp", "both", tanh), {"activation": "gelu_tanh", "glu": "none"}) == []
    assert check(
        _entry("Mlp", "both", {"operator": "npu_gelu"}), {"activation": "gelu_tanh", "glu": "none"}
    )


def test_rotary_pairing_and_norm_kind(facts_module: ModuleType) -> None:
    check = facts_module.wrong_stages
    half = {"operator": "npu_rotary_mul", "args": {"rotary_mode": "half"}}
    assert check(_entry("Attn", "prefill", half), {"rope": "half"}) == []
    assert check(_entry("Attn", "prefill", half), {"rope": "interleave"})
    assert check(_entry("Attn", "prefill", {"operator": "npu_interleave_rope"}), {"rope": "half"})
    assert check(_entry("Attn", "prefill", {"operator": "npu_rotary_mul"}), {"rope": "none"})
    assert check(_entry("Norm", "both", {"operator": "npu_rms_norm"}), {"norm": "layer"})
    assert (
        check(
            _entry("Norm", "both", {"operator": "npu_rms_norm"}),
            {"norm": "layer", "qk_norm": "rms"},
        )
        == []
    )
    assert check(_entry("Norm", "both", {"operator": "npu_layer_norm_eval"}), {"norm": "rms"})


def test_router_scoring_groups_bias_and_renormalisation(facts_module: ModuleType) -> None:
    check = facts_module.wrong_stages
    sigmoid_groups = {
        "scoring": "sigmoid",
        "bias": True,
        "groups": 8,
        "topk_groups": 4,
        "renormalize": True,
    }
    right = {
        "operator": "npu_moe_gating_top_k",
        "passed": ["x", "bias"],
        "args": {"norm_type": 1, "group_count": 8, "k_group": 4},
    }
    assert check(_entry("Gate", "both", right), sigmoid_groups) == []
    assert check(
        _entry("Gate", "both", {"operator": "npu_moe_gating_top_k_softmax"}), sigmoid_groups
    )
    no_bias = {**right, "passed": ["x"]}
    assert check(_entry("Gate", "both", no_bias), sigmoid_groups)
    softmax_flat = {"operator": "npu_moe_gating_top_k", "args": {"norm_type": 0}}
    assert check(_entry("Gate", "both", softmax_flat), sigmoid_groups)
    assert check(_entry("Gate", "both", softmax_flat), {"scoring": "softmax", "groups": 1}) == []
    raw = {"scoring": "sigmoid", "renormalize": False, "groups": 1}
    assert check(
        _entry("Gate", "both", {"operator": "npu_moe_gating_top_k", "args": {"norm_type": 1}}), raw
    )
    flagged = {"operator": "npu_moe_gating_top_k", "args": {"norm_type": 1, "out_flag": True}}
    assert check(_entry("Gate", "both", flagged), raw) == []


def test_sinks_window_and_linear_attention(facts_module: ModuleType) -> None:
    check = facts_module.wrong_stages
    fia = {"operator": "npu_fused_infer_attention_score_v2", "args": {"sparse_mode": 3}}
    assert check(_entry("Attn", "prefill", fia), {"sinks": True})
    with_sink = {**fia, "passed": ["query", "learnable_sink"]}
    assert check(_entry("Attn", "prefill", with_sink), {"sinks": True}) == []
    assert check(_entry("Attn", "prefill", fia), {"window": 4096})
    banded = {
        "operator": "npu_fused_infer_attention_score",
        "args": {"sparse_mode": 4, "pre_tokens": 4095},
    }
    assert check(_entry("Attn", "prefill", banded), {"window": 4096}) == []
    assert check(_entry("Attn", "prefill", fia), {"linear": True})


@pytest.mark.skipif(
    not os.environ.get("KB_SCAN_ORIGSET"), reason="set KB_SCAN_ORIGSET to the laid-out files"
)
def test_plan_meets_the_bar_on_original_code() -> None:
    rows = _script("scan_origset").measure(Path(os.environ["KB_SCAN_ORIGSET"]))
    present = [r for r in rows if "wanted" in r]
    if not present:
        pytest.skip("no development-set file under KB_SCAN_ORIGSET")
    assert not [r for r in rows if r.get("failed")], [r["failed"] for r in rows if r.get("failed")]
    wanted = sum(len(r["wanted"]) for r in present)
    found = sum(len(r["found"]) for r in present)
    assert found >= 0.9 * wanted, [(r["name"], r["missed"]) for r in present if r["missed"]]
    for r in present:
        assert r["wrong"] == [] and r["check_errors"] == [], r
