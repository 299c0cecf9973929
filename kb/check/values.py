"""Reading the few free-form values of a candidate list: byte sizes and versions."""

from __future__ import annotations

import math
import re

#: Decimal units are powers of 1000, ``i`` units and bare letters powers of 1024, as in
#: ``ls -h`` and most configuration files ("128M").
_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(-?[0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


class SizeError(ValueError):
    pass


def parse_size(value: object) -> int:
    """Bytes from an int, an integral float or a string: ``128MiB``, ``18 MB``, ``7168*2``.

    A ``*`` product of plain numbers is accepted so a size can be written the way it
    is computed (``18432 * 7168 * 2``).  Raises SizeError with a readable reason.
    """
    if isinstance(value, bool):
        raise SizeError("a size is a number of bytes, not true/false")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise SizeError(f"{value!r} is not a whole number of bytes")
        return int(value)
    if not isinstance(value, str):
        raise SizeError("a size is an integer or a string such as '128MiB'")
    text = value.strip()
    if "*" in text:
        total = 1
        for part in text.split("*"):
            total *= parse_size(part)
        return total
    m = _SIZE.match(text)
    if not m:
        raise SizeError(f"{value!r} is not a size (write bytes, or e.g. '128MiB', '18 MB')")
    number, unit = m.group(1).replace("_", ""), m.group(2).lower()
    if unit not in _UNITS:
        raise SizeError(
            f"unknown unit {m.group(2)!r} in {value!r} (use B, KiB, MiB, GiB, KB, MB, GB)"
        )
    amount = float(number) * _UNITS[unit]
    if not math.isfinite(amount) or amount > 2**62:
        raise SizeError(f"{value!r} is too large")
    return int(amount)


def format_size(n: float) -> str:
    """Human size for messages: exact bytes plus MiB/GiB when large."""
    if n >= 1024**3:
        return f"{n / 1024**3:.4g} GiB = {int(n)} bytes"
    if n >= 1024**2:
        return f"{n / 1024**2:.4g} MiB = {int(n)} bytes"
    return f"{int(n)} bytes"


_VERSION = re.compile(
    r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?(?:\.?(rc|a|b|alpha|beta)(\d*))?(?:\+.*)?$",
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


def version_before(a: str, b: str) -> bool | None:
    """True when release ``a`` is older than ``b``; None when either is unreadable.

    When one side names only ``major.minor`` the comparison uses those two parts.
    """
    pa, pb = parse_version(a), parse_version(b)
    if pa is None or pb is None:
        return None
    parts = min(pa[1], pb[1])
    ka, kb = pa[0], pb[0]
    if parts == 2:
        return ka[:2] < kb[:2]
    return ka < kb
