"""The playbook record: a workflow over classes of operators (prefetch)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kb.catalog.models.base import Keywords, Name, Strict, Text


class OpClass(Strict):
    """A class of operators as the prefetch workflow sees them."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    names: list[str] = Field(min_length=1, description="op spellings that belong to the class")
    weight_heavy: bool = Field(description="reads a large weight: worth prefetching for")
    window: Literal["safe", "output-only", "unsafe"] = Field(
        description="as the dependency window: safe, only once its output exists, or never"
    )
    why: str


class SizeFormula(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]*$")
    applies_to: str
    formula: str
    explanation: str


class Signal(Strict):
    signal: str
    action: str


class Playbook(Strict):
    kind: Literal["playbook"] = "playbook"
    name: Name
    title: Text
    summary: Text
    description: str = ""
    op_classes: list[OpClass] = Field(min_length=1)
    conservative_factor: float = Field(gt=0, le=1)
    ladder: list[float] = Field(min_length=1, description="max_size factors to try, in order")
    formulas: list[SizeFormula] = Field(default_factory=list)
    success: list[str] = Field(default_factory=list)
    failures: list[Signal] = Field(default_factory=list)
    keywords: Keywords = Field(default_factory=Keywords)
    related: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> Playbook:
        seen: dict[str, str] = {}
        for cls in self.op_classes:
            for n in cls.names:
                if n in seen:
                    raise ValueError(f"op {n!r} is in classes {seen[n]!r} and {cls.id!r}")
                seen[n] = cls.id
        return self
