"""kb verify drives decode by positions (a cache its own method allocates, ``input_pos``
with every call, the mask read from positions) and measures the cache write there; kb
port writes an ``index_copy_`` into a helper's parameter as the scatter and leaves a
module's own ``scaled_dot_product_attention`` method alone (fixture:
tests/data/port/pos_cache_llm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

from kb.api.port import port, verify

pytestmark = pytest.mark.heavy

DATA = Path(__file__).parent / "data" / "port"
NAME = "pos_cache_llm"
STEP = "step_cache_llm"  # one token per call, caches as plain tensors, start_pos: int


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("poscache")
    out = {}
    for name in (NAME, STEP):
        out[name] = root / f"{name}_npu.py"
        port(str(DATA / f"{name}.py"), str(out[name]), product="atlas-a2")
    return out


@pytest.fixture(scope="module")
def ported(ports: dict[str, Path]) -> Path:
    return ports[NAME]


@pytest.fixture(scope="module")
def stepped(ports: dict[str, Path]) -> Path:
    return ports[STEP]


def _verify(path: Path, name: str = NAME, **kw: object) -> dict:
    return verify(str(DATA / f"{name}.py"), str(path), str(DATA / f"{name}.json"), **kw)  # type: ignore[arg-type]


def test_both_writes_are_the_scatter_and_the_method_is_left(ported: Path) -> None:
    text = ported.read_text()
    assert "_kb_scatter_write(keys, 2, input_pos, k)" in text
    # the helper writes the tensor its caller hands in: that is the cache
    assert "_kb_scatter_write(buffer, dim, index, rows)" in text
    # the class's own method of torch's name returns [B, S, N, D]: not the kernel's call
    assert "y = self.scaled_dot_product_attention(q, k, v, mask)" in text
    # is_causal decided at run time: the mask from positions is used when one is given
    assert "sparse_mode=3 if (mask is None) else 0" in text


@pytest.mark.parametrize(
    ("name", "writes"),
    [
        (NAME, {"KVCache.cache_write_scatter", "put_rows.cache_write_scatter"}),
        # one token per call (prefilled token by token), caches kept as plain tensors
        (STEP, {"Attention.cache_write_scatter", "Attention.cache_write_scatter#2"}),
    ],
)
def test_prefill_and_decode_by_positions_pass_with_the_cache_writes_measured(
    name: str, writes: set[str], ports: dict[str, Path]
) -> None:
    doc = _verify(ports[name], name)
    assert doc["passed"], doc["failures"]
    ran = {(r["dtype"], r["phase"]) for r in doc["runs"] if not r["not_run"]}
    assert ran == {(d, p) for d in ("float32", "bfloat16") for p in ("prefill", "decode")}
    for run in doc["runs"]:
        assert writes <= {s["stage"] for s in run["stages"] if s["calls"]}
    assert not [s for s in doc["stages_not_reached"] if "cache_write" in s]


WRONG = [
    # the new keys written one slot further on: decode reads a stale slot
    ("_kb_scatter_write(keys, 2, input_pos, k)", "_kb_scatter_write(keys, 2, input_pos + 1, k)"),
    # keys and values swapped in the write
    ("_kb_scatter_write(keys, 2, input_pos, k)", "_kb_scatter_write(keys, 2, input_pos, v)"),
]


@pytest.mark.parametrize(("old", "new"), WRONG)
def test_a_wrong_cache_write_fails_naming_the_stage(
    old: str, new: str, ported: Path, tmp_path: Path
) -> None:
    text = ported.read_text()
    assert old in text
    wrong = tmp_path / f"{NAME}_wrong.py"
    wrong.write_text(text.replace(old, new, 1))
    doc = _verify(wrong, dtypes=("bfloat16",), phases=("decode",))
    assert not doc["passed"]
    assert any("KVCache.cache_write_scatter" in f["message"] for f in doc["failures"]), doc[
        "failures"
    ]


class _NoPositions:
    def forward(self, x):  # pragma: no cover - read, not run
        return x


class _Allocates:
    def setup_caches(self, max_batch_size, max_seq_length, page_table):  # pragma: no cover
        pass

    def forward(self, idx, start_pos: int = 0):  # pragma: no cover
        return idx


def test_what_cannot_be_driven_is_said() -> None:
    from kb.port import positions

    assert positions.reader(_NoPositions) is None
    said = positions.why_not("", {})
    assert "input_pos" in said and "start_pos" in said and "prefill only" in said
    drive = positions.reader(_Allocates)
    assert drive is not None and drive.setup == "setup_caches" and drive.offset
    with pytest.raises(positions.CannotDrive, match="setup_caches needs 'page_table'"):
        positions.allocate(_Allocates(), drive, None)
    # positions but nothing kept to write: no decode, and the line says why
    import torch

    class Turn(torch.nn.Module):
        def forward(self, x, positions):  # pragma: no cover
            return x

    turn = positions.reader(Turn)
    assert turn is not None and not positions.keeps_cache(Turn(), turn)
    assert "keeps no cache to write" in positions.no_cache(turn)
    kept = Turn()
    kept.register_buffer("k_cache", torch.zeros(1))
    assert positions.keeps_cache(kept, turn)


def test_a_note_is_taken_back_when_a_helper_further_down_does_the_stage() -> None:
    from types import SimpleNamespace

    from kb.port.across import drop_stale

    said = "stage cache_write_scatter (npu_scatter_nd_update_) not rewritten: none found"
    notes = {"Attn": [said, "other"], "Other": [said]}
    text = f"# kb port: {said}\nclass Other:\n    pass\n# kb port: {said}\nclass Attn:\n    pass\n"
    out = drop_stale(text, SimpleNamespace(done={("Attn", "cache_write_scatter")}), notes)
    assert notes == {"Attn": ["other"], "Other": [said]}
    assert out == f"# kb port: {said}\nclass Other:\n    pass\nclass Attn:\n    pass\n"


def test_a_step_model_written_one_slot_on_fails_naming_the_stage(
    stepped: Path, tmp_path: Path
) -> None:
    old = "_kb_scatter_write(self.cache_v[:bsz], 1, torch.arange(start_pos, start_pos + s), v)"
    text = stepped.read_text()
    assert old in text
    wrong = tmp_path / f"{STEP}_wrong.py"
    wrong.write_text(
        text.replace(
            old, old.replace("(start_pos, start_pos + s)", "(start_pos + 1, start_pos + 1 + s)")
        )
    )
    doc = _verify(wrong, STEP, dtypes=("float32",), phases=("decode",))
    assert not doc["passed"]
    named = [f for f in doc["failures"] if "Attention.cache_write_scatter#2" in f["message"]]
    assert named, doc["failures"]
