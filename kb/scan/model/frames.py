"""What the model reader's calls pass around: the running frame, a tensor method or a
method of a plain value waiting for its call, ``super()``, and small helpers."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kb.scan.model.graph import ClassRef, Inst, Node, Seq


class Frame:
    """One running function: its names, file, the instance owning what it computes."""

    __slots__ = ("closure", "entry_loop", "env", "file", "loop", "owner", "returns")

    def __init__(
        self,
        env: dict[str, Any],
        file: str,
        owner: Inst | None,
        loop: int,
        closure: dict[str, Any] | None = None,
    ) -> None:
        self.env = env
        self.file = file
        self.owner = owner
        self.loop = loop
        self.entry_loop = loop  # the loops of its callers; loop - entry_loop are its own
        self.returns: list[Any] = []
        self.closure = closure


@dataclass(eq=False)
class TensorMethod:
    node: Node
    name: str


@dataclass(eq=False)
class SuperRef:
    cls: ClassRef
    inst: Any


@dataclass(eq=False)
class Bound:
    """A method of a plain Python value (``d.get``, ``list.append``, ``str.lower``)."""

    value: Any
    name: str


#: tensor methods answering a number (the reader keeps them symbolic)
def has_tensors(values: Any) -> bool:
    """Whether any value is a tensor, also inside tuples and lists."""
    return any(isinstance(v, Node) or (isinstance(v, Seq) and has_tensors(v.items)) for v in values)


def last_name(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def decorators(node: ast.AST) -> set[str]:
    out = set()
    for deco in getattr(node, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, ast.Attribute):
            out.add(target.attr)
    return out
