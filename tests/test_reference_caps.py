"""Issue 35 class A: a required tensor given as None or [] is refused by name, and no call
works past the caller's cap, however small its arguments are."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="the [reference] extra is not installed")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.reference import ReferenceInputError, limit, run  # noqa: E402
from tests.reference_support import sampler  # noqa: E402

randn = sampler(21, np.float16)


# ------------------------------------------------------------------ required tensors
@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((None, np.ones(8, np.float16)), "input"),
        ((np.ones((2, 8), np.float16), None), "gamma"),
    ],
)
def test_none_for_a_required_tensor_names_it(args, name: str) -> None:
    with pytest.raises(ReferenceInputError, match=f"'{name}'"):
        run("npu_rms_norm", *args)


def test_an_empty_tensor_list_names_it() -> None:
    with pytest.raises(ReferenceInputError, match="'x'"):
        run("npu_grouped_matmul", [], [np.ones((4, 3), np.float16)])


# ------------------------------------------------------------------ the work cap
def test_broadcast_tricks_cannot_grow_the_work_past_the_cap() -> None:
    """Two small operands whose broadcast is N x N: refused before anything that size exists."""
    n = 20_000
    # a view of n real elements that reads as 2 * n
    x = np.broadcast_to(np.ones((n, 1, 1, 1), np.float16), (n, 1, 1, 2))
    cos = np.ones((1, n, 1, 2), np.float16)
    with limit(64 * 2**20), pytest.raises(ReferenceInputError, match="cap"):
        run("npu_rotary_mul", x, cos, cos)
    long = np.broadcast_to(np.ones((1, 1, 1, 8), np.float16), (1, 1, n, 8))  # scores would be n x n
    with limit(64 * 2**20), pytest.raises(ReferenceInputError, match="cap"):
        run("npu_fused_infer_attention_score", long, long, long, num_heads=1, input_layout="BNSD")


def test_scalar_sizes_are_held_to_the_cap() -> None:
    x, ids = randn(2, 8), np.array([[0], [1]], np.int32)
    w = np.ones((1, 8, 4), np.int8)
    with limit(2**20), pytest.raises(ReferenceInputError, match="cap"):
        run(
            "npu_grouped_matmul_finalize_routing",
            x.astype(np.int8),
            w,
            np.array([2]),
            scale=np.ones((1, 4), np.float32),
            row_index=np.array([0, 1]),
            output_bs=10**8,
        )
    with limit(2**20), pytest.raises(ReferenceInputError, match="cap"):
        run(
            "npu_moe_distribute_dispatch_v2",
            x,
            ids,
            "ep",
            1,
            0,
            2,
            global_bs=10**7,
            shared_expert_num=0,
        )
    q = randn(1, 1, 16)
    cache = randn(1, 128, 16)
    with limit(2**20), pytest.raises(ReferenceInputError, match="cap"):
        run(
            "npu_fused_infer_attention_score_v2",
            q,
            cache,
            cache,
            block_table=np.zeros((1, 10**6), np.int32),
            block_size=128,
            actual_seq_kvlen=[100],
        )


def test_a_normal_call_fits_a_small_cap() -> None:
    with limit(2**20):
        assert run("npu_rms_norm", randn(4, 64), np.ones(64, np.float16))[0].shape == (4, 64)
