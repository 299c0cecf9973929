"""Reading ``ast`` nodes the way the scanner needs them, without unparsing anything.

Source text is sliced from the file's lines (cheaper than ``ast.unparse`` and what the
findings quote); the walks stop at nested function and class bodies, which the
interpreter visits on their own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from kb.scan.values import UNKNOWN, Typed


def segment(lines: list[str], node: ast.AST) -> str:
    """Source text of ``node`` from the file's lines, whitespace folded to single spaces."""
    try:
        first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined,operator]
        start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    except AttributeError:
        return "?"
    if first < 0 or last >= len(lines) or last < first:
        return "?"
    if first == last:
        raw = lines[first].encode("utf-8")[start:end]
    else:
        parts = [lines[first].encode("utf-8")[start:]]
        parts += [lines[i].encode("utf-8") for i in range(first + 1, last)]
        parts.append(lines[last].encode("utf-8")[:end])
        raw = b" ".join(parts)
    return " ".join(raw.decode("utf-8", "replace").split())


def const_str(node: ast.AST | None) -> str | None:
    """The value of a string literal, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def target_names(target: ast.AST) -> Iterator[str]:
    """Every name an assignment target (``a, (b, c)``) binds."""
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


#: Fields that never hold a call, a statement or an operation: load/store contexts,
#: operators, names, constants and flags (an ``op`` is read off its BinOp directly).
_LEAF_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "ops",
        "name",
        "id",
        "attr",
        "arg",
        "asname",
        "module",
        "level",
        "is_async",
        "conversion",
        "type_comment",
        "kind",
        "rest",
        "tag",
        "names",
        "kwd_attrs",
        "simple",
        "lineno",
    }
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: ast.AST) -> list[ast.AST]:
    """The child nodes that may hold calls, statements or operations, in
    :func:`ast.iter_child_nodes` order: that function less contexts, operators and names
    (a third of a tree's nodes), from a field list made once per node type."""
    kind = type(node)
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        leaf = _LEAF_FIELDS | ({"value"} if kind in (ast.Constant, ast.MatchSingleton) else set())
        fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in leaf)
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend([v for v in value if isinstance(v, ast.AST)])
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def expr_calls(root: ast.AST) -> list[ast.Call]:
    """The calls in an expression or simple statement, depth first, not descending into
    nested bodies (function and class definitions are statements too; an expression's
    children never are).  One list, no generator: this runs for every statement."""
    out: list[ast.Call] = []
    stack = [root]
    stmt, expr, call = ast.stmt, ast.expr, ast.Call
    while stack:
        node = stack.pop()
        if isinstance(node, call):
            out.append(node)
        if isinstance(node, expr):
            stack.extend(children(node))
        else:
            stack.extend([c for c in children(node) if not isinstance(c, stmt)])
    return out


def child_exprs(stmt: ast.stmt) -> Iterator[ast.expr]:
    """The expressions directly under a statement (for statements the walker does not model)."""
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.expr):
            yield child


def annotated(annotation: ast.expr | None, lines: list[str]) -> Any:
    """What a parameter annotation says: a plain tensor, a list of tensors, or nothing."""
    if annotation is None:
        return UNKNOWN
    text = segment(lines, annotation).replace(" ", "")
    if text in ("torch.Tensor", "Tensor"):
        return Typed("Tensor")
    if text.lower().startswith(("list[torch.tensor]", "list[tensor]", "typing.list[torch.tensor]")):
        return Typed("TensorList")
    return UNKNOWN


#: Fields holding statement lists (or handlers and match cases, which hold them).
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def binds_self(fn: ast.AST) -> bool:
    """Does a method assign ``self.<attr>`` anywhere, nested bodies included (the first
    pass needs only those)?  Assignments are statements, so only statement lists are
    walked, not the expressions that make up most of a tree."""
    stack: list[ast.AST] = [fn]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                ):
                    return True
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack.extend(block)
    return False
