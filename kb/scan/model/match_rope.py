"""How a rotary embedding pairs the elements it rotates, read from the dataflow: the two
halves of a head (``half``: rotate_half, complex numbers over halves) or neighbouring
elements (``interleave``: complex numbers over adjacent pairs, even/odd slices stacked, a
2x2 rotation of pairs), whatever the code names them."""

from __future__ import annotations

from typing import Any

from kb.scan.model.dataflow import Graph, number, source
from kb.scan.model.graph import Const, Node, Seq, Slice, label
from kb.scan.model.match_dense import Fact, half_of


def rope_of(nodes: list[Node], graph: Graph) -> Fact | None:
    """How the rotation on one operand's path pairs elements (``half``: the two halves of a
    head; ``interleave``: neighbouring elements), read from the split it rotates."""
    found: list[Fact] = []
    for n in nodes:
        if n.op == "view_as_complex" and n.args:
            shaped = source(n.args[0], frozenset({"same", "contiguous"}))
            pairs = _pairs_last(shaped)
            if pairs is None and isinstance(shaped, Node) and shaped.op == "stack" and shaped.args:
                # view_as_complex(stack((re, im), -1)): the parts say which elements pair
                pairs = _stacked_pairs(shaped.args[0])
            if pairs is not None:
                found.append(
                    Fact.at(
                        "interleave" if pairs else "half",
                        n,
                        "complex multiplication over " + ("adjacent pairs" if pairs else "halves"),
                    )
                )
        elif (
            n.op in ("cat", "stack")
            and n.args
            and isinstance(n.args[0], Seq)
            and len(n.args[0].items) == 2
        ):
            a, b = n.args[0].items
            written = _rotated_halves(a, b)
            if written is not None:
                layout = "half" if written in ("first", "second") and n.op == "cat" else None
                layout = layout or ("interleave" if written in ("even", "odd") else None)
                if layout is not None:
                    found.append(
                        Fact.at(layout, n, f"x1*cos - x2*sin and x2*cos + x1*sin over {layout}")
                    )
                continue
            negated = isinstance(a, Node) and a.op == "neg"
            if not negated:
                continue
            inner = a.args[0] if a.args else None
            layout = _split_layout(inner, b)
            if layout is None:
                continue
            if n.op == "cat" and layout == "half":
                found.append(
                    Fact.at("half", n, "rotate_half: the negated second half joins the first")
                )
            elif n.op == "stack":
                found.append(
                    Fact.at(
                        "interleave", n, "neighbouring elements rotated as pairs (stack, flatten)"
                    )
                )
        elif n.op == "complex" and len(n.args) >= 2:
            # torch.complex(re, im): the real and imaginary parts say which elements pair
            layout = _split_layout(n.args[0], n.args[1])
            if layout is not None:
                found.append(Fact.at(layout, n, f"complex numbers built from the {layout} split"))
        elif n.op == "rope_kernel" and isinstance(n.kw.get("layout"), Const):
            layout = n.kw["layout"].value
            found.append(Fact.at(layout, n, f"{label(n.kw.get('fn'))} pairs {layout}"))
        elif n.op in ("view", "unflatten") and _pairs_last(n) and _pairs_picked(graph, n):
            found.append(
                Fact.at("interleave", n, "pairs of neighbouring elements (a 2x2 rotation)")
            )
    kinds = {f.value for f in found}
    if len(kinds) == 1:
        return found[0]
    if len(kinds) > 1:
        return Fact("unknown", found[0].file, found[0].line, "both layouts on one path")
    return None


def _stacked_pairs(parts: Any) -> bool | None:
    """What the real and imaginary parts stacked into complex numbers pair: False for the
    two halves of a head (``x.chunk(2, -1)`` or its halves named), True for its even and
    odd elements, None when the code does not say."""
    if isinstance(parts, Seq) and len(parts.items) == 2:
        split = _split_layout(*parts.items)
        return None if split is None else split == "interleave"
    whole = source(parts, frozenset({"same", "contiguous"}))
    if isinstance(whole, Node) and whole.op == "chunk":
        count, dim = whole.arg(1, "chunks"), whole.arg(2, "dim")
        if isinstance(count, Const) and count.value == 2 and number(dim) == -1:
            return False
    return None


def _rotated_halves(a: Any, b: Any) -> str | None:
    """The split a rotation written term by term reads (``x1*cos - x2*sin`` joined with
    ``x2*cos + x1*sin``): "first"/"second" for two halves, "even"/"odd" for strided ones."""
    if not (isinstance(a, Node) and isinstance(b, Node) and a.op == "sub" and b.op == "add"):
        return None
    seen: list[set[tuple[int, str]]] = []
    for joined in (a, b):
        parts = set()
        for term in joined.args:
            if not (isinstance(term, Node) and term.op == "mul"):
                return None
            halves = [h for h in (half_of(t) for t in term.args) if h is not None]
            if len(halves) != 1:
                return None
            parts.add((id(halves[0][0]), halves[0][1]))
        seen.append(parts)
    if seen[0] != seen[1] or len(seen[0]) != 2 or len({k for k, _ in seen[0]}) != 1:
        return None
    return sorted(p for _, p in seen[0])[0]


def _pairs_last(n: Any) -> bool | None:
    """True for ``x.view(..., -1, 2)`` (adjacent pairs), False for ``(..., 2, -1)`` (halves)."""
    if not isinstance(n, Node) or n.op not in ("view", "unflatten", "reshape") or len(n.args) < 2:
        return None
    shape = n.args[1:]
    if n.op == "unflatten" and len(n.args) >= 3 and isinstance(n.args[2], Const):
        shape = (
            tuple(Const(v) for v in n.args[2].value)
            if isinstance(n.args[2].value, tuple)
            else shape
        )
    elif len(shape) == 1 and isinstance(shape[0], (Const, Seq)):
        items = shape[0].value if isinstance(shape[0], Const) else shape[0].items
        shape = (
            tuple(i if not isinstance(i, (int, float)) else Const(i) for i in items)
            if isinstance(items, tuple)
            else shape
        )
    last = [number(s) for s in shape[-3:]]
    if last and last[-1] == 2.0:
        return True
    if len(last) >= 2 and last[-2] == 2.0:
        return False
    return None


def _pairs_picked(graph: Graph, n: Node) -> bool:
    """The pairs view is read element by element (``x[..., 0]``, ``x[..., 1]``) into a product."""
    picks = [
        u
        for u in graph.uses(n)
        if u.op == "getitem" and (u.kw.get("index") or (None,))[-1] in (Const(0), Const(1))
    ]
    return len(picks) >= 2 or any(u.op == "unbind" for u in graph.uses(n))


def _split_layout(a: Any, b: Any) -> str | None:
    """``half`` when a and b are the two halves of one tensor, ``interleave`` when they are
    its odd and even elements."""
    if not (isinstance(a, Node) and isinstance(b, Node)):
        return None
    ha, hb = half_of(a), half_of(b)
    if ha is not None and hb is not None and ha[0] is hb[0] and ha[1] != hb[1]:
        whole = source(ha[0])
        if isinstance(whole, Node) and whole.op == "unbind":
            return "interleave"
        return "half"
    sa, sb = _strided(a), _strided(b)
    if sa is not None and sb is not None and sa[0] is sb[0]:
        return "interleave"
    pa, pb = source(a), source(b)
    if (
        isinstance(pa, Node)
        and isinstance(pb, Node)
        and pa.op == "part"
        and pb.op == "part"
        and pa.args[0] is pb.args[0]
    ):
        whole = pa.args[0]
        if (
            isinstance(whole, Node)
            and whole.op == "unbind"
            and whole.args
            and _pairs_last(source(whole.args[0]))
        ):
            return "interleave"
    return None


def _strided(value: Node) -> tuple[Any, int] | None:
    v = source(value, frozenset({"same", "contiguous"}))
    if isinstance(v, Node) and v.op == "getitem":
        index = v.kw.get("index") or ()
        last = index[-1] if index else None
        if isinstance(last, Slice) and number(last.step) == 2.0:
            return source(v.args[0]), int(number(last.lower) or 0)
    return None
