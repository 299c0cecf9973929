"""The device side of torch_npu as CPU no-ops: ``torch.npu``, ``.npu()``, ``device="npu"``.

``torch.npu`` (also ``torch_npu.npu``) answers as one idle device: available, one
device, streams and events that complete at once, memory queries that report nothing
held.  A port that places tensors with ``.npu()``, ``.to("npu")`` or ``device="npu"``
gets CPU tensors: a torch function mode rewrites the device of every torch call while
the emulation is on (PyTorch's privateuse1 backend is renamed ``npu`` once, so
``torch.device("npu:0")`` parses as on a machine with torch_npu; that rename cannot be
undone within a process and is harmless without the mode).
"""

from __future__ import annotations

import contextlib
import os
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

DEVICE = "npu"


def _is_npu(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == DEVICE
    return isinstance(value, str) and (value == DEVICE or value.startswith(DEVICE + ":"))


def _cpu(value: Any) -> Any:
    return torch.device("cpu") if _is_npu(value) else value


class NpuOnCpu(TorchFunctionMode):
    """Every torch call asked for the NPU runs on the CPU instead."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False
        if args and any(_is_npu(a) for a in args):
            args = tuple(_cpu(a) for a in args)
        return func(*args, **kwargs)


def rename_backend() -> None:
    """Let ``torch.device("npu")`` parse (once per process; see the module docstring)."""
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        torch.utils.rename_privateuse1_backend(DEVICE)


class Stream:
    """An NPU stream whose work is always finished."""

    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = torch.device("cpu")
        self.priority = priority

    def wait_stream(self, stream: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Event:
        return event if event is not None else Event()

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Event:
    """An NPU event that has always happened."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, **_: Any) -> None:
        self.enable_timing = enable_timing

    def record(self, stream: Any = None) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


_DEFAULT_STREAM = Stream()


@contextlib.contextmanager
def stream(s: Any = None) -> Iterator[Any]:
    """``with torch.npu.stream(s):`` — the block runs as it would on any stream."""
    yield s


def _total_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def _nothing(*_: Any, **__: Any) -> None:
    return None


def _zero(*_: Any, **__: Any) -> int:
    return 0


def device_module(name: str = "torch_npu.npu") -> types.ModuleType:
    """A fresh ``torch.npu`` stand-in (``config`` and ``utils`` submodules included)."""
    mod = types.ModuleType(name, "torch.npu on the CPU (kb.emulate): one idle device.")
    total = _total_memory()
    props = types.SimpleNamespace(
        name="kb.emulate CPU stand-in",
        total_memory=total,
        multi_processor_count=1,
        major=0,
        minor=0,
    )
    mod.__dict__.update(
        is_available=lambda: True,
        is_initialized=lambda: True,
        device_count=lambda: 1,
        current_device=_zero,
        set_device=_nothing,
        synchronize=_nothing,
        empty_cache=_nothing,
        init=_nothing,
        get_device_name=lambda *_: props.name,
        get_device_properties=lambda *_: props,
        get_device_capability=lambda *_: (0, 0),
        mem_get_info=lambda *_: (total, total),
        memory_allocated=_zero,
        memory_reserved=_zero,
        max_memory_allocated=_zero,
        max_memory_reserved=_zero,
        reset_peak_memory_stats=_nothing,
        reset_max_memory_allocated=_nothing,
        memory_stats=lambda *_: {},
        set_compile_mode=_nothing,
        set_option=_nothing,
        Stream=Stream,
        Event=Event,
        stream=stream,
        current_stream=lambda *_: _DEFAULT_STREAM,
        default_stream=lambda *_: _DEFAULT_STREAM,
        set_stream=_nothing,
        device=contextlib.nullcontext,
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        seed=_nothing,
    )
    config = types.ModuleType(f"{name}.config")
    config.allow_internal_format = False  # type: ignore[attr-defined]
    utils = types.ModuleType(f"{name}.utils")
    for key in (
        "is_available",
        "device_count",
        "current_device",
        "set_device",
        "synchronize",
        "get_device_name",
        "get_device_properties",
        "empty_cache",
    ):
        setattr(utils, key, getattr(mod, key))
    mod.config = config  # type: ignore[attr-defined]
    mod.utils = utils  # type: ignore[attr-defined]
    return mod


class Patches:
    """What the emulation changes in torch itself, undone by :meth:`undo`."""

    def __init__(self, npu_module: types.ModuleType) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._mode = NpuOnCpu()
        rename_backend()
        self._set(torch, "npu", npu_module)
        self._set(torch.Tensor, "npu", lambda self, *_, **__: self)
        self._set(torch.nn.Module, "npu", lambda self, *_, **__: self)
        self._mode.__enter__()

    def _set(self, owner: Any, attr: str, value: Any) -> None:
        self._saved.append((owner, attr, owner.__dict__.get(attr, _MISSING)))
        setattr(owner, attr, value)

    def undo(self) -> None:
        self._mode.__exit__(None, None, None)
        for owner, attr, old in reversed(self._saved):
            if old is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, attr)
            else:
                setattr(owner, attr, old)
        self._saved.clear()


_MISSING = object()
__all__ = ["DEVICE", "Event", "NpuOnCpu", "Patches", "Stream", "device_module"]
