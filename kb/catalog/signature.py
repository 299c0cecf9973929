"""Parse PyTorch function schema strings (``native_functions.yaml`` style).

Used by the importer, the drift report and the record tests: a record's structured
``parameters`` must agree with its ``signature`` string, which is the upstream fact.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

_ALIAS = re.compile(r"\((\w+)(!?)\)")


class SchemaArg(NamedTuple):
    name: str
    type: str  # alias annotation removed: "Tensor(a!)" → "Tensor"
    default: str | None
    keyword_only: bool
    mutated: bool

    @property
    def required(self) -> bool:
        return self.default is None


class Schema(NamedTuple):
    name: str  # without overload: "npu_mla_prolog_v3"
    overload: str  # "Tensor" in "__ior__.Tensor", else ""
    args: tuple[SchemaArg, ...]
    returns: tuple[str, ...]
    text: str

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


class SchemaError(ValueError):
    pass


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes."""
    parts, depth, quote, buf = [], 0, "", []
    for ch in text:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
    tail = "".join(buf).strip()
    if tail:
        parts.append(tail)
    return parts


def _matching_paren(text: str, start: int) -> int:
    depth, quote = 0, ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SchemaError(f"unbalanced parentheses in {text!r}")


@lru_cache(maxsize=4096)
def parse_schema(text: str) -> Schema:
    """The parts of a schema string; the same text parsed once per process (a compile
    reads each signature and release schema several times; the result is immutable)."""
    text = text.strip()
    open_at = text.find("(")
    if open_at <= 0:
        raise SchemaError(f"not a schema: {text!r}")
    head = text[:open_at].strip()
    name, _, overload = head.partition(".")
    close_at = _matching_paren(text, open_at)
    arg_text = text[open_at + 1 : close_at]
    rest = text[close_at + 1 :].strip()
    if not rest.startswith("->"):
        raise SchemaError(f"schema has no return arrow: {text!r}")
    ret = rest[2:].strip()
    if ret.startswith("(") and ret.endswith(")"):
        returns = tuple(_split_top(ret[1:-1]))
    else:
        returns = (ret,) if ret else ()
    args: list[SchemaArg] = []
    kw_only = False
    for raw in _split_top(arg_text):
        if raw == "*":
            kw_only = True
            continue
        decl, eq, default = raw.partition("=")
        decl = decl.strip()
        pieces = decl.rsplit(None, 1)
        if len(pieces) != 2:
            raise SchemaError(f"cannot read argument {raw!r}")
        typ, arg_name = pieces
        mutated = bool(_ALIAS.search(typ) and "!" in typ)
        typ = _ALIAS.sub("", typ).replace(" ", "")
        args.append(SchemaArg(arg_name, typ, default.strip() if eq else None, kw_only, mutated))
    return Schema(name, overload, tuple(args), returns, text)
