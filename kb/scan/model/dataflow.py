"""Walking the dataflow graph the interpreter built: who reads a node, where a value comes
from through reshapes and casts, and small structural questions the pattern matchers ask
(is this a weight, a constant, one half of a split).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kb.scan.model.graph import UNKNOWN, Alt, Const, Inst, Node, Seq, Slice, label
from kb.scan.model.ops import SHAPE_OPS

#: ops that hand on their first operand's elements (the one table: :data:`SHAPE_OPS`)
THROUGH = SHAPE_OPS


class Graph:
    """The nodes of one file's reading, with the reverse edges."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.users: dict[int, list[Node]] = {}
        self.by_op: dict[str, list[Node]] = {}
        phis: dict[int, Node] = {}
        for n in nodes:
            self.by_op.setdefault(n.op, []).append(n)
            for o in n.operands():
                self.users.setdefault(o.id, []).append(n)
                if o.op == "phi":
                    phis[o.id] = o
        todo = list(phis.values())
        while todo:  # the merges of undecided branches are made, not recorded: find them
            phi = todo.pop()
            self.by_op.setdefault("phi", []).append(phi)
            for o in phi.operands():
                self.users.setdefault(o.id, []).append(phi)
                if o.op == "phi" and o.id not in phis:
                    phis[o.id] = o
                    todo.append(o)

    def uses(self, n: Node) -> list[Node]:
        return self.users.get(n.id, [])

    def ops(self, *names: str) -> Iterator[Node]:
        for name in names:
            yield from self.by_op.get(name, [])

    def downstream(self, n: Node, through: frozenset[str] = THROUGH, limit: int = 24) -> list[Node]:
        """The nodes reading ``n`` once reshapes and casts are passed (their own readers)."""
        out: list[Node] = []
        todo, seen = [n], {n.id}
        while todo and len(seen) < limit:
            here = todo.pop()
            for user in self.uses(here):
                if user.id in seen:
                    continue
                seen.add(user.id)
                if (
                    user.op in through
                    or user.op == "phi"
                    or (user.op == "getitem" and user.args[0] is here)
                ):
                    todo.append(user)
                else:
                    out.append(user)
        return out


def source(value: Any, through: frozenset[str] = THROUGH) -> Any:
    """Where a tensor's elements come from once reshapes, casts and index picks are passed
    (the first alternative of an undecided branch)."""
    seen = 0
    while isinstance(value, Node) and seen < 64:
        seen += 1
        if (
            (value.op in through and value.args)
            or (value.op == "getitem" and value.args and not _narrows(value))
            or (value.op == "phi" and value.args)
        ):
            value = value.args[0]
        else:
            break
    return value


def choice(value: Any, through: frozenset[str] = THROUGH) -> tuple[list[Node], str] | None:
    """The first undecided branch a value comes from (through reshapes and casts): where
    each alternative's elements come from, and ", as <what decides> decides" (or "")."""
    seen = 0
    while isinstance(value, Node) and seen < 64:
        seen += 1
        if value.op == "phi" and value.args:
            alts = [a for a in (source(v, through) for v in value.args) if isinstance(a, Node)]
            why = value.kw.get("why")
            return alts, (f", as {why.value} decides" if isinstance(why, Const) else "")
        if (value.op in through and value.args) or (
            value.op == "getitem" and value.args and not _narrows(value)
        ):
            value = value.args[0]
        else:
            break
    return None


def sources(value: Any, through: frozenset[str] = THROUGH, limit: int = 16) -> list[Node]:
    """:func:`source` through every alternative of undecided branches."""
    out: list[Node] = []
    todo = [value]
    seen: set[int] = set()
    while todo and len(out) < limit:
        v = todo.pop()
        if isinstance(v, Alt):
            todo += list(v.options)
            continue
        if not isinstance(v, Node) or v.id in seen:
            continue
        seen.add(v.id)
        if v.op == "phi":
            todo += list(v.args)
        elif (v.op in through or (v.op == "getitem" and not _narrows(v))) and v.args:
            todo.append(v.args[0])
        else:
            out.append(v)
    return out


def _narrows(n: Node) -> bool:
    """An index that picks part of the last axis (``x[..., :d]``) rather than rows."""
    index = n.kw.get("index") or ()
    if not index:
        return False
    last = index[-1]
    return (
        isinstance(last, Slice)
        and (last.lower is not None or last.upper is not None or last.step is not None)
        and (len(index) > 1 or isinstance(index[0], Slice))
    )


def ancestors(value: Any, limit: int = 200, stop: frozenset[str] = frozenset()) -> list[Node]:
    """Every tensor ``value`` is computed from (breadth first, bounded), stopping at ops in ``stop``."""
    out: list[Node] = []
    todo = [v for v in _nodes(value)]
    seen = {v.id for v in todo}
    while todo and len(out) < limit:
        here = todo.pop(0)
        out.append(here)
        if here.op in stop:
            continue
        for o in here.operands():
            if o.id not in seen:
                seen.add(o.id)
                todo.append(o)
    return out


def _nodes(value: Any) -> list[Node]:
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (Alt, Seq)):
        items = value.options if isinstance(value, Alt) else value.items
        return [n for v in items for n in _nodes(v)]
    return []


def tensors(values: Iterable[Any]) -> list[Node]:
    return [n for v in values for n in _nodes(v)]


def number(value: Any) -> float | None:
    """A numeric literal (a tensor made by ``torch.tensor(c)`` counts too)."""
    if (
        isinstance(value, Const)
        and isinstance(value.value, (int, float))
        and not isinstance(value.value, bool)
    ):
        return float(value.value)
    if isinstance(value, Node) and value.op == "full" and value.args:
        return number(value.args[0])
    return None


def is_weight(value: Any) -> bool:
    """A parameter of the model (``nn.Parameter``, a leaf's weight), possibly reshaped."""
    v = source(value)
    return isinstance(v, Node) and v.op == "param"


def const_value(value: Any) -> Any:
    return value.value if isinstance(value, Const) else UNKNOWN


def kwarg(n: Node, name: str, position: int | None = None) -> Any:
    if name in n.kw:
        return n.kw[name]
    if position is not None and position < len(n.args):
        return n.args[position]
    return UNKNOWN


def module_of(n: Node) -> Inst | None:
    """The leaf module whose call made ``n`` (``nn.Linear`` ...), when one did."""
    inst = n.kw.get("module")
    return inst if isinstance(inst, Inst) else None


def owner_module(nodes: Iterable[Node]) -> Inst | None:
    """The deepest module whose code (or whose children's code) made all ``nodes``."""
    chains: list[list[Inst]] = []
    for n in nodes:
        if n.owner is None:
            continue
        chains.append(list(reversed(n.owner.module_owner().ancestors())))
    if not chains:
        return None
    common: Inst | None = None
    for level in zip(*chains, strict=False):
        if all(x is level[0] for x in level):
            common = level[0]
        else:
            break
    return common.module_owner() if common is not None else None


#: a short text of a non-tensor value (the one wording: :func:`kb.scan.model.graph.label`)
symbolic = label


def fact_value(value: Any) -> Any:
    """A size or count as a fact: the number when the code or the configuration gives
    one, else its short text (``config.num_experts_per_tok``)."""
    if isinstance(value, Const) and isinstance(value.value, (int, float)):
        return value.value
    return label(value)
