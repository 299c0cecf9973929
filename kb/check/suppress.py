"""``# kb: ignore[CODE,…]`` comments: deliberate exceptions written next to the candidate.

A comment on the candidate's first line (the line of its first key, normally
``- module: …``) silences those codes for the whole candidate; anywhere else it
silences them for findings on that line only.  Codes may be prefixes (``KB4``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IGNORE = re.compile(r"#\s*kb:\s*ignore\b(\[([^\]]*)\])?", re.IGNORECASE)
#: Line breaks as YAML counts them, so comment lines agree with finding lines.
_LINES = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")


@dataclass(frozen=True)
class Ignore:
    line: int
    column: int
    codes: tuple[str, ...]  # empty when the comment has no [CODE] list


def ignore_comments(text: str) -> list[Ignore]:
    if "kb:" not in text and "KB:" not in text:
        return []
    out = []
    for n, line in enumerate(_LINES.split(text), start=1):
        if "#" not in line:
            continue
        for m in IGNORE.finditer(line):
            codes = tuple(
                c.strip().upper() for c in re.split(r"[,\s]+", m.group(2) or "") if c.strip()
            )
            out.append(Ignore(n, m.start() + 1, codes))
    return out


def matches(code: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(code.startswith(p) for p in patterns)
