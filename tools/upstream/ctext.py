"""Small readers of C++ text with its comments already blanked (see ``kernels.strip_comments``).

Wrappers and kernel registrations are read as text: these helpers step over string
literals, find the parenthesis that closes another, split argument lists at top-level
commas and cut a function body into statements, so the readers above them never
mistake a comma, brace or parenthesis inside a string for code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: a template argument list (``<int64_t>``, ``<std::string, int>``), never a comparison
TEMPLATE = re.compile(r"<[\w:\s,*&]*(?:<[\w:\s,*&]*>[\w:\s,*&]*)*>")


def string_end(text: str, i: int) -> int:
    """Offset just after the string literal whose opening quote is at ``i``."""
    j = i + 1
    while j < len(text) and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def close_bracket(text: str, open_at: int) -> int:
    """Offset just after the bracket closing the ``(``, ``[`` or ``{`` at ``open_at``."""
    opening = text[open_at]
    closing = {"(": ")", "[": "]", "{": "}"}[opening]
    depth, i = 0, open_at
    while i < len(text):
        c = text[i]
        if c == '"':
            i = string_end(text, i)
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def close_paren(text: str, open_at: int) -> int:
    """Offset just after the parenthesis closing the one at ``open_at``."""
    return close_bracket(text, open_at)


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets, template argument lists and strings."""
    parts: list[str] = []
    start, depth, i = 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = string_end(text, i)
            continue
        if c == "<" and i and (text[i - 1].isalnum() or text[i - 1] == "_"):
            m = TEMPLATE.match(text, i)
            if m:
                i = m.end()
                continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def statements(body: str) -> Iterator[tuple[int, str]]:
    """(offset, statement) split at ``;``, ``{`` and ``}`` outside parentheses."""
    depth, start, i = 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == '"':
            i = string_end(body, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and c in ";{}":
            stmt = body[start:i].strip()
            if stmt:
                yield start, stmt
            start = i + 1
        i += 1
