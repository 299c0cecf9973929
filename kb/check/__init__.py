"""``kb check``: lint a candidate list (fusion candidates and prefetch points) against the records.

Importable API for agents and scripts::

    from kb.check import check_paths
    for f in check_paths(["candidates.yaml"], ignore=["KB110"]):
        print(f.file, f.line, f.code, f.message)

``check_paths`` raises :class:`InputError` for a file it cannot read (missing, a
directory, binary, over the size limit), ``ValueError`` for a select/ignore pattern
that matches no rule, and :class:`kb.compiled.StoreInvalid` when the records themselves
do not validate.  Everything wrong *inside* a file is a :class:`Finding`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from kb.check.findings import Finding, Severity
from kb.check.parse import InputError

__all__ = ["Finding", "InputError", "Severity", "check_paths", "check_text"]


def check_paths(paths: Iterable[str | os.PathLike[str]], *, select: Sequence[str] | None = None,
                ignore: Sequence[str] | None = None, catalog: Any = None) -> list[Finding]:  # fmt: skip
    """Findings for candidate-list files (``-`` is standard input), file by file, by line."""
    from kb.check.engine import Checker
    from kb.check.parse import read_source

    sources = [read_source(p) for p in paths]
    return Checker(catalog, select=select, ignore=ignore).check_sources(sources).findings


def check_text(text: str, file: str = "<string>", *, select: Sequence[str] | None = None,
               ignore: Sequence[str] | None = None, catalog: Any = None) -> list[Finding]:  # fmt: skip
    """Findings for one candidate list given as text."""
    from kb.check.engine import Checker

    return Checker(catalog, select=select, ignore=ignore).check_text(file, text)
