"""``kb check`` as functions: lint candidate lists against the records.

Importable API for agents and scripts::

    from kb.api.check import check_paths
    for f in check_paths(["candidates.yaml"], ignore=["KB110"]):
        print(f.file, f.line, f.code, f.message)

``check_paths`` raises :class:`InputError` for a file it cannot read (missing, a
directory, binary, over the size limit), ``ValueError`` for a select/ignore pattern
that matches no rule, and :class:`kb.catalog.compiled.StoreInvalid` when the records
themselves do not validate.  Everything wrong *inside* a file is a :class:`Finding`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from kb.check.parse import InputError
from kb.lint.findings import Finding, Severity

__all__ = ["Finding", "InputError", "Severity", "check_paths", "check_text", "checker"]


def checker(catalog: Any = None, *, select: Sequence[str] | None = None,
            ignore: Sequence[str] | None = None) -> Any:  # fmt: skip
    """A :class:`kb.check.engine.Checker` running the whole registry's selection."""
    from kb.check.engine import Checker
    from kb.rules import RULES

    return Checker(catalog, rules=RULES, select=select, ignore=ignore)


def check_paths(paths: Iterable[str | os.PathLike[str]], *, select: Sequence[str] | None = None,
                ignore: Sequence[str] | None = None, catalog: Any = None) -> list[Finding]:  # fmt: skip
    """Findings for candidate-list files (``-`` is standard input), file by file, by line."""
    from kb.check.parse import read_source

    sources = [read_source(p) for p in paths]
    return checker(catalog, select=select, ignore=ignore).check_sources(sources).findings


def check_text(text: str, file: str = "<string>", *, select: Sequence[str] | None = None,
               ignore: Sequence[str] | None = None, catalog: Any = None) -> list[Finding]:  # fmt: skip
    """Findings for one candidate list given as text."""
    return checker(catalog, select=select, ignore=ignore).check_text(file, text)
