"""Read the schema file and the operator docstrings of a torch_npu build.

Three shapes are accepted for ``--wheel``: the ``.whl`` file itself (a zip), an
installed ``torch_npu`` package directory (or the site-packages above it), or a folder
holding ``npu_native_functions_by_codegen.yaml`` and ``op_docstrings.json`` side by
side.  ``_op_plugin_docs.py`` is read with :mod:`ast`, never imported or executed.
"""

from __future__ import annotations

import ast
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CODEGEN_MEMBER = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
DOCS_MEMBER = "torch_npu/_op_plugin_docs.py"
DOCSTRINGS_JSON = "op_docstrings.json"
_DOC_FUNCTION = "_add_torch_npu_docstr"


class WheelError(Exception):
    """The --wheel path holds none of the files we read."""


@dataclass
class WheelContents:
    codegen_yaml: str | None = None
    docstrings: dict[str, str] = field(default_factory=dict)
    origin: str = ""


def docstrings_from_python(source: str) -> dict[str, str]:
    """``{op: docstring}`` from the calls ``_add_torch_npu_docstr("op", \"\"\"…\"\"\")``."""
    tree = ast.parse(source)
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        func = node.func
        fname = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if fname != _DOC_FUNCTION:
            continue
        name, doc = node.args[0], node.args[1]
        if (
            isinstance(name, ast.Constant)
            and isinstance(doc, ast.Constant)
            and isinstance(name.value, str)
            and isinstance(doc.value, str)
        ):
            out[name.value] = doc.value
    return out


def _from_zip(path: Path) -> WheelContents:
    contents = WheelContents(origin=str(path))
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        for member in names:
            if member.endswith(CODEGEN_MEMBER) or member == CODEGEN_MEMBER:
                contents.codegen_yaml = zf.read(member).decode("utf-8-sig")
            elif member.endswith(DOCS_MEMBER) or member == DOCS_MEMBER:
                contents.docstrings = docstrings_from_python(zf.read(member).decode("utf-8-sig"))
    return contents


def _from_dir(path: Path) -> WheelContents:
    contents = WheelContents(origin=str(path))
    candidates = [path, path / "torch_npu", path.parent]
    for base in candidates:
        flat = base / "npu_native_functions_by_codegen.yaml"
        nested = base / "csrc/aten/npu_native_functions_by_codegen.yaml"
        site = base / CODEGEN_MEMBER
        for p in (flat, nested, site):
            if contents.codegen_yaml is None and p.is_file():
                contents.codegen_yaml = p.read_text(encoding="utf-8-sig")
        for p in (base / DOCSTRINGS_JSON,):
            if not contents.docstrings and p.is_file():
                data = json.loads(p.read_text(encoding="utf-8-sig"))
                contents.docstrings = {str(k): str(v) for k, v in data.items()}
        for p in (base / "_op_plugin_docs.py", base / DOCS_MEMBER):
            if not contents.docstrings and p.is_file():
                contents.docstrings = docstrings_from_python(p.read_text(encoding="utf-8-sig"))
        if contents.codegen_yaml is not None:
            break
    return contents


def read_wheel(path: Path) -> WheelContents:
    if path.is_file() and zipfile.is_zipfile(path):
        contents = _from_zip(path)
    elif path.is_dir():
        contents = _from_dir(path)
    else:
        raise WheelError(f"{path}: not a .whl file or a directory")
    if contents.codegen_yaml is None and not contents.docstrings:
        raise WheelError(
            f"{path}: found neither npu_native_functions_by_codegen.yaml nor operator docstrings"
        )
    return contents
