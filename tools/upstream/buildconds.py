"""Which products a package builds each operator for: its CMake files, evaluated per product.

A kernel package compiles some registrations only for some chips: the C++ puts them
under ``#ifdef MACRO`` and the CMake defines ``MACRO`` only when ``SOC_VERSION`` matches
(vLLM-Ascend's ``ASCEND_PLATFORM_310P``, sgl-kernel-npu's ``SGL_KERNEL_ENABLE_A3_ONLY_OPS``).
This module runs the few CMake commands that decide that, once per product with that
product's SoC name as ``SOC_VERSION`` (the SoC names of :mod:`kb.vocab.products`), and
says which preprocessor macros each product's build defines.  It is no CMake: ``if``/
``elseif``/``else``/``endif`` with ``MATCHES``, ``STREQUAL``, ``DEFINED``, ``NOT``,
``AND``, ``OR``, variables; ``set``, ``option``, ``string(TOLOWER|TOUPPER)``;
``add_compile_definitions``, ``add_definitions(-D…)``, ``target_compile_definitions``.
A condition it cannot read makes what depends on it unknown, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from kb.vocab import PRODUCTS

_COMMAND = re.compile(r"\b([A-Za-z_]\w*)\s*\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)", re.S)
_ARG = re.compile(r'"((?:\\.|[^"\\])*)"|([^\s()"]+)|(\()|(\))')
_VAR = re.compile(r"\$\{(\w+)\}")
_FALSE = {"", "0", "off", "no", "false", "n", "ignore", "notfound"}


def product_socs() -> dict[str, str]:
    """One ``SOC_VERSION`` per product with a chip of its own: its first SoC name in lower
    case, as build scripts pass it (``ascend910b1``, ``ascend310p1``)."""
    return {p.id: p.socs[0][0].lower() for p in PRODUCTS if p.socs and p.family is None}


def cmake_texts(root: Path) -> list[str]:
    """The package's CMake files (third-party trees left out)."""
    return [
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("CMakeLists.txt"))
        if not {"third_party", "3rdparty", ".git"} & set(p.parts)
    ]


def _strip_comments(text: str) -> str:
    return "\n".join(
        line.split("#", 1)[0] if '"' not in line else line for line in text.splitlines()
    )


def _tokens(args: str, env: dict[str, str]) -> list[str | None]:
    """Arguments with ``${VAR}`` expanded; ``(`` and ``)`` as None markers kept in place."""
    out: list[str | None] = []
    for m in _ARG.finditer(args):
        if m.group(3) or m.group(4):
            out.append(m.group(3) or m.group(4))
            continue
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        out.append(_VAR.sub(lambda v: env.get(v.group(1), ""), raw))
    return out


class _Unknown(Exception):
    """A condition the evaluator cannot read."""


#: The value of an ``option()``: the builder chooses it, so a test of it is unknown.
_OPTION = "\x00option"
#: Set in the environment when options keep their declared defaults.
_DEFAULTS = "\x00defaults"


def _truthy(word: str, env: dict[str, str]) -> bool:
    value = env.get(word, word)
    if value == _OPTION:
        raise _Unknown
    return value.lower() not in _FALSE and not value.lower().endswith("-notfound")


def _condition(words: list[str | None], env: dict[str, str]) -> bool:
    """Evaluate an ``if(...)`` argument list (precedence: parentheses, NOT, AND, OR)."""
    pos = 0

    def atom() -> bool:
        nonlocal pos
        if pos >= len(words):
            raise _Unknown
        word = words[pos]
        if word == "(":
            pos += 1
            value = disjunction()
            pos += 1  # ")"
            return value
        if word == "NOT":
            pos += 1
            return not atom()
        if word == "DEFINED" and pos + 1 < len(words):
            pos += 2
            return str(words[pos - 1]) in env
        if pos + 2 < len(words) + 0 and words[pos + 1] in ("MATCHES", "STREQUAL", "EQUAL"):
            left, op, right = str(env.get(str(word), word)), words[pos + 1], str(words[pos + 2])
            pos += 3
            if op == "MATCHES":
                return re.search(right, left) is not None
            return left == right
        pos += 1
        if word is None or not re.fullmatch(r"[\w.\-]+", word):
            raise _Unknown
        return _truthy(word, env)

    def joined(keyword: str, part: Callable[[], bool]) -> bool:
        """``part (keyword part)*``, every part evaluated (no short cut: positions move)."""
        nonlocal pos
        values = [part()]
        while pos < len(words) and words[pos] == keyword:
            pos += 1
            values.append(part())
        return all(values) if keyword == "AND" else any(values)

    def conjunction() -> bool:
        return joined("AND", atom)

    def disjunction() -> bool:
        return joined("OR", conjunction)

    result = disjunction()
    if pos != len(words):
        raise _Unknown
    return result


def defined_macros(
    cmake_texts: Iterable[str], soc: str, defaults: bool = False
) -> tuple[set[str], set[str]]:
    """(macros surely defined, macros perhaps defined) by a build for ``soc``; with
    ``defaults``, every ``option()`` keeps the value its CMake gives it (OFF when none)."""
    env: dict[str, str] = {"SOC_VERSION": soc}
    if defaults:
        env[_DEFAULTS] = "1"
    sure: set[str] = set()
    maybe: set[str] = set()
    for text in cmake_texts:
        stack: list[
            tuple[bool | None, bool]
        ] = []  # (this arm runs: True/False/unknown, an arm ran)
        for m in _COMMAND.finditer(_strip_comments(text)):
            name, words = m.group(1).lower(), _tokens(m.group(2), env)
            if name in ("if", "elseif", "else", "endif"):
                stack = _branch(stack, name, words, env)
                continue
            active = [s[0] for s in stack]
            if False in active:
                continue
            certain = None not in active
            _run(
                name,
                [w for w in words if w not in ("(", ")")],
                env,
                sure if certain else maybe,
                certain,
            )
    return sure, maybe - sure


def _branch(
    stack: list[tuple[bool | None, bool]], name: str, words: list[str | None], env: dict[str, str]
) -> list[tuple[bool | None, bool]]:
    def test() -> bool | None:
        try:
            return _condition(words, env)
        except (_Unknown, re.error, IndexError):
            return None

    if name == "if":
        value = test()
        return [*stack, (value, value is True)]
    if not stack:
        return stack
    _now, ran = stack[-1]
    if name == "endif":
        return stack[:-1]
    if name == "else":
        return [*stack[:-1], (False if ran else (None if _now is None else True), True)]
    value = test() if not ran else False
    return [
        *stack[:-1],
        (None if _now is None and not ran and value is not False else value, ran or value is True),
    ]


def _run(
    name: str, args: list[str | None], env: dict[str, str], into: set[str], certain: bool
) -> None:
    words = [str(a) for a in args if a is not None]
    if name == "set" and words:
        if certain:
            env[words[0]] = ";".join(words[1:])
    elif name == "option" and words and words[0] not in env and certain:
        default = words[2] if len(words) > 2 else "OFF"
        env[words[0]] = default if _DEFAULTS in env else _OPTION
    elif name == "string" and len(words) >= 3 and words[0] in ("TOLOWER", "TOUPPER") and certain:
        env[words[2]] = words[1].lower() if words[0] == "TOLOWER" else words[1].upper()
    elif name in ("add_compile_definitions", "add_definitions", "target_compile_definitions"):
        for word in words[1:] if name == "target_compile_definitions" else words:
            macro = word.removeprefix("-D").split("=", 1)[0]
            if re.fullmatch(r"[A-Za-z_]\w*", macro) and macro not in (
                "PRIVATE",
                "PUBLIC",
                "INTERFACE",
            ):
                into.add(macro)


def not_built(texts: list[str], condition: tuple[str, ...]) -> list[str] | None:
    """The products whose build leaves out a registration compiled under ``condition``;
    None when a condition is not a macro the CMake files decide for every product, or when
    no build compiles it (then it hangs on an option, not on the chip)."""
    socs = product_socs()
    if not all(re.fullmatch(r"[A-Za-z_]\w*", c.removeprefix("!")) for c in condition):
        return None  # an #if expression: not read
    out: list[str] = []
    for product, soc in socs.items():
        sure, maybe = defined_macros(texts, soc)
        # a part that surely fails leaves the registration out; a part hanging on an
        # option (maybe defined) decides nothing
        if any(
            c.removeprefix("!") not in maybe and (c.removeprefix("!") in sure) == c.startswith("!")
            for c in condition
        ):
            out.append(product)
    return out if 0 < len(out) < len(socs) else None


def off_by_default(texts: list[str], condition: tuple[str, ...]) -> bool:
    """Whether a registration under ``condition`` hangs on a build option and no product's
    build with every option at its CMake default compiles it (sgl-kernel-npu's catlass
    operators behind ``option(BUILD_CATLASS_MODULE … OFF)``): present only in builds that
    turn the option on."""
    if not texts or not all(re.fullmatch(r"[A-Za-z_]\w*", c.removeprefix("!")) for c in condition):
        return False
    socs = product_socs().values()
    hangs = any(
        c.removeprefix("!") in defined_macros(texts, soc)[1] for soc in socs for c in condition
    )
    if not hangs:
        return False
    for soc in socs:
        sure, maybe = defined_macros(texts, soc, defaults=True)
        if any(c.removeprefix("!") in maybe for c in condition):
            return False  # still unread with the defaults: no claim
        if all((c.removeprefix("!") in sure) != c.startswith("!") for c in condition):
            return False  # this product's default build has it
    return True
