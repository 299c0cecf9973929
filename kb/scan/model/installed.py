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


def _from_outside(target: ast.expr) -> bool:
    """``layer.cache = ...`` (not the class's own ``self.cache = ...``)."""
    return isinstance(target, ast.Attribute) and not (
        isinstance(target.value, ast.Name) and target.value.id == "self"
    )


def _index(
    tree: ast.Module,
) -> tuple[dict[str, list[str]], set[str], dict[tuple[str, str], list[str]]]:
    """Over one file: (attribute -> classes built into it from outside its class, attributes
    assigned from outside at all, (class, attribute) -> classes its annotation names)."""
    built: dict[str, list[str]] = {}
    outside: set[str] = set()
    annotated: dict[tuple[str, str], list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            called = simple_name(node.value.func) if isinstance(node.value, ast.Call) else ""
            for target in node.targets:
                if _from_outside(target):
                    assert isinstance(target, ast.Attribute)
                    outside.add(target.attr)
                    if called:
                        built.setdefault(target.attr, []).append(called)
        elif isinstance(node, ast.ClassDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Attribute):
                    key = (node.name, inner.target.attr)
                    annotated.setdefault(key, []).extend(_names(inner.annotation))
    return built, outside, annotated


def installed_classes(parsed: Parsed, owner: str, name: str) -> list[str]:
    """Names of what may be installed into attribute ``name`` of class ``owner`` in this
    file, in order (resolve each: only a module class of the scanned code counts).  Only
    code outside the class installs: the class's own assignments are read as they run."""
    index = parsed.memo.get("installed")
    if not isinstance(index, tuple):
        index = _index(parsed.tree)
        parsed.memo["installed"] = index
    built, outside, annotated = index
    found = list(built.get(name, []))
    if name in outside:
        found += annotated.get((owner, name), [])
    return list(dict.fromkeys(found))
