"""``# kb: ignore[CODE,…]`` comments: deliberate exceptions written next to the candidate.

A comment on the candidate's first line (the line of its first key, normally
``- module: …``) silences those codes for the whole candidate; anywhere else it
silences them for findings on that line only.  Codes may be prefixes (``KB4``).
Only real YAML comments count: the same words inside a quoted or block value are data,
so the loaded document's scalar spans decide (see :meth:`kb.core.yamlpos.Located.in_scalar`).

The grammar is strict and shared by ``kb check`` and ``kb scan``: ``# kb: ignore``,
optional spaces, then ``[`` codes (``KB`` and digits) separated by commas or spaces
``]``.  Anything else that starts like an ignore comment (``# kb: ignore KB106``,
``# kb: ignore[KB106`` without its ``]``, a bare ``# kb: ignore``) silences nothing
and is reported as KB006: a typo must never widen what is silenced.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from kb.core.yamlpos import LINE_BREAKS, Located

#: The rule that reports ignore comments which silence nothing (both front ends).
BAD_IGNORE_CODE = "KB006"
#: Where an ignore comment starts; :func:`parse` reads what follows.
IGNORE = re.compile(r"#\s*kb:\s*ignore\b", re.IGNORECASE)
_LIST = re.compile(r"\s*\[([^\]\n]*)\]")
_CODE = re.compile(r"KB[0-9]*", re.IGNORECASE)
_BARE_END = re.compile(r"\s*(#|$)")


@dataclass(frozen=True)
class Ignore:
    line: int
    column: int
    codes: tuple[str, ...]  # empty when the comment silences nothing
    problem: str | None = None  # why it silences nothing, when it is malformed


def _shown(text: str) -> str:
    return text if len(text) <= 30 else text[:27] + "..."


def parse(comment: str) -> list[tuple[int, tuple[str, ...], str | None]]:
    """(0-based offset, codes, problem) of each ignore comment in one comment's text.

    Well formed: codes, no problem.  Malformed or bare: no codes, the problem.
    """
    out: list[tuple[int, tuple[str, ...], str | None]] = []
    for m in IGNORE.finditer(comment):
        rest = comment[m.end() :]
        listed = _LIST.match(rest)
        if listed is None:
            if _BARE_END.match(rest):
                problem = "'# kb: ignore' needs the codes it silences, e.g. '# kb: ignore[KB104]'"
            elif rest.lstrip().startswith("["):
                problem = (
                    "'# kb: ignore[' is not closed with ']', so it silences nothing; "
                    "write e.g. '# kb: ignore[KB104]'"
                )
            else:
                problem = (
                    f"'# kb: ignore{_shown(rest.rstrip())}' is malformed and silences "
                    "nothing; write the codes in brackets, e.g. '# kb: ignore[KB104]'"
                )
            out.append((m.start(), (), problem))
            continue
        tokens = [t for t in re.split(r"[,\s]+", listed.group(1)) if t]
        bad = [t for t in tokens if not _CODE.fullmatch(t)]
        if bad:
            out.append(
                (
                    m.start(),
                    (),
                    f"'{_shown(bad[0])}' in '# kb: ignore[…]' is not a rule "
                    "code (KB and digits, e.g. KB104), so the comment silences nothing",
                )
            )
        elif not tokens:
            out.append(
                (m.start(), (), "'# kb: ignore[]' names no code; write e.g. '# kb: ignore[KB104]'")
            )
        else:
            out.append((m.start(), tuple(t.upper() for t in tokens), None))
    return out


def ignore_comments(text: str, located: Located | None = None) -> list[Ignore]:
    """The ignore comments of ``text``; with ``located``, those inside a scalar drop out."""
    if "kb:" not in text.lower():
        return []
    out = []
    for n, line in enumerate(LINE_BREAKS.split(text), start=1):
        if "#" not in line:
            continue
        for start, codes, problem in parse(line):
            if located is not None and located.in_scalar(n, start + 1):
                continue
            out.append(Ignore(n, start + 1, codes, problem))
    return out


def problems(ig: Ignore, known: Collection[str]) -> list[str]:
    """Why ``ig`` does not do what it says: malformed, or codes matching no rule of ``known``."""
    if ig.problem is not None:
        return [ig.problem]
    return [
        f"'# kb: ignore[{code}]' matches no rule; 'kb rules' lists the codes"
        for code in ig.codes
        if not any(c.startswith(code) for c in known)
    ]


def matches(code: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(code.startswith(p) for p in patterns)
