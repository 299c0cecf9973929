"""One emulated call from binding to result: validate, convert, run the reference, convert back.

Both ways in end here: ``torch_npu.<op>`` (bound the Python way) and the kernels
registered under ``torch.ops.npu`` (bound by the dispatcher from the schema).  The
numpy reference is called through :func:`kb.reference.run_record` with the same
arguments a direct caller would pass, so the result is the reference's, bit for bit;
mutated arguments (caches, ``scatter_update_``'s input) get the reference's values
copied back, and a result that is a mutated argument is that very tensor.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import torch

from kb.catalog.binding import python_name
from kb.catalog.signature import Schema
from kb.emulate.dtypes import dtype_name, from_numpy, to_numpy
from kb.emulate.errors import BackwardNotEmulated, CallRejected, EmulatorWarning, NotEmulated
from kb.emulate.trace import Trace
from kb.emulate.validate import TensorFacts, Validator
from kb.reference.binding import parse_default

Record = dict[str, Any]


def plain(value: Any) -> Any:
    """A call argument as records and references spell it (a torch.dtype as its name)."""
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.Size):
        return list(value)
    if isinstance(value, (list, tuple)) and not any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(plain(v) for v in value)
    return value


def _to_ref(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return to_numpy(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return [None if v is None else to_numpy(v) for v in value]
    return plain(value)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


class FormatBook:
    """Formats ``npu_format_cast`` gave, per storage (views and ``.data =`` share it).

    One book per process, as a format belongs to the tensor and outlives an emulation
    that is turned off and on again.  Holding the storage keeps its address from being
    reused by another tensor; base-format casts are not held (a fresh tensor has one).
    """

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, int]] = {}

    def remember(self, t: torch.Tensor, code: int | None) -> None:
        from kb.vocab import BASE_FORMATS, FORMAT_CODES

        if t.numel() == 0:
            return
        storage = t.untyped_storage()
        if code is None or FORMAT_CODES.get(int(code)) in BASE_FORMATS:
            self._held.pop(storage.data_ptr(), None)
        else:
            self._held[storage.data_ptr()] = (storage, int(code))

    def code(self, t: torch.Tensor) -> int | None:
        if t.numel() == 0:
            return None
        hit = self._held.get(t.untyped_storage().data_ptr())
        return hit[1] if hit else None

    def name(self, t: torch.Tensor) -> str | None:
        from kb.vocab import FORMAT_CODES

        code = self.code(t)
        return None if code is None else FORMAT_CODES.get(code)


FORMATS = FormatBook()


class Runtime:
    """The state of one emulation: records, validation target, formats, the trace."""

    def __init__(self, catalog: Any, product: str | None, torch_npu: str | None) -> None:
        self.catalog = catalog
        self.product = product
        self.torch_npu = torch_npu
        self.validator = Validator(catalog, product, torch_npu)
        self.formats = FORMATS
        self.trace = Trace()
        #: what ``torch_npu.<name>`` resolved to (kb.emulate.module.lookup)
        self.operators: dict[str, Any] = {}
        #: called after each call with (call, inputs before it, inputs after it, result)
        self.listeners: list[Any] = []
        self._warned: set[tuple[str, str, str]] = set()

    # -- one call -------------------------------------------------------------------
    def run(
        self, rec: Record, schema: Schema, given: dict[str, Any], site: tuple[str, int, str]
    ) -> Any:
        """``rec``'s operator (overload ``schema``) on ``given`` (schema name → value)."""
        from kb.emulate import plumbing

        name = rec["name"]
        where = f"{site[0]}:{site[1]}"
        params = rec.get("parameters") or []
        known = {p["name"] for p in params}
        outs = [
            given.pop(a.name)
            for a in schema.args
            if a.mutated and a.name not in known and a.name in given
        ]
        # an overload's own arguments: a plumbing overload's code or tensor, or a workspace=
        # the emulated kernels do not need
        extras = {k: plain(given.pop(k)) for k in [k for k in given if k not in known]}
        full = self._complete(params, given)
        self._judge(rec, full, where)
        call = self.trace.add(name, schema.overload, site, self._shapes(params, full))
        before = self._snapshot(given) if self.listeners else None
        if plumbing.handles(name):
            result = plumbing.run(self, rec, schema, {**full, **extras})
        else:
            result = _no_backward(name, full, self._reference(rec, params, given, where))
        for listener in self.listeners:
            listener(call, before, given, result)
        return self._into_outs(result, outs, schema, where) if outs else result

    def _complete(self, params: list[Record], given: dict[str, Any]) -> dict[str, Any]:
        full: dict[str, Any] = {}
        for p in params:
            full[p["name"]] = (
                plain(given[p["name"]]) if p["name"] in given else parse_default(p.get("default"))
            )
        return full

    def _judge(self, rec: Record, full: dict[str, Any], where: str) -> None:
        facts: dict[str, TensorFacts | None] = {}
        for p in rec.get("parameters") or []:
            ts = _tensors(full.get(p["name"]))
            if not str(p.get("type", "")).startswith("Tensor"):
                continue
            if not ts:
                facts[p["name"]] = None
                continue
            first = ts[0]
            fmts = {self.formats.name(t) for t in ts}
            facts[p["name"]] = TensorFacts(
                dtype_name(first.dtype), list(first.shape), fmts.pop() if len(fmts) == 1 else None
            )
        verdict = self.validator.judge(rec, full, facts)
        for f in verdict.warnings:
            key = (rec["name"], where, f.code)
            if key not in self._warned:
                self._warned.add(key)
                file, _, line = where.rpartition(":")
                warnings.warn_explicit(
                    f"torch_npu.{rec['name']}: {f.code} {f.message}",
                    EmulatorWarning,
                    file,
                    int(line),
                )
        if verdict.errors:
            found = [
                {"code": f.code, "severity": f.severity, "message": f.message}
                for f in verdict.errors
            ]
            formats = [
                f for f in verdict.errors if f.code in ("KB108", "KB109") and "FRACTAL" in f.message
            ]
            uncast = [
                n
                for n in verdict.never_cast
                if any(re.search(rf"\b{n}\b", f.message) for f in formats)
            ]
            if uncast:
                were, them = ("was", "it") if len(uncast) == 1 else ("were", "them")
                message = (
                    f"{', '.join(uncast)} {were} never cast with torch_npu.npu_format_cast, "
                    f"so kb.emulate holds {them} in the base format (ND), not FRACTAL_NZ"
                )
                found.append({"code": "KB108", "severity": "error", "message": message})
            raise CallRejected(rec["name"], where, found)

    @staticmethod
    def _shapes(
        params: list[Record], full: dict[str, Any]
    ) -> list[tuple[str, tuple[int, ...], str]]:
        out = []
        for p in params:
            for t in _tensors(full.get(p["name"]))[:1]:
                out.append((p["name"], tuple(t.shape), str(dtype_name(t.dtype))))
        return out

    def _reference(
        self, rec: Record, params: list[Record], given: dict[str, Any], where: str
    ) -> Any:
        from kb import reference

        arrays = {p["name"]: _to_ref(given[p["name"]]) for p in params if p["name"] in given}
        kwargs = {python_name(p): arrays[p["name"]] for p in params if p["name"] in arrays}
        try:
            result = reference.run_record(rec, **kwargs)
        except reference.ReferenceInputError as exc:
            try:
                located = type(exc)(f"torch_npu.{rec['name']} at {where}: {exc}")
            except TypeError:  # an error class that takes other arguments: as it is
                raise exc from None
            raise located from None
        mutated: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for p in params:
                t, a = given.get(p["name"]), arrays.get(p["name"])
                if p.get("mutated") and isinstance(t, torch.Tensor) and isinstance(a, np.ndarray):
                    t.copy_(from_numpy(a))
                    mutated[id(a)] = t
        return _to_torch(result, mutated)

    def _into_outs(self, result: Any, outs: list[torch.Tensor], schema: Schema, where: str) -> Any:
        values = list(result) if isinstance(result, (tuple, list)) else [result]
        with torch.no_grad():
            for out, value in zip(outs, values, strict=False):
                if not isinstance(value, torch.Tensor) or value.numel() == 0:
                    continue
                if out.shape != value.shape:
                    if out.numel() == value.numel():
                        out.copy_(value.reshape(out.shape))
                        continue
                    raise CallRejected(
                        schema.name,
                        where,
                        [
                            {
                                "code": "out",
                                "severity": "error",
                                "message": f"an out tensor of shape {list(out.shape)} cannot hold a result "
                                f"of shape {list(value.shape)}",
                            }
                        ],
                    )
                out.copy_(value)
        return tuple(outs) if len(outs) > 1 else outs[0]

    def _snapshot(self, given: dict[str, Any]) -> dict[str, Any]:
        """Copies of a call's tensor arguments as they were before it ran (formats kept)."""

        def copy(t: torch.Tensor) -> torch.Tensor:
            out = t.detach().clone()
            self.formats.remember(out, self.formats.code(t))
            return out

        snap: dict[str, Any] = {}
        for k, v in given.items():
            if isinstance(v, torch.Tensor):
                snap[k] = copy(v)
            elif isinstance(v, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in v):
                snap[k] = [copy(t) if isinstance(t, torch.Tensor) else t for t in v]
            else:
                snap[k] = v
        return snap

    def not_emulated(self, name: str) -> NotEmulated:
        """The error for ``name`` (``op`` or ``op.overload``), naming the op's page."""
        rec = self.catalog.get(name.split(".")[0])
        page = ((rec or {}).get("upstream") or {}).get("url") if rec else None
        return NotEmulated(name, page)


def _to_torch(value: Any, mutated: dict[int, torch.Tensor]) -> Any:
    if isinstance(value, np.ndarray):
        same = mutated.get(id(value))
        return same if same is not None else from_numpy(value)
    if isinstance(value, np.generic):
        return from_numpy(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_to_torch(v, mutated) for v in value)
    if isinstance(value, list):
        return [_to_torch(v, mutated) for v in value]
    return value


class _NoBackward(torch.autograd.Function):
    """Joins an emulated result to the graph of its inputs; its backward refuses."""

    @staticmethod
    def forward(ctx: Any, name: str, results: list[torch.Tensor], *inputs: torch.Tensor) -> Any:
        ctx.name = name
        return tuple(r.detach() for r in results)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise BackwardNotEmulated(ctx.name)


def _no_backward(name: str, full: dict[str, Any], result: Any) -> Any:
    """``result`` with a grad_fn that raises :class:`BackwardNotEmulated`, when an input
    requires grad (training code calling ``.backward()`` learns it is not emulated)."""
    if not torch.is_grad_enabled():
        return result
    needing = [t for v in full.values() for t in _tensors(v) if t.requires_grad]
    if not needing:
        return result
    flat = [r for r in (result if isinstance(result, (tuple, list)) else [result])]
    fresh = [
        r
        for r in flat
        if isinstance(r, torch.Tensor)
        and r.is_floating_point()
        and not any(r is t for t in needing)
    ]
    if not fresh:
        return result
    joined = dict(zip(map(id, fresh), _NoBackward.apply(name, fresh, *needing), strict=True))
    swapped = [joined.get(id(r), r) for r in flat]
    if isinstance(result, tuple):
        return tuple(swapped)
    return swapped if isinstance(result, list) else swapped[0]
