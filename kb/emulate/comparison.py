"""Run an original module and its port on the same inputs; say where they part.

Forward hooks on every named submodule of both record their outputs; submodules with
the same name are compared (float64, elementwise ``|port - original| <= atol + rtol *
|original|`` at the tolerance of the original's dtype), in the order the port finished
them, so the first failure is the innermost module that went wrong.  The report names
the emulated calls made inside it (operator and file:line, from the trace), which is
where a swapped GLU half or a wrong rotary mode sits.  Everything in the result is
plain data (:meth:`Comparison.as_dict`), for ``kb verify`` and for tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kb.emulate.trace import Call

#: (rtol, atol) per output dtype: a module is many rounded ops, so a few units in the
#: last place of its own dtype, not of one operation.
TOLERANCE: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-9, 1e-9),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}
ROOT = "(output)"


@dataclass
class ModuleDiff:
    """One submodule (or the whole output) of original vs port: the largest absolute
    error, and that error relative to the largest magnitude of the original's output."""

    name: str
    dtype: str
    shape: list[int]
    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    passed: bool
    calls: list[Call] = field(default_factory=list)
    note: str = ""
    #: the module got the inputs the original's did (else its error is inherited)
    inputs_match: bool = True
    #: ... bit for bit (within tolerance is not enough for a choice among near ties)
    inputs_equal: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": self.shape,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "passed": self.passed,
            "calls": [c.as_dict() for c in self.calls],
            "note": self.note,
            "inputs_match": self.inputs_match,
            "inputs_equal": self.inputs_equal,
        }


@dataclass
class Comparison:
    """Every compared submodule in the order the port finished it, and the verdict."""

    modules: list[ModuleDiff]

    @property
    def passed(self) -> bool:
        return all(m.passed for m in self.modules)

    @property
    def first_failure(self) -> ModuleDiff | None:
        """The first module (in the order the port finished them) that got the original's
        inputs and still differs: where the error starts, not where it is inherited."""
        failed = [m for m in self.modules if not m.passed]
        return next((m for m in failed if m.inputs_match), failed[0] if failed else None)

    def message(self) -> str:
        bad = self.first_failure
        if bad is None:
            return f"port matches the original in {len(self.modules)} compared outputs"
        where = "; ".join(c.label() for c in bad.calls) or "no emulated call inside it"
        return (
            f"{bad.name} differs: max abs {bad.max_abs:.3g}, max rel {bad.max_rel:.3g} over "
            f"the {bad.dtype} tolerance (rtol {bad.rtol:g}, atol {bad.atol:g}){bad.note}; "
            f"emulated calls inside: {where}"
        )

    def as_dict(self) -> dict[str, Any]:
        bad = self.first_failure
        return {
            "passed": self.passed,
            "first_failure": bad.name if bad else None,
            "message": self.message(),
            "modules": [m.as_dict() for m in self.modules],
        }


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


@dataclass
class _Seen:
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]
    calls: tuple[int, int] = (0, 0)


class _Recorder:
    """Forward hooks on every named submodule: outputs (and trace marks) per call."""

    def __init__(self, model: Any, trace: Any) -> None:
        self.seen: dict[str, list[_Seen]] = {}
        self.order: list[tuple[str, int]] = []
        self._handles: list[Any] = []
        self._starts: dict[int, list[tuple[int, list[torch.Tensor]]]] = {}
        self.trace = trace
        #: record only while this model runs (the port may share modules with the original)
        self.on = False
        if isinstance(model, torch.nn.Module):
            for name, mod in model.named_modules():
                if name:
                    self._handles.append(
                        mod.register_forward_pre_hook(self._pre(mod), with_kwargs=True)
                    )
                    self._handles.append(mod.register_forward_hook(self._post(name, mod)))

    def _mark(self) -> int:
        return self.trace.mark() if self.trace is not None else 0

    def _pre(self, mod: Any) -> Callable[..., None]:
        def hook(_m: Any, args: Any, kwargs: Any) -> None:
            if not self.on:
                return
            inputs = [t.detach().clone() for t in _tensors([args, kwargs])]
            self._starts.setdefault(id(mod), []).append((self._mark(), inputs))

        return hook

    def _post(self, name: str, mod: Any) -> Callable[..., None]:
        def hook(_m: Any, _args: Any, output: Any) -> None:
            if not self.on:
                return
            start, inputs = self._starts[id(mod)].pop() if self._starts.get(id(mod)) else (0, [])
            outs = [t.detach().clone() for t in _tensors(output)]
            self.seen.setdefault(name, []).append(_Seen(inputs, outs, (start, self._mark())))
            self.order.append((name, len(self.seen[name]) - 1))

        return hook

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _floor(dtype: torch.dtype) -> float:
    """Below this an error is rounding in any output (a few units of the dtype's
    smallest normal step), however small the output."""
    return float(torch.finfo(dtype).tiny) * 16 if dtype.is_floating_point else 0.0


def _ties(
    a: torch.Tensor,
    b: torch.Tensor,
    original: list[torch.Tensor],
    port: list[torch.Tensor],
    precision: torch.dtype | None = None,
) -> int | None:
    """How many ids differ where the values they come with agree (a top-k's ids beside its
    values: two experts with equal scores, either one a right choice); None when an id
    differs where the values differ too, or when no values of the same shape come with
    them.  ``precision``: the dtype the values were computed from, when coarser than
    their own (float32 weights of a softmax over bfloat16 logits)."""
    pair = next(
        (
            (x, y)
            for x, y in zip(original, port, strict=False)
            if x.is_floating_point() and x.shape == a.shape and y.shape == b.shape
        ),
        None,
    )
    if pair is None:
        return None
    # equal values: what the same score gives on both sides, up to two units of the
    # values' last place (the two sides round the softmax in their own order)
    ulp = float(torch.finfo(pair[0].dtype).eps) * 2
    if precision is not None and precision.is_floating_point:
        ulp = max(ulp, float(torch.finfo(precision).eps) * 2)
    x, y = pair[0].double(), pair[1].double()
    differ = a.long() != b.long()
    close = (x - y).abs() <= ulp * torch.maximum(x.abs(), y.abs()) + _floor(pair[0].dtype)
    if not bool(close[differ].all()):
        return None
    return int(differ.sum())


def diff(
    name: str,
    original: list[torch.Tensor],
    port: list[torch.Tensor],
    tolerance: dict[torch.dtype, tuple[float, float]],
    precision: torch.dtype | None = None,
) -> ModuleDiff:
    """Worst element of ``port`` against ``original`` (tensor by tensor); ``precision``:
    the dtype the run computes in (ids tied within its rounding are ties)."""
    worst_abs, worst_rel, ok, note = 0.0, 0.0, True, ""
    # the tolerance is the values' (a router gives its ids first, then their weights)
    ref = next((t for t in original if t.is_floating_point()), original[0] if original else None)
    dtype = ref.dtype if ref is not None else torch.float32
    rtol, atol = tolerance.get(dtype, TOLERANCE[torch.float32])
    if len(original) != len(port):
        ok, note = False, f" ({len(port)} output tensors where the original has {len(original)})"
    for a, b in zip(original, port, strict=False):
        if a.shape != b.shape:
            ok, note = False, f" (shape {list(b.shape)} where the original has {list(a.shape)})"
            continue
        if not (a.is_floating_point() or b.is_floating_point()):
            if not torch.equal(a.long(), b.long()):  # ids: int64 here, int32 there
                ties = _ties(a, b, original, port, precision)
                if ties is None:
                    ok, note = False, " (integer outputs differ)"
                else:
                    note = note or f" ({ties} tied choice(s): other ids with equal values)"
            continue
        x, y = a.double(), b.double()
        err = (x - y).abs()
        both_nan = x.isnan() & y.isnan()
        err = torch.where(both_nan, torch.zeros_like(err), err)
        worst_abs = max(worst_abs, float(err.max()) if err.numel() else 0.0)
        scale = float(x.abs().max()) if x.numel() else 0.0
        worst_rel = max(worst_rel, float(err.max()) / scale if scale > 0 and err.numel() else 0.0)
        if bool((err > atol + rtol * x.abs()).any()) or bool(err.isnan().any()):
            ok = False
        # an error over rtol of the output's largest magnitude fails whatever atol allows:
        # atol is sized for values near one, and a port whose outputs are all small (a
        # routed expert's weighted rows) would pass any mistake under it
        if scale > 0 and err.numel() and float(err.max()) > rtol * scale + _floor(a.dtype):
            ok = False
    shape = list(ref.shape) if ref is not None else []
    return ModuleDiff(
        name,
        str(dtype).removeprefix("torch."),
        shape,
        worst_abs,
        worst_rel,
        rtol,
        atol,
        ok,
        note=note,
    )


@contextlib.contextmanager
def _emulation(product: str | None) -> Iterator[Any]:
    from kb.emulate import state
    from kb.emulate.session import install, uninstall

    if state.ACTIVE is not None:
        yield state.ACTIVE.runtime
        return
    em = install(product)
    try:
        yield em.runtime
    finally:
        uninstall()


def compare(
    original: Any,
    port: Any,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    tolerance: dict[torch.dtype, tuple[float, float]] | None = None,
    product: str | None = None,
) -> Comparison:
    """Run ``original(*args, **kwargs)`` and ``port(...)`` (the port under the emulator,
    installed for the call when it is off) and compare every submodule both name."""
    kwargs = kwargs or {}
    table = {**TOLERANCE, **(tolerance or {})}
    with _emulation(product) as rt, torch.no_grad():
        rec_o = _Recorder(original, None)
        rec_p = _Recorder(port, rt.trace)
        try:
            rec_o.on = True
            out_o = original(*_clone(args), **_clone(kwargs))
            rec_o.on, rec_p.on = False, True
            start = rt.trace.mark()
            out_p = port(*_clone(args), **_clone(kwargs))
            end = rt.trace.mark()
        finally:
            rec_o.close()
            rec_p.close()
    modules = []
    for name, i in rec_p.order:
        if name in rec_o.seen and i < len(rec_o.seen[name]):
            seen, before = rec_p.seen[name][i], rec_o.seen[name][i]
            d = diff(name, before.outputs, seen.outputs, table)
            d.inputs_match = diff(name, before.inputs, seen.inputs, table).passed
            d.inputs_equal = len(before.inputs) == len(seen.inputs) and all(
                x.shape == y.shape and torch.equal(x, y.to(x.dtype))
                for x, y in zip(before.inputs, seen.inputs, strict=False)
            )
            d.calls = rt.trace.since(*seen.calls)
            modules.append(d)
    root = diff(
        ROOT, [t.detach() for t in _tensors(out_o)], [t.detach() for t in _tensors(out_p)], table
    )
    root.calls = rt.trace.since(start, end)
    modules.append(root)
    return Comparison(modules)
