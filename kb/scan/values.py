"""What the scanner knows about a Python value without running anything.

The scanner reads code the way pyflakes does: names resolve through scopes to abstract
values, and whatever it cannot pin down is :data:`UNKNOWN` -- never an error.  Values
that depend on a branch come as *alternatives*, each guarded by the branch conditions
it needs (``Cond``), so ``3 if use_c8 else 0`` next to a dict filled under
``if use_c8:`` combines only the arms that can run together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from kb.vocab import NAMESPACE_PATHS, PYTHON_NAMESPACES


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"  # unpickled as this module's one instance (a scan's workers send it)


UNKNOWN: Any = _Unknown()

#: A branch condition: (source text of the test, truth) pairs that must all hold.
Cond = frozenset[tuple[str, bool]]
TRUE: Cond = frozenset()


def consistent(*conds: Cond) -> Cond | None:
    """The conjunction of conditions, or None when one atom is required both ways."""
    merged: dict[str, bool] = {}
    for cond in conds:
        for atom, truth in cond:
            if merged.setdefault(atom, truth) != truth:
                return None
    return frozenset(merged.items())


@dataclass(frozen=True)
class Lit:
    """A literal: int, float, str, bool, None, or a list of literals (tuples become lists)."""

    value: Any


@dataclass(frozen=True)
class DtypeConst:
    """``torch.bfloat16``, ``torch_npu.hifloat8``: a dtype named by a constant."""

    spelled: str  # as the code writes it: "torch.bfloat16"


@dataclass(frozen=True)
class Typed:
    """A value known only by its annotated type (``weight: torch.Tensor``)."""

    type: str  # "Tensor" or "TensorList"


@dataclass(frozen=True)
class Module:
    """A module or operator namespace: torch_npu, torch.ops.npu, functools ..."""

    path: str


@dataclass(frozen=True)
class Where:
    """Where a value is written (1-based line, 1-based column in characters)."""

    line: int
    column: int


@dataclass(frozen=True)
class Entry:
    """One argument as written: its abstract value, where it is, and its source text."""

    value: Any
    where: Where
    text: str
    key_where: Where | None = None  # where the keyword (or dict key) is written


@dataclass(frozen=True)
class Op:
    """A callable torch_npu operator, possibly with arguments bound by functools.partial."""

    namespace: str  # "torch_npu", "npu", "atb", "torch.npu", or a custom torch.ops namespace
    name: str
    overload: str | None = None
    bound_args: tuple[Entry, ...] = ()
    bound_kwargs: tuple[tuple[str, Entry], ...] = ()

    @property
    def spelled(self) -> str:
        base = NAMESPACE_PATHS.get(self.namespace, f"torch.ops.{self.namespace}")
        return f"{base}.{self.name}"

    @property
    def binding(self) -> str:
        """``python`` for the torch_npu functions, ``dispatcher`` for torch.ops calls."""
        return "python" if self.namespace in PYTHON_NAMESPACES else "dispatcher"


@dataclass(frozen=True)
class DictV:
    """A dict built up in the code: keyword entries and whether unknown keys may exist."""

    entries: tuple[tuple[str, Entry], ...] = ()
    open: bool = False

    def set(self, key: str, entry: Entry) -> DictV:
        kept = tuple((k, e) for k, e in self.entries if k != key)
        return DictV(kept + ((key, entry),), self.open)

    def drop(self, key: str) -> DictV:
        return DictV(tuple((k, e) for k, e in self.entries if k != key), self.open)

    def merged(self, other: DictV) -> DictV:
        out = self
        for k, e in other.entries:
            out = out.set(k, e)
        return DictV(out.entries, self.open or other.open)


class Alt(NamedTuple):
    """One alternative of a value: it holds when ``cond`` holds."""

    cond: Cond
    value: Any


def literal_of(value: Any) -> tuple[bool, Any]:
    """(True, python value) when ``value`` is a literal or a dtype constant, else (False, None)."""
    if isinstance(value, Lit):
        return True, value.value
    if isinstance(value, DtypeConst):
        return True, value.spelled
    return False, None
