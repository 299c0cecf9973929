"""Findings: the plain values every rule produces and every formatter prints.

Kept free of any other import so tools can depend on it cheaply and so a finding can
be compared, hashed and serialised without knowing where it came from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One problem in a candidate list, at a 1-based line and column.

    ``candidate`` is the 0-based index of the entry in ``candidates`` the finding is
    about, or None for findings about the file or its ``target``.
    """

    file: str
    line: int
    column: int
    code: str
    severity: Severity
    message: str
    candidate: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line, self.column, self.code, self.message)
