"""Where lines end, as each language kb reads counts them.

``str.splitlines`` also breaks at form feed, vertical tab, the file/group/record
separators, U+0085 and U+2028/9.  Python's tokenizer (and so every ``lineno`` of
``ast``) breaks only at LF, CR LF and CR; a form feed is whitespace and U+2028 an
ordinary character in a comment or string.  YAML (PyYAML's marks, libyaml alike)
breaks at those three and at U+0085, U+2028 and U+2029, and refuses the other controls.
Splitting a file any other way shifts every line and column after the first stray
character.
"""

from __future__ import annotations

import re

#: Line breaks as YAML counts them (what PyYAML's ``Mark.line`` counts).
YAML_BREAKS = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")
#: Line breaks as Python's tokenizer counts them.
PYTHON_BREAKS = re.compile(r"\r\n|\r|\n")


def python_lines(text: str) -> list[str]:
    """The lines of Python source as ``ast`` numbers them (``lines[lineno - 1]``),
    without their line endings; like ``splitlines`` for text without stray breaks."""
    lines = PYTHON_BREAKS.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines
