"""The candidate list after structure checking: plain dataclasses, no pydantic.

The parser fills these with values that have the right type and, for controlled
vocabularies, their canonical id.  A value that was wrong is left out (``None`` or
missing from a mapping), so rules only ever see what is both stated and readable:
"not stated" and "unreadable" are both *unknown* to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.yamlpos import Located

Path = tuple[Any, ...]


@dataclass
class TensorSpec:
    dtype: str | None = None
    format: str | None = None
    shape: list[Any] | None = None


@dataclass
class Weight:
    shape: list[Any] | None = None
    dtype: str | None = None


@dataclass
class Dependency:
    name: str | None = None
    op: str | None = None
    output: bool | None = None


@dataclass
class Target:
    product: str | None = None
    torch_npu: str | None = None
    quantization: str | None = None
    graph_mode: str | None = None
    parallel: dict[str, int] = field(default_factory=dict)


@dataclass
class Candidate:
    """One entry of ``candidates``; ``stated`` names the keys that were written."""

    index: int
    kind: str | None = None  # "fusion" | "prefetch"; None when unreadable
    stated: set[str] = field(default_factory=set)
    module: str | None = None
    phase: str | None = None  # prefill | decode | training | both
    operator: str | None = None
    status: str | None = None
    replaces: str | None = None
    chain: str | None = None
    prerequisites: list[str] | None = None
    args: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, TensorSpec | None] = field(default_factory=dict)
    quantization: str | None = None
    evidence: str | None = None
    # prefetch points
    target: str | None = None
    target_op: str | None = None
    weight: Weight | None = None
    dependency: Dependency | None = None
    max_size: int | None = None
    #: max_size was written but names something only the code knows (a constant):
    #: max_size is None and size rules skip, as for any unknown value.
    max_size_unknown: bool = False
    switch: str | None = None
    switch_default: bool | None = None
    validated: bool | None = None

    @property
    def path(self) -> Path:
        return ("candidates", self.index)

    def phases(self) -> frozenset[str] | None:
        """The phases this candidate covers; None when it does not say."""
        if self.phase is None:
            return None
        if self.phase == "both":
            return frozenset({"prefill", "decode"})
        return frozenset({self.phase})


@dataclass
class Document:
    """One checked file: where it came from, its positions and its parsed content."""

    file: str
    text: str
    located: Located | None = None
    target: Target = field(default_factory=Target)
    target_stated: bool = False
    candidates: list[Candidate] = field(default_factory=list)

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        if self.located is None:
            return (1, 1)
        return self.located.where(path, key=key)


def phases_overlap(a: Candidate, b: Candidate) -> bool:
    """True when both state phases and they share one, or neither states one."""
    pa, pb = a.phases(), b.phases()
    if pa is None or pb is None:
        return pa is None and pb is None
    return bool(pa & pb)
