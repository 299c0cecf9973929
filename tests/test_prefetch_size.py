"""`kb prefetch-size` evaluates the playbook's formulas; bad input is a clear exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kb.advice.prefetch_size import SizeInputError, evaluate, human
from kb.api.check import check_text
from kb.check.rules.prefetch import point
from kb.cli import main


def playbook(dense: str, factor: float) -> str:
    """A one-formula prefetch playbook (``dense`` is the shape formula)."""
    return f"""\
        kind: playbook
        name: prefetch
        title: {{en: Test playbook, zh: 测试}}
        summary: {{en: Test., zh: 测试。}}
        op_classes:
          - {{id: large-matmul, names: [matmul], weight_heavy: true, window: output-only, why: test}}
        conservative_factor: {factor}
        ladder: [{factor}, 1.0]
        formulas:
          - {{id: dense, applies_to: test, formula: {dense}, explanation: test}}
        """


def sizes(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["prefetch-size", *argv, "--format", "json"]) == 0, capsys.readouterr().err
    results: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["results"]
    return results


def test_gate_up_weight_7168_by_18432_bf16(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prefetch-size", "--shape", "7168x18432", "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "theoretical  264241152 bytes" in out
    assert "max_size     132120576 bytes  (126 MiB" in out
    assert "conservative factor 0.5" in out
    (r,) = sizes(capsys, "--shape", "7168x18432", "--dtype", "bf16")
    assert r["theoretical_bytes"] == 7168 * 18432 * 2 == 264241152
    assert r["max_size"] == 132120576 and r["factor"] == 0.5
    assert r["human"]["max_size"] == "126 MiB / 132.12 MB"


def test_hidden_intermediate_gate_up_matches_the_shape(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = sizes(capsys, "--hidden", "7168", "--intermediate", "9216", "--gate-up")
    assert r["formula"]["id"] == "dense-gate-up"
    assert r["theoretical_bytes"] == 264241152 and r["max_size"] == 132120576


def test_hidden_only_is_a_square_projection(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = sizes(capsys, "--hidden", "4096", "--dtype", "int8")
    assert r["theoretical_bytes"] == 4096 * 4096 and r["dtype"] == "int8"


@pytest.mark.parametrize("dtype,nbytes", [("bf16", 2), ("int8", 1)])
def test_moe_gmm_sizes_follow_the_formula(
    capsys: pytest.CaptureFixture[str], dtype: str, nbytes: int
) -> None:
    hidden, inter, experts, tp = 7168, 2048, 16, 2
    gmm1, gmm2 = sizes(
        capsys,
        "--moe",
        "--hidden",
        str(hidden),
        "--moe-intermediate",
        str(inter),
        "--experts-per-rank",
        str(experts),
        "--moe-tp",
        str(tp),
        "--dtype",
        dtype,
    )
    # by hand: each local expert holds gate+up (2 * I / tp) and down (I / tp) slices of width H
    assert gmm1["theoretical_bytes"] == experts * hidden * (2 * inter // tp) * nbytes
    assert gmm2["theoretical_bytes"] == experts * hidden * (inter // tp) * nbytes
    assert gmm1["max_size"] == gmm1["theoretical_bytes"] // 2
    (only2,) = sizes(
        capsys,
        "--moe",
        "--hidden",
        str(hidden),
        "--moe-intermediate",
        str(inter),
        "--experts-per-rank",
        str(experts),
        "--moe-tp",
        str(tp),
        "--dtype",
        dtype,
        "--gmm",
        "2",
    )
    assert only2 == gmm2


def test_factor_override_and_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = sizes(capsys, "--shape", "1000x1000", "--factor", "70%")
    assert r["factor"] == 0.7 and r["max_size"] == 1_400_000
    assert [step["factor"] for step in r["ladder"]] == [0.1, 0.3, 0.5, 0.7, 1.0]


def test_formulas_and_factor_come_from_the_playbook(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    record_tree({"playbooks/prefetch.yaml": playbook("elements * dtype_bytes * 3", factor=0.25)})
    (r,) = sizes(capsys, "--shape", "100x100", "--dtype", "fp32")
    assert r["theoretical_bytes"] == 100 * 100 * 4 * 3 and r["max_size"] == 30_000
    assert (
        main(
            [
                "prefetch-size",
                "--moe",
                "--hidden",
                "8",
                "--moe-intermediate",
                "8",
                "--experts-per-rank",
                "2",
            ]
        )
        == 2
    )
    assert "has no formula 'moe-gmm1'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "say which weight to size"),
        (["--shape", "7168xabc"], "'abc' is not a positive whole number"),
        (["--shape", "7168x0"], "'0' is not a positive whole number"),
        (["--shape", "10x10", "--dtype", "bf17"], "--dtype 'bf17' is not a known dtype"),
        (["--shape", "10x10", "--hidden", "10"], "either --shape or --hidden"),
        (["--moe", "--hidden", "7168"], "--moe needs --moe-intermediate, --experts-per-rank"),
        (
            [
                "--moe",
                "--hidden",
                "8",
                "--moe-intermediate",
                "9",
                "--experts-per-rank",
                "2",
                "--moe-tp",
                "2",
            ],
            "not divisible by --moe-tp 2",
        ),
        (["--hidden", "7168", "--gmm", "1"], "--gmm only apply with --moe"),
        (["--hidden", "7168", "--gate-up"], "--gate-up needs --intermediate"),
        (["--hidden", "-5"], "--hidden '-5' must be a positive whole number"),
        (["--shape", "10x10", "--factor", "1.5"], "must be above 0 and at most 1"),
        (["--shape", "10x10", "--factor", "half"], "is not a number"),
        (["--shape", "10x10", "--tp", "0"], "--tp '0' must be a positive whole number"),
        (
            [
                "--moe",
                "--hidden",
                "8",
                "--moe-intermediate",
                "8",
                "--experts-per-rank",
                "2",
                "--tp",
                "2",
            ],
            "for expert weights use --moe-tp",
        ),
        (["--shape", "10x10", "--window-us", "40"], "--window-us and --bandwidth go together"),
        (
            ["--shape", "10x10", "--window-us", "fast", "--bandwidth", "100"],
            "--window-us 'fast' is not a number",
        ),
        (
            ["--shape", "10x10", "--window-us", "10", "--bandwidth", "-1"],
            "--bandwidth '-1' must be a positive",
        ),
        (["--shape", "10x10", "--l2", "96 parsecs"], "unknown unit 'parsecs'"),
        (
            ["--shape", "10x10", "--l2", "L2_BYTES"],
            "--l2 'L2_BYTES' names something kb cannot size",
        ),
        (["--shape", "10x10", "--l2", "0"], "--l2 '0' must be above 0"),
    ],
)
def test_bad_or_missing_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(["prefetch-size", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("kb prefetch-size: ") and expected in captured.err
    assert "Traceback" not in captured.err


def test_formula_evaluator_refuses_code() -> None:
    assert evaluate("a * (b + 1) // 2", {"a": 3, "b": 5}) == 9
    for bad in ("__import__('os').system('true')", "a ** 2", "a.real"):
        with pytest.raises(SizeInputError):
            evaluate(bad, {"a": 3})
    with pytest.raises(SizeInputError, match="needs 'b'"):
        evaluate("a * b", {"a": 1})


def test_human_units() -> None:
    assert human(132120576) == "126 MiB / 132.12 MB"
    assert human(18 * 1000**2) == "17.17 MiB / 18 MB"
    assert human(512) == "512 B"


def test_tp_sharded_weights_are_sized_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    """LongCat-Flash: hidden * intermediate * 2 * bytes // dense_tp_size for gate_up."""
    hidden, inter, tp = 6144, 12288, 2
    (r,) = sizes(
        capsys, "--hidden", str(hidden), "--intermediate", str(inter), "--gate-up", "--tp", str(tp)
    )
    assert r["theoretical_bytes"] == hidden * inter * 2 * 2 // tp
    assert r["tp"] == 2 and r["inputs"]["tp"] == 2
    (whole,) = sizes(capsys, "--shape", f"{hidden}x{inter}", "--tp", str(tp))
    assert whole["theoretical_bytes"] == hidden * inter * 2 // tp


def test_window_and_l2_caps_bound_max_size(capsys: pytest.CaptureFixture[str]) -> None:
    # 40 us x 1200 GB/s = 48,000,000 bytes < 0.5 x 264,241,152
    (r,) = sizes(
        capsys, "--shape", "7168x18432", "--window-us", "40", "--bandwidth", "1200", "--l2", "96MiB"
    )
    assert [c["id"] for c in r["caps"]] == ["window-cap", "l2-cap"]
    assert [c["bytes"] for c in r["caps"]] == [48_000_000, 96 * 1024**2]
    assert r["uncapped_max_size"] == 132120576 and r["max_size"] == 48_000_000
    assert r["limited_by"] == "window-cap"
    assert max(step["max_size"] for step in r["ladder"]) == 48_000_000
    (loose,) = sizes(capsys, "--shape", "1000x1000", "--l2", "96MiB")
    assert (
        loose["max_size"] == loose["uncapped_max_size"] == 1_000_000 and loose["limited_by"] is None
    )
    assert main(["prefetch-size", "--shape", "7168x18432", "--l2", "32MiB"]) == 0
    out = capsys.readouterr().out
    assert (
        "max_size     33554432 bytes" in out
        and "= l2-cap (the conservative factor 0.5 gives" in out
    )


def test_json_without_caps_keeps_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = sizes(capsys, "--shape", "100x100")
    assert r["caps"] == [] and r["limited_by"] is None and r["uncapped_max_size"] == r["max_size"]
    assert {
        "label",
        "formula",
        "inputs",
        "dtype",
        "theoretical_bytes",
        "factor",
        "max_size",
        "human",
        "ladder",
    } <= set(r)


def test_a_formula_without_tp_refuses_a_tp_degree(
    record_tree: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    record_tree({"playbooks/prefetch.yaml": playbook("elements * dtype_bytes", factor=0.5)})
    assert main(["prefetch-size", "--shape", "10x10", "--tp", "2"]) == 2
    assert "does not divide by tp" in capsys.readouterr().err


# ------------------------------------------- targets and windows from the same playbook

HEAD = "version: 1\ntarget: {product: atlas-a3}\ncandidates:\n"


def codes(text: str) -> set[str]:
    return {f.code for f in check_text(text)}


def test_the_router_classifier_is_a_legal_target() -> None:
    router = point(
        target="router.classifier",
        target_op="router",
        weight="{shape: [6144, 768], dtype: float32}",
        dependency='{name: "o_proj output", op: matmul, output: true}',
        max_size="9MiB",
    )
    assert "KB401" not in codes(HEAD + router)
    assert "KB401" in codes(HEAD + point(target="input_layernorm", target_op="rms_norm"))


@pytest.mark.parametrize(
    ("dependency", "expected"),
    [
        ('{name: "reduce_scatter output", op: reduce_scatter, output: true}', set()),
        ('{name: "reduce_scatter input", op: reduce_scatter}', {"KB403"}),
        ('{name: "kv concat", op: concat}', {"KB402"}),
    ],
)
def test_a_finished_communication_output_is_a_legal_window(
    dependency: str, expected: set[str]
) -> None:
    found = codes(HEAD + point(dependency=dependency)) & {"KB402", "KB403"}
    assert found == expected


@pytest.mark.parametrize(
    ("dependency", "expected"),
    [
        # a communication step however the port spells it, not said to be finished
        ('{name: "attention all_reduce", op: all_reduce}', {"KB403"}),
        ("{name: h, op: tensor_model_parallel_all_reduce}", {"KB403"}),
        ("{name: h, op: dist.all_reduce}", {"KB403"}),
        ("{name: h, op: reduce_scatter_tensor}", {"KB403"}),
        ('{name: "tp all-reduce"}', {"KB403"}),
        ('{name: "hcom_allReduce__812_0_1"}', {"KB403"}),
        ("{name: h, op: all_gather, output: false}", {"KB403"}),
        ("{name: h, op: npu_mm_all_reduce_base}", {"KB403"}),  # matmul and collective in one
        # ... and the same steps once finished
        ('{name: "all_reduce output", op: all_reduce}', set()),
        ("{name: h, op: tensor_model_parallel_all_reduce, output: true}", set()),
        ('{name: "tp all-reduce output"}', set()),
        ('{name: "hcom_allReduce__812_0_1", output: true}', set()),
        # not communication: compute-bound windows, MC2 dispatch, a data move by name only
        ('{name: "gate_up_proj input x", op: swiglu}', set()),
        ("{name: h, op: npu_moe_distribute_dispatch_v2}", set()),
        ('{name: "previous layer output"}', set()),
        ('{name: "kv concat"}', {"KB402"}),
    ],
)
def test_a_communication_window_is_recognised_however_it_is_written(
    dependency: str, expected: set[str]
) -> None:
    found = codes(HEAD + point(dependency=dependency)) & {"KB402", "KB403"}
    assert found == expected
