"""``# kb: ignore[...]`` comments in scanned Python: read with tokenize, so only real
comments count (the same text inside a string literal silences nothing)."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Collection

from kb.lint.findings import Finding
from kb.lint.suppress import BAD_IGNORE_CODE, Ignore, problems
from kb.lint.suppress import parse as parse_ignores


def ignore_comments(text: str) -> dict[int, tuple[str, ...]]:
    """Line → codes of well-formed ``# kb: ignore[...]`` in real comments (read with tokenize).

    The grammar is :mod:`kb.lint.suppress`'s, strict: a malformed or bare comment
    silences nothing (:func:`bad_ignore_comments` reports it)."""
    out: dict[int, tuple[str, ...]] = {}
    for ig in _ignore_directives(text):
        if ig.codes:
            out[ig.line] = out.get(ig.line, ()) + ig.codes
    return out


def bad_ignore_comments(text: str, file: str, known: Collection[str]) -> list[Finding]:
    """KB006 for each ignore comment of ``text`` that silences nothing, as ``kb check`` has it."""
    return [
        Finding(file, ig.line, ig.column, BAD_IGNORE_CODE, "warning", message)
        for ig in _ignore_directives(text)
        for message in problems(ig, known)
    ]


def _ignore_directives(text: str) -> list[Ignore]:
    """Every ignore comment in the real comments of ``text`` (columns 1-based, in characters)."""
    out: list[Ignore] = []
    if "kb:" not in text.lower():
        return out
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            for offset, codes, problem in parse_ignores(tok.string):
                out.append(Ignore(tok.start[0], tok.start[1] + offset + 1, codes, problem))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return out
