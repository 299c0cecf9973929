"""Shared by the kb.emulate tests: record examples run once per session, their calls kept.

torch is imported once per test session (the first module that needs it); each module
turns the emulation on for its tests and off after them (the ``emulation`` fixture of
conftest.py), so the rest of the suite never sees an emulated torch_npu.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the [emulate] extra is not installed")

from kb.emulate import BackwardNotEmulated  # noqa: E402
from kb.emulate.session import Emulation  # noqa: E402


@dataclass
class Captured:
    """One emulated call: its arguments before and after it ran, and its result."""

    op: str
    overload: str
    before: dict[str, Any]
    after: dict[str, Any]
    result: Any


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


@dataclass
class ExampleRun:
    """What running one record example did: the calls, and how it ended."""

    key: str
    calls: list[Captured]
    error: BaseException | None


def run_examples(em: Emulation, names: list[Any]) -> list[ExampleRun]:
    """Every example of every record in ``names`` (record names, or record-shaped dicts),
    each call captured as it happened."""
    from kb.emulate import examples

    runs: list[ExampleRun] = []
    catalog = em.runtime.catalog
    for name in names:
        rec = catalog.get(name) if isinstance(name, str) else name
        for index in range(len(rec.get("examples") or [])):
            seen: list[Captured] = []

            def listen(
                call: Any, before: Any, after: Any, result: Any, seen: list[Captured] = seen
            ) -> None:
                seen.append(Captured(call.op, call.overload, before, _clone(after), _clone(result)))

            em.runtime.listeners.append(listen)
            error: BaseException | None = None
            try:
                examples.run(rec, index)
            except BackwardNotEmulated as exc:  # training examples: the forward call ran
                error = exc
            except Exception as exc:
                error = exc
            finally:
                em.runtime.listeners.remove(listen)
            runs.append(ExampleRun(f"{rec['name']}[{index}]", seen, error))
    return runs


_RUNS: list[ExampleRun] = []


def every_example(em: Emulation) -> list[ExampleRun]:
    """:func:`run_examples` over every emulated record, once per test session."""
    from kb.emulate import emulated_names

    if not _RUNS:
        _RUNS.extend(run_examples(em, emulated_names()))
    return _RUNS
