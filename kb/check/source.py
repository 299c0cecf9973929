"""Reading one candidate list's bytes: a regular file or standard input, within the size
limit, a UTF-16/32 list (with its byte-order mark) re-encoded as UTF-8, then decoded.

What cannot be read as text raises :class:`InputError`; what the text says is
:mod:`kb.check.parse`'s business.
"""

from __future__ import annotations

import codecs
import os
import sys

from kb.core import yamlpos
from kb.core.paths import NotRegularFile, read_regular_file


class InputError(Exception):
    """An input that is not text we can read (missing, a directory, binary, too big)."""

    def __init__(self, file: str, message: str) -> None:
        super().__init__(f"{file}: {message}")
        self.file = file
        self.message = message


def read_source(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(display name, text) of one input; ``-`` reads standard input.

    Only regular files are opened: a FIFO, device or socket could block ``open`` or
    ``read`` forever, so it is refused from its ``stat`` first.
    """
    name = str(path)
    limit = yamlpos.MAX_BYTES
    try:
        if name == "-":
            name = "<stdin>"
            stdin = sys.stdin
            if stdin is None or stdin.closed:
                raise InputError(name, "standard input is closed")
            raw = stdin.buffer.read(limit + 1)
        else:
            raw = read_regular_file(name, limit + 1)
    except NotRegularFile as exc:
        raise InputError(name, f"is {exc.kind}, expected a candidate list file") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. a stdin replaced by a closed file object
        raise InputError(name, f"cannot read: {exc}") from None
    if len(raw) <= limit:
        raw = _utf16_or_32_as_utf8(name, raw)
    try:
        return name, yamlpos.decode(raw, max_bytes=limit)
    except yamlpos.YamlError as exc:
        if len(raw) > limit:
            raise InputError(name, f"larger than the {limit} byte limit; split the list") from None
        raise InputError(name, exc.message) from None


#: Byte-order marks of the encodings YAML 1.2 allows besides UTF-8 (UTF-32 first: its
#: little-endian mark begins with UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _utf16_or_32_as_utf8(name: str, raw: bytes) -> bytes:
    """A list saved as UTF-16/32 with a BOM (Windows editors do) re-encoded as UTF-8;
    its NUL bytes are the encoding, not a binary file."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(encoding).encode("utf-8")
            except UnicodeError as exc:
                raise InputError(
                    name,
                    f"starts with a {encoding.upper()} byte-order mark "
                    f"but is not {encoding.upper()} text: {exc}",
                ) from None
    return raw
