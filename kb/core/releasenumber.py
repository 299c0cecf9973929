"""torch_npu release numbers as users write them (``2.7.1``, ``2.7``, ``2.7.1rc1``, ``2.7.1.post2``).

One grammar and one validator for every front end: the command line's ``--torch-npu``,
``[tool.kb] torch-npu`` and candidate lists all accept exactly the same releases, so
``torch-npu = 1e400`` (a TOML float that reads back as ``inf``) is refused everywhere.
"""

from __future__ import annotations

import re

#: Longer text is not a release number (and is not worth matching).
MAX_RELEASE_CHARS = 40

_VERSION = re.compile(
    r"^v?(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?(?:\.?post(\d{1,9}))?(?:\.?(rc|a|b|alpha|beta)(\d{0,9}))?(?:\+.*)?$",
    re.IGNORECASE,
)


def parse_version(text: str) -> tuple[tuple[int, ...], int] | None:
    """A comparable key for a torch_npu release and how many parts were written.

    ``2.7.1rc1`` < ``2.7.1`` < ``2.7.1.post2``.  The second item is 2 for ``2.7`` (any
    2.7.x) and 3 otherwise, so a two-part version is compared on two parts only.
    Returns None for text that is not a release number.
    """
    m = _VERSION.match(text.strip())
    if not m:
        return None
    major, minor, patch, post, pre, pre_n = m.groups()
    parts = 3 if patch is not None else 2
    pre_rank = 0 if pre else 1
    key = (int(major), int(minor), int(patch or 0), pre_rank, int(pre_n or 0), int(post or 0))
    return key, parts


def release_text(value: object) -> str | None:
    """The release ``value`` names, as text (``str(value)``), or None when it is not one.

    Text and numbers are read as their text (a TOML ``2.7`` is ``"2.7"``); booleans,
    other types, over-long text and anything the release grammar refuses (``inf``,
    ``nan``, ``2``) are not releases.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value)
    if len(text) > MAX_RELEASE_CHARS or parse_version(text) is None:
        return None
    return text
