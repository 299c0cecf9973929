"""Scopes: names bound to alternatives, and how many alternatives a name may keep.

A name past :data:`MAX_ALTS` alternatives becomes UNKNOWN (never judged) rather than
multiplying the argument combinations of every call that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kb.scan.values import TRUE, UNKNOWN, Alt

MAX_ALTS = 12  # alternatives kept per name before it becomes UNKNOWN


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
