"""A top-k's ids may differ where the values chosen are equal (two experts with one score):
the comparison counts them as ties; ids that differ where the values differ still fail."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kb.emulate.comparison import TOLERANCE, diff  # noqa: E402


def _topk(scores: torch.Tensor) -> list[torch.Tensor]:
    values, ids = torch.topk(scores, 2, dim=-1)
    return [values, ids]


def test_ids_swapped_between_equal_scores_are_ties() -> None:
    scores = torch.tensor([[0.5, 0.25, 0.25, 0.0]], dtype=torch.bfloat16)
    original = _topk(scores)
    port = [original[0].clone(), original[1].clone()]
    port[1][0, 1] = 2 if int(original[1][0, 1]) == 1 else 1  # the other tied expert
    d = diff("router", original, port, TOLERANCE)
    assert d.passed, d.note
    assert "1 tied choice" in d.note


def test_ids_that_differ_where_the_values_differ_fail() -> None:
    scores = torch.tensor([[0.5, 0.25, 0.125, 0.0]], dtype=torch.bfloat16)
    original = _topk(scores)
    wrong = [torch.tensor([[0.5, 0.125]], dtype=torch.bfloat16), torch.tensor([[0, 2]])]
    d = diff("router", original, wrong, TOLERANCE)
    assert not d.passed and "integer outputs differ" in d.note


def test_ids_alone_have_no_values_to_tie_with() -> None:
    d = diff("ids", [torch.tensor([[0, 1]])], [torch.tensor([[1, 0]])], TOLERANCE)
    assert not d.passed and "integer outputs differ" in d.note


def test_a_near_tie_beyond_rounding_is_no_tie() -> None:
    # values a few percent apart are two different scores, whatever atol would allow
    original = [torch.tensor([[0.5, 0.26]]), torch.tensor([[0, 1]])]
    port = [torch.tensor([[0.5, 0.25]]), torch.tensor([[0, 2]])]
    d = diff("router", original, port, TOLERANCE)
    assert not d.passed and "integer outputs differ" in d.note


def test_values_rounded_through_the_run_dtype_still_tie() -> None:
    # float32 weights of a softmax over bfloat16 logits: the port's went through bfloat16
    original = [torch.tensor([[0.5, 0.2503]]), torch.tensor([[0, 1]])]
    port = [torch.tensor([[0.5, 0.25]]), torch.tensor([[0, 2]])]
    assert not diff("router", original, port, TOLERANCE).passed  # float32's own rounding
    from kb.port.verify import tolerance  # a bfloat16 run's table (floored at bfloat16)

    d = diff("router", original, port, tolerance(torch.bfloat16), torch.bfloat16)
    assert d.passed and "tied" in d.note


def _module(name: str, *, equal: bool, ops: tuple[str, ...]) -> dict:
    return {
        "name": name,
        "max_abs": 0.0026,
        "max_rel": 0.5,
        "passed": False,
        "tolerance": {"rtol": 0.05, "atol": 0.05},
        "inputs_match": True,
        "inputs_equal": equal,
        "calls": [{"op": op} for op in ops],
    }


def test_a_routing_module_fed_close_inputs_is_not_where_an_error_starts() -> None:
    """A near tie routed otherwise after upstream rounding: the router and experts stages
    are compared on equal inputs; the module's own output cannot be, unless its inputs are
    equal, and the model's output still counts."""
    from kb.port.verify import Run, StageRun

    router = StageRun(
        "Moe.router_softmax_topk",
        {"mapping": "router_softmax_topk", "operator": "npu_moe_gating_top_k_softmax"},
    )
    ops = ("npu_moe_gating_top_k_softmax", "npu_grouped_matmul")
    run = Run("M", "bfloat16", "prefill", stages=[router])
    run.comparison = {"modules": [_module("layers.0.mlp", equal=False, ops=ops)]}
    assert run.failing_modules == []
    run.comparison = {"modules": [_module("layers.0.mlp", equal=True, ops=ops)]}
    assert [m["name"] for m in run.failing_modules] == ["layers.0.mlp"]  # equal inputs
    run.comparison = {"modules": [_module("layers.0.mlp", equal=False, ops=ops[1:])]}
    assert [m["name"] for m in run.failing_modules] == ["layers.0.mlp"]  # no routing inside
    run.comparison = {"modules": [_module("(output)", equal=False, ops=ops)]}
    assert [m["name"] for m in run.failing_modules] == ["(output)"]


def test_an_unported_router_choosing_otherwise_on_close_inputs_is_inherited() -> None:
    from kb.port.verify import Run

    gate = _module("layers.1.mlp.gate", equal=False, ops=())
    gate["note"] = " (integer outputs differ)"
    run = Run("M", "bfloat16", "prefill")
    run.comparison = {"modules": [gate]}
    assert run.failing_modules == []
    run.comparison = {"modules": [{**gate, "inputs_equal": True}]}  # equal inputs: it starts
    assert [m["name"] for m in run.failing_modules] == ["layers.1.mlp.gate"]
    run.comparison = {"modules": [{**gate, "calls": [{"op": "npu_grouped_matmul"}]}]}
    assert [m["name"] for m in run.failing_modules] == ["layers.1.mlp.gate"]  # port code ran


def test_ids_first_take_the_tolerance_of_their_values() -> None:
    """A router module's outputs: ids, then float32 weights, in a bfloat16 run."""
    from kb.port.verify import tolerance

    original = [torch.tensor([[0, 1]]), torch.tensor([[0.5, 0.25]])]
    port = [torch.tensor([[0, 1]]), torch.tensor([[0.5003, 0.25]])]
    d = diff("gate", original, port, tolerance(torch.bfloat16), torch.bfloat16)
    assert d.passed and d.dtype == "float32" and d.rtol == 0.05
