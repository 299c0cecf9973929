"""Untrusted text (file names, values quoted in messages) made safe for each output.

A file name may hold any byte but ``/`` and NUL: a newline followed by
``::warning file=x::`` would start a GitHub workflow command in a CI log, an ESC
sequence would drive the reader's terminal.  Text and GitHub output show such
characters as visible escapes (``\\n``, ``\\x1b``, ``\\u2028``); GitHub properties and
data also get the workflow-command escaping (``%``, CR, LF, and ``:`` ``,`` in
properties); SARIF URIs are percent-encoded as RFC 3986 relative references.
Ordinary names come out exactly as they went in.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import quote

#: C0 and C1 controls, DEL, the Unicode line and paragraph separators, the bidi
#: controls that reorder what a terminal or viewer shows (Trojan Source), and lone
#: surrogates (undecodable bytes of a file name, which no UTF-8 stream can carry).
_UNSAFE_CLASS = (
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
#: Every character of _UNSAFE_CLASS except CR and LF, which GitHub's own escaping carries.
_UNSAFE_BUT_BREAKS_CLASS = (
    "[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)


@functools.cache
def _pattern(chars: str) -> re.Pattern[str]:
    """Compiled on first use: every verb imports this module, few print what it escapes
    (compiling both classes was a millisecond of each cold ``kb search``)."""
    return re.compile(chars)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(m: re.Match[str]) -> str:
    char = m.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of an argument or file name
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control, line-separator and bidi character shown as an escape."""
    unsafe = _pattern(_UNSAFE_CLASS)
    return unsafe.sub(_visible, text) if unsafe.search(text) else text


def github_data(text: str) -> str:
    """The message of a workflow command (``::error …::DATA``)."""
    text = _pattern(_UNSAFE_BUT_BREAKS_CLASS).sub(_visible, text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A property value of a workflow command (``file=VALUE``)."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


#: RFC 3986 ``pchar`` minus ``:`` (a colon in a relative reference's first segment
#: would read as a scheme), plus ``/`` between segments.
_URI_SAFE = "/!$&'()*+,;=@-._~"


def uri_path(path: str) -> str:
    """A ``/``-separated path as the path of an RFC 3986 URI reference, percent-encoded
    (UTF-8, undecodable name bytes as themselves); unreserved characters and
    sub-delimiters stay as they are, and ``:`` too after a leading ``/``."""
    safe = _URI_SAFE + ":" if path.startswith("/") else _URI_SAFE
    return quote(path, safe=safe, encoding="utf-8", errors="surrogateescape")
