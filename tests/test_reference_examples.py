"""Record examples run through the numpy reference on zeros, where that is cheap.

Each example of an operator that has a reference is executed with a stand-in torch
(tests/torch_shim.py): its tensors are zeros of the written shapes and dtypes and its
torch_npu call goes to ``kb.reference.run``.  An example that contradicts its record (a
dtype the record does not list, an unknown keyword, a call path that names no operator)
fails; one that needs what the reference does not model, more torch than the stand-in
has, or large tensors is skipped, and the skips are counted so the test cannot pass
by skipping everything.
"""

from __future__ import annotations

import pytest

pytest.importorskip("numpy", reason="the [reference] extra is not installed")
pytest.importorskip("ml_dtypes", reason="the [reference] extra is not installed")

from kb.catalog.compiled import open_catalog
from kb.reference import NotModelled, OverCap, ReferenceInputError, available
from tests import torch_shim

EXAMPLES = [
    (name, i, ex)
    for name in available()
    for i, ex in enumerate(open_catalog().get(name).get("examples") or [])
]
#: at least this many examples run end to end (17 did when the test was written)
MIN_RUN = 16
OUTCOMES: dict[str, str] = {}


@pytest.mark.parametrize(
    ("name", "index", "example"), EXAMPLES, ids=lambda v: v if isinstance(v, str) else None
)
def test_example_agrees_with_its_record(name: str, index: int, example: dict) -> None:
    key = f"{name}[{index}]"
    try:
        calls = torch_shim.execute(example["code"])
    except (torch_shim.TooLarge, torch_shim.Unsupported, NotModelled, OverCap) as exc:
        OUTCOMES[key] = "skipped"
        pytest.skip(f"{type(exc).__name__}: {exc}")
    except ReferenceInputError as exc:
        pytest.fail(f"{key} ({example['title']}) contradicts the record: {exc}")
    OUTCOMES[key] = "ran"
    assert name in calls, f"{key} never calls {name} (calls: {calls})"


def test_enough_examples_ran() -> None:
    if len(OUTCOMES) < len(EXAMPLES):  # run alone: execute them here
        for name, index, example in EXAMPLES:
            try:
                torch_shim.execute(example["code"])
                OUTCOMES[f"{name}[{index}]"] = "ran"
            except (torch_shim.TooLarge, torch_shim.Unsupported, NotModelled, OverCap):
                OUTCOMES[f"{name}[{index}]"] = "skipped"
    ran = sum(1 for v in OUTCOMES.values() if v == "ran")
    assert ran >= MIN_RUN, OUTCOMES


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (
            "x = torch.randn(4, 64, dtype=torch.float64)\ng = torch.ones(64, dtype=torch.float64)\n"
            "torch_npu.npu_rms_norm(x, g)\n",
            "dtype float64",
        ),
        (
            "x = torch.randn(4, 64, dtype=torch.bfloat16)\ng = torch.ones(64, dtype=torch.bfloat16)\n"
            "torch_npu.npu_rms_norm(x, g, eps=1e-6)\n",
            "no parameter 'eps'",
        ),
        ("x = torch.randn(4, 64, dtype=torch.bfloat16)\ntorch_npu.npu_swiglu(x, dim=5)\n", "dim=5"),
    ],
)
def test_a_contradicting_example_fails(code: str, fragment: str) -> None:
    with pytest.raises(ReferenceInputError, match=fragment):
        torch_shim.execute(code)


def test_a_wrong_call_path_fails() -> None:
    with pytest.raises(AttributeError, match="npu_rms_normalize"):
        torch_shim.execute("x = torch.randn(2, 8)\ntorch_npu.npu_rms_normalize(x, x)\n")
