"""Written-out attention with an optional step on its scores: ``if cap is not None:
s = tanh(s / cap) * cap`` (logit softcapping) or any other ``if`` block, without ``else``,
that only reassigns names.

The fused kernel computes the attention without that step, so the port may call it only
when the block does not run: the span becomes ``FUSED if not (test) else ORIGINAL``.  The
trace is first read as the code runs (every assignment counts); when that is not
attention, it is read again skipping the fewest such blocks that make it one, and their
tests are the guard.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import Any, TypeVar

import libcst as cst

from kb.port.spans import code

T = TypeVar("T")


def _blocks(fn: cst.FunctionDef | None) -> list[tuple[str, set[str]]]:
    """(test, the code of the values it assigns) of each top-level ``if`` block of ``fn``
    without ``else`` whose statements are all plain assignments."""
    out: list[tuple[str, set[str]]] = []
    if fn is None or not isinstance(fn.body, cst.IndentedBlock):
        return out
    for st in fn.body.body:
        if not (isinstance(st, cst.If) and st.orelse is None):
            continue
        values: set[str] = set()
        for inner in st.body.body if isinstance(st.body, cst.IndentedBlock) else []:
            small = inner.body if isinstance(inner, cst.SimpleStatementLine) else []
            if not small or not all(isinstance(x, cst.Assign) for x in small):
                values = set()
                break
            values |= {code(x.value) for x in small if isinstance(x, cst.Assign)}
        if values:
            out.append((code(st.test), values))
    return out


def read_guarded(
    porter: Any, fn: cst.FunctionDef | None, read: Callable[[Callable[..., Any]], T | None]
) -> tuple[T | None, list[str]]:
    """``read(resolve)`` as the code runs, else skipping the fewest guarded blocks that
    make it succeed: (the result, the tests of the skipped blocks)."""
    found = read(porter._resolve)
    if found is not None:
        return found, []
    blocks = _blocks(fn)
    for size in range(1, min(len(blocks), 3) + 1):
        for chosen in combinations(blocks, size):
            skipped = set().union(*(values for _, values in chosen))

            def resolve(name: str, before: int, skipped: set[str] = skipped) -> Any:
                found = [
                    (i, v)
                    for i, v in porter.history[-1].get(name, [])
                    if i < before and (v is None or code(v) not in skipped)
                ]
                if not found or found[-1][1] is None:
                    return None
                return found[-1][1], found[-1][0]

            got = read(resolve)
            if got is not None:
                return got, [test for test, _ in chosen]
    return None, []


def guarded(fused: str, unfused: str, tests: list[str]) -> str:
    """The fused call where none of ``tests`` holds, the original where one does."""
    if not tests:
        return fused
    cond = " or ".join(f"({t})" for t in tests)
    return f"({unfused}) if {cond} else ({fused})"
