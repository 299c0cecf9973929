"""Word wrap for the text views, line for line what :func:`textwrap.wrap` gives.

``kb show`` wraps a few hundred short paragraphs per record; :mod:`textwrap` builds a
wrapper object, rewrites the whitespace and splits with a regular expression for
each, which was most of the time a record took to render (and its import a
millisecond of every cold call).  Here the text is split at whitespace once and the
greedy fill runs over the words.

The result equals ``textwrap.wrap(" ".join(text.split()), width, initial_indent=first,
subsequent_indent=rest, break_on_hyphens=False)`` (long words broken, as textwrap's
default), including its corner cases: a word longer than a line is cut to fill the
line it starts on, and an indent as wide as the line still takes one character per line.
``tests/test_wrapping.py`` compares the two on generated text.
"""

from __future__ import annotations


def wrap_words(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """The lines of ``text`` (its whitespace collapsed) within ``width`` characters,
    the first starting with ``first`` and the others with ``rest``."""
    if width <= 0:
        raise ValueError(f"invalid width {width!r} (must be > 0)")
    words = text.split()
    if not words:
        return []
    one = " ".join(words)
    if len(first) + len(one) <= width:  # the common case: it fits
        return [first + one]
    # textwrap's chunks: the words with a one-space chunk between each two
    chunks = [" "] * (2 * len(words) - 1)
    chunks[::2] = words
    lines: list[str] = []
    i, n = 0, len(chunks)
    while i < n:
        indent = rest if lines else first
        room = width - len(indent)
        if lines and not chunks[i].strip():  # a line never starts with the space
            i += 1
        start, used = i, 0
        while i < n and used + len(chunks[i]) <= room:
            used += len(chunks[i])
            i += 1
        parts = chunks[start:i]
        if i < n and len(chunks[i]) > room:  # a word longer than a line: cut it here
            take = 1 if room < 1 else room - used
            parts.append(chunks[i][:take])
            chunks[i] = chunks[i][take:]
        if parts and not parts[-1].strip():
            parts.pop()
        if parts:
            lines.append(indent + "".join(parts))
    return lines
