"""kb port reads written-out attention back to its q, k, v, scale and mask, whatever
the statements and spellings (no torch needed: the reader works on the source)."""

from __future__ import annotations

import pytest

cst = pytest.importorskip("libcst")

from kb.port import eager  # noqa: E402


def _read(src: str) -> eager.Eager | None:
    """The attention the last statement's value computes, names traced backwards."""
    body = cst.parse_module(src).body
    values: dict[str, list[tuple[int, object]]] = {}
    for i, st in enumerate(body[:-1], 1):
        a = st.body[0]
        values.setdefault(a.targets[0].target.value, []).append((i, a.value))

    def resolve(name: str, before: int):  # type: ignore[no-untyped-def]
        found = [(v, i) for i, v in values.get(name, []) if i < before]
        return found[-1] if found else None

    return eager.read(body[-1].body[0].value, len(body), resolve)


@pytest.mark.parametrize(
    "fill", ["float('-inf')", '-float("inf")', "torch.finfo(s.dtype).min", "-1e9"]
)
def test_masked_fill_is_read_as_a_boolean_mask(fill: str) -> None:
    found = _read(
        "s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
        f"s = s.masked_fill(self.keep[:, :, :T, :T] == 0, {fill})\n"
        "p = F.softmax(s, dim=-1)\n"
        "p = self.attn_dropout(p)\n"
        "p @ v\n"
    )
    assert found is not None
    assert (found.query, found.key, found.value) == ("q", "k", "v")
    assert found.scale == "(1.0 / math.sqrt(k.size(-1)))"
    assert found.mask == "~(self.keep[:, :, :T, :T] == 0)"
    assert found.at == 1  # q and k are read by the first statement


def test_a_method_softmax_and_a_divided_scale() -> None:
    found = _read(
        "s = torch.matmul(a, c.mT) / 8\nw = self.drop(s.softmax(dim=-1))\ntorch.matmul(w, d)\n"
    )
    assert found is not None
    assert (found.query, found.key, found.value, found.scale) == ("a", "c", "d", "1.0 / (8)")


def test_a_positive_fill_is_no_mask() -> None:
    assert _read("s = a @ c.mT\ns = s.masked_fill(m, -1e9)\nw = s.softmax(-1)\nw @ d\n")
    assert _read("s = a @ c.mT\ns = s.masked_fill(m, 0.0)\nw = s.softmax(-1)\nw @ d\n") is None


SINK_TAIL = (
    "s = torch.matmul(q, k.transpose(2, 3)) * scale\n"
    "s = s + mask\n"
    "extra = self.sinks.reshape(1, -1, 1, 1).expand(b, -1, n, 1)\n"
    "c = torch.cat([s, extra], dim=-1)\n"
    "c = c - c.max(dim=-1, keepdim=True).values\n"
    "p = F.softmax(c, dim=-1)\n"
)


def test_a_learned_sink_column_is_read_with_its_per_head_tensor() -> None:
    found = _read(SINK_TAIL + "w = p[..., :-1]\ntorch.matmul(w, v)\n")
    assert found is not None
    assert (found.query, found.key, found.value, found.scale) == ("q", "k", "v", "scale")
    assert found.sink == "self.sinks.reshape(-1)" and found.mask == "mask"
    # without the sink's probability dropped, p @ v has one row too many: not attention
    assert _read(SINK_TAIL + "torch.matmul(p, v)\n") is None
