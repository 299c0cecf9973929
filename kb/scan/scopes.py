"""Scopes: names bound to alternatives, and how many alternatives a name may keep.

A name past :data:`MAX_ALTS` alternatives becomes UNKNOWN (never judged) rather than
multiplying the argument combinations of every call that uses it; a dict past
:data:`MAX_KEYS` keys becomes UNKNOWN too (an open ``**kwargs``, never judged), so
tracking a generated 20,000-key dict costs a bounded amount per statement.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kb.scan.values import TRUE, UNKNOWN, Alt, DictV

MAX_ALTS = 12  # alternatives kept per name before it becomes UNKNOWN
MAX_KEYS = 256  # keys tracked per dict before it becomes UNKNOWN (no operator has as many)


class Env:
    """A scope: names bound to alternatives, falling back to the enclosing scope."""

    __slots__ = ("parent", "vars")

    def __init__(self, parent: Env | None = None) -> None:
        self.vars: dict[str, list[Alt]] = {}
        self.parent = parent

    def lookup(self, name: str) -> list[Alt] | None:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        return None

    def copy(self) -> Env:
        out = Env(self.parent)
        out.vars = dict(self.vars)
        return out


def dedupe(alts: Iterable[Alt]) -> list[Alt]:
    """Alternatives in first-seen order without repeats; too many become UNKNOWN."""
    seen: list[Alt] = []
    for alt in alts:
        if alt not in seen:
            seen.append(alt)
    if len(seen) > MAX_ALTS:
        return [Alt(TRUE, UNKNOWN)]
    return seen


def capped(d: DictV) -> Any:
    """``d``, or UNKNOWN once it holds more keys than :data:`MAX_KEYS`.

    UNKNOWN is sticky (a mutation of it is a no-op) where an open ``DictV`` would start
    collecting keys again, and a ``**`` spread of it is open: nothing is judged.
    """
    return UNKNOWN if len(d.entries) > MAX_KEYS else d
