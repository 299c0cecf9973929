"""Operators a tree registers itself: C++ ``TORCH_LIBRARY`` blocks and Python definitions.

An engine that ships its own kernels registers them with the dispatcher: C++
``TORCH_LIBRARY(ns, m) { m.def("name(schema)"); }`` (or ``TORCH_LIBRARY_FRAGMENT``),
Python ``torch.library.define("ns::name", "(...) -> ...")``, ``Library("ns", "DEF").define``
or a ``custom_op("ns::name")`` decorator.  Calls of those operators are the tree's own
API: they are checked against the schema registered here (when there is one), never
against a torch_npu record of the same name.

C++ is read with a few linear-time regular expressions over text with comments blanked,
not parsed: a namespace written through a macro (``CONCAT(_C, _ascend)``) is kept as
unknown (``None``), and a ``def`` with only a name (``m.def("x", &fn)``) has no schema.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: Source files that may hold ``TORCH_LIBRARY`` blocks.
NATIVE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".cu", ".hip", ".h", ".hpp", ".hh", ".hxx")
#: Bytes read of one native file (a generated file larger than this is skipped).
MAX_NATIVE_BYTES = 4 * 1024 * 1024

# Comments and literals in one alternation, so a "//" inside a string stays a string.  Every
# alternative matches wherever it starts (an unterminated comment runs to the end, an
# unterminated literal to the end of its line): the scan never backs up, so it is linear.
_LEXEME = re.compile(
    r'//[^\n]*|/\*(?:.*?\*/|.*)|"(?:\\.|[^"\\\n])*"?|\'(?:\\.|[^\'\\\n])*\'?', re.S
)
_MACRO = re.compile(r"\bTORCH_LIBRARY(\w*)\s*\(")
_PLAIN = re.compile(r'\s*"((?:\\.|[^"\\\n])*)"', re.S)
_RAW = re.compile(r'\s*R"([^()\\\s]{0,16})\(')
_WRAPPER = re.compile(r"\s*[A-Za-z_]\w*\s*\(")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_QUALNAME = re.compile(r"^\s*([A-Za-z_]\w*)::([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Registration:
    """One operator a tree (or a package, see :mod:`kb.scan.extensions`) registers."""

    namespace: str | None  # None: written through a macro the reader does not expand
    name: str
    schema: str | None  # the full schema text, when the registration gives one
    file: str
    line: int
    package: str | None = None  # the public package that registers it (extension records)
    params: tuple[tuple[str, str, bool, bool], ...] | None = None  # (name, type, required, kw-only)
    defines: bool = True  # False: a kernel for an operator defined elsewhere (TORCH_LIBRARY_IMPL)
    #: the preprocessor conditions the registration is compiled under, outermost first:
    #: ``MACRO`` (``#ifdef``/``#if defined``), ``!MACRO`` (``#ifndef``, an ``#else`` arm),
    #: or the ``#if`` expression as written
    condition: tuple[str, ...] = ()
    not_built: tuple[str, ...] = ()  # products whose build of the package leaves it out (records)
    #: the other backend a Python branch keeps the registration to (``if not is_npu():``)
    branch: str | None = None

    def parameters(self) -> list[dict[str, Any]] | None:
        """The parameters in the records' terms, for :func:`kb.scan.binding.bind`."""
        if self.params is not None:
            return [
                {
                    "name": n,
                    "type": t,
                    "required": r,
                    "default": None if r else "?",
                    "keyword_only": k,
                }
                for n, t, r, k in self.params
            ]
        return None if self.schema is None else schema_parameters(self.schema)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def other_build(self) -> str | None:
        """The other backend a registration is built for, whose schema an NPU build does
        not register: the Python branch it is made in, the preprocessor condition it is
        compiled under (``#ifdef USE_ROCM``), its namespace (``_rocm_C``), its file
        (``csrc/cpu/…``, ``…_rocm.cpp``)."""
        if self.branch is not None:
            return self.branch
        for cond in self.condition:  # only a condition that must hold names a build
            named = None if cond.startswith("!") else _backend_of(cond)
            if named is not None:
                return named or None
        named = _backend_of(self.namespace or "")
        if named is not None:
            return named or None
        return _other_build(self.file)


def _backend_of(text: str) -> str | None:
    """The other backend a name names (``USE_ROCM``, ``_rocm_C``); ``""`` when it names
    the NPU, None when neither."""
    from kb.scan.hints import tokens
    from kb.vocab import NPU_BACKEND_WORDS, OTHER_BACKEND_WORDS

    words = set(tokens(text))
    if words & NPU_BACKEND_WORDS:
        return ""
    other = words & OTHER_BACKEND_WORDS
    return sorted(other)[0] if other else None


@lru_cache(maxsize=4096)
def _other_build(file: str) -> str | None:
    """The backend the file's own name and its two folders name, when not the NPU: the
    folders above those (the checkout, ``sgl-kernel-npu/``) say nothing about the build."""
    from kb.scan.hints import tokens
    from kb.vocab import NPU_BACKEND_WORDS, OTHER_BACKEND_WORDS

    words = {t for part in file.replace("\\", "/").split("/")[-3:] for t in tokens(part)}
    if words & NPU_BACKEND_WORDS:
        return None  # csrc/npu/cpu_fallback.cpp is the NPU build's
    other = words & OTHER_BACKEND_WORDS
    if other:
        return sorted(other)[0]
    return _COMPILER_SUFFIXES.get(file.rsplit(".", 1)[-1].lower())


#: Source suffixes only another backend's compiler builds: a registration in a CUDA or HIP
#: source (``common_extension.cu``) is that build's.
_COMPILER_SUFFIXES = {"cu": "cuda", "cuh": "cuda", "hip": "hip"}


@lru_cache(maxsize=1024)
def _parsed(schema: str) -> tuple[tuple[str, str, str | None, bool, bool], ...] | None:
    from kb.catalog.signature import SchemaError, parse_schema

    try:
        args = parse_schema(schema).args
    except SchemaError:
        return None
    return tuple((a.name, a.type, a.default, a.required, a.keyword_only) for a in args)


def schema_parameters(schema: str) -> list[dict[str, Any]] | None:
    """A schema's parameters in the records' terms (None: the text is not a schema)."""
    parsed = _parsed(schema)
    if parsed is None:
        return None
    return [
        {"name": n, "type": t, "default": d, "required": r, "keyword_only": k}
        for n, t, d, r, k in parsed
    ]


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    if text.startswith(("//", "/*")):
        return re.sub(r"[^\n]", " ", text)
    return text


def _args(text: str, start: int, limit: int = 400) -> tuple[list[str], int] | None:
    """The comma-separated arguments of a call whose ``(`` is just before ``start``."""
    depth, buf, out = 1, list[str](), list[str]()
    end = min(len(text), start + limit)
    for i in range(start, end):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                out.append("".join(buf).strip())
                return out, i + 1
        if ch == "," and depth == 1:
            out.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
    return None


def _unescape(text: str) -> str:
    text = text.replace("\\\n", "")  # a backslash-newline continues the literal
    return text.replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def _literal_at(text: str, pos: int, unclosed: set[str]) -> str | None:
    """Adjacent string literals from ``pos`` joined (C++ concatenates them), else None.

    A raw literal's end is found with one search; a delimiter never closed is remembered
    in ``unclosed`` so a file full of them is not searched again and again.
    """
    wrapped = _WRAPPER.match(text, pos)  # TORCH_SELECTIVE_SCHEMA("...") and kin
    if wrapped:
        pos = wrapped.end()
    parts: list[str] = []
    while True:
        raw = _RAW.match(text, pos)
        if raw is not None:
            close = f'){raw.group(1)}"'
            end = -1 if close in unclosed else text.find(close, raw.end())
            if end < 0:
                unclosed.add(close)
                break
            parts.append(text[raw.end() : end])
            pos = end + len(close)
            continue
        plain = _PLAIN.match(text, pos)
        if plain is None:
            break
        parts.append(_unescape(plain.group(1)))
        pos = plain.end()
    return "".join(parts) if parts else None


#: The namespace of a kernel a tree builds itself (``OP_ADD(Name)`` in ``op_host``):
#: torch_npu reaches it as ``torch_npu.npu_<snake name>`` / ``torch.ops.npu.npu_<snake name>``.
KERNEL_NAMESPACE = "<op_host>"
_OP_ADD = re.compile(r"\bOP_ADD\s*\(\s*([A-Za-z_]\w*)\s*[,)]")  # OP_ADD(Name[, ...])


def kernel_key(name: str) -> str:
    """The spelling-free key of a kernel or operator name: ``RecomputeWUFwd``,
    ``npu_recompute_w_u_fwd`` and ``recompute_wu_fwd`` are one (the snake spelling of a
    run of capitals varies: ``FFN`` → ``ffn``, ``WU`` → ``w_u``)."""
    key = name.replace("_", "").lower()
    return key[3:] if key.startswith("npu") else key


def kernel_registrations(text: str, file: str) -> list[Registration]:
    """Kernels a tree builds with CANN's ``OP_ADD(Name)`` (``op_host/*_def.cpp``)."""
    if "OP_ADD" not in text:
        return []
    out = []
    for m in _OP_ADD.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start : m.start()].lstrip().startswith(("#", "//")):
            continue
        out.append(
            Registration(
                KERNEL_NAMESPACE, m.group(1), None, file, text.count("\n", 0, m.start()) + 1
            )
        )
    return out


def native_registrations(text: str, file: str) -> list[Registration]:
    """The ``def``s of the ``TORCH_LIBRARY``/``TORCH_LIBRARY_FRAGMENT`` blocks of C++ text,
    and the ``impl``s of ``TORCH_LIBRARY_IMPL`` blocks (kernels for an operator defined
    elsewhere: its name, no schema).  A macro with another number of arguments, or inside
    a ``#define``, is not a block.  Kernels built with ``OP_ADD`` come too
    (:func:`kernel_registrations`).
    """
    kernels = kernel_registrations(text, file)
    if "TORCH_LIBRARY" not in text:
        return kernels
    code = _LEXEME.sub(_blank, text)
    blocks: list[tuple[int, str | None, str, str]] = []  # (body start, namespace, var, method)
    for m in _MACRO.finditer(code):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if code[line_start : m.start()].lstrip().startswith("#"):
            continue
        parsed = _args(code, m.end())
        impl = "IMPL" in m.group(1)
        if parsed is None or len(parsed[0]) != (3 if impl else 2):
            continue
        args, end = parsed
        ns_text, var = args[0], args[-1]
        if not _IDENT.fullmatch(var):
            continue
        ns = ns_text if _IDENT.fullmatch(ns_text) else None
        blocks.append((end, ns, var, "impl" if impl else "def"))
    out: list[Registration] = []
    unclosed: set[str] = set()
    conditions = _Conditions(code)
    line, counted = 1, 0
    starts = [m.start() for m in _MACRO.finditer(code)] + [len(code)]
    for body, ns, var, method in blocks:
        stop = next((s for s in starts if s > body), len(code))
        for d in re.finditer(rf"\b{re.escape(var)}\s*\.\s*{method}\s*\(", code[body:stop]):
            at = body + d.end()
            literal = _literal_at(text, at, unclosed)  # the original text: literals were kept
            if not literal:
                continue
            head = literal.split("(", 1)[0].strip()
            name = head.split(".", 1)[0].split("::")[-1]
            if not _IDENT.fullmatch(name):
                continue
            schema = " ".join(literal.split()) if "(" in literal and "->" in literal else None
            line += code.count("\n", counted, at)  # counted once: positions only grow
            counted = at
            out.append(
                Registration(
                    ns,
                    name,
                    schema,
                    file,
                    line,
                    defines=method == "def",
                    condition=conditions.at(line),
                )
            )
    return out + kernels


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[ \t]*(.*)$", re.M)
_DEFINED = re.compile(r"^!?\s*defined\s*\(?\s*(\w+)\s*\)?$")


def _negate(cond: str) -> str:
    return cond[1:] if cond.startswith("!") else f"!{cond}"


def _plain(expr: str) -> str:
    """``defined(X)`` / ``!defined(X)`` as ``X`` / ``!X``; any other expression as written."""
    expr = " ".join(expr.split())
    m = _DEFINED.match(expr)
    if m:
        return ("!" if expr.startswith("!") else "") + m.group(1)
    return expr


class _Conditions:
    """The preprocessor conditions in force at each line of C++ text (comments blanked)."""

    def __init__(self, code: str) -> None:
        self.changes: list[tuple[int, tuple[str, ...]]] = [(1, ())]
        stack: list[list[str]] = []  # per open #if: the conditions of its arms so far
        for m in _DIRECTIVE.finditer(code):
            kind, arg = m.group(1), m.group(2).strip()
            if kind in ("if", "ifdef", "ifndef"):
                first = arg if kind == "ifdef" else f"!{arg}" if kind == "ifndef" else _plain(arg)
                stack.append([first])
            elif not stack:
                continue
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
            self.changes.append((code.count("\n", 0, m.start()) + 2, tuple(now)))

    def at(self, line: int) -> tuple[str, ...]:
        current: tuple[str, ...] = ()
        for start, conds in self.changes:
            if start > line:
                break
            current = conds
        return current


def qualified(text: str | None) -> tuple[str, str] | None:
    """``("ns", "name")`` from ``"ns::name"`` or ``"ns::name(schema)"``."""
    if not text:
        return None
    m = _QUALNAME.match(text)
    return (m.group(1), m.group(2)) if m else None


def function_params(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[tuple[str, str, bool, bool], ...]:
    """A decorated Python definition's parameters, as ``custom_op`` infers the schema.

    The type is ``Tensor`` when the annotation names one (a list annotation is ``Tensor[]``)
    and empty otherwise; a parameter with a default is optional.
    """
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(
        args.defaults
    )
    out: list[tuple[str, str, bool, bool]] = []
    for arg, default in zip(positional, defaults, strict=True):
        out.append((arg.arg, _annotation_type(arg.annotation), default is None, False))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((arg.arg, _annotation_type(arg.annotation), kw_default is None, True))
    return tuple(out)


def _annotation_type(node: ast.expr | None) -> str:
    if node is None:
        return ""
    text = ast.dump(node)
    if "Tensor" not in text:
        return ""
    if "List" in text or "list" in text or "Sequence" in text:
        return "Tensor[]"
    return "Tensor?" if "Optional" in text or "None" in text else "Tensor"
