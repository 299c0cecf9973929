"""One entry of the module inventory, and what every kind reader builds it from.

:mod:`kb.scan.model.kinds` decides the kind of each class (the attention readers are
:mod:`kb.scan.model.attention`); the inventory, the planner and the scanner's report
hold the result as a :class:`Module`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kb.scan.model.facts import ClassFacts

if TYPE_CHECKING:
    from kb.scan.model.kinds import Context


@dataclass
class Module:
    """One entry of the module inventory."""

    name: str
    kind: str  # family.variant, e.g. attention.gqa, moe.router, norm.rms
    file: str
    line: int
    end_line: int
    facts: dict[str, Any] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    not_proposed: list[str] = field(default_factory=list)
    mappings: list[str] = field(default_factory=list)
    parts: dict[str, str] = field(default_factory=dict)  # attribute -> kind of its module
    proven: dict[str, str] = field(default_factory=dict)  # fact -> "file:line (why)" that shows it
    #: an undecided fact ("unknown") -> the values the code can give it (the configuration
    #: decides which); the planner asks which instead of choosing
    options: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "module": self.name,
            "kind": self.kind,
            "file": self.file,
            "lines": [self.line, self.end_line],
        }
        for key in ("facts", "proven", "parts", "mappings", "unknown", "not_proposed"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out


def module_entry(cf: ClassFacts, kind: str, **facts: Any) -> Module:
    """The entry of a class decided as ``kind``, with the facts that are not None."""
    return Module(
        cf.name, kind, "", cf.line, cf.end_line, {k: v for k, v in facts.items() if v is not None}
    )


def linears(cf: ClassFacts, ctx: Context) -> set[str]:
    """The attributes of a class that hold linear layers."""
    return {a for a, c in cf.attrs.items() if ctx.kind_of(c) == "linear"}
