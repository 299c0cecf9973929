"""The ``torch_npu`` module the emulation puts in ``sys.modules``.

``torch_npu.<op>`` binds a call the way torch_npu's Python binding does (positional
order, keywords by their Python names, ``input`` for a schema ``self``), then runs it;
``.default``, ``.out`` and the other overloads bind by their own schema, and ``out=``
given as a list fills the overload's output arguments in order (as ports call
``npu_fused_infer_attention_score.out``).  An operator torch_npu has but the emulator
does not run is still an attribute, and calling it raises :class:`NotEmulated`; a name
torch_npu does not define at all is an AttributeError, as on the device.
"""

from __future__ import annotations

import enum
import types
from typing import Any

from kb.catalog.binding import python_name
from kb.catalog.signature import Schema, parse_schema
from kb.emulate.library import schemas_of
from kb.emulate.names import emulated
from kb.emulate.trace import call_site
from kb.vocab import FORMATS

Record = dict[str, Any]

#: ``torch_npu.Format``: the aclFormat codes as an IntEnum (kb.vocab's table).
Format = enum.IntEnum(  # type: ignore[misc]
    "Format", [("UNDEFINED", -1)] + [(f.name, f.code) for f in FORMATS if f.code is not None]
)


def _active() -> Any:
    from kb.emulate.state import active

    return active()


class Overload:
    """``torch_npu.<op>.<overload>``: binds by that overload's schema."""

    def __init__(self, rec: Record, schema: Schema, runs: bool) -> None:
        self.rec = rec
        self.schema = schema
        self.runs = runs
        self.__name__ = schema.full_name

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        rt = _active()
        if not self.runs:
            raise rt.not_emulated(self.schema.full_name)
        names = {a.name for a in self.schema.args}
        outs = [a.name for a in self.schema.args if a.mutated and a.name not in _params(self.rec)]
        if "out" in kwargs and "out" not in names and outs:
            given_out = kwargs.pop("out")
            seq = list(given_out) if isinstance(given_out, (list, tuple)) else [given_out]
            kwargs.update(zip(outs, seq, strict=False))
        given = bind(self.rec, self.schema, args, kwargs)
        return rt.run(self.rec, self.schema, given, call_site())

    def __repr__(self) -> str:
        return f"<kb.emulate torch_npu.{self.schema.full_name}>"


def _params(rec: Record) -> set[str]:
    return {p["name"] for p in rec.get("parameters") or []}


def bind(
    rec: Record, schema: Schema, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Schema name → value for a Python call; TypeError worded as Python and ``kb check``."""
    op = schema.full_name
    positional = [a.name for a in schema.args if not a.keyword_only]
    if len(args) > len(positional):
        raise TypeError(
            f"torch_npu.{op}() takes at most {len(positional)} positional "
            f"arguments ({len(args)} given)"
        )
    given = dict(zip(positional, args, strict=False))
    by_python = {python_name(p): p["name"] for p in rec.get("parameters") or []}
    names = {a.name for a in schema.args}
    unknown = [k for k in kwargs if k not in names and by_python.get(k) not in names]
    if unknown:
        raise TypeError(
            _active().validator.unknown(rec, unknown)
            or f"torch_npu.{op}() got an unexpected keyword argument {unknown[0]!r}"
        )
    for key, value in kwargs.items():
        name = key if key in names else by_python[key]
        if name in given:
            raise TypeError(f"torch_npu.{op}() got multiple values for argument {key!r}")
        given[name] = value
    missing = [a.name for a in schema.args if a.required and a.name not in given]
    if missing:
        shown = next(
            (python_name(p) for p in rec.get("parameters") or [] if p["name"] == missing[0]),
            missing[0],
        )
        raise TypeError(f"torch_npu.{op}() missing required argument {shown!r}")
    return given


def _kind_fits(schema_type: str, value: Any) -> bool:
    import torch

    if value is None:
        return schema_type.endswith("?")
    base = schema_type.rstrip("?")
    if base == "Tensor":
        return isinstance(value, torch.Tensor)
    if base.startswith("Tensor["):
        return isinstance(value, (list, tuple))
    if base in ("int", "SymInt", "float", "bool"):
        return not isinstance(value, torch.Tensor) and not isinstance(value, (list, tuple, str))
    return True


def _fits(schema: Schema, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call's arguments bind to ``schema`` by position and type."""
    positional = [a for a in schema.args if not a.keyword_only]
    if len(args) > len(positional):
        return False
    if not all(_kind_fits(a.type, v) for a, v in zip(positional, args, strict=False)):
        return False
    by_name = {a.name: a for a in schema.args}
    return all(
        k in by_name and _kind_fits(by_name[k].type, v)
        for k, v in kwargs.items()
        if k not in ("input", "out")
    )


class Operator:
    """``torch_npu.<op>``: the default overload, with the others as attributes."""

    def __init__(self, rec: Record) -> None:
        self.rec = rec
        self.__name__ = rec["name"]
        self.__doc__ = (rec.get("summary") or {}).get("en")
        runs = emulated(rec["name"])
        parsed = schemas_of(rec)
        self._overloads = {s.overload or "default": Overload(rec, s, runs) for s in parsed}
        if "default" not in self._overloads and rec.get("signature"):
            self._overloads["default"] = Overload(rec, parse_schema(rec["signature"]), runs)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        """The first overload (default first) the arguments fit, as torch's overload
        resolution picks one: ``npu_format_cast_(t, 29)`` is ``.acl_format``."""
        chosen = self._overloads.get("default")
        if chosen is None:
            raise _active().not_emulated(self.rec["name"])
        for overload in self._overloads.values():
            if _fits(overload.schema, args, kwargs):
                chosen = overload
                break
        return chosen(*args, **kwargs)

    def overloads(self) -> list[str]:
        return sorted(self._overloads)

    def __getattr__(self, item: str) -> Any:
        if item.startswith("__") or item not in self.__dict__.get("_overloads", {}):
            raise AttributeError(f"torch_npu.{self.__name__} has no overload {item!r}")
        return self._overloads[item]

    def __repr__(self) -> str:
        return f"<kb.emulate torch_npu.{self.__name__}>"


class Unrecorded:
    """A torch_npu operator no record describes: known to exist, never emulated."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        raise _active().not_emulated(self.__name__)


def lookup(name: str) -> Any:
    """What ``torch_npu.<name>`` is under the emulation, or None (AttributeError)."""
    rt = _active()
    if name in rt.operators:
        return rt.operators[name]
    rec = rt.catalog.get(name)
    found: Any = None
    if rec is not None and rec.get("kind") == "operator":
        found = Operator(rec)
    else:
        from kb.catalog.knownops import load

        if load().get(name) is not None:
            found = Unrecorded(name)
    rt.operators[name] = found
    return found


class Namespace(types.ModuleType):
    """``torch_npu`` itself and ``torch_npu.atb``: operators by attribute."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        found = lookup(name)
        if found is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return found


def build(version: str, npu: types.ModuleType) -> dict[str, types.ModuleType]:
    """The emulated ``torch_npu`` package: module name → module, for ``sys.modules``."""
    from kb.emulate.dtypes import npu_constants

    root = Namespace("torch_npu", "torch_npu on the CPU (kb.emulate)")
    root.__path__ = []  # type: ignore[attr-defined]
    root.__version__ = version  # type: ignore[attr-defined]
    root.__dict__.update(npu_constants())
    atb = Namespace("torch_npu.atb", "torch_npu.atb on the CPU (kb.emulate)")
    contrib = types.ModuleType("torch_npu.contrib")
    contrib.__path__ = []  # type: ignore[attr-defined]
    transfer = types.ModuleType(
        "torch_npu.contrib.transfer_to_npu",
        "A no-op under kb.emulate: there is no CUDA code to redirect.",
    )
    contrib.transfer_to_npu = transfer  # type: ignore[attr-defined]
    root.__dict__.update(npu=npu, atb=atb, contrib=contrib, Format=Format)
    npu.__path__ = []  # type: ignore[attr-defined]
    return {m.__name__: m for m in (root, npu, npu.utils, npu.config, atb, contrib, transfer)}
