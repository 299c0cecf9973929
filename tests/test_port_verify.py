"""kb port writes the fused port of a planned file; kb verify proves it on the CPU and
fails, naming the stage, when a port computes something else (fixtures: tests/data/port)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.errors import UsageError
from kb.api.port import port, verify
from kb.cli import main

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
MODELS = (
    "dense_llm",
    "moe_block",
    "dit_block",
    "moe_stacked",
    "gpt_ln",
    "tiny_denoiser",
    "written_gpt",
)
#: decoders with a key/value cache (tests/test_port_cache.py verifies them)
CACHED = ("slot_cache_llm", "index_cache_llm", "pos_cache_llm", "step_cache_llm")
#: flash-attn / xformers calls (tests/test_port_flashattn.py verifies them)
FLASH = ("flash_llm", "xformers_dit")
#: expert loops (tests/test_port_experts.py verifies them)
EXPERTS = ("moe_modules", "moe_stacked_bias")


def _port(name: str, out: Path) -> dict:
    return port(str(DATA / f"{name}.py"), str(out), product="atlas-a2")


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ports")
    out = {}
    for name in MODELS:
        out[name] = root / f"{name}_npu.py"
        _port(name, out[name])
    return out


def test_port_rewrites_each_stage_and_keeps_the_rest(tmp_path: Path) -> None:
    doc = _port("dense_llm", tmp_path / "p.py")
    stages = doc["files"][0]["stages"]
    assert {s["mapping"] for s in stages.values()} == {
        "rms_norm",
        "rope_half",
        "swiglu",
        "attention_gqa_bsnd",
        "add_rms_norm",
    }
    rope = next(s for s in stages.values() if s["mapping"] == "rope_half")
    assert rope["args"]["rotary_mode"] == "half"
    text = (tmp_path / "p.py").read_text()
    assert "# normalise in float32 and come back to the input dtype" in text
    assert "def _kb_unfused_forward(self, x):" in text
    assert doc["files"][0]["weights"]["FeedForward.w1+w3"]["from"] == ["w1.weight", "w3.weight"]
    assert "-        return self.w2(F.silu(self.w1(x)) * self.w3(x))" in doc["files"][0]["diff"]


def test_port_rewrites_norm_modules_gelu_classes_and_written_attention(tmp_path: Path) -> None:
    doc = _port("written_gpt", tmp_path / "p.py")
    stages = doc["files"][0]["stages"]
    assert sorted(stages) == [
        "MaskedAttention.attention_gqa_bsnd",
        "WrittenBlock.gelu_tanh",
        "WrittenBlock.layer_norm",
        "WrittenBlock.layer_norm#2",
        "WrittenGpt.layer_norm",
    ]
    assert stages["MaskedAttention.attention_gqa_bsnd"]["args"]["sparse_mode"] == 3
    assert stages["WrittenBlock.gelu_tanh"]["args"]["approximate"] == "tanh"
    assert stages["WrittenBlock.layer_norm#2"]["args"]["eps"] == "self.ff.norm.eps"
    text = (tmp_path / "p.py").read_text()
    # the GELU class the unplanned head builds stays as written
    assert "return h * 0.5 * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))" in text
    notes = [n for ns in doc["files"][0]["notes"].values() for n in ns]
    assert not [n for n in notes if "not rewritten" in n], notes


def test_port_notes_what_it_cannot_write(tmp_path: Path) -> None:
    doc = _port("dit_block", tmp_path / "p.py")
    notes = doc["files"][0]["notes"]
    assert any("prerequisite cu-seqlens" in n for n in notes["SelfAttention"])
    text = (tmp_path / "p.py").read_text()
    assert "# kb port: TODO(kb port): prerequisite cu-seqlens" in text
    # the adaLN modulation is folded into the norm's weight and bias in code: no TODO
    assert "prerequisite adaln-modulation-as-norm-weight" not in text
    assert "DiTBlock.adaln_layer_norm#2" in doc["files"][0]["stages"]


@pytest.mark.parametrize("name", MODELS)
def test_verify_passes_in_fp32_and_bf16(name: str, ported: dict[str, Path]) -> None:
    doc = verify(str(DATA / f"{name}.py"), str(ported[name]), str(DATA / f"{name}.json"))
    assert doc["passed"], doc["failures"]
    assert not doc["stages_not_reached"]
    ran = {(r["dtype"], r["phase"]) for r in doc["runs"] if not r["not_run"]}
    assert ran == {("float32", "prefill"), ("bfloat16", "prefill")}
    bf16 = next(r for r in doc["runs"] if r["dtype"] == "bfloat16" and not r["not_run"])
    assert {s["stage"] for s in bf16["stages"]} == set(doc["stages_planned"])
    assert all(not s["rejected"] for s in bf16["stages"])


WRONG = [
    # the GLU halves swapped: the up projection activated
    ("dense_llm", "('w1', 'w3')", "('w3', 'w1')", "FeedForward.swiglu"),
    # adjacent pairs rotated where the model rotates halves
    (
        "dense_llm",
        "_kb_rotary(q, cos, sin, 'half')",
        "_kb_rotary(q, cos, sin, 'interleave')",
        "rotary_mode='interleave' where the plan derives 'half'",
    ),
    # a causal mask on a bidirectional attention
    (
        "dit_block",
        "v, None, None, sparse_mode=0)",
        "v, None, None, sparse_mode=3)",
        "SelfAttention.attention_noncausal_bsnd",
    ),
    # stacked experts: the up projection activated in place of the gate
    (
        "moe_stacked",
        "torch.cat([self.gate, self.up], dim=2)",
        "torch.cat([self.up, self.gate], dim=2)",
        "SplitExperts.moe_experts_loop",
    ),
    # stacked experts: the routing weights not applied
    (
        "moe_stacked",
        "_kb_moe_experts(tokens, expert_ids, expert_weights,",
        "_kb_moe_experts(tokens, expert_ids, torch.ones_like(expert_weights),",
        "PackedExperts.moe_experts_loop",
    ),
    # a LayerNorm's bias dropped
    (
        "gpt_ln",
        "self.weight, self.bias, 1e-5)",
        "self.weight, None, 1e-5)",
        "BiasedLayerNorm.layer_norm",
    ),
    # adaLN shift and scale swapped (an affine LayerNorm under the modulation)
    (
        "gpt_ln",
        "x, scale.unsqueeze(1), shift.unsqueeze(1))",
        "x, shift.unsqueeze(1), scale.unsqueeze(1))",
        "GptLnBlock.adaln_layer_norm",
    ),
    # adaLN shift and scale swapped on a LayerNorm without affine
    (
        "dit_block",
        "_kb_adaln(self.norm2, x, scale2[:, None], shift2[:, None])",
        "_kb_adaln(self.norm2, x, shift2[:, None], scale2[:, None])",
        "DiTBlock.adaln_layer_norm#2",
    ),
    # adaLN written as two statements: shift and scale swapped where the norm rebinds x
    (
        "tiny_denoiser",
        "_kb_adaln(self.norm_out, x, scale_b[:, None].to(x.device), shift_b[:, None].to(x.device))",
        "_kb_adaln(self.norm_out, x, shift_b[:, None].to(x.device), scale_b[:, None].to(x.device))",
        "TinyDenoiser.adaln_layer_norm#3",
    ),
    # adaLN through a helper function: its shift and scale arguments swapped
    (
        "tiny_denoiser",
        "_kb_adaln(self.norm_pre, x, (scale_a).unsqueeze(1), (shift_b).unsqueeze(1))",
        "_kb_adaln(self.norm_pre, x, (shift_b).unsqueeze(1), (scale_a).unsqueeze(1))",
        "TinyDenoiser.adaln_layer_norm",
    ),
    # written attention: the causal buffer's mask dropped
    (
        "written_gpt",
        "math.sqrt(a.shape[-1])), sparse_mode=3)",
        "math.sqrt(a.shape[-1])), sparse_mode=0)",
        "MaskedAttention.attention_gqa_bsnd",
    ),
    # a LayerNorm module's bias not read
    (
        "written_gpt",
        "self.pre.weight, self.pre.bias, self.pre.eps)",
        "self.pre.weight, None, self.pre.eps)",
        "WrittenBlock.layer_norm",
    ),
    # the router's renormalisation dropped
    (
        "moe_block",
        "weights = weights / weights.sum(dim=-1, keepdim=True)",
        "weights = weights",
        "SparseMoE.router_softmax_topk",
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "named"), WRONG)
def test_a_wrong_port_fails_naming_the_stage(
    name: str, old: str, new: str, named: str, ported: dict[str, Path], tmp_path: Path
) -> None:
    text = ported[name].read_text()
    assert old in text
    wrong = tmp_path / f"{name}_wrong.py"
    wrong.write_text(text.replace(old, new, 1))
    doc = verify(
        str(DATA / f"{name}.py"),
        str(wrong),
        str(DATA / f"{name}.json"),
        dtypes=("bfloat16",),
        phases=("prefill",),
    )
    assert not doc["passed"]
    assert any(named in f["message"] for f in doc["failures"]), doc["failures"]


def test_a_gelu_class_ported_without_tanh_fails_in_float32(
    ported: dict[str, Path], tmp_path: Path
) -> None:
    """The erf GELU is within bf16's tolerance of the tanh formula, not within fp32's."""
    text = ported["written_gpt"].read_text()
    old = "npu_gelu(h, approximate='tanh')"
    assert old in text
    wrong = tmp_path / "written_gpt_wrong.py"
    wrong.write_text(text.replace(old, "npu_gelu(h, approximate='none')"))
    data = (str(DATA / "written_gpt.py"), str(wrong), str(DATA / "written_gpt.json"))
    doc = verify(*data, dtypes=("float32",), phases=("prefill",))
    assert not doc["passed"]
    assert any("WrittenBlock.gelu_tanh" in f["message"] for f in doc["failures"]), doc["failures"]


def test_verify_says_what_it_could_not_import(tmp_path: Path, ported: dict[str, Path]) -> None:
    original = tmp_path / "needs_a_package.py"
    original.write_text("import kb_no_such_package\n" + (DATA / "dense_llm.py").read_text())
    with pytest.raises(UsageError, match="No module named 'kb_no_such_package'"):
        verify(str(original), str(ported["dense_llm"]), str(DATA / "dense_llm.json"))


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.py"
    assert main(["port", str(DATA / "dit_block.py"), "-o", str(out), "--diff"]) == 0
    assert "+import torch_npu" in capsys.readouterr().out
    wrong = tmp_path / "w.py"
    wrong.write_text(out.read_text().replace("None, sparse_mode=0)", "None, sparse_mode=3)"))
    args = [str(DATA / "dit_block.py"), str(wrong), "--model-config", str(DATA / "dit_block.json")]
    assert main(["verify", *args, "--dtypes", "bfloat16", "--phases", "prefill"]) == 1
    assert "FAILED DiTBlock bfloat16 prefill: stage SelfAttention" in capsys.readouterr().out
    assert main(["verify", *args, "--phases", "later"]) == 2


def test_port_of_a_folder_writes_every_file(tmp_path: Path) -> None:
    doc = port(str(DATA), str(tmp_path / "out"), product="atlas-a2")
    written = {Path(f["target"]).name for f in doc["files"]}
    assert written == {f"{m}.py" for m in MODELS + CACHED + FLASH + EXPERTS} | {
        "modeling_tiny.py",
        "modeling_split.py",
        "layers.py",
        "window_llm.py",
        "config_window_llm.py",
        "mla_rope.py",
        "sink_llm.py",
    }
    assert (tmp_path / "out" / "tiny_pkg" / "configuration_tiny.py").exists()  # copied
    assert not (tmp_path / "out" / "dense_llm.json").exists()  # only Python is ported
    assert "_kb_stage(" in (tmp_path / "out" / "moe_block.py").read_text()


def test_the_switch_runs_the_original_code(ported: dict[str, Path]) -> None:
    import torch

    import kb.emulate
    from kb.port.build import build, load_config, load_module, shrink

    cfg = shrink(load_config(str(DATA / "moe_block.json")))
    original = load_module(str(DATA / "moe_block.py"))
    with kb.emulate.install():
        port_mod = load_module(str(ported["moe_block"]), alias="moe_block__switch")
        a = build(original.SparseMoE, cfg, original).eval()
        b = build(port_mod.SparseMoE, cfg, port_mod).eval()
        b.load_state_dict(a.state_dict())
        x = torch.randn(2, 8, cfg["hidden_size"], generator=torch.Generator().manual_seed(0))
        port_mod.KB_PORT_UNFUSED = True
        try:
            assert torch.equal(a(x), b(x))
            assert not kb.emulate.calls()  # no fused call ran
        finally:
            port_mod.KB_PORT_UNFUSED = False
        b(x)
        assert {c.op for c in kb.emulate.calls()} >= {"npu_swiglu"}


def test_scan_plan_verify_marks_every_stage(capsys: pytest.CaptureFixture[str]) -> None:
    """kb scan --plan --verify ports and proves each planned stage on the CPU."""
    import json

    code = main(
        [
            "scan",
            "--plan",
            "--verify",
            "--no-config",
            "--format",
            "json",
            "--model-config",
            str(DATA / "dense_llm.json"),
            str(DATA / "dense_llm.py"),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    stages = [s for e in out["plan"] for s in e["stages"]]
    assert code == 0
    assert stages and {s["verified"] for s in stages} == {"passed"}, stages
    assert all("max abs" in s["verify_note"] for s in stages)


def test_scan_plan_verify_says_what_it_could_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "needs_more.py"
    model.write_text(
        "import kb_no_such_package\n" + (DATA / "dense_llm.py").read_text(), encoding="utf-8"
    )
    code = main(
        ["scan", "--plan", "--verify", "--no-config", "--model-config"]
        + [str(DATA / "dense_llm.json"), str(model)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "verified: not run" in out and "kb_no_such_package" in out, out


def test_scan_verify_needs_the_plan_and_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--verify", str(DATA / "dense_llm.py")]) == 2
    assert "--model-config" in capsys.readouterr().err


def test_the_port_never_writes_over_what_it_ports(tmp_path: Path) -> None:
    """-o naming the input, its folder, or a folder inside the ported one is refused
    before anything is written (the input stays byte for byte)."""
    model = tmp_path / "model.py"
    model.write_bytes((DATA / "dense_llm.py").read_bytes())
    before = model.read_bytes()
    for out in (model, tmp_path, tmp_path / "sub"):
        src = tmp_path if out == tmp_path / "sub" else model
        with pytest.raises(UsageError, match="over"):
            port(str(src), str(out), product="atlas-a2")
    assert model.read_bytes() == before
    assert not (tmp_path / "sub").exists()


def test_the_config_class_of_a_sibling_module_builds_the_model(tmp_path: Path) -> None:
    """A configuration JSON without model_type: the package's own config class is used, not
    an output dataclass the modelling file imports (so the whole model is built), and a
    class that runs without reaching every stage is not the last one tried."""
    original = DATA / "tiny_pkg" / "modeling_tiny.py"
    out = tmp_path / "modeling_tiny_npu.py"
    port(str(original), str(out), product="atlas-a2")
    doc = verify(str(original), str(out), str(DATA / "tiny_pkg.json"), phases=("prefill",))
    assert doc["passed"], doc["failures"]
    assert not doc["stages_not_reached"]
    # the unused class runs first and leaves the model's stages unmeasured: the model runs
    assert {r["class"] for r in doc["runs"] if not r["not_run"]} == {"TinyUnusedMLP", "TinyModel"}


def test_a_config_subclass_with_its_own_constructor_is_shrunk() -> None:
    """Sizes the subclass's constructor names (no dataclass fields of its base) are shrunk
    from its defaults too, so the model is built at the tiny size."""
    import inspect

    from kb.port.build import config_object, load_module

    ns = load_module(str(DATA / "tiny_pkg" / "modeling_tiny.py"))
    cfg = config_object(ns, {}, inspect.Parameter.empty)
    assert type(cfg).__name__ == "TinyConfig"
    assert (cfg.hidden_size, cfg.intermediate_size) == (64, 128)
