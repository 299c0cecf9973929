"""One file's inventory and plan, as the scan engine asks for them."""

from __future__ import annotations

import ast
from typing import Any

from kb.lint.context import Context
from kb.scan.model.entry import Module
from kb.scan.model.files import Refusal
from kb.scan.model.inventory import inventory
from kb.scan.model.modelconfig import cached
from kb.scan.model.plan import Target, plan
from kb.vocab.parallel import DEFAULT_PARALLEL


def read_and_plan(
    tree: ast.Module, path: str, ctx: Context, settings: Any
) -> tuple[list[Module], list[dict[str, Any]], list[Refusal]]:
    """The modules of ``tree``, their plan for the file's target settings, and the files
    the reader meant to follow but did not read (none for a file nested deeper than the
    reader's recursion allows: the scan's other findings stand)."""
    unread: list[Refusal] = []
    named = getattr(settings, "model_config", None)
    config = cached(named) if named else None  # checked when the scan began
    try:
        modules = inventory(tree, path, unread=unread, config=config)
    except RecursionError:
        return [], [], [Refusal(path, "nesting too deep for the model reader")]
    target = Target(
        getattr(settings, "product", None),
        getattr(settings, "torch_npu", None),
        getattr(settings, "quantization", None),
        getattr(settings, "parallel", None) or DEFAULT_PARALLEL,
    )
    return modules, plan(ctx, modules, target), unread
