"""Harvest an extension record: the operators a public kernel package registers.

A maintainer step (never run by CI).  The package's source tree is read with the
scanner's own readers, nothing is built or imported: C++ ``TORCH_LIBRARY`` /
``TORCH_LIBRARY_FRAGMENT`` blocks (:func:`kb.scan.registrations.native_registrations`)
and Python definitions (``torch.library.define``, ``Library(...).define``, ``custom_op``
decorators, read by the scan interpreter).  Each operator keeps its namespace, its schema
exactly as registered, and the file and line of the registration.  The facts are the
package's; the record's summary is the maintainer's own words, given as arguments.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kb.scan.registrations import (
    KERNEL_NAMESPACE,
    NATIVE_SUFFIXES,
    Registration,
    native_registrations,
)

#: Directories a harvest skips unless asked: tests register throw-away operators.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        "tests",
        "test",
        "third_party",
        "3rdparty",
        "build",
        "dist",
        "__pycache__",
        "node_modules",
    }
)


def source_files(root: Path, only: Sequence[str] = ()) -> Iterable[Path]:
    """The C/C++ and Python files under ``root`` (or under the ``only`` sub-paths), sorted."""
    starts = [root / o for o in only] or [root]
    for start in starts:
        if start.is_file():
            yield start
            continue
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            for name in sorted(filenames):
                if name.endswith((".py", *NATIVE_SUFFIXES)):
                    yield Path(dirpath) / name


def registrations(root: Path, only: Sequence[str] = ()) -> list[Registration]:
    """Every registration in the tree, paths relative to ``root``."""
    from kb.scan.engine import parse_file

    out: list[Registration] = []
    for path in source_files(root, only):
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".py":
            scan, _problem, _tree, _text = parse_file(path)
            if scan is not None:
                out += sorted(
                    (
                        Registration(
                            r.namespace,
                            r.name,
                            r.schema,
                            rel,
                            r.line,
                            params=r.params,
                            defines=r.defines,
                        )
                        for r in scan.registrations
                    ),
                    key=lambda r: (r.line, r.name),
                )
            continue
        raw = path.read_bytes()
        if b"TORCH_LIBRARY" in raw:
            out += native_registrations(raw.decode("utf-8", "replace"), rel)
    return out


def record(
    regs: Iterable[Registration],
    *,
    name: str,
    repo: str,
    commit: str,
    licence: str,
    imports: list[str],
    summary_en: str,
    summary_zh: str,
    namespaces: Sequence[str] = (),
    macro_namespace: str | None = None,
    products: Sequence[str] = (),
    root: Path | None = None,
) -> dict[str, Any]:
    """The record's data: one operator per distinct (namespace, name, schema).

    ``macro_namespace`` names the namespace of blocks written through a macro (the reader
    does not expand macros: the maintainer reads it off the package's Python side);
    ``namespaces`` keeps only those.  With the tree's ``root``, an operator compiled under
    preprocessor conditions gets ``condition``; where its CMake files decide it per chip,
    ``not_built`` (the products whose build leaves it out), and where it hangs on a build
    option that is OFF by default, ``off_by_default`` (:mod:`tools.upstream.buildconds`).
    """
    from tools.upstream.buildconds import cmake_texts, not_built, off_by_default

    texts = cmake_texts(root) if root is not None else []
    ops: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str | None]] = set()
    regs = list(regs)
    with_schema = {(r.namespace, r.name) for r in regs if r.schema is not None}
    for reg in regs:
        if reg.namespace == KERNEL_NAMESPACE:
            continue  # an OP_ADD kernel: reached through torch_npu, not registered with torch
        if reg.schema is None and (reg.namespace, reg.name) in with_schema:
            continue  # a kernel (impl) of an operator whose definition is listed
        ns = reg.namespace if reg.namespace is not None else macro_namespace
        if ns is None or (namespaces and ns not in namespaces):
            continue
        schema = reg.schema  # a decorated Python function writes none down: name only
        key = (ns, reg.name, schema)
        if key in seen:
            continue
        seen.add(key)
        op: dict[str, Any] = {"name": reg.name, "namespace": ns}
        if schema is not None:
            op["schema"] = schema
        op.update({"path": reg.file, "lines": str(reg.line)})
        left_out = not_built(texts, reg.condition) if reg.condition and texts else None
        if left_out:
            op["not_built"] = left_out
        if reg.condition and texts:
            op["condition"] = " && ".join(reg.condition)
            if off_by_default(texts, reg.condition):
                op["off_by_default"] = True
        ops.append(op)
    found = sorted({op["namespace"] for op in ops})
    body: dict[str, Any] = {
        "kind": "extension",
        "name": name,
        "summary": {"en": summary_en, "zh": summary_zh},
        "imports": list(imports),
        "namespaces": found,
        "repo": repo,
        "commit": commit,
        "licence": licence,
    }
    if products:
        body["products"] = list(products)
    body["operators"] = ops
    return body


def dump(body: dict[str, Any]) -> str:
    """The record as YAML, validated by the record model first (a bad harvest fails here)."""
    import yaml

    from kb.catalog.models import Extension

    Extension.model_validate(body)
    head = (
        f"# Harvested by scripts/harvest_extensions.py from {body['repo']}@{body['commit']}.\n"
        "# Facts (names, namespaces, schemas, places) are the package's; the summary is ours.\n"
    )
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)
