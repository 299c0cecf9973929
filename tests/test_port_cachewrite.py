"""Which statements kb port reads as a cache write by position and as a residual add +
RMSNorm (libcst only: no torch)."""

from __future__ import annotations

import pytest

cst = pytest.importorskip("libcst")

from kb.port import cachewrite, residual  # noqa: E402


def _assign(text: str) -> cst.Assign:
    stmt = cst.parse_statement(text)
    assert isinstance(stmt, cst.SimpleStatementLine)
    node = stmt.body[0]
    assert isinstance(node, cst.Assign)
    return node


def _resolve(values: dict[str, str]):
    def resolve(name: str, before: int):
        return (cst.parse_expression(values[name]), 0) if name in values else None

    return resolve


@pytest.mark.parametrize(
    ("text", "known", "want"),
    [
        ("k_out[:, :, input_pos] = k", {"k_out": "self.k_cache"}, ("k_out", "2", "input_pos")),
        ("self.v[:, p] = v", {}, ("self.v", "1", "p")),
        ("kv_cache[:, :, s:e] = k", {}, ("kv_cache", "2", "torch.arange(s, e)")),
        ("self.k_cache[:, :, pos, :] = k", {}, ("self.k_cache", "2", "pos")),
        # the first bsz rows: the write goes into that view of the cache
        (
            "self.cache_k[:bsz, p : p + s] = k",
            {},
            ("self.cache_k[:bsz]", "1", "torch.arange(p, p + s)"),
        ),
    ],
)
def test_writes_by_position_into_state(text: str, known: dict, want: tuple) -> None:
    found = cachewrite.slot_write(_assign(text), _resolve(known), 1)
    assert found is not None and found[:3] == want


@pytest.mark.parametrize(
    "text",
    [
        "mask[:, :, i] = 0",  # a tensor of this call, not state nor a cache
        "self.k_cache[:, :, 0] = k",  # one fixed slot
        "self.k_cache[..., pos] = k",  # the axis is not known
        "self.k_cache[:, pos, :3] = k",  # a partial write after the positions
        "self.k_cache[:, ::2] = k",  # a stepped slice
    ],
)
def test_other_subscript_writes_are_left(text: str) -> None:
    assert cachewrite.slot_write(_assign(text), _resolve({}), 1) is None


def test_index_copy_needs_its_three_arguments() -> None:
    call = cst.parse_expression("self.k_cache.index_copy_(2, pos, k)")
    assert cachewrite.index_copy(call) == ("self.k_cache", "2", "pos", "k")
    assert cachewrite.index_copy(cst.parse_expression("x.index_copy_(2, pos)")) is None


def _body(text: str) -> list:
    return list(cst.parse_module(text).body)


def _eps(attr: str) -> str:
    return "eps" if attr.endswith("norm") else ""


@pytest.mark.parametrize(
    ("text", "reader"),
    [
        ("h = r + h\nr = h\nh = self.post_norm(h)\n", 2),
        ("h = x + a\nout = h + self.ffn(self.ffn_norm(h))\n", 1),
    ],
)
def test_the_sum_reaches_its_norm(text: str, reader: int) -> None:
    found = residual.find(_body(text), 0, _eps)
    assert found is not None and found.reader == reader


@pytest.mark.parametrize(
    "text",
    [
        "h = x + a\nh = self.drop(h)\nh = self.norm(h)\n",  # another step between
        "h = x + a\nout = self.norm(h) + self.norm(h)\n",  # read twice
        "h = x * a\nh = self.norm(h)\n",  # not a sum
        "h = x + a\nh = self.proj(h)\n",  # not a planned norm
    ],
)
def test_other_statements_are_no_residual_norm(text: str) -> None:
    assert residual.find(_body(text), 0, _eps) is None


def test_a_cache_grown_by_cat_gets_a_note_saying_what_to_keep(tmp_path) -> None:
    from pathlib import Path

    from kb.api.port import port

    data = Path(__file__).parent / "data" / "port" / "index_cache_llm.py"
    text = data.read_text().replace(
        "            k = cache.keys[self.layer_idx].index_copy_(2, input_pos, k)\n"
        "            v = cache.values[self.layer_idx].index_copy_(2, input_pos, v)\n",
        "            if cache.keys[self.layer_idx] is not None:\n"
        "                k = torch.cat([cache.keys[self.layer_idx], k], dim=2)\n"
        "                v = torch.cat([cache.values[self.layer_idx], v], dim=2)\n"
        "            cache.keys[self.layer_idx], cache.values[self.layer_idx] = k, v\n",
    )
    assert "torch.cat([cache.keys" in text
    (tmp_path / "cat_llm.py").write_text(text)
    doc = port(str(tmp_path / "cat_llm.py"), str(tmp_path / "out.py"), product="atlas-a2")
    notes = doc["files"][0]["notes"]["Attention"]
    said = [n for n in notes if "cache_write_scatter" in n and "grows by torch.cat" in n]
    assert said, notes
    # the prerequisite and the chain's cache-write operator, and nothing rewritten
    assert "paged-kv-cache" in said[0] and "npu_scatter_nd_update_" in said[0]
    ported = (tmp_path / "out.py").read_text()
    assert "_kb_stage_inplace(" not in ported.split("def _kb_stage_inplace", 1)[-1]


class _Porter:
    """What cachewrite.plain_container reads of the running port: the enclosing class."""

    def __init__(self, source: str) -> None:
        module = cst.parse_module(source)
        self.classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
        self.cls = list(self.classes)


@pytest.mark.parametrize(
    ("init", "plain"),
    [
        ("self.kind = {}", True),  # a lookup table: rope_type[layer_type] = ...
        ("self.kind = dict()", True),
        ("self.kind = []", True),
        ("self.kind = torch.zeros(2, 8)", False),  # a tensor: a write by position
    ],
)
def test_an_item_stored_into_a_table_the_class_sets_up_is_no_cache_write(
    init: str, plain: bool
) -> None:
    source = f"class Rotary:\n    def __init__(self):\n        {init}\n"
    assert cachewrite.plain_container(_Porter(source), "self.kind") is plain
