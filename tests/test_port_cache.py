"""kb port writes the residual add + RMSNorm of a decoder layer however its statements
read, and a cache written by position (slot assignment, index_copy_) as the in-place
scatter; kb verify runs decode on the cache the prefill wrote and fails, naming the stage,
when the port writes another slot or drops the residual sum (fixtures: tests/data/port)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify

pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
MODELS = ("slot_cache_llm", "index_cache_llm")


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ports")
    out = {}
    for name in MODELS:
        out[name] = root / f"{name}_npu.py"
        port(str(DATA / f"{name}.py"), str(out[name]), product="atlas-a2")
    return out


def _verify(name: str, path: Path, **kw: object) -> dict:
    return verify(str(DATA / f"{name}.py"), str(path), str(DATA / f"{name}.json"), **kw)  # type: ignore[arg-type]


def test_the_residual_sum_and_its_norm_are_one_call(ported: dict[str, Path]) -> None:
    # the one-statement form: the sum's norm read inside the next statement
    text = ported["slot_cache_llm"].read_text()
    assert "_kb_normed, h = _kb_stage('TransformerBlock.add_rms_norm'" in text
    assert "out = h + self.feed_forward(_kb_normed)" in text
    # HF's form: the sum copied to the residual, then normalised
    text = ported["index_cache_llm"].read_text()
    assert "_kb_normed, x = _kb_stage('DecoderLayer.add_rms_norm'" in text
    assert "        skip = x\n        x = _kb_normed\n" in text
    assert "kb port does not write this mapping yet" not in text


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("slot_cache_llm", "_kb_scatter_write(k_out, 2, input_pos, k_val)"),
        ("index_cache_llm", "_kb_scatter_write(cache.keys[self.layer_idx], 2, input_pos, k)"),
    ],
)
def test_the_cache_write_is_the_scatter(name: str, write: str, ported: dict[str, Path]) -> None:
    text = ported[name].read_text()
    assert write in text
    assert "cache_write_scatter" in text and "not rewritten" not in text


@pytest.mark.parametrize("name", MODELS)
def test_prefill_and_decode_pass_in_fp32_and_bf16(name: str, ported: dict[str, Path]) -> None:
    doc = _verify(name, ported[name])
    assert doc["passed"], doc["failures"]
    assert not doc["stages_not_reached"]
    ran = {(r["dtype"], r["phase"]) for r in doc["runs"] if not r["not_run"]}
    assert ran == {(d, p) for d in ("float32", "bfloat16") for p in ("prefill", "decode")}
    decode = next(r for r in doc["runs"] if r["dtype"] == "bfloat16" and r["phase"] == "decode")
    measured = {s["stage"] for s in decode["stages"] if s["calls"]}
    assert {s for s in doc["stages_planned"] if "cache_write" in s} <= measured
    assert any("cache_write" in s for s in measured)


WRONG = [
    # the new keys written one slot further on: decode reads a stale slot
    (
        "slot_cache_llm",
        "_kb_scatter_write(k_out, 2, input_pos, k_val)",
        "_kb_scatter_write(k_out, 2, input_pos + 1, k_val)",
        "decode",
        "KVCache.cache_write_scatter",
    ),
    (
        "index_cache_llm",
        "_kb_scatter_write(cache.values[self.layer_idx], 2, input_pos, v)",
        "_kb_scatter_write(cache.values[self.layer_idx], 2, input_pos + 1, v)",
        "decode",
        "Attention.cache_write_scatter#2",
    ),
    # the residual sum not carried on: the layer's input passed on in its place
    ("slot_cache_llm", "    return y, total\n", "    return y, x\n", "prefill", "add_rms_norm"),
    (
        "index_cache_llm",
        "    return y, total\n",
        "    return y, residual\n",
        "decode",
        "add_rms_norm",
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "phase", "named"), WRONG)
def test_a_wrong_port_fails_naming_the_stage(
    name: str, old: str, new: str, phase: str, named: str, ported: dict[str, Path], tmp_path: Path
) -> None:
    text = ported[name].read_text()
    assert old in text
    wrong = tmp_path / f"{name}_wrong.py"
    wrong.write_text(text.replace(old, new, 1))
    doc = _verify(name, wrong, dtypes=("bfloat16",), phases=(phase,))
    assert not doc["passed"]
    assert any(named in f["message"] for f in doc["failures"]), doc["failures"]
