"""``kb scan`` as functions: read Python model code against the records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kb.scan.engine import ScanOptions, ScanReport

__all__ = ["ScanOptions", "ScanReport", "scan_paths", "scanner"]


def scanner(catalog: Any = None, options: ScanOptions | None = None) -> Any:
    """A :class:`kb.scan.engine.Scanner` running the whole registry's selection."""
    from kb.rules import RULES
    from kb.scan.engine import Scanner

    return Scanner(catalog, options, rules=RULES)


def scan_paths(paths: Iterable[str], options: ScanOptions | None = None,
               catalog: Any = None) -> ScanReport:  # fmt: skip
    """Scan files and directories; raises ScanError for unusable settings."""
    return scanner(catalog, options).scan(list(paths))
