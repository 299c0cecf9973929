"""One file's inventory and plan, as the scan engine asks for them."""

from __future__ import annotations

import ast
from typing import Any

from kb.lint.context import Context
from kb.scan.model.entry import Module
from kb.scan.model.inventory import inventory
from kb.scan.model.plan import Target, plan
from kb.vocab.parallel import DEFAULT_PARALLEL


def read_and_plan(
    tree: ast.Module, path: str, ctx: Context, settings: Any
) -> tuple[list[Module], list[dict[str, Any]]]:
    """The modules of ``tree`` and their plan for the file's target settings (none for a
    file nested deeper than the reader's recursion allows: the scan's other findings stand)."""
    try:
        modules = inventory(tree, path)
    except RecursionError:
        return [], []
    target = Target(
        getattr(settings, "product", None),
        getattr(settings, "torch_npu", None),
        getattr(settings, "quantization", None),
        getattr(settings, "parallel", None) or DEFAULT_PARALLEL,
    )
    return modules, plan(ctx, modules, target)
