"""Attributes a model installs after construction: ``self.cache = None`` in ``__init__``
and, elsewhere, ``layer.cache = Store(...)`` (a ``setup_caches`` method, a loop over the
blocks of the model), or an annotation that names the class the slot will hold
(``self.cache: Store | None = None``).  Inference runs with the installed object, so the
reader reads the slot as that class rather than as the ``None`` the constructor leaves."""

from __future__ import annotations

import ast

from kb.scan.model.graph import simple_name
from kb.scan.model.resolve import Parsed

_NOT_CLASSES = frozenset({"Optional", "Union", "None", "Any", "typing"})


def _names(annotation: ast.expr) -> list[str]:
    """Class names an annotation mentions (``Store | None``, ``Optional[Store]``, ``"Store"``)."""
    out: list[str] = []
    for n in ast.walk(annotation):
        if isinstance(n, ast.Name) and n.id not in _NOT_CLASSES:
            out.append(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.append(n.value)
    return out


def _index(tree: ast.Module) -> dict[str, list[str]]:
    """attribute name -> class names that may be installed into it, over one file."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute):
            out.setdefault(node.target.attr, []).extend(_names(node.annotation))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = simple_name(node.value.func)
            for target in node.targets:
                if isinstance(target, ast.Attribute) and called:
                    out.setdefault(target.attr, []).append(called)
    return out


def installed_classes(parsed: Parsed, name: str) -> list[str]:
    """Names of what may be installed into attribute ``name`` in this file, in order of
    appearance (resolve each: only a class of the scanned code counts)."""
    index = parsed.memo.get("installed")
    if not isinstance(index, dict):
        index = _index(parsed.tree)
        parsed.memo["installed"] = index
    return list(dict.fromkeys(index.get(name, [])))
