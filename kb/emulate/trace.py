"""Every emulated call, in order: operator, the caller's file:line and the tensor shapes.

A comparison names the calls made inside a failing submodule from here, so the trace
is plain data (no tensors are kept) and JSON-able.  It is kept per process while an
emulation is on; :func:`mark` and :func:`since` cut out the calls of one region.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

#: calls kept (the oldest go first): enough for a long decode loop of a small model
LIMIT = 200_000


@dataclass(frozen=True)
class Call:
    """One emulated call: ``op`` (record name), ``overload`` ('' for the default), where it
    was made, and ``inputs`` as ``(parameter, shape, dtype)`` of each tensor passed."""

    index: int
    op: str
    overload: str
    file: str
    line: int
    function: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...] = field(default_factory=tuple)

    @property
    def site(self) -> str:
        return f"{self.file}:{self.line}"

    def label(self) -> str:
        """``torch_npu.npu_swiglu at port.py:41 (self [4, 64] bfloat16)``."""
        name = self.op + (f".{self.overload}" if self.overload else "")
        shapes = ", ".join(f"{p} {list(s)} {d}" for p, s, d in self.inputs[:4])
        return f"torch_npu.{name} at {self.site}" + (f" ({shapes})" if shapes else "")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["inputs"] = [{"name": p, "shape": list(s), "dtype": d} for p, s, d in self.inputs]
        out["site"] = self.site
        return out


class Trace:
    """The calls of one emulation, oldest first (at most :data:`LIMIT`)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.count = 0

    def add(
        self,
        op: str,
        overload: str,
        site: tuple[str, int, str],
        inputs: list[tuple[str, tuple[int, ...], str]],
    ) -> Call:
        call = Call(self.count, op, overload, site[0], site[1], site[2], tuple(inputs))
        self.count += 1
        self.calls.append(call)
        if len(self.calls) > LIMIT:
            del self.calls[: len(self.calls) - LIMIT]
        return call

    def mark(self) -> int:
        """The index the next call will get."""
        return self.count

    def since(self, mark: int, until: int | None = None) -> list[Call]:
        """The calls numbered ``mark`` .. ``until`` (exclusive; None: all so far)."""
        end = self.count if until is None else until
        return [c for c in self.calls if mark <= c.index < end]


_HERE = os.path.dirname(os.path.abspath(__file__))
_SKIPPED: tuple[str, ...] = (_HERE, "<frozen")


def skip_dir(path: str) -> None:
    """Frames under ``path`` (torch's package) are not the caller of an emulated op."""
    global _SKIPPED
    if path not in _SKIPPED:
        _SKIPPED = (*_SKIPPED, path)


def call_site(depth: int = 1) -> tuple[str, int, str]:
    """(file, line, function) of the first frame outside kb.emulate and torch."""
    frame = sys._getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return ("<unknown>", 0, "")
    file = frame.f_code.co_filename
    here = os.getcwd() + os.sep
    if file.startswith(here):  # a port's own files read best relative to where it runs
        file = file[len(here) :]
    return (file, frame.f_lineno, frame.f_code.co_name)
