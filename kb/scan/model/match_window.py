"""A sliding window over the keys of an attention whose mask is built elsewhere.

Models written for a library (transformers) do not apply the window where they compute
attention: each layer keeps its window in an attribute (``self.sliding_window``, None on the
layers that attend to every earlier key) and the model builds the windowed mask once, with
the library's mask builder, and hands it to the layers.  The attention code then only adds
a mask it was given, so the reader cannot see the window there.

Two facts make the window usable by a port: which attribute holds the size per layer, and
whether a window of W keys counts the current one (each query sees itself and the W - 1
keys before it) or not (itself and W before it).  The second is read from the mask builder
the file calls, never assumed: :data:`MASK_BUILDERS` lists the builders whose rule is known
with the source line that states it.  A file that keeps a window but builds its mask with
something else gets the window fact with its rule unknown, and the port leaves the
attention as it is.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from kb.scan.model.graph import Alt, Const, Inst, Node
from kb.scan.model.match_dense import Fact

#: the attributes that hold a layer's window size (None where the layer has no window)
WINDOW_ATTRS = ("sliding_window",)

#: library mask builders called by name -> (the window counts the current key, the source
#: that says so).  transformers 5.24.0 masking_utils.py:90-99 (sliding_window_overlay keeps
#: ``kv_idx > q_idx - sliding_window``) and :132-136 (the causal sliding-window mask is that
#: overlay and the causal mask); create_sliding_window_causal_mask builds its mask from
#: sliding_window_causal_mask_function (masking_utils.py, create_sliding_window_causal_mask).
MASK_BUILDERS: dict[str, tuple[bool, str]] = {
    name: (
        True,
        "transformers masking_utils.sliding_window_overlay keeps kv_idx > q_idx - "
        "sliding_window: the query and the sliding_window - 1 keys before it",
    )
    for name in (
        "create_sliding_window_causal_mask",
        "sliding_window_overlay",
        "sliding_window_causal_mask_function",
    )
}


@lru_cache(maxsize=64)
def _file_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def builders_in(text: str) -> tuple[str, ...]:
    """The known mask builders ``text`` names: called, or chosen as a value and called
    later (``fn = create_causal_mask if w is None else create_sliding_window_causal_mask``)."""
    return tuple(n for n in MASK_BUILDERS if re.search(rf"\b{n}\b(?!\s*=)", text))


def counts_current_in(text: str) -> bool | None:
    """Whether a window of W keys counts the current one, by the window comparisons
    ``text`` writes or else the known mask builder it names; None when neither says."""
    written, _line = written_rule(text)
    if written is not None:
        return written
    named = builders_in(text)
    return MASK_BUILDERS[named[0]][0] if named else None


def _windowed(node: ast.expr) -> bool:
    """An expression that names a window (``window``, ``self.sliding_window``, ...)."""
    return any(
        "window" in (n.id if isinstance(n, ast.Name) else n.attr)
        for n in ast.walk(node)
        if isinstance(n, (ast.Name, ast.Attribute))
    )


def _rule(cmp: ast.Compare) -> bool | None:
    """Whether one comparison of positions with a window keeps W keys counting the
    current one (True), W + 1 (False), or is no such comparison (None):
    ``k > q - W`` / ``q - k < W`` keep distances below W, ``>=`` / ``<=`` up to W."""
    if len(cmp.ops) != 1:
        return None
    op, left, right = cmp.ops[0], cmp.left, cmp.comparators[0]

    def sub(x: ast.expr) -> bool:
        return isinstance(x, ast.BinOp) and isinstance(x.op, ast.Sub)

    for a, b, mirrored in ((left, right, False), (right, left, True)):
        if isinstance(b, ast.BinOp) and sub(b) and _windowed(b.right) and not _windowed(a):
            if _windowed(b.left):
                continue
            keep: tuple[type, type] = (ast.Gt, ast.GtE)  # k > q - W
        elif sub(a) and _windowed(b) and not _windowed(a):
            keep = (ast.Lt, ast.LtE)  # q - k < W
        else:
            continue
        if mirrored:
            keep = (ast.Lt, ast.LtE) if keep[0] is ast.Gt else (ast.Gt, ast.GtE)
        return True if isinstance(op, keep[0]) else False if isinstance(op, keep[1]) else None
    return None


def written_rule(text: str) -> tuple[bool | None, int]:
    """(the rule, its line) of the window comparisons written in ``text``; (None, 0) when
    there are none or they disagree."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None, 0
    found = [
        (r, n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.Compare)
        for r in [_rule(n)]
        if r is not None
    ]
    if not found or len({r for r, _ in found}) > 1:
        return None, 0
    return found[0]


def _sizes(value: object) -> list[int]:
    """The integer sizes an attribute's value can take (an Alt's options included)."""
    if isinstance(value, Const):
        return [value.value] if isinstance(value.value, int) and value.value > 0 else []
    if isinstance(value, Alt):
        return [s for o in value.options for s in _sizes(o)]
    return []


def window_facts(owner: Inst | None, node: Node) -> dict[str, Fact]:
    """``sliding_window`` (the attribute's expression) and ``window_counts_current`` (from
    the file's mask builder; None when the file builds its mask otherwise) for an
    attention computed by ``owner``; empty when the module keeps no window."""
    if owner is None:
        return {}
    for attr in WINDOW_ATTRS:
        value = owner.attrs.get(attr)
        sizes = _sizes(value)
        if not sizes:
            continue
        per_layer = isinstance(value, Alt) and any(
            isinstance(o, Const) and o.value is None for o in value.options
        )
        why = f"the module keeps its window in self.{attr} ({sizes[0]} by default" + (
            f"; None when {value.why})" if per_layer and isinstance(value, Alt) else ")"
        )
        out = {"sliding_window": Fact.at(f"self.{attr}", node, why)}
        text = _file_text(node.file)
        called = builders_in(text)
        written, line = written_rule(text)
        if written is not None:
            keys = (
                "the query and the window - 1 keys before it"
                if written
                else ("the query and the window's keys before it")
            )
            out["window_counts_current"] = Fact(
                written, node.file, line, f"the file's window mask keeps {keys}"
            )
        elif called:
            counts, source = MASK_BUILDERS[called[0]]
            out["window_counts_current"] = Fact.at(counts, node, f"{called[0]}: {source}")
        else:
            out["window_counts_current"] = Fact.at(
                None, node, "the file builds its window mask with no builder kb knows"
            )
        return out
    return {}
