"""What a row of the fusion-pattern table holds (:mod:`kb.reference.mappings`): the
pattern a planner matches against a module's facts, how each argument of the fused call
derives from them, and which proof shows the call computes the unfused code."""

from __future__ import annotations

from dataclasses import dataclass, field

#: a fact that must be stated (whatever value the code gives it)
PRESENT = "<present>"
#: a fact the module does not state (it does not do that thing)
ABSENT = "<absent>"


@dataclass(frozen=True)
class On:
    """Modules a pattern matches: an inventory kind (a prefix: ``attention`` is every kind
    of attention) and the facts that must hold (fact -> the values allowed)."""

    kind: str
    facts: tuple[tuple[str, tuple[object, ...]], ...] = ()


def on(kind: str, **facts: tuple[object, ...]) -> On:
    return On(kind, tuple(sorted(facts.items())))


@dataclass(frozen=True)
class Arg:
    """One argument of the fused call, derived from a module fact (mapped through
    ``values`` when given), else ``fixed``; ``absent`` is its value when the module does
    not state the fact (no expert groups: one group).  ``ops`` limits it to some of the
    row's operators; a ``tensor`` argument is wired by the port (the operator must take it)."""

    name: str
    fact: str = ""
    values: tuple[tuple[object, object], ...] = ()
    fixed: object = None
    absent: object = None
    ops: tuple[str, ...] = ()
    tensor: bool = False


def arg(
    name: str,
    fact: str = "",
    values: dict[object, object] | None = None,
    *,
    fixed: object = None,
    absent: object = None,
    ops: tuple[str, ...] = (),
    tensor: bool = False,
) -> Arg:
    return Arg(name, fact, tuple((values or {}).items()), fixed, absent, ops, tensor)


@dataclass(frozen=True)
class Pattern:
    """What the planner reads of a row (see the module doc).  ``proof`` names a function of
    :mod:`kb.reference` (``dense.geglu``; ``sparse.attention:BSND`` passes the layout first)
    taking ``(rng)`` or ``(rng, facts, args)``; ``proves`` are the module facts its unfused
    side is written with.  Among rows of one operator, ``chain_prerequisite`` picks this one
    when the chain has that prerequisite."""

    on: tuple[On, ...]
    steps: tuple[str, ...]
    args: tuple[Arg, ...] = ()
    proof: str = ""
    proves: tuple[str, ...] = ()
    chain_prerequisite: str = ""


@dataclass(frozen=True)
class Mapping:
    id: str
    unfused: str  # the code shape it replaces, in words
    target: str  # the record name of the fused operator (the first one called)
    arguments: str  # how the unfused values become the call's arguments
    also: tuple[str, ...] = ()  # further operators the mapped chain calls
    notes: str = ""
    pattern: Pattern | None = field(default=None, compare=False)

    @property
    def operators(self) -> tuple[str, ...]:
        return (self.target, *self.also)
