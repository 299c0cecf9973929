"""Operators a tree registers itself: C++ ``TORCH_LIBRARY`` blocks and Python definitions.

An engine that ships its own kernels registers them with the dispatcher: C++
``TORCH_LIBRARY(ns, m) { m.def("name(schema)"); }`` (or ``TORCH_LIBRARY_FRAGMENT``),
Python ``torch.library.define("ns::name", "(...) -> ...")``, ``Library("ns", "DEF").define``
or a ``custom_op("ns::name")`` decorator.  Calls of those operators are the tree's own
API: they are checked against the schema registered here (when there is one), never
against a torch_npu record of the same name.

C++ is tokenized in one forward pass (:mod:`kb.scan.native_reader`), not parsed: a
namespace written through a macro (``CONCAT(_C, _ascend)``) is kept as unknown (``None``),
and a ``def`` with only a name (``m.def("x", &fn)``) has no schema.
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


#: The namespace of a kernel a tree builds itself (``OP_ADD(Name)`` in ``op_host``):
#: torch_npu reaches it as ``torch_npu.npu_<snake name>`` / ``torch.ops.npu.npu_<snake name>``.
KERNEL_NAMESPACE = "<op_host>"


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
    return [r for r in native_registrations(text, file) if r.namespace == KERNEL_NAMESPACE]


def native_registrations(text: str, file: str) -> list[Registration]:
    """The ``def``s of the ``TORCH_LIBRARY``/``TORCH_LIBRARY_FRAGMENT`` blocks of C++ text,
    and the ``impl``s of ``TORCH_LIBRARY_IMPL`` blocks (kernels for an operator defined
    elsewhere: its name, no schema).  A macro with another number of arguments, or inside
    a ``#define``, is not a block; a call inside a comment or a literal is not a
    registration.  Kernels built with ``OP_ADD`` come too, after the blocks' operators.
    The text is read in one forward pass (:class:`kb.scan.native_reader.NativeReader`).
    """
    if "TORCH_LIBRARY" not in text and "OP_ADD" not in text:
        return []
    from kb.scan.native_reader import NativeReader

    out: list[Registration] = []
    kernels: list[Registration] = []
    for found in NativeReader(text).read():
        if found.method == "kernel":
            if found.literal:
                kernels.append(
                    Registration(KERNEL_NAMESPACE, found.literal, None, file, found.line)
                )
            continue
        literal = found.literal
        if not literal:
            continue
        head = literal.split("(", 1)[0].strip()
        name = head.split(".", 1)[0].split("::")[-1]
        if not _IDENT.fullmatch(name):
            continue
        schema = " ".join(literal.split()) if "(" in literal and "->" in literal else None
        out.append(
            Registration(
                found.namespace,
                name,
                schema,
                file,
                found.line,
                defines=found.method == "def",
                condition=found.condition,
            )
        )
    return out + kernels


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
