"""The width terminal output wraps to: the terminal's, at most 80 columns.

A module of its own (os and sys only) so a quick verb such as ``kb search`` gets the
width without importing the renderers.
"""

from __future__ import annotations

import os
import sys

MAX_WIDTH = 80
MIN_WIDTH = 40


def terminal_width() -> int:
    """min(terminal width, 80); 80 when output is not a terminal (files, pipes, tests).

    ``COLUMNS`` wins when set, as with :func:`shutil.get_terminal_size`.
    """
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(MIN_WIDTH, min(int(columns), MAX_WIDTH))
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno()) if sys.__stdout__ else None
    except (OSError, ValueError):
        size = None
    if size is None or size.columns <= 0:
        return MAX_WIDTH
    return max(MIN_WIDTH, min(size.columns, MAX_WIDTH))
