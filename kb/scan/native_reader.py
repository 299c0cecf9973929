"""One left-to-right pass over C++ text for :mod:`kb.scan.registrations`.

The pass is a small tokenizer that only stops where the registration reader cares:
comments, preprocessor lines, string, character and raw-string literals, numbers (so a
digit separator ``1'000`` is not a character literal), ``TORCH_LIBRARY…(`` macros,
``OP_ADD(Name)``, ``var.def(`` / ``var.impl(`` calls and braces.  Everything else is
skipped by the regular-expression engine.  The cursor only moves forward: a raw string
``R"d(`` is closed by one search for ``)d"`` from where it opens, and one never closed
runs to the end of the file (nothing after it is code), as a block comment never closed
does.  So the work is linear in the text; :attr:`NativeReader.examined` counts the
characters the pass looked at (each at most a small constant number of times) and the
fault tests hold it to that.

A registration call inside a literal or a comment is therefore never seen: the literal is
one token.  A block's body is its braces (``TORCH_LIBRARY(ns, m) { … }``); a block written
without them runs to the next ``TORCH_LIBRARY`` macro.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# Every token starts with one of a few characters (the pattern opens with their class, so
# the engine skips everything else without trying the alternatives); which token it is
# is told by a fixed-width look-behind at that character.  Possessive quantifiers
# (``*+``): no alternative backtracks.  A token's kind is the marker group ending it.
_DIRECTIVE_BODY = r"[ \t]*+\#(?:[^\n\\/]++|\\.|/(?![/*])|//[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+"
_PREFIX = r"(?<=[uUL])(?<!\w[uUL])(?:(?<=u)8)?+"  # u8, u, U, L: not inside a longer name
_TOKEN = re.compile(
    r"""[/\n"'RuUL0-9TO.{}]
    (?: (?<=/)/(?:[^\n\\]++|\\.)*+(?P<line_comment>)
      | (?<=/)\*(?P<block_comment>)
      | (?<=\n)"""
    + _DIRECTIVE_BODY
    + r"""(?P<directive>)
      | (?:(?<=R)(?<!\wR)|"""
    + _PREFIX
    + r"""R)"(?P<delim>[^()\\\s"]{0,16}+)\((?P<raw>)
      | (?:(?<=")|"""
    + _PREFIX
    + r"""")(?:[^"\\\n]++|\\.)*+"?+(?P<string>)
      | (?<=\d)(?<!\w\d)(?<!\.\d)(?:[eEpP][+-]|[\w.])*+'(?:[eEpP][+-]|[\w.'])*+(?P<number>)
      | (?<=')(?:[^'\\\n]++|\\.)*+'?+(?P<char>)
      | (?<=T)(?<!\wT)ORCH_LIBRARY(?P<kind>\w*+)\s*+\((?P<macro>)
      | (?<=O)(?<!\wO)P_ADD\s*+\(\s*+(?P<kernel_name>[A-Za-z_]\w*+)\s*+[,)](?P<kernel>)
      | (?<=\.)\s*+(?P<method>def|impl)\s*+\((?P<call>)
      | (?<=[{}])[{} \t\r]*+(?P<brace>)
    )""",
    re.S | re.X,
)
_START_DIRECTIVE = re.compile(_DIRECTIVE_BODY, re.S)
# The arguments of a ``TORCH_LIBRARY…(`` macro: two or three short names (a name may be a
# macro call one level deep: ``CONCAT(_k, _ext)``), then ``)``.
_ARG = r"\s*+([^(),\"'/;{}#\\]{0,200}+(?:\([^()\"'/;{}#\\]{0,200}+\))?+)\s*+"
_MACRO_ARGS = re.compile(rf"{_ARG},{_ARG}(?:,{_ARG})?+\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_WORD = re.compile(r"\w")
_WRAPPER = re.compile(r"\s*+[A-Za-z_]\w{0,80}+\s*+\(")  # TORCH_SELECTIVE_SCHEMA("...")
_GAP = re.compile(r"(?:\s++|//[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+")
_PLAIN = re.compile(r'(?:u8|[uUL])?+"((?:[^"\\\n]++|\\.)*+)"', re.S)
_RAW = re.compile(r'(?:u8|[uUL])?+R"([^()\\\s"]{0,16}+)\(')
_DIRECTIVE = re.compile(r"[ \t]*+#[ \t]*+(if|ifdef|ifndef|elif|else|endif)\b(.*)", re.S)
_DEFINED = re.compile(r"^!?\s*defined\s*\(?\s*(\w+)\s*\)?$")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Found:
    """One registration site: ``(namespace, var, method)`` of its block, the literal
    (None: not a closed string literal), its line and the conditions it is compiled under."""

    namespace: str | None
    method: str  # "def", "impl" or "kernel" (OP_ADD)
    literal: str | None
    line: int
    condition: tuple[str, ...]


@dataclass
class _Block:
    namespace: str | None
    var: str
    method: str
    depth: int  # braces open inside the block; -1 before its first "{"


def _unescape(text: str) -> str:
    text = text.replace("\\\n", "")  # a backslash-newline continues the literal
    return text.replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def _negate(cond: str) -> str:
    return cond[1:] if cond.startswith("!") else f"!{cond}"


def _plain(expr: str) -> str:
    """``defined(X)`` / ``!defined(X)`` as ``X`` / ``!X``; any other expression as written."""
    expr = " ".join(expr.split())
    m = _DEFINED.match(expr)
    if m:
        return ("!" if expr.startswith("!") else "") + m.group(1)
    return expr


class NativeReader:
    """The registration sites of one C++ text, read in one forward pass."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.examined = 0  # characters looked at by every search, count and slice
        self.found: list[Found] = []
        self._stack: list[list[str]] = []  # per open #if: the conditions of its arms so far
        self._condition: tuple[str, ...] = ()
        self._line, self._counted = 1, 0
        self._block: _Block | None = None

    # -- the pass ---------------------------------------------------------------------------

    def read(self) -> list[Found]:
        text, pos, end = self.text, 0, len(self.text)
        handlers: dict[str | None, Callable[[re.Match[str]], int]] = {
            "block_comment": self._block_comment,
            "directive": self._directive,
            "raw": self._raw,
            "macro": self._macro,
            "kernel": self._kernel,
            "call": self._call,
            "brace": self._brace,
        }
        first = _START_DIRECTIVE.match(text)
        if first is not None:
            pos = self._directive(first)
        while pos < end:
            m = _TOKEN.search(text, pos)
            if m is None:
                self.examined += end - pos
                break
            self.examined += m.end() - pos
            handler = handlers.get(m.lastgroup)
            pos = handler(m) if handler is not None else m.end()
        return self.found

    def _line_at(self, pos: int) -> int:
        if pos > self._counted:  # positions only grow: every newline is counted once
            self._line += self.text.count("\n", self._counted, pos)
            self.examined += pos - self._counted
            self._counted = pos
        return self._line

    def _to(self, needle: str, start: int) -> int:
        """The end of ``needle`` searched from ``start``, or the end of the text."""
        at = self.text.find(needle, start)
        stop = len(self.text) if at < 0 else at + len(needle)
        self.examined += stop - start
        return stop

    # -- tokens -----------------------------------------------------------------------------

    def _block_comment(self, m: re.Match[str]) -> int:
        return self._to("*/", m.end())

    def _raw(self, m: re.Match[str]) -> int:
        return self._to(f'){m.group("delim")}"', m.end())

    def _directive(self, m: re.Match[str]) -> int:
        d = _DIRECTIVE.match(_COMMENTS.sub(" ", m.group(0).lstrip("\n")))
        if d is None:
            return m.end()
        kind, arg = d.group(1), " ".join(d.group(2).replace("\\\n", " ").split())
        stack = self._stack
        if kind in ("if", "ifdef", "ifndef"):
            first = arg if kind == "ifdef" else f"!{arg}" if kind == "ifndef" else _plain(arg)
            stack.append([first])
        elif not stack:
            return m.end()
        elif kind == "elif":
            stack[-1].append(_plain(arg))
        elif kind == "else":
            stack[-1].append("<else>")
        else:
            stack.pop()
        now: list[str] = []
        for arms in stack:
            now += [_negate(a) for a in arms[:-1]]
            if arms[-1] != "<else>":
                now.append(arms[-1])
        self._condition = tuple(now)
        return m.end()

    def _macro(self, m: re.Match[str]) -> int:
        args = _MACRO_ARGS.match(self.text, m.end())
        if args is None:
            return m.end()
        self.examined += args.end() - m.end()
        impl = "IMPL" in m.group("kind")
        names = [a.strip() for a in args.groups() if a is not None]
        if len(names) != (3 if impl else 2) or not _IDENT.fullmatch(names[-1]):
            self._block = None  # another macro ends the block before it
            return args.end()
        ns = names[0] if _IDENT.fullmatch(names[0]) else None
        self._block = _Block(ns, names[-1], "impl" if impl else "def", -1)
        return args.end()

    def _brace(self, m: re.Match[str]) -> int:
        block = self._block
        if block is None:
            return m.end()
        depth = block.depth
        for i in range(m.start(), m.end()):  # a run of braces (and spaces), one at a time
            ch = self.text[i]
            if ch == "{":
                depth = 1 if depth < 0 else depth + 1
            elif ch == "}" and depth > 0:
                depth -= 1
                if depth == 0:
                    self._block = None  # the block's closing brace
                    return i + 1
        block.depth = depth
        return m.end()

    def _kernel(self, m: re.Match[str]) -> int:
        line = self._line_at(m.start())
        self.found.append(Found(None, "kernel", m.group("kernel_name"), line, self._condition))
        return m.end()

    def _call(self, m: re.Match[str]) -> int:
        block = self._block
        if block is None or m.group("method") != block.method:
            return m.end()
        before = self.text[max(0, m.start() - 256) : m.start()].rstrip()  # bounded look back
        var = block.var
        if not before.endswith(var) or _WORD.fullmatch(before[-len(var) - 1 : -len(var)]):
            return m.end()  # another object's def/impl (or a longer name ending in var)
        line = self._line_at(m.end() - 1)
        literal, after = self._literal(m.end())
        self.found.append(Found(block.namespace, block.method, literal, line, self._condition))
        return after

    def _literal(self, pos: int) -> tuple[str | None, int]:
        """Adjacent string literals from ``pos`` joined (C++ concatenates them), and where
        the pass goes on: after the last literal read, or ``pos`` when there is none."""
        text = self.text
        wrapped = _WRAPPER.match(text, pos)
        start = wrapped.end() if wrapped else pos
        parts: list[str] = []
        while True:
            gap = _GAP.match(text, start)
            at = gap.end() if gap else start
            raw = _RAW.match(text, at)
            if raw is not None:
                self.examined += raw.end() - start
                close = f'){raw.group(1)}"'
                stop = self._to(close, raw.end())
                if not text.endswith(close, 0, stop):
                    return None, stop  # never closed: the rest of the file is the literal
                parts.append(text[raw.end() : stop - len(close)])
                start = stop
                continue
            plain = _PLAIN.match(text, at)
            if plain is None:
                break
            self.examined += plain.end() - start
            parts.append(_unescape(plain.group(1)))
            start = plain.end()
        if not parts:
            return None, pos
        self.examined += (wrapped.end() - pos) if wrapped else 0
        return "".join(parts), start
