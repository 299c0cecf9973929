"""Reading the few free-form values of a candidate list: byte sizes and versions."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kb.core.releasenumber import parse_version, release_text

__all__ = [
    "SizeError",
    "format_size",
    "parse_size",
    "parse_version",
    "release_text",
    "version_before",
]

#: Decimal units are powers of 1000, ``i`` units and bare letters powers of 1024, as in
#: ``ls -h`` and most configuration files ("128M").
_UNITS: dict[str, int] = {
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
    "tb": 1000**4,
}
#: A size may be written as code computes it; these bounds keep reading it linear and
#: every intermediate value small (no bignum growth, no float overflow).
MAX_SIZE_CHARS = 1000
MAX_DIGITS = 20
MAX_NESTING = 32
MAX_BYTES = 2**62
_TOKEN = re.compile(
    r"\s*(?:(?P<num>[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE]\+?[0-9]{1,2})?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*/()])|(?P<bad>\S))"
)

Number = int | Fraction


class SizeError(ValueError):
    pass


class _Unknown:
    """A size that names something only the code knows (``MAX_PREFETCH_BYTES``)."""


UNKNOWN = _Unknown()
Value = Number | _Unknown


def _unit(word: str, *, after_number: bool) -> int | None:
    """Bytes per unit word; single letters stand alone only in capitals (K, M, G)."""
    if not after_number and len(word) == 1 and not word.isupper():
        return None
    return _UNITS.get(word.lower())


class _SizeParser:
    """Recursive descent over ``+ - * //``, parentheses, numbers, units and names."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup or "bad"
            if kind == "bad":
                raise SizeError(f"unexpected {m.group(kind)!r}")
            self.tokens.append((kind, m.group(kind)))
        if not self.tokens:
            raise SizeError("empty")
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise SizeError("ends too early")
        self.pos += 1
        return tok

    def parse(self) -> Value:
        value = self.expr(0)
        if self.peek() is not None:
            raise SizeError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return value

    def expr(self, depth: int) -> Value:
        value = self.term(depth)
        while (tok := self.peek()) is not None and tok[1] in ("+", "-"):
            self.pos += 1
            right = self.term(depth)
            value = _apply(tok[1], value, right)
        return value

    def term(self, depth: int) -> Value:
        value = self.unary(depth)
        while (tok := self.peek()) is not None and tok[1] in ("*", "//", "/"):
            if tok[1] == "/":
                raise SizeError("use // for integer division")
            self.pos += 1
            value = _apply(tok[1], value, self.unary(depth))
        return value

    def unary(self, depth: int) -> Value:
        tok = self.peek()
        if tok is not None and tok[1] in ("+", "-"):
            self.pos += 1
            inner = self.unary(depth)
            return inner if tok[1] == "+" or isinstance(inner, _Unknown) else -inner
        return self.atom(depth)

    def atom(self, depth: int) -> Value:
        kind, text = self.take()
        if text == "(":
            if depth >= MAX_NESTING:
                raise SizeError("parentheses nest too deeply")
            value = self.expr(depth + 1)
            if self.take()[1] != ")":
                raise SizeError("a parenthesis is not closed")
            return value
        if kind == "num":
            value = _number(text)
            nxt = self.peek()
            if nxt is not None and nxt[0] == "name":
                unit = _unit(nxt[1], after_number=True)
                if unit is None:
                    raise SizeError(f"unknown unit {nxt[1]!r} (use B, KiB, MiB, GiB, KB, MB, GB)")
                self.pos += 1
                value = _apply("*", value, unit)
            return value
        if kind == "name":
            unit = _unit(text, after_number=False)
            return UNKNOWN if unit is None else unit
        raise SizeError(f"unexpected {text!r}")


def _number(text: str) -> Number:
    digits = text.replace("_", "")
    mantissa = digits.lower().split("e")[0]
    if sum(c.isdigit() for c in mantissa) > MAX_DIGITS:
        raise SizeError(f"{text[:24]}… has more than {MAX_DIGITS} digits")
    if "." in digits or "e" in digits.lower():
        return Fraction(digits)
    return int(digits)


def _apply(op: str, a: Value, b: Value) -> Value:
    if isinstance(a, _Unknown) or isinstance(b, _Unknown):
        return UNKNOWN
    if op == "+":
        out: Number = a + b
    elif op == "-":
        out = a - b
    elif op == "*":
        out = a * b
    else:
        if b == 0:
            raise SizeError("division by zero")
        out = a // b
    if abs(out) > MAX_BYTES:  # type: ignore[operator]
        raise SizeError(f"is larger than {MAX_BYTES} bytes")
    return out


def parse_size(value: object) -> int | None:
    """Bytes from an int, an integral float or a string, or None when it cannot be known.

    Strings are written the way code computes a size: integers, ``+ - * //`` and
    parentheses, unit words (``64 * MiB``, ``128MiB``, ``18 MB``, ``(7168*18432*2)//2``).
    A name kb cannot resolve (``MAX_PREFETCH_BYTES``) makes the size unknown (None),
    not an error.  Raises SizeError with a readable reason for anything else.
    """
    if isinstance(value, bool):
        raise SizeError("a size is a number of bytes, not true/false")
    if isinstance(value, int):
        if abs(value) > MAX_BYTES:
            raise SizeError(f"{value} is larger than {MAX_BYTES} bytes")
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise SizeError(f"{value!r} is not a whole number of bytes")
        return parse_size(int(value))
    if not isinstance(value, str):
        raise SizeError("a size is an integer or a string such as '128MiB'")
    if len(value) > MAX_SIZE_CHARS:
        raise SizeError(f"is {len(value)} characters long; write it in at most {MAX_SIZE_CHARS}")
    try:
        result = _SizeParser(value).parse()
    except SizeError as exc:
        raise SizeError(
            f"{_short(value)} is not a size: {exc} (write bytes, or e.g. '128MiB', "
            "'18 MB', '64 * MiB', '7168 * 18432 * 2 // 2')"
        ) from None
    if isinstance(result, _Unknown):
        return None
    if result != int(result):
        raise SizeError(f"{_short(value)} is not a whole number of bytes")
    return int(result)


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def format_size(n: float) -> str:
    """Human size for messages: exact bytes plus MiB/GiB when large."""
    if n >= 1024**3:
        return f"{n / 1024**3:.4g} GiB = {int(n)} bytes"
    if n >= 1024**2:
        return f"{n / 1024**2:.4g} MiB = {int(n)} bytes"
    return f"{int(n)} bytes"


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
