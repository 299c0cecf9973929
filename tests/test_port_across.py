"""kb port FILE takes along the package files that hold planned stages of the classes FILE
builds (its attention, norm and feed-forward classes imported from a sibling module):
written beside the port, imported by it, verified stage by stage (fixture:
tests/data/port/split_pkg)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify
from kb.cli import main

pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
MODEL = DATA / "split_pkg" / "modeling_split.py"
CONFIG = DATA / "split_pkg.json"
#: the stages of the sibling module's classes (the processor shared by both attentions;
#: a GELU whose mode is a module attribute; a norm modulated as (1 + scale)[:, None, :])
SIBLING = {
    "SharedAttnProcessor.attention_noncausal_bsnd",
    "HeadRMSNorm.rms_norm",
    "FeedForward.gelu_tanh",
    "ModulatedNorm.adaln_layer_norm",
}


def _package(tmp_path: Path, name: str, files: dict[str, str], config: str) -> tuple[Path, Path]:
    """A package ``name`` of ``files`` under ``tmp_path`` (config in cfg.json); the port's
    path (each test its own package name: one process imports them all)."""
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    (tmp_path / "cfg.json").write_text(config)
    return pkg, tmp_path / "out" / "model_npu.py"


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("across") / "split_npu.py"
    port(str(MODEL), str(out), product="atlas-a2")
    return out


def test_the_sibling_module_is_ported_beside_the_port(tmp_path: Path, capsys) -> None:
    out = tmp_path / "split_npu.py"
    assert main(["port", str(MODEL), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    files = {Path(f["source"]).name: f for f in doc["files"]}
    assert set(files) == {"modeling_split.py", "layers.py"}
    assert files["layers.py"]["target"] == str(tmp_path / "layers.py")
    assert set(files["layers.py"]["stages"]) == SIBLING
    # the q/k norms the attention builds are ported as their own class's stage
    assert files["layers.py"]["notes"]["Attention"][-1] == (
        "stage rms_norm is computed by the ported HeadRMSNorm (its own stage)"
    )
    port_text = out.read_text()
    assert "from .layers import" not in port_text
    assert "_kb_port_module('.layers', 'layers.py').Attention" in port_text
    assert (
        "npu_gelu(self.proj_in(hidden_states), approximate=self.approximate)"
        in (tmp_path / "layers.py").read_text()
    )
    # the original and its sibling are untouched
    assert "from .layers import Attention, FeedForward, ModulatedNorm" in MODEL.read_text()
    assert "_kb_stage" not in (DATA / "split_pkg" / "layers.py").read_text()
    assert main(["port", str(MODEL), "-o", str(tmp_path / "again.py"), "--diff"]) == 0
    printed = capsys.readouterr().out
    assert f"+++ {tmp_path / 'layers.py'}" in printed and f"+++ {tmp_path / 'again.py'}" in printed


def test_verify_measures_the_sibling_stages_in_fp32_and_bf16(ported: Path) -> None:
    doc = verify(str(MODEL), str(ported), str(CONFIG), phases=("prefill",))
    assert doc["passed"], doc["failures"]
    assert set(doc["stages_planned"]) >= SIBLING
    assert not doc["stages_not_reached"]
    bf16 = next(r for r in doc["runs"] if r["dtype"] == "bfloat16")
    calls = {s["stage"]: s["calls"] for s in bf16["stages"]}
    files = {s["stage"]: s["file"] for s in bf16["stages"]}
    assert files["FeedForward.gelu_tanh"] == str(ported.parent / "layers.py")
    assert files["SplitBlock.adaln_layer_norm"] is None  # the port's own file
    # one processor object per attention, one class: its stage runs in self- and
    # cross-attention of both layers (the tiny model has two)
    assert calls["SharedAttnProcessor.attention_noncausal_bsnd"] == 4
    assert calls["FeedForward.gelu_tanh"] == 2
    assert calls["ModulatedNorm.adaln_layer_norm"] == 1


def test_a_wrong_port_in_the_sibling_file_fails_naming_the_stage(
    ported: Path, tmp_path: Path
) -> None:
    """A causal mask on the bidirectional attention of the sibling module."""
    for f in ported.parent.glob("*.py"):
        (tmp_path / f.name).write_text(f.read_text())
    sibling = tmp_path / "layers.py"
    text = sibling.read_text()
    assert "None, sparse_mode=0)" in text
    sibling.write_text(text.replace("None, sparse_mode=0)", "None, sparse_mode=3)"))
    doc = verify(
        str(MODEL),
        str(tmp_path / ported.name),
        str(CONFIG),
        dtypes=("bfloat16",),
        phases=("prefill",),
    )
    assert not doc["passed"]
    stage = "SharedAttnProcessor.attention_noncausal_bsnd"
    bad = [f for f in doc["failures"] if f["stage"] == stage]
    assert bad and "sparse_mode=3 where the plan derives 0" in bad[0]["message"], doc["failures"]


def test_the_switch_runs_the_original_code_of_every_ported_file(
    ported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import kb.emulate
    from kb.port.build import build, load_config, load_module, shrink
    from kb.port.package import forget_copies, port_modules

    cfg = shrink(load_config(str(CONFIG)))
    original = load_module(str(MODEL))
    monkeypatch.setenv("KB_PORT_UNFUSED", "1")
    with kb.emulate.install():
        mod = load_module(str(ported), alias="modeling_split__switch", beside=str(MODEL))
        assert [m.__file__ for m in port_modules(mod)][1:] == [str(ported.parent / "layers.py")]
        a = build(original.SplitModel, cfg, original).eval()
        b = build(mod.SplitModel, cfg, mod).eval()
        b.load_state_dict(a.state_dict())
        # the port builds the sibling's ported classes, the original its own
        assert type(b.blocks[0].attn1).__module__.endswith("layers__kb_port")
        assert type(a.blocks[0].attn1).__module__.endswith("split_pkg.layers")
        gen = torch.Generator().manual_seed(0)
        x, c = (torch.randn(2, 8, cfg["hidden_size"], generator=gen) for _ in range(2))
        try:
            assert torch.equal(a(x, c), b(x, c))
            assert not kb.emulate.calls()  # no fused call ran in either file
        finally:  # the copies read the switch when loaded: not kept for later tests
            forget_copies(mod)


def test_stage_ids_stay_unique_across_files(tmp_path: Path) -> None:
    """A class of the same name in the model file and its sibling, both planned."""
    mlp = (
        "class MLP(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.fc1 = nn.Linear(dim, 4 * dim)\n"
        "        self.fc2 = nn.Linear(4 * dim, dim)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc2(F.gelu(self.fc1(x), approximate='tanh'))\n"
    )
    head = "import torch.nn.functional as F\nfrom torch import nn\n"
    blocks = (
        head + "\n\n" + mlp + "\n\nclass Block(nn.Module):\n"
        "    def __init__(self, dim):\n        super().__init__()\n        self.mlp = MLP(dim)\n\n"
        "    def forward(self, x):\n        return x + self.mlp(x)\n"
    )
    model = (
        head + "\nfrom .blocks import Block\n\n\n" + mlp + "\n\nclass Model(nn.Module):\n"
        "    def __init__(self, dim):\n        super().__init__()\n"
        "        self.block = Block(dim)\n        self.head = MLP(dim)\n\n"
        "    def forward(self, x):\n        return self.head(self.block(x))\n"
    )
    pkg, out = _package(tmp_path, "twins", {"blocks.py": blocks, "model.py": model}, '{"dim": 64}')
    doc = port(str(pkg / "model.py"), str(out), product="atlas-a2")
    ids = [sid for f in doc["files"] for sid in f["stages"]]
    assert sorted(ids) == ["MLP.gelu_tanh", "blocks:MLP.gelu_tanh"]
    assert "_kb_stage('blocks:MLP.gelu_tanh'" in (out.parent / "blocks.py").read_text()
    result = verify(
        str(pkg / "model.py"), str(out), str(tmp_path / "cfg.json"), phases=("prefill",)
    )
    assert result["passed"], result["failures"]
    run = next(r for r in result["runs"] if r["dtype"] == "float32")
    assert {s["stage"]: s["calls"] for s in run["stages"]} == {
        "MLP.gelu_tanh": 1,
        "blocks:MLP.gelu_tanh": 1,
    }


def test_a_file_without_stages_of_its_own_is_verified_through_its_sibling(tmp_path: Path) -> None:
    """The model file only composes the sibling's classes: its port changes only imports."""
    model = (
        "from torch import nn\n\nfrom .layers import FeedForward\n\n\n"
        "class Thin(nn.Module):\n"
        "    def __init__(self, hidden_size):\n        super().__init__()\n"
        "        self.ff = FeedForward(hidden_size)\n\n"
        "    def forward(self, hidden_states):\n        return self.ff(hidden_states)\n"
    )
    layers = (DATA / "split_pkg" / "layers.py").read_text()
    pkg, out = _package(
        tmp_path, "thin", {"layers.py": layers, "model.py": model}, '{"hidden_size": 64}'
    )
    doc = port(str(pkg / "model.py"), str(out), product="atlas-a2")
    assert {Path(f["source"]).name: len(f["stages"]) for f in doc["files"]} == {
        "model.py": 0,
        "layers.py": 1,  # only what the model reaches: the feed-forward
    }
    result = verify(
        str(pkg / "model.py"), str(out), str(tmp_path / "cfg.json"), phases=("prefill",)
    )
    assert result["passed"], result["failures"]
    ran = {s["stage"] for r in result["runs"] for s in r["stages"]}
    assert ran == {"FeedForward.gelu_tanh"}


def test_an_adaln_span_whose_norm_a_branch_built_otherwise_runs_the_original(
    ported: Path,
) -> None:
    """ModulatedNorm builds an RMS norm in its other branch: the fused adaLN (a LayerNorm
    kernel) must not run on it."""
    import torch

    import kb.emulate
    from kb.port.build import load_module
    from kb.port.package import port_modules

    original = load_module(str(DATA / "split_pkg" / "layers.py"))
    with kb.emulate.install():
        mod = load_module(str(ported), alias="modeling_split__rms", beside=str(MODEL))
        layers = port_modules(mod)[1]
        torch.manual_seed(0)
        a = original.ModulatedNorm(64, kind="rms").eval()
        b = layers.ModulatedNorm(64, kind="rms").eval()
        b.load_state_dict(a.state_dict())
        gen = torch.Generator().manual_seed(1)
        x, pooled = torch.randn(2, 8, 64, generator=gen), torch.randn(2, 64, generator=gen)
        # the RMS norm itself is ported (npu_rms_norm): equal within float32's rounding
        torch.testing.assert_close(a(x, pooled), b(x, pooled))
        assert "npu_layer_norm_eval" not in {c.op for c in kb.emulate.calls()}
        assert "npu_rms_norm" in {c.op for c in kb.emulate.calls()}


def test_a_port_within_a_root_reads_no_package_file_outside_it(tmp_path: Path) -> None:
    """The MCP server's root: the sibling outside it is neither read nor ported."""
    model = (MODEL.read_text()).replace("from .layers import", "from ..layers import")
    pkg, _ = _package(
        tmp_path, "rooted", {"layers.py": (MODEL.parent / "layers.py").read_text()}, "{}"
    )
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "modeling_split.py").write_text(model)
    out = tmp_path / "out.py"
    doc = port(
        str(pkg / "sub" / "modeling_split.py"), str(out), write=False, within=str(pkg / "sub")
    )
    assert [Path(f["source"]).name for f in doc["files"]] == ["modeling_split.py"]
    doc = port(str(pkg / "sub" / "modeling_split.py"), str(out), write=False, within=str(pkg))
    assert sorted(Path(f["source"]).name for f in doc["files"]) == [
        "layers.py",
        "modeling_split.py",
    ]


def test_a_file_on_the_import_path_is_ported_for_its_imports(tmp_path: Path) -> None:
    """model -> blocks (no stage) -> layers (a stage): blocks is ported too, only its
    import changed, so the model builds the ported feed-forward."""
    blocks = (
        "from torch import nn\n\nfrom .layers import FeedForward\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, hidden_size):\n        super().__init__()\n"
        "        self.ff = FeedForward(hidden_size)\n\n"
        "    def forward(self, hidden_states):\n        return hidden_states + self.ff(hidden_states)\n"
    )
    model = blocks.replace("from .layers import FeedForward", "from .blocks import Block")
    model = model.replace("class Block(", "class Chain(").replace(
        "FeedForward(hidden_size)", "Block(hidden_size)"
    )
    layers = (DATA / "split_pkg" / "layers.py").read_text()
    files = {"layers.py": layers, "blocks.py": blocks, "model.py": model}
    pkg, out = _package(tmp_path, "chained", files, '{"hidden_size": 64}')
    doc = port(str(pkg / "model.py"), str(out), product="atlas-a2")
    written = {Path(f["source"]).name: sorted(f["stages"]) for f in doc["files"]}
    assert written == {"model.py": [], "blocks.py": [], "layers.py": ["FeedForward.gelu_tanh"]}
    assert (
        "_kb_port_module('.layers', 'layers.py').FeedForward"
        in (out.parent / "blocks.py").read_text()
    )
    result = verify(
        str(pkg / "model.py"), str(out), str(tmp_path / "cfg.json"), phases=("prefill",)
    )
    assert result["passed"], result["failures"]
    assert {s["stage"] for r in result["runs"] for s in r["stages"]} == {"FeedForward.gelu_tanh"}
