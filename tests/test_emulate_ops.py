"""Every operator with a reference runs under kb.emulate and matches kb.reference.run bit for bit.

The inputs are those of the record examples (at their small sizes): every call an
example makes is captured with its arguments as they were before it ran, and the same
arguments, converted to numpy here (not by the emulator), go to ``kb.reference.run``.
Results and mutated arguments must agree exactly (compared in float64, NaN equal to
NaN), with the same dtype and shape, through ``torch_npu.<op>``, ``torch.ops.npu.<op>``
and ``torch_npu.atb.<op>`` alike.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from kb import reference
from kb.catalog.binding import python_name
from kb.emulate import emulated_names
from tests.emulate_support import Captured, every_example, torch

OPERATORS = reference.available()
pytestmark = [
    pytest.mark.filterwarnings("ignore::kb.emulate.EmulatorWarning"),
    pytest.mark.heavy,  # a minute or more of CPU: started first
]
_VIEWS = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2),
    torch.float8_e8m0fnu: (torch.uint8, ml_dtypes.float8_e8m0fnu),
}


def numpy_of(t: torch.Tensor) -> np.ndarray:
    """The array a numpy caller of the reference would build for ``t`` (same bits)."""
    t = t.detach().contiguous()
    if t.dtype in _VIEWS:
        carrier, kind = _VIEWS[t.dtype]
        return t.view(carrier).numpy().view(kind).copy()
    return t.numpy().copy()


def reference_args(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return numpy_of(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return [None if v is None else numpy_of(v) for v in value]
    if isinstance(value, torch.dtype):
        return str(value)
    return value


def flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [value]


def same_bits(got: Any, want: Any, what: str) -> None:
    if want is None or got is None:
        assert got is None and want is None, f"{what}: {got!r} vs {want!r}"
        return
    if not isinstance(want, np.ndarray):
        assert got == want, what
        return
    assert isinstance(got, torch.Tensor), f"{what}: {type(got).__name__}, not a tensor"
    mine = numpy_of(got)
    assert mine.dtype == want.dtype and mine.shape == want.shape, (
        what,
        mine.dtype,
        want.dtype,
        mine.shape,
        want.shape,
    )
    a, b = mine.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(a, b, equal_nan=True), f"{what}: max diff {np.nanmax(np.abs(a - b))}"


@pytest.fixture(scope="module")
def captured(emulation: Any) -> dict[str, list[Captured]]:
    by_op: dict[str, list[Captured]] = {}
    for run in every_example(emulation):
        for call in run.calls:
            if not call.overload:
                by_op.setdefault(call.op, []).append(call)
    return by_op


def _fresh(before: dict[str, Any]) -> dict[str, Any]:
    """Copies of a call's arguments, each keeping the format npu_format_cast gave it."""
    import torch_npu

    def copy(v: Any) -> Any:
        if not isinstance(v, torch.Tensor):
            return v
        code = torch_npu.get_npu_format(v)
        return v.clone() if code == 2 else torch_npu.npu_format_cast(v, code)

    return {k: [copy(t) for t in v] if isinstance(v, list) else copy(v) for k, v in before.items()}


@pytest.mark.parametrize("name", OPERATORS)
def test_an_operator_matches_its_reference_bit_for_bit(
    name: str, captured: dict[str, list[Captured]], emulation: Any
) -> None:
    import torch_npu

    calls = captured.get(name, [])
    assert calls, f"no record example calls {name} under the emulator"
    rec = reference.record(name)
    params = rec["parameters"]
    for n, call in enumerate(calls):
        kwargs = {
            python_name(p): reference_args(call.before[p["name"]])
            for p in params
            if p["name"] in call.before
        }
        want = reference.run(name, **kwargs)
        same_bits_all(call.result, want, f"{name} call {n}")
        for p in params:
            if p.get("mutated") and p["name"] in call.after:
                same_bits(
                    call.after[p["name"]],
                    kwargs[python_name(p)],
                    f"{name} call {n}: {p['name']} after",
                )
        if n:
            continue
        # the first call again through torch.ops.npu (the dispatcher binds by schema) and
        # torch_npu.atb
        for path in (getattr(torch.ops.npu, name), getattr(torch_npu.atb, name)):
            again = path(**_fresh(call.before))
            same_bits_all(again, want, f"{name} call {n} via {path}")


def same_bits_all(got: Any, want: Any, what: str) -> None:
    got_l, want_l = flat(got), flat(want)
    assert len(got_l) == len(want_l), (
        f"{what}: {len(got_l)} results, the reference gives {len(want_l)}"
    )
    for i, (g, w) in enumerate(zip(got_l, want_l, strict=True)):
        same_bits(g, w, f"{what} result {i}")


def test_every_emulated_name_resolves(emulation: Any) -> None:
    import torch_npu

    for name in emulated_names():
        op = getattr(torch_npu, name)
        assert op.__name__ == name
        assert hasattr(torch.ops.npu, name) and getattr(torch_npu.atb, name).__name__ == name
