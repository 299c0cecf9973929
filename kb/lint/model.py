"""The candidate list after structure checking: plain dataclasses, no pydantic.

The parser fills these with values that have the right type and, for controlled
vocabularies, their canonical id.  A value that was wrong is left out (``None`` or
missing from a mapping), so rules only ever see what is both stated and readable:
"not stated" and "unreadable" are both *unknown* to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.core.yamlpos import Located
from kb.vocab import CAPTURED_GRAPH_MODES, INFERENCE_PHASES

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
    #: graph mode per phase (``graph_mode: {prefill: eager, decode: aclgraph}``)
    graph_modes: dict[str, str] = field(default_factory=dict)
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
    #: arguments passed with a value the list does not state (a variable in the code)
    passed: set[str] = field(default_factory=set)
    graph_mode: str | None = None
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
    #: what rules computed about this candidate once (record rule violations ...)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def path(self) -> Path:
        return ("candidates", self.index)

    def graph_mode_in(self, target: Target) -> str | None:
        """The graph mode this candidate runs under: its own, its phase's, else the target's.

        A candidate covering both phases whose phases run under different modes gets the
        captured one (aclgraph/torchair), since that is the stricter question.
        """
        if self.graph_mode is not None:
            return self.graph_mode
        phases = self.phases()
        if target.graph_modes and phases:
            modes = [target.graph_modes.get(p) for p in sorted(phases)]
            captured = [m for m in modes if m in CAPTURED_GRAPH_MODES]
            if captured:
                return captured[0]
            if any(m is not None for m in modes):
                return next(m for m in modes if m is not None)
        return target.graph_mode

    def phases(self) -> frozenset[str] | None:
        """The phases this candidate covers; None when it does not say."""
        if self.phase is None:
            return None
        if self.phase == "both":
            return frozenset(INFERENCE_PHASES)
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

    #: canonical path → path as written (``args.self`` written as ``args.input``)
    aliases: dict[Path, Path] = field(default_factory=dict)
    #: The candidates each kind of candidate rule reads, listed once for all of them
    #: (:meth:`kb.lint.unit.CandidateRule.check`; 40 rules over 10,000 candidates).
    judged: dict[tuple[tuple[str, ...], bool], list[Candidate]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        if self.located is None:
            return (1, 1)
        path = tuple(path)
        for n in range(len(path), 0, -1):
            written = self.aliases.get(path[:n])
            if written is not None:
                path = written + path[n:]
                break
        return self.located.where(path, key=key)


def phases_overlap(a: Candidate, b: Candidate) -> bool:
    """True when both state phases and they share one, or neither states one."""
    pa, pb = a.phases(), b.phases()
    if pa is None or pb is None:
        return pa is None and pb is None
    return bool(pa & pb)
