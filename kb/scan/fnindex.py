"""One function body indexed once for the fusion detectors (:mod:`kb.scan.patterns`).

Every detector asks the same questions of a body -- its calls by callee name, its binary
operations, its statement lists, its cache stores -- so the body is walked once and the
answers kept, instead of once per detector.
"""

from __future__ import annotations

import ast
from typing import cast

from kb.scan.syntax import children


def dotted(node: ast.AST, *, subscripts: bool = False) -> str:
    """Dotted name of a callee or target: ``torch.nn.functional.silu``, ``self.q_proj``;
    ``x()`` marks a call on the way, and with ``subscripts`` ``x[]`` an index."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(dotted(node.func, subscripts=subscripts) + "()")
    elif subscripts and isinstance(node, ast.Subscript):
        parts.append(dotted(node.value, subscripts=True) + "[]")
    return ".".join(reversed(parts))


class FnIndex:
    """One function body read once (nested functions and classes excluded, they are
    indexed on their own): its calls, also by the last part of their callee name, its
    binary operations, cache stores and statement lists.  Every detector works from this
    instead of walking the tree again."""

    def __init__(self, fn: ast.AST) -> None:
        self.node = fn
        self.bodies: list[list[ast.stmt]] = []
        self.calls: list[ast.Call] = []
        self.named: list[tuple[str, ast.Call]] = []  # (lower-cased callee name, call)
        self.by_last: dict[str, list[ast.Call]] = {}
        self.binops: list[ast.BinOp] = []
        self.cache_stores: list[ast.AST] = []  # see cache_store
        stack: list[ast.AST] = children(fn)
        while stack:
            node = stack.pop()
            kind = type(node)  # the parser makes no subclasses: exact types dispatch
            if kind in _NESTED:
                continue
            if kind is ast.Call:
                call = cast(ast.Call, node)
                callee = dotted(call.func).lower()
                last = callee.rsplit(".", 1)[-1]
                self.calls.append(call)
                self.named.append((callee, call))
                self.by_last.setdefault(last, []).append(call)
                if last in _CACHE_WRITES and "cache" in callee:
                    self.cache_stores.append(call)
            elif kind is ast.BinOp:
                self.binops.append(cast(ast.BinOp, node))
            elif kind is ast.Assign and cache_store(node):
                self.cache_stores.append(node)
            blocks = _BODY_FIELDS.get(kind)
            if blocks is None:
                blocks = _BODY_FIELDS[kind] = tuple(
                    f for f in ("body", "orelse", "finalbody") if f in kind._fields
                )
            for attr in blocks:
                body = getattr(node, attr, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    self.bodies.append(body)
            stack.extend(children(node))
        body = getattr(fn, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            self.bodies.append(body)
        self.calls.sort(key=lambda c: (c.lineno, c.col_offset))


#: Per node type, which of its fields may hold a statement list (most hold none).
_BODY_FIELDS: dict[type, tuple[str, ...]] = {}
_NESTED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
#: Calls that write into a tensor in place (a cache when the callee names one).
_CACHE_WRITES = ("index_copy_", "index_put_", "scatter_", "index_copy", "index_put")


def last_part(name: str) -> str:
    """The last part of a dotted name, lower-cased: what detectors match callees on."""
    return name.rsplit(".", 1)[-1].lower()


def cache_store(node: ast.AST) -> bool:
    """``cache[idx] = x`` or ``cache.index_copy_(...)`` on a cache (not ``states[layer_idx] = x``)."""
    if isinstance(node, ast.Assign):
        return any(
            isinstance(t, ast.Subscript)
            and "cache" in dotted(t.value).lower()
            and "layer" not in dotted(t.slice).lower()
            for t in node.targets
        )
    if isinstance(node, ast.Call):
        return (
            last_part(dotted(node.func)) in _CACHE_WRITES and "cache" in dotted(node.func).lower()
        )
    return False
