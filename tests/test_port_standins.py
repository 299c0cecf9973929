"""kb verify's CPU stand-ins for flash-attn and xformers compute the documented semantics
(bottom-right causal, windows, packed sequences, GQA head groups, xformers' top-left
causal and block-diagonal biases), refuse what they do not model by name, and the port's
fused helpers, run under kb.emulate, agree with them where query and key lengths differ."""

from __future__ import annotations

import importlib.util
import sys

import pytest

torch = pytest.importorskip("torch")

from kb.port import flashattn, standins  # noqa: E402
from kb.reference.errors import NotModelled  # noqa: E402


def _naive(q, k, v, keep, scale=None):  # type: ignore[no-untyped-def]
    """[B, S, H, D] attention written out per head, one key/value head per query group."""
    h, hk = q.shape[2], k.shape[2]
    out = torch.zeros(q.shape[0], q.shape[1], h, v.shape[-1])
    for b in range(q.shape[0]):
        for n in range(h):
            kv = n // (h // hk)
            s = q[b, :, n].float() @ k[b, :, kv].float().T
            s = s * (scale if scale is not None else q.shape[-1] ** -0.5)
            s = s.masked_fill(~keep, float("-inf"))
            p = torch.nan_to_num(torch.softmax(s, -1))
            out[b, :, n] = p @ v[b, :, kv].float()
    return out


def _qkv(sq: int, sk: int, h: int = 4, hk: int = 2, d: int = 8, b: int = 2):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(b, sq, h, d, generator=g),
        torch.randn(b, sk, hk, d, generator=g),
        torch.randn(b, sk, hk, d, generator=g),
    )


def test_causal_is_aligned_to_the_bottom_right() -> None:
    # flash_attn_interface.py 1175-1185: seqlen_q = 2, seqlen_k = 5
    assert standins.band(2, 5, True, (-1, -1)).int().tolist() == [
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]
    assert standins.band(5, 2, True, (-1, -1)).int().tolist() == [
        [0, 0],
        [0, 0],
        [0, 0],
        [1, 0],
        [1, 1],
    ]


def test_window_counts_from_the_bottom_right_and_causal_bounds_its_right() -> None:
    keep = standins.band(3, 6, False, (1, 1))
    # query i sees [i + 3 - 1, i + 3 + 1]
    assert keep.int().tolist() == [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1]]
    assert standins.band(3, 6, True, (1, 1)).int().tolist() == [
        [0, 0, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 0],
        [0, 0, 0, 0, 1, 1],
    ]


def test_flash_attn_func_groups_heads_and_keeps_the_dtype() -> None:
    q, k, v = _qkv(3, 7)
    got = standins.flash_attn_func(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=True)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 4, 8)
    want = _naive(q.bfloat16(), k.bfloat16(), v.bfloat16(), standins.band(3, 7, True, (-1, -1)))
    assert torch.allclose(got.float(), want, atol=1e-2)


def test_varlen_attends_within_each_sequence() -> None:
    q, k, v = _qkv(5, 5, b=1)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    got = standins.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 3, 3, causal=True)
    for s, e in ((0, 2), (2, 5)):
        keep = torch.ones(e - s, e - s, dtype=torch.bool).tril()
        want = _naive(q[:, s:e], k[:, s:e], v[:, s:e], keep)[0]
        assert torch.allclose(got[s:e], want, atol=1e-5)


def test_xformers_lower_triangular_is_top_left_and_block_diagonal_packs() -> None:
    q, k, v = _qkv(3, 5, hk=4)
    got = standins.memory_efficient_attention(q, k, v, standins.LowerTriangularMask())
    keep = torch.ones(3, 5, dtype=torch.bool).tril()
    assert torch.allclose(got, _naive(q, k, v, keep), atol=1e-5)
    bias = standins.BlockDiagonalMask.from_seqlens([1, 2], [2, 3])
    got = standins.memory_efficient_attention(q[:1], k[:1], v[:1], attn_bias=bias)
    keep = torch.tensor([[1, 1, 0, 0, 0], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool)
    assert torch.allclose(got, _naive(q[:1], k[:1], v[:1], keep), atol=1e-5)


@pytest.mark.parametrize(
    ("fn", "kwargs", "named"),
    [
        (standins.flash_attn_func, {"dropout_p": 0.1}, "dropout_p"),
        (standins.flash_attn_func, {"softcap": 50.0}, "softcap"),
        (standins.flash_attn_func, {"alibi_slopes": torch.ones(4)}, "alibi_slopes"),
        (standins.memory_efficient_attention, {"p": 0.1}, "p"),
        (standins.memory_efficient_attention, {"attn_bias": object()}, "attn_bias=object"),
    ],
)
def test_what_a_stand_in_does_not_model_is_refused_by_name(fn, kwargs, named) -> None:  # type: ignore[no-untyped-def]
    q, k, v = _qkv(3, 3, hk=4)
    with pytest.raises(NotModelled, match=named):
        fn(q, k, v, **kwargs)


def test_unpad_and_pad_round_trip_with_the_cited_results() -> None:
    x = torch.arange(12.0).view(2, 3, 2)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    rows, indices, cu, longest, used = standins.unpad_input(x, mask)
    assert rows.shape == (5, 2) and cu.tolist() == [0, 2, 5] and longest == 3
    assert used.tolist() == [2, 3]  # the fifth result of the cited release
    back = standins.pad_input(rows, indices, 2, 3)
    assert torch.equal(back, x * mask[..., None])


def test_the_tree_is_importable_only_while_installed() -> None:
    assert "flash_attn" not in sys.modules
    done = standins.install()
    try:
        import flash_attn
        from flash_attn.bert_padding import pad_input  # noqa: F401
        from xformers.ops.fmha.attn_bias import BlockDiagonalMask  # noqa: F401

        assert int(flash_attn.__version__.split(".")[1]) >= 1  # >= 2.1: bottom-right causal
        # libraries probe with find_spec (transformers raises on a module without a spec)
        assert importlib.util.find_spec("flash_attn.flash_attn_interface") is not None
    finally:
        done.undo()
    assert "flash_attn" not in sys.modules and "xformers.ops" not in sys.modules


def _helpers() -> dict:
    """The port's fused helpers as a ported file defines them, on the emulated torch_npu."""
    import torch_npu

    ns = {"torch": torch, "torch_npu": torch_npu}
    names = ("_kb_fused_attention", "_kb_flash_attention", "_kb_flash_kvcache")
    for name in (*names, "_kb_xformers_attention"):
        exec(flashattn.HELPERS[name], ns)
    return ns


@pytest.mark.parametrize(
    ("sq", "sk", "causal", "window"),
    [
        (3, 7, True, (-1, -1)),
        (7, 7, True, (2, -1)),
        (3, 9, False, (2, 1)),
        (4, 9, True, (3, 3)),
        (5, 5, False, (-1, -1)),
        (1, 6, True, (2, 0)),
    ],
)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_the_fused_helper_matches_flash_attn_where_lengths_differ(
    sq, sk, causal, window, dtype
) -> None:  # type: ignore[no-untyped-def]
    """bfloat16 through the inference kernel, float32 through npu_fusion_attention."""
    from kb import emulate

    q, k, v = (t.to(getattr(torch, dtype)) for t in _qkv(sq, sk))
    want = standins.flash_attn_func(q, k, v, causal=causal, window_size=window)
    with emulate.install("atlas-a2"):
        got = _helpers()["_kb_flash_attention"](q, k, v, None, causal, window)
    atol = 2e-2 if dtype == "bfloat16" else 1e-5
    assert got.dtype == q.dtype
    assert torch.allclose(got.float(), want.float(), atol=atol), (got - want).abs().max()


def test_the_fused_helper_reads_packed_lengths_and_the_kv_cache() -> None:
    from kb import emulate

    q, k, v = (t.bfloat16()[0] for t in _qkv(6, 6, b=1))
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    want = standins.flash_attn_varlen_func(q, k, v, cu, cu, 4, 4, causal=True)
    qb, kb_, vb = (t.bfloat16() for t in _qkv(2, 8))
    cache_k, cache_v = torch.zeros_like(kb_), torch.zeros_like(vb)
    lens = torch.tensor([3, 5], dtype=torch.int32)
    new_k, new_v = kb_[:, :2], vb[:, :2]
    want_c = standins.flash_attn_with_kvcache(
        qb, cache_k.clone(), cache_v.clone(), new_k, new_v, cache_seqlens=lens, causal=True
    )
    with emulate.install("atlas-a2"):
        ns = _helpers()
        got = ns["_kb_flash_attention"](q, k, v, None, True, (-1, -1), cu, cu)
        got_c = ns["_kb_flash_kvcache"](qb, cache_k, cache_v, new_k, new_v, lens, None, True)
    assert torch.allclose(got.float(), want.float(), atol=2e-2)
    assert torch.allclose(got_c.float(), want_c.float(), atol=2e-2)
    assert torch.equal(cache_k[0, 3:5], new_k[0])  # written in place, as flash-attn does


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize(
    "bias",
    [
        None,
        standins.LowerTriangularMask(),
        standins.LowerTriangularFromBottomRightMask(),
        standins.BlockDiagonalMask.from_seqlens([1, 2], [2, 3]),
        standins.BlockDiagonalCausalMask.from_seqlens([2, 3]),
    ],
    ids=["none", "top-left", "bottom-right", "block-diagonal", "block-causal"],
)
def test_the_xformers_helper_matches_each_bias(bias, dtype) -> None:  # type: ignore[no-untyped-def]
    from kb import emulate

    block = isinstance(bias, standins.BlockDiagonalMask)
    sq, sk = (3, 5) if block and not bias.causal else (5, 5) if block else (3, 6)
    q, k, v = (t.to(getattr(torch, dtype)) for t in _qkv(sq, sk, b=1 if block else 2))
    want = standins.memory_efficient_attention(q, k, v, bias)
    with emulate.install("atlas-a2"):
        got = _helpers()["_kb_xformers_attention"](q, k, v, bias)
    atol = 2e-2 if dtype == "bfloat16" else 1e-5
    assert got.dtype == q.dtype and got.shape == want.shape
    assert torch.allclose(got.float(), want.float(), atol=atol), (got - want).abs().max()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_window_over_packed_single_queries_is_kept(dtype) -> None:  # type: ignore[no-untyped-def]
    """One query per packed sequence (decode): the inference kernel would read no sparse
    mode, so the window must still reach the kernel the helper picks."""
    from kb import emulate

    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 8, generator=g).to(getattr(torch, dtype))
    k, v = (torch.randn(10, 2, 8, generator=g).to(q.dtype) for _ in range(2))
    cu_q = torch.tensor([0, 1, 2], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 10], dtype=torch.int32)
    want = standins.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, 1, 6, causal=True, window_size=(2, 0)
    )
    full = standins.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1, 6, causal=True)
    assert not torch.allclose(want.float(), full.float(), atol=2e-2)  # the window matters here
    with emulate.install("atlas-a2"):
        got = _helpers()["_kb_flash_attention"](q, k, v, None, True, (2, 0), cu_q, cu_k)
    atol = 2e-2 if dtype == "bfloat16" else 1e-5
    assert torch.allclose(got.float(), want.float(), atol=atol), (got - want).abs().max()
