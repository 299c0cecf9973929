"""Every record example of an emulated operator runs under kb.emulate, at its small size.

The examples run on real PyTorch with the emulated torch_npu: each call is bound the way
torch_npu binds it and judged by its record, so an example that the record or the
binding contradicts (a dtype the record does not list, an unknown keyword, a value
outside the allowed set, a call path that names no operator) fails here.  Training
examples run their forward calls; their ``.backward()`` raises BackwardNotEmulated,
which is the emulator's documented limit, not the example's fault.

``NOT_YET`` lists the examples that need what no reference computes yet; each must
still fail with NotModelled or NotEmulated, so an entry goes when its reference lands.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from kb.emulate import BackwardNotEmulated, CallRejected, NotEmulated, emulated_names
from kb.emulate.examples import SmallError, shrink
from kb.emulate.examples import run as run_example
from kb.reference import NotModelled, ReferenceInputError
from tests.emulate_support import ExampleRun, every_example

pytestmark = pytest.mark.filterwarnings("ignore::kb.emulate.EmulatorWarning")

#: example -> what it needs that no reference computes yet
NOT_YET: dict[str, str] = {}


def _examples() -> list[str]:
    from kb.catalog.compiled import open_catalog

    catalog = open_catalog()
    return [
        f"{n}[{i}]"
        for n in emulated_names()
        for i in range(len(catalog.get(n).get("examples") or []))
    ]


EXAMPLES = _examples()


@pytest.fixture(scope="module")
def runs(emulation: Any) -> dict[str, ExampleRun]:
    return {run.key: run for run in every_example(emulation)}


@pytest.mark.parametrize("key", EXAMPLES)
def test_an_example_runs_under_the_emulator(key: str, runs: dict[str, ExampleRun]) -> None:
    run = runs[key]
    name = key.split("[")[0]
    if key in NOT_YET:
        assert isinstance(run.error, (NotModelled, NotEmulated)), (
            f"{key} no longer fails for want of {NOT_YET[key]} ({run.error!r}): take it out of NOT_YET"
        )
        return
    if isinstance(run.error, BackwardNotEmulated):
        assert any(c.op == name for c in run.calls), f"{key}: .backward() before {name} ran"
    else:
        assert run.error is None, (
            f"{key} fails under the emulator: {type(run.error).__name__}: {run.error}"
        )
    assert any(c.op == name for c in run.calls), (
        f"{key} never calls {name}: {[c.op for c in run.calls]}"
    )


def test_not_yet_names_real_examples() -> None:
    assert set(NOT_YET) <= set(EXAMPLES), set(NOT_YET) - set(EXAMPLES)


def _snippet(code: str, small: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "snippet", "examples": [{"title": "t", "code": code, "small": small or {}}]}


@pytest.mark.parametrize(
    ("code", "error", "fragment"),
    [
        (
            "x = torch.randn(4, 64, dtype=torch.float64)\ng = torch.ones(64, dtype=torch.float64)\n"
            "torch_npu.npu_rms_norm(x, g)\n",
            CallRejected,
            "KB107 npu_rms_norm takes self as",
        ),
        (
            "x = torch.randn(4, 64, dtype=torch.bfloat16)\ng = torch.ones(64, dtype=torch.bfloat16)\n"
            "torch_npu.npu_rms_norm(x, g, eps=1e-6)\n",
            TypeError,
            "no parameter 'eps' (did you mean epsilon?)",
        ),
        (
            "x = torch.randn(4, 64, dtype=torch.bfloat16)\ntorch_npu.npu_swiglu(x, dim=5)\n",
            ReferenceInputError,
            "dim",
        ),
        (
            "x = torch.randn(2, 8)\ntorch_npu.npu_rms_normalize(x, x)\n",
            AttributeError,
            "npu_rms_normalize",
        ),
    ],
)
def test_an_example_that_contradicts_its_record_fails(
    code: str, error: type, fragment: str, emulation: Any
) -> None:
    with pytest.raises(error, match=re.escape(fragment)):
        run_example(_snippet(code), 0)


def test_small_rewrites_names_and_literals() -> None:
    code = "tokens, hidden = 256, 4096\nw = torch.zeros(4096, 14336)\nlens = [700, 324]\n"
    tree = shrink(code, {"hidden": 64, "14336": 96, "lens": [7, 3]})
    import ast

    text = ast.unparse(tree)
    assert (
        "tokens, hidden = (256, 64)" in text
        and "torch.zeros(4096, 96)" in text
        and "lens = [7, 3]" in text
    )


def test_a_stale_small_entry_is_an_error() -> None:
    with pytest.raises(SmallError, match="seqlen"):
        shrink("x = 1\n", {"seqlen": 4})
