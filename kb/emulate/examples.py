"""Record examples run under the emulator, at the small size their record gives.

An example is written at the sizes of a real model (hidden 7168, 4096-token prompts);
its ``small`` map says what to run it with on a CPU: a variable name maps to the value
its first assignment gets instead, an integer literal to the integer that replaces it
everywhere.  An example written for several processes (an MC2 expert-parallel group) runs
as rank 0 of a group of one, the group the references model: its ``small`` map gives the
rank, the world size and the group's name as literals in place of the calls that ask a
process group for them.  The code runs with ``torch`` and the emulated ``torch_npu`` in scope (an
example may be a continuation that does not import them).
"""

from __future__ import annotations

import ast
from typing import Any

Record = dict[str, Any]


class SmallError(ValueError):
    """A ``small`` entry that matches nothing in its example (a stale size hint)."""


def _literal(value: Any) -> ast.expr:
    return ast.parse(repr(value), mode="eval").body


def shrink(code: str, small: dict[str, Any]) -> ast.Module:
    """``code`` parsed, with ``small`` applied (SmallError for a key that matches nothing)."""
    tree = ast.parse(code)
    if not small:
        return tree
    numbers = {int(k): v for k, v in small.items() if k.lstrip("-").isdigit()}
    names = {k: v for k, v in small.items() if not k.lstrip("-").isdigit()}
    hit: set[str] = set()

    class Literals(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.expr:
            v = node.value
            if isinstance(v, int) and not isinstance(v, bool) and v in numbers:
                hit.add(str(v))
                return ast.copy_location(_literal(numbers[v]), node)
            return node

    tree = Literals().visit(tree)
    for stmt in ast.walk(tree):
        if not isinstance(stmt, ast.Assign) or not names:
            continue
        for target in stmt.targets:
            _assign(stmt, target, names, hit)
    missing = sorted(set(small) - hit)
    if missing:
        raise SmallError(f"small names {missing}, which the example never assigns or writes")
    return ast.fix_missing_locations(tree)


def _assign(stmt: ast.Assign, target: ast.expr, names: dict[str, Any], hit: set[str]) -> None:
    if isinstance(target, ast.Name) and target.id in names and target.id not in hit:
        stmt.value = _literal(names[target.id])
        hit.add(target.id)
    elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
        for i, elt in enumerate(target.elts):
            if isinstance(elt, ast.Name) and elt.id in names and elt.id not in hit:
                stmt.value.elts[i] = _literal(names[elt.id])
                hit.add(elt.id)


def run(rec: Record, index: int, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run example ``index`` of ``rec`` under the active emulation; its namespace after."""
    import sys

    import torch

    example = rec["examples"][index]
    tree = shrink(example["code"], example.get("small") or {})
    scope: dict[str, Any] = {
        "torch": torch,
        "torch_npu": sys.modules["torch_npu"],
        "__name__": f"example_{index}",
    }
    scope.update(namespace or {})
    exec(compile(tree, f"<example {rec['name']}[{index}]>", "exec"), scope)
    return scope


__all__ = ["SmallError", "run", "shrink"]
