"""``# kb: ignore[CODE,…]`` comments: deliberate exceptions written next to the candidate.

A comment on the candidate's first line (the line of its first key, normally
``- module: …``) silences those codes for the whole candidate; anywhere else it
silences them for findings on that line only.  Codes may be prefixes (``KB4``).
Only real YAML comments count: the same words inside a quoted or block value are data,
so the loaded document's scalar spans decide (see :meth:`kb.core.yamlpos.Located.in_scalar`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.core.yamlpos import LINE_BREAKS, Located

IGNORE = re.compile(r"#\s*kb:\s*ignore\b(\[([^\]]*)\])?", re.IGNORECASE)


@dataclass(frozen=True)
class Ignore:
    line: int
    column: int
    codes: tuple[str, ...]  # empty when the comment has no [CODE] list


def ignore_comments(text: str, located: Located | None = None) -> list[Ignore]:
    """The ignore comments of ``text``; with ``located``, those inside a scalar drop out."""
    if "kb:" not in text.lower():
        return []
    out = []
    for n, line in enumerate(LINE_BREAKS.split(text), start=1):
        if "#" not in line:
            continue
        for m in IGNORE.finditer(line):
            if located is not None and located.in_scalar(n, m.start() + 1):
                continue
            codes = tuple(
                c.strip().upper() for c in re.split(r"[,\s]+", m.group(2) or "") if c.strip()
            )
            out.append(Ignore(n, m.start() + 1, codes))
    return out


def matches(code: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(code.startswith(p) for p in patterns)
