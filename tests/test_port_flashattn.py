"""flash-attn and xformers attention calls: kb port rewrites them into the fused inference
kernel with the layout, causal alignment, window, scale and head counts the call gives;
kb verify runs both sides through CPU stand-ins of the two libraries and fails, naming
the stage, on a port that drops the causal flag, the window or the sequence boundaries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify  # noqa: E402
from kb.port import flashattn  # noqa: E402

DATA = Path(__file__).parent / "data" / "port"
MODELS = ("flash_llm", "xformers_dit")


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flash")
    out = {}
    for name in MODELS:
        out[name] = root / f"{name}_npu.py"
        port(str(DATA / f"{name}.py"), str(out[name]), product="atlas-a2")
    return out


def _stages(path: Path) -> dict[str, dict]:
    ns: dict = {}
    text = path.read_text()
    start = text.index("KB_PORT_STAGES = ")
    end = text.index("\n#: tensors the port derives")
    exec(text[start:end], ns)
    return ns["KB_PORT_STAGES"]


def test_port_passes_layout_causal_window_and_lengths(ported: dict[str, Path]) -> None:
    stages = _stages(ported["flash_llm"])
    padded = stages["Attention.attention_gqa_bsnd"]["args"]
    assert padded["input_layout"] == "BSND"
    assert (padded["causal"], padded["window"]) == ("True", "(self.window, self.window)")
    assert "at run time" in padded["sparse_mode"]  # the window is an expression
    packed = stages["PackedAttention.attention_gqa_tnd"]["args"]
    assert packed["sparse_mode"] == 3
    assert packed["input_layout"] == "TND"
    assert (packed["cu_seqlens_q"], packed["cu_seqlens_k"]) == ("cu", "cu")
    text = ported["flash_llm"].read_text()
    assert "_kb_flash_attention(q, k, v, scale=None, causal=True, window=(-1, -1), " in text
    xf = _stages(ported["xformers_dit"])
    assert xf["SelfAttention.attention_noncausal_bsnd"]["args"]["attn_bias"] == "None"
    assert xf["CrossAttention.attention_gqa_bsnd"]["args"]["attn_bias"] == "bias"


@pytest.mark.heavy
@pytest.mark.parametrize("name", MODELS)
def test_verify_passes_in_fp32_and_bf16(name: str, ported: dict[str, Path]) -> None:
    """bfloat16 through the inference kernel, float32 through npu_fusion_attention."""
    doc = verify(str(DATA / f"{name}.py"), str(ported[name]), str(DATA / f"{name}.json"))
    assert doc["passed"], doc["failures"]
    assert not doc["stages_not_reached"]
    for dtype in ("float32", "bfloat16"):
        runs = [r for r in doc["runs"] if r["dtype"] == dtype and not r["not_run"]]
        measured = {s["stage"] for r in runs for s in r["stages"] if s["calls"]}
        assert measured == set(doc["stages_planned"]), dtype
    assert "flash_attn" not in sys.modules and "xformers" not in sys.modules


WRONG = [
    # causal dropped: the window's right side and the causal bound are gone
    (
        "flash_llm",
        "causal=True, window=(self.window, self.window)",
        "causal=False, window=(self.window, self.window)",
        "Attention.attention_gqa_bsnd",
    ),
    # the sliding window dropped
    (
        "flash_llm",
        "window=(self.window, self.window)",
        "window=(-1, -1)",
        "window=(-1, -1) where the plan derives '(self.window, self.window)'",
    ),
    # the packed sequences read as one: their boundaries ignored
    (
        "flash_llm",
        "cu_seqlens_q=cu, cu_seqlens_k=cu",
        "cu_seqlens_q=cu[[0, -1]], cu_seqlens_k=cu[[0, -1]]",
        "PackedAttention.attention_gqa_tnd",
    ),
    # causal dropped in a packed call
    (
        "flash_llm",
        "causal=True, window=(-1, -1), cu",
        "causal=False, window=(-1, -1), cu",
        "causal=False where the plan derives 'True'",
    ),
    # xformers: the block-diagonal bias dropped (every caption seen by every image)
    (
        "xformers_dit",
        "_kb_xformers_attention(q, k, v, bias,",
        "_kb_xformers_attention(q, k, v, None,",
        "CrossAttention.attention_gqa_bsnd",
    ),
    # xformers: the lower-triangular mask dropped
    (
        "xformers_dit",
        "_kb_xformers_attention(q, k, v, mask,",
        "_kb_xformers_attention(q, k, v, None,",
        "TextEncoder.attention_gqa_bsnd",
    ),
]


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "old", "new", "named"), WRONG)
def test_a_wrong_port_fails_naming_the_stage(
    name: str, old: str, new: str, named: str, ported: dict[str, Path], tmp_path: Path
) -> None:
    head, body = ported[name].read_text().split("\ndef _kb_stage(", 1)
    assert old in body  # the rewritten calls, not the plan's record above them
    wrong = tmp_path / f"{name}_wrong.py"
    wrong.write_text(head + "\ndef _kb_stage(" + body.replace(old, new, 1))
    doc = verify(
        str(DATA / f"{name}.py"),
        str(wrong),
        str(DATA / f"{name}.json"),
        dtypes=("bfloat16",),
        phases=("prefill",),
    )
    assert not doc["passed"]
    assert any(named in f["message"] for f in doc["failures"]), doc["failures"]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        ("flash_attn_func(q, k, v, 0.0, None, True, (-1, -1), 0.0, slopes)", "alibi_slopes=slopes"),
        ("flash_attn_func(q, k, v, softcap=30.0, causal=True)", "softcap=30.0"),
        ("flash_attn_func(q, k, v, 0.1, causal=True)", "dropout_p=0.1"),
        ("flash_attn_varlen_func(q, k, v, cu, cu, 8, 8, block_table=t)", "block_table=t"),
        ("flash_attn_func(q, k, v, return_attn_probs=True)", "return_attn_probs=True"),
        ("flash_attn_func(*qkv, causal=True)", "*qkv"),
        ("memory_efficient_attention(q, k, v, p=0.2)", "p=0.2"),
        # flash-attn 1.x: causal aligned top-left, and the name does not say the release
        ("flash_attn_unpadded_func(q, k, v, cu, cu, 8, 8, 0.0, causal=True)", "1.x name"),
    ],
)
def test_a_call_the_kernel_cannot_take_stays_with_a_note(
    call: str, named: str, tmp_path: Path
) -> None:
    src = (DATA / "flash_llm.py").read_text()
    old = "flash_attn_func(\n            q, k, v, 0.0, softmax_scale=None, causal=True, window_size=(self.window, self.window)\n        )"
    assert old in src
    model = tmp_path / "model.py"
    model.write_text(src.replace(old, call, 1))
    out = tmp_path / "model_npu.py"
    doc = port(str(model), str(out), product="atlas-a2")
    notes = [n for f in doc["files"] for ns in f["notes"].values() for n in ns]
    assert any("not rewritten" in n and named in n for n in notes), notes
    assert call in out.read_text()
    assert not any(s.startswith("Attention.") for f in doc["files"] for s in f["stages"])


@pytest.mark.parametrize(
    ("causal", "window", "want"),
    [
        ("True", "(-1, -1)", {"sparse_mode": 3}),
        ("False", "(-1, -1)", {"sparse_mode": 0}),
        ("False", "(-1, 0)", {"sparse_mode": 3}),  # a window ending at the diagonal is causal
        ("True", "(4, 4)", {"sparse_mode": 4, "pre_tokens": 4, "next_tokens": 0}),
        ("False", "(4, -1)", {"sparse_mode": 4, "pre_tokens": 4, "next_tokens": 2147483647}),
    ],
)
def test_literal_flags_give_the_sparse_mode(causal: str, window: str, want: dict) -> None:
    assert flashattn.sparse(causal, window) == want


def test_a_method_of_the_model_named_like_an_entry_point_is_left(tmp_path: Path) -> None:
    src = (DATA / "flash_llm.py").read_text()
    old = "out = flash_attn_func(\n"
    assert old in src
    src = src.replace(old, "out = self.flash_attn_func(\n", 1)
    src = src.replace(
        "    def forward(self, x):\n        b, s, _ = x.shape\n        q = self.wq(x)",
        "    def flash_attn_func(self, q, k, v, *rest, **named):\n"
        "        return q\n\n"
        "    def forward(self, x):\n        b, s, _ = x.shape\n        q = self.wq(x)",
        1,
    )
    model = tmp_path / "model.py"
    model.write_text(src)
    doc = port(str(model), str(tmp_path / "model_npu.py"), product="atlas-a2")
    stages = [s for f in doc["files"] for s in f["stages"]]
    assert not any(s.startswith("Attention.") for s in stages), stages
    assert any(s.startswith("PackedAttention.") for s in stages), stages


def test_bind_reads_positions_and_keywords() -> None:
    import libcst as cst

    node = cst.parse_expression("flash_attn_varlen_func(q, k, v, a, b, 4, 4, 0.0, causal=c)")
    got = flashattn.bind(node, flashattn.PARAMS["flash_attn_varlen_func"])
    assert got == {
        "q": "q",
        "k": "k",
        "v": "v",
        "cu_seqlens_q": "a",
        "cu_seqlens_k": "b",
        "max_seqlen_q": "4",
        "max_seqlen_k": "4",
        "dropout_p": "0.0",
        "causal": "c",
    }
    assert flashattn.unmodelled(got) == ""
