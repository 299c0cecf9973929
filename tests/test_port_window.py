"""Sliding-window attention and RoPE written on halves or lanes: the reader's window
facts, the port's per-layer window (sparse_mode=4 and pre_tokens from whether the model's
window counts the current key), an optional softcap step that keeps the original code
where it runs, the rotations of chunked halves and of an MLA's even/odd lanes, and wrong
ports that fail naming the stage (fixtures: tests/data/port/window_llm.py, mla_rope.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify
from kb.port.porting import plan_of
from kb.scan.engine import ScanOptions

pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
MODEL, CONFIG = DATA / "window_llm.py", DATA / "window_llm.json"
CALL = "_kb_window_attention(q, k, v, self.scale, window=self.sliding_window, counts_current="


def _facts(path: Path) -> dict:
    _, inventory = plan_of([str(path)], ScanOptions())
    return next(dict(m.facts) for m in inventory if m.name == "Attention")


def _one_more_key(tmp_path: Path) -> Path:
    """The fixture with a window of W keys before the query (W + 1 in all)."""
    text = MODEL.read_text()
    old = "(k > q - window)"
    assert old in text
    path = tmp_path / "window_plus_one.py"
    path.write_text(text.replace(old, "(k >= q - window)"))
    return path


def test_the_reader_reads_the_window_and_its_rule_from_the_mask(tmp_path: Path) -> None:
    facts = _facts(MODEL)
    assert facts["sliding_window"] == "self.sliding_window"
    assert facts["window_counts_current"] is True
    assert _facts(_one_more_key(tmp_path))["window_counts_current"] is False


def _attention_stage(doc: dict) -> tuple[str, dict]:
    stages = doc["files"][0]["stages"]
    return next((k, v) for k, v in stages.items() if v["mapping"].startswith("attention_"))


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("window") / "window_npu.py"
    doc = port(str(MODEL), str(out), product="atlas-a2")
    _, stage = _attention_stage(doc)
    assert stage["args"]["pre_tokens"] == "self.sliding_window - 1"
    assert stage["args"]["unfused_when"] == ["self.softcap is not None"]
    return out


def _verify(ported: Path, config: Path = CONFIG, original: Path = MODEL) -> dict:
    return verify(str(original), str(ported), str(config), dtypes=("bfloat16",))


def test_the_window_port_passes_per_layer(ported: Path) -> None:
    text = ported.read_text()
    assert CALL + "True)" in text
    doc = _verify(ported)
    assert doc["passed"], doc["failures"]
    run = next(r for r in doc["runs"] if not r["not_run"])
    attn = next(s for s in run["stages"] if ".attention_" in s["stage"])
    assert not attn["rejected"] and attn["calls"] == 2  # a windowed and a full layer
    rope = next(s for s in run["stages"] if s["stage"] == "rotate_halves.rope_half")
    assert not rope["rejected"] and rope["calls"] == 4


def test_a_window_of_one_more_key_is_ported_as_such(tmp_path: Path) -> None:
    original = _one_more_key(tmp_path)
    out = tmp_path / "plus_one_npu.py"
    port(str(original), str(out), product="atlas-a2")
    assert CALL + "False)" in out.read_text()
    doc = _verify(out, original=original)
    assert doc["passed"], doc["failures"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("window=self.sliding_window", "window=None"),  # the window dropped
        ("counts_current=True", "counts_current=False"),  # one key too many
    ],
)
def test_a_wrong_window_fails_naming_the_stage(
    ported: Path, tmp_path: Path, old: str, new: str
) -> None:
    wrong = tmp_path / "window_wrong.py"
    text = ported.read_text()
    assert old in text
    wrong.write_text(text.replace(old, new))
    doc = _verify(wrong)
    assert not doc["passed"]
    assert any("Attention.attention_" in f["message"] for f in doc["failures"])


def test_a_softcap_keeps_the_original_attention(ported: Path, tmp_path: Path) -> None:
    config = tmp_path / "capped.json"
    config.write_text(CONFIG.read_text().replace("}", ', "softcap": 0.05}'))
    assert _verify(ported, config)["passed"]
    guard = "(torch.matmul(probs, v)) if (self.softcap is not None) else "
    text = ported.read_text()
    assert guard in text
    dropped = tmp_path / "no_guard.py"
    dropped.write_text(text.replace(guard, ""))
    doc = _verify(dropped, config)
    assert not doc["passed"]
    assert any("Attention.attention_" in f["message"] for f in doc["failures"])


@pytest.mark.parametrize(
    ("name", "old", "new", "named"),
    [
        # halves rotated as adjacent pairs
        (
            "window_llm",
            "torch.cat((sin, sin), -1), 'half')",
            "torch.cat((sin, sin), -1), 'interleave')",
            "rotate_halves.rope_half",
        ),
        # the MLA's lanes rotated as adjacent pairs
        (
            "mla_rope",
            "torch.cat((sin, sin), -1), 'half')",
            "torch.cat((sin, sin), -1), 'interleave')",
            "lanes_rotated.rope_deinterleave",
        ),
        # the lanes left interleaved (the input as it came, not de-interleaved)
        ("mla_rope", "_kb_rotary(torch.cat((q1, q2), -1)", "_kb_rotary(q", "rope_deinterleave"),
    ],
)
def test_a_wrong_rotation_fails_naming_the_stage(
    tmp_path: Path, name: str, old: str, new: str, named: str
) -> None:
    out = tmp_path / f"{name}_npu.py"
    port(str(DATA / f"{name}.py"), str(out), product="atlas-a2")
    text = out.read_text()
    assert old in text
    config = DATA / f"{name}.json"
    assert verify(str(DATA / f"{name}.py"), str(out), str(config), dtypes=("float32",))["passed"]
    out.write_text(text.replace(old, new, 1))
    doc = _verify(out, config, DATA / f"{name}.py")
    assert not doc["passed"]
    assert any(named in f["message"] for f in doc["failures"]), doc["failures"]


BODY = """        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
        if self.softcap is not None:
            scores = scores / self.softcap
            scores = torch.tanh(scores) * self.softcap
        scores = scores + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = torch.matmul(probs, v)
"""
ATTEND = """

def attend(q, k, v, mask, scale, **kwargs):
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    scores = scores + mask
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return torch.matmul(probs, v)
"""


def _handed(tmp_path: Path, passed: str) -> Path:
    """The fixture with its attention in a function the class hands ``passed`` to (the way
    library models call their attention functions)."""
    text = MODEL.read_text()
    assert BODY in text
    text = text.replace(BODY, f"        out = attend(q, k, v, mask, self.scale, {passed})\n")
    text = text.replace("\n\nclass Attention(", ATTEND + "\n\nclass Attention(")
    path = tmp_path / "window_handed.py"
    path.write_text(text)
    return path


def test_a_window_handed_to_the_attention_function_reaches_it(tmp_path: Path) -> None:
    original = _handed(tmp_path, "sliding_window=self.sliding_window")
    out = tmp_path / "handed_npu.py"
    port(str(original), str(out), product="atlas-a2")
    assert "window=kwargs.get('sliding_window'), counts_current=True)" in out.read_text()
    doc = _verify(out, original=original)
    assert doc["passed"], doc["failures"]


def test_a_window_without_a_per_layer_attribute_is_left_as_it_is(tmp_path: Path) -> None:
    original = _handed(tmp_path, "sliding_window=getattr(self, 'span', None)")
    doc = port(str(original), str(tmp_path / "left_npu.py"), product="atlas-a2")
    entry = doc["files"][0]
    assert not any(v["mapping"].startswith("attention_") for v in entry["stages"].values())
    notes = entry["notes"]["Attention"]
    assert any("not rewritten" in n and "window" in n for n in notes), notes


SINKS = DATA / "sink_llm.py"


def test_the_plan_proposes_the_sink_attention_for_layers_of_both_kinds() -> None:
    """The sinks chain passes sparse_mode per layer (4 with a window, else 3): the plan
    proves and proposes the layers without one; the port passes each layer's window."""
    plan, _ = plan_of([str(SINKS)], ScanOptions())
    entry = next(e for e in plan if e.get("module") == "Attention")
    attention = [s for s in entry["stages"] if s["stage"] == "attention"]
    assert attention and attention[0]["args"]["sparse_mode"] == 3


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (None, None),
        ("self.sinks.reshape(-1), self.scale", "torch.full_like(self.sinks, -1e4), self.scale"),
        ("window=self.sliding_window", "window=None"),
    ],
)
def test_sink_attention_passes_and_a_dropped_sink_or_window_fails(
    tmp_path: Path, old: str | None, new: str | None
) -> None:
    out = tmp_path / "sink_npu.py"
    doc = port(str(SINKS), str(out), product="atlas-a2")
    sid, stage = _attention_stage(doc)
    assert stage["operator"] == "npu_fused_infer_attention_score_v2"
    assert stage["args"]["learnable_sink"] == "self.sinks.reshape(-1)"
    if old is not None and new is not None:
        text = out.read_text()
        assert old in text
        out.write_text(text.replace(old, new))
    got = _verify(out, DATA / "sink_llm.json", SINKS)
    if old is None:
        assert got["passed"], got["failures"]
    else:
        assert not got["passed"]
        assert any(sid in f["message"] for f in got["failures"]), got["failures"]


def test_a_config_window_handed_by_keyword_is_passed_from_the_kwargs(tmp_path: Path) -> None:
    """One window for every layer, from the config, handed by keyword to a module-level
    attention function that takes it in ``**kwargs``: the port reads it there (it was left
    unported before); dropping it fails naming the stage."""
    model, config = DATA / "config_window_llm.py", DATA / "config_window_llm.json"
    out = tmp_path / "cw_npu.py"
    port(str(model), str(out), product="atlas-a2")
    text = out.read_text()
    call = "window=kwargs.get('sliding_window'), counts_current=True"
    assert call in text
    good = verify(str(model), str(out), str(config), dtypes=("bfloat16",), phases=("prefill",))
    assert good["passed"], good["failures"]
    wrong = tmp_path / "cw_wrong.py"
    wrong.write_text(text.replace(call, "window=None, counts_current=True"))
    bad = verify(str(model), str(wrong), str(config), dtypes=("bfloat16",), phases=("prefill",))
    assert not bad["passed"]
    assert any("attend.attention_gqa_bsnd" in f["message"] for f in bad["failures"])


def test_counts_current_is_read_from_comparisons_or_a_named_builder() -> None:
    from kb.scan.model.match_window import counts_current_in

    assert counts_current_in("keep = k > q - window\n") is True
    assert counts_current_in("keep = k >= q - window\n") is False
    chosen = "fn = create_causal_mask if w is None else create_sliding_window_causal_mask\n"
    assert counts_current_in(chosen) is True  # chosen as a value, called later
    assert counts_current_in("mask = causal(q, k)\n") is None
