"""Dense patterns matched on the dataflow: activations, feed-forwards (plain and gated),
norms, adaptive-norm modulation and the residual add before a norm.

Each matcher reads the graph of :mod:`kb.scan.model.dataflow`, never a name: a GELU is the
``gelu`` call made (its ``approximate`` argument decides the curve) or the formula written
out, a GLU is an activation whose output multiplies another projection, and which half of a
merged projection the activation reaches is read from the split that feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.scan.model.dataflow import Graph, is_weight, kwarg, number, owner_module, source, symbolic
from kb.scan.model.graph import Const, Node, Slice, Sym

#: activation ops and the kind each computes when called without options
_ACT_OPS = {
    "silu": "silu",
    "relu": "relu",
    "quick_gelu": "quick_gelu",
    "mish": "mish",
    "tanh": "tanh",
    "relu2": "relu2",
    "sigmoid": "sigmoid",
    "elu": "elu",
    "leaky_relu": "leaky_relu",
    "hardswish": "hardswish",
    "softplus": "softplus",
}
_QUICK = 1.702
_PROJECTIONS = frozenset({"linear", "matmul", "einsum", "call", "conv"})


@dataclass
class Fact:
    """One fact of a module: its value and the line that proves it (0: not proven)."""

    value: Any
    file: str = ""
    line: int = 0
    why: str = ""
    options: tuple[Any, ...] = ()  # an undecided fact: the values the code can take

    @staticmethod
    def at(value: Any, node: Node | None, why: str = "", options: tuple[Any, ...] = ()) -> Fact:
        return Fact(value, node.file if node else "", node.line if node else 0, why, options)


@dataclass
class Match:
    """One pattern found: its kind, the nodes that make it (their owner is the module that
    computes it) and the facts read from it."""

    kind: str
    nodes: list[Node]
    facts: dict[str, Fact] = field(default_factory=dict)
    parts: list[Node] = field(default_factory=list)  # nodes of smaller patterns it includes


# -- activations -------------------------------------------------------------------------------


@dataclass
class Activation:
    kind: str  # silu | gelu | gelu_tanh | quick_gelu | relu | ... | unknown
    out: Node  # the activation's result
    x: Any  # what it is applied to
    why: str
    options: tuple[str, ...] = ()  # kind "unknown": the kinds an undecided choice takes


def activations(graph: Graph) -> dict[int, Activation]:
    """Every activation computed, by its output node: calls and written-out formulas."""
    out: dict[int, Activation] = {}
    for n in graph.nodes:
        if n.op == "gelu":
            approx = kwarg(n, "approximate")
            if isinstance(approx, Const) and approx.value not in ("none", None):
                kind = "gelu_tanh" if approx.value == "tanh" else "unknown"
            elif approx is None or isinstance(approx, Const) or not isinstance(approx, (Sym, Node)):
                kind = "gelu"
            else:
                kind = "unknown"
            why = _spelled(
                n, f"gelu(approximate={symbolic(approx)})" if kind != "gelu" else "gelu (erf)"
            )
            out[n.id] = Activation(kind, n, n.args[0] if n.args else None, why)
        elif n.op in _ACT_OPS:
            out[n.id] = Activation(
                _ACT_OPS[n.op], n, n.args[0] if n.args else None, _spelled(n, n.op)
            )
        elif n.op == "activation":
            spelling = n.kw.get("spelling")
            out[n.id] = Activation(
                "unknown", n, n.args[0] if n.args else None, f"chosen by {symbolic(spelling)}"
            )
        elif n.op == "mul":
            found = _sigmoid_formula(n)
            if found is not None:
                out[n.id] = found
    for t in graph.ops("tanh", "erf"):
        found = _gelu_formula(graph, t)
        if found is not None:
            out[found.out.id] = found
    for n in graph.ops("phi"):  # one of several activations, as a flag or a key decides
        picked = [out.get(a.id) if isinstance(a, Node) else None for a in n.args]
        alts = [a for a in picked if a is not None]
        if not alts or len(alts) < len(picked) or len({id(source(a.x)) for a in alts}) != 1:
            continue
        kinds = tuple(dict.fromkeys(a.kind for a in alts))
        if len(kinds) == 1:
            out[n.id] = Activation(kinds[0], n, alts[0].x, alts[0].why)
            continue
        decider = n.kw.get("why")
        decides = f", as {decider.value} decides" if isinstance(decider, Const) else ""
        out[n.id] = Activation("unknown", n, alts[0].x, f"{' or '.join(kinds)}{decides}", kinds)
    return out


def _spelled(n: Node, why: str) -> str:
    """How an activation was chosen: the spelling a table was indexed with, and where that
    spelling came from."""
    spelling = n.kw.get("spelling")
    if isinstance(spelling, Const):
        return f"{spelling.value!r}" + (f" ({spelling.origin})" if spelling.origin else "")
    return why


def _sigmoid_formula(n: Node) -> Activation | None:
    """``x * sigmoid(x)`` (SiLU) and ``x * sigmoid(1.702 * x)`` (QuickGELU)."""
    if len(n.args) != 2:
        return None
    for x, s in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
        if not (isinstance(s, Node) and s.op == "sigmoid" and s.args):
            continue
        inner = s.args[0]
        scale = 1.0
        if isinstance(inner, Node) and inner.op == "mul" and len(inner.args) == 2:
            c = [number(a) for a in inner.args]
            if c[0] is not None:
                scale, inner = c[0], inner.args[1]
            elif c[1] is not None:
                scale, inner = c[1], inner.args[0]
        if source(inner) is not source(x) or not isinstance(x, Node):
            continue
        if abs(scale - 1.0) < 1e-6:
            return Activation("silu", n, x, "x * sigmoid(x)")
        if abs(scale - _QUICK) < 1e-3:
            return Activation("quick_gelu", n, x, "x * sigmoid(1.702 * x)")
    return None


def _gelu_formula(graph: Graph, t: Node) -> Activation | None:
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` and the erf form."""
    if t.op == "tanh" and not _has_constant(t, 0.044715, depth=5):
        return None
    top: Node | None = None
    here = t
    for _ in range(4):  # 1 + tanh(...), then 0.5 * x * (...)
        users = [u for u in graph.uses(here) if u.op in ("add", "mul")]
        if not users:
            break
        here = users[0]
        if here.op == "mul":
            top = here
    if top is None:
        return None
    x = next(
        (
            a
            for a in _mul_operands(top)
            if isinstance(a, Node) and a is not t and not _contains(a, t)
        ),
        None,
    )
    if x is None:
        return None
    return Activation("gelu_tanh" if t.op == "tanh" else "gelu", top, x, f"written out with {t.op}")


def _mul_operands(n: Node) -> list[Any]:
    out: list[Any] = []
    for a in n.args:
        if isinstance(a, Node) and a.op == "mul" and len(out) < 8:
            out += _mul_operands(a)
        else:
            out.append(a)
    return out


def _contains(value: Any, target: Node, depth: int = 4) -> bool:
    if value is target:
        return True
    if depth == 0 or not isinstance(value, Node):
        return False
    return any(_contains(o, target, depth - 1) for o in value.operands())


def _has_constant(n: Node, wanted: float, depth: int) -> bool:
    for a in n.args:
        v = number(a)
        if v is not None and abs(v - wanted) < 1e-6:
            return True
        if depth and isinstance(a, Node) and _has_constant(a, wanted, depth - 1):
            return True
    return False


# -- feed-forwards ------------------------------------------------------------------------------


def half_of(value: Any) -> tuple[Node, str] | None:
    """``(tensor split, "first" | "second")`` when ``value`` is one half of a split: a chunk or
    split part, or a slice of the last axis from its start or to its end."""
    v = source(value, frozenset({"same", "contiguous"}))
    if isinstance(v, Node) and v.op == "part" and v.args:
        whole = v.args[0]
        index = v.kw.get("index")
        if (
            isinstance(whole, Node)
            and whole.op in ("chunk", "split", "unbind", "rearrange")
            and isinstance(index, Const)
        ):
            count = whole.arg(1, "chunks")
            if whole.op == "chunk" and isinstance(count, Const) and count.value not in (2, None):
                return None
            if index.value in (0, 1, -1, -2):
                position = "first" if index.value in (0, -2) else "second"
                return source(whole.args[0]) if whole.args else whole, position
    if isinstance(v, Node) and v.op == "getitem" and v.args:
        index = v.kw.get("index") or ()
        last = index[-1] if index else None
        if isinstance(last, Slice) and last.step is None:
            base = source(v.args[0])
            if last.lower is None and last.upper is not None:
                return base, "first"
            if last.upper is None and last.lower is not None:
                return base, "second"
        if isinstance(last, Slice) and number(last.step) == 2 and last.upper is None:
            # ``x[..., ::2]`` / ``x[..., 1::2]``: gate and up interleaved column by column
            start = number(last.lower) if last.lower is not None else 0
            if start in (0, 1):
                return source(v.args[0]), "even" if start == 0 else "odd"
    return None


def _unclamped(value: Any) -> tuple[Any, bool]:
    """A GLU operand with its clamp and its ``+ 1`` shift taken off, and whether it had any."""
    changed = False
    for _ in range(3):
        v = source(value, frozenset({"same", "contiguous"}))
        if isinstance(v, Node) and v.op == "clamp" and v.args:
            value, changed = v.args[0], True
        elif (
            isinstance(v, Node)
            and v.op == "add"
            and len(v.args) == 2
            and any(number(a) is not None for a in v.args)
        ):
            value, changed = next(a for a in v.args if number(a) is None), True
        else:
            break
    return value, changed


def feed_forwards(graph: Graph, acts: dict[int, Activation]) -> list[Match]:
    """Gated (an activation multiplying another projection) and plain feed-forwards."""
    out: list[Match] = []
    # an alternative of an undecided choice of activations is read as that choice
    chosen = {a.id for act in acts.values() if act.out.op == "phi" for a in act.out.operands()}
    for act in acts.values():
        if act.kind == "sigmoid" or act.x is None or act.out.id in chosen:
            continue
        x_src = _unbiased(source(act.x))
        if not isinstance(x_src, Node):
            continue
        down = graph.downstream(act.out)
        gate = next((u for u in down if u.op == "mul" and u.id not in acts), None)
        if gate is not None:
            other = next(
                (
                    a
                    for a in gate.args
                    if isinstance(a, Node)
                    and source(a) is not source(act.out)
                    and source(a) is not act.out
                ),
                None,
            )
            m = _glu(graph, act, gate, other)
            if m is not None:
                out.append(m)
            continue
        if x_src.op in _PROJECTIONS and not is_weight(x_src) and _into_projection(graph, act.out):
            out.append(
                Match(
                    "mlp",
                    [x_src, act.out],
                    {
                        "activation": Fact.at(act.kind, act.out, act.why, act.options),
                        "glu": Fact.at("none", act.out),
                        "input_projection": Fact.at(x_src.op, x_src),
                    },
                )
            )
    return out


def _glu(graph: Graph, act: Activation, gate: Node, other: Node | None) -> Match | None:
    if other is None:
        return None
    x, clamped_gate = _unclamped(act.x)
    other, clamped_up = _unclamped(other)
    mine, theirs = half_of(x), half_of(other)
    facts: dict[str, Fact] = {"activation": Fact.at(act.kind, act.out, act.why, act.options)}
    if mine is not None and theirs is not None and mine[0] is theirs[0] and mine[1] != theirs[1]:
        base = mine[0]
        if isinstance(base, Node) and base.op == "add":  # the projection plus its bias
            base = next(
                (a for a in base.args if isinstance(a, Node) and a.op in _PROJECTIONS), base
            )
        if not (isinstance(base, Node) and base.op in _PROJECTIONS):
            return None
        facts["glu"] = Fact.at(
            mine[1], act.out, f"the activation reads the {mine[1]} half of one projection"
        )
        facts["merged"] = Fact.at(True, base)
        nodes = [base, act.out, gate]
    else:
        a, b = source(x), source(other)
        if not (
            isinstance(a, Node)
            and isinstance(b, Node)
            and a.op in _PROJECTIONS
            and b.op in _PROJECTIONS
        ):
            return None
        if a is b:
            return None
        facts["glu"] = Fact.at(
            "first", act.out, "the activation reads the gate projection; up multiplies it"
        )
        facts["merged"] = Fact.at(False, a)
        nodes = [a, b, act.out, gate]
    if not _into_projection(graph, gate) and not gate.loop:
        facts["output"] = Fact("not projected")
    if clamped_gate or clamped_up:
        facts["clamped_glu"] = Fact.at(True, gate, "gate and up clamped (or up shifted by 1)")
    return Match("mlp", nodes, facts)


def _unbiased(x: Any) -> Any:
    """A projection written ``x @ w.T + b``: the product (the bias is part of it)."""
    if isinstance(x, Node) and x.op == "add" and len(x.args) == 2 and any(map(is_weight, x.args)):
        rest = [a for a in x.args if isinstance(a, Node) and not is_weight(a)]
        return source(rest[0]) if len(rest) == 1 else x
    return x


def _into_projection(graph: Graph, n: Node) -> bool:
    return any(
        u.op in ("linear", "matmul", "einsum", "call", "conv", "index_add", "setitem", "mul")
        for u in graph.downstream(n)
    )


# -- norms ----------------------------------------------------------------------------------------


@dataclass
class Norm:
    kind: str  # rms | layer | group
    x: Any
    out: Node  # after the weight when there is one
    nodes: list[Node]
    weight: str  # "weight" | "1 + weight" | "none"
    why: str


def norms(graph: Graph) -> list[Norm]:
    found: list[Norm] = []
    for n in graph.ops("layer_norm", "rms_norm", "group_norm"):
        kind = {"layer_norm": "layer", "rms_norm": "rms", "group_norm": "group"}[n.op]
        affine = kwarg(n, "elementwise_affine")
        weight = "none" if isinstance(affine, Const) and affine.value is False else "weight"
        found.append(Norm(kind, n.args[0] if n.args else None, n, [n], weight, f"{n.op} call"))
    for r in graph.ops("rsqrt", "sqrt"):
        m = _written_norm(graph, r)
        if m is not None:
            found.append(m)
    return found


def _squares(value: Any, x_hint: Node | None = None) -> Node | None:
    """``x**2``, ``x*x`` or ``x.square()``: the x squared, else None."""
    if not isinstance(value, Node):
        return None
    if (
        value.op == "pow"
        and len(value.args) == 2
        and number(value.args[1]) == 2.0
        and isinstance(value.args[0], Node)
    ):
        return value.args[0]
    if (
        value.op == "mul"
        and len(value.args) == 2
        and source(value.args[0]) is source(value.args[1])
        and isinstance(value.args[0], Node)
    ):
        return value.args[0]
    return None


def _written_norm(graph: Graph, r: Node) -> Norm | None:
    """``x * rsqrt(mean(x**2) + eps)`` (RMS) or ``(x - mean) / sqrt(var + eps)`` (layer)."""
    inner = r.args[0] if r.args else None
    if isinstance(inner, Node) and inner.op == "add":
        inner = next((a for a in inner.args if isinstance(a, Node)), None)
    inner = source(inner)
    if not isinstance(inner, Node):
        return None
    kind = None
    x: Any = None
    if inner.op == "mean" and inner.args:
        sq = _squares(source(inner.args[0]))
        if sq is not None:
            centred = source(sq)
            if isinstance(centred, Node) and centred.op == "sub":
                kind, x = "layer", centred.args[0]
            else:
                kind, x = "rms", sq
    elif inner.op == "var" and inner.args:
        kind, x = "layer", inner.args[0]
    if kind is None:
        return None
    apply = next((u for u in graph.downstream(r) if u.op in ("mul", "div")), None)
    if apply is None:
        return None
    out = apply
    weight = "none"
    for u in graph.downstream(apply)[:4]:
        if u.op == "mul" and any(is_weight(a) for a in u.args):
            out, weight = u, "weight"
            break
        if u.op == "mul" and any(_one_plus(a) for a in u.args):
            out, weight = u, "1 + weight"
            break
    if kind == "layer" and weight != "none":
        for u in graph.downstream(out)[:2]:
            if u.op == "add" and any(is_weight(a) for a in u.args):
                out = u
    return Norm(kind, x, out, [r, apply, out], weight, f"written out at line {r.line}")


def _one_plus(value: Any) -> bool:
    v = source(value)
    return (
        isinstance(v, Node)
        and v.op == "add"
        and any(number(a) == 1.0 for a in v.args)
        and any(is_weight(a) for a in v.args)
    )


def norm_matches(norms_found: list[Norm]) -> list[Match]:
    return [
        Match(
            "norm",
            n.nodes,
            {"norm": Fact.at(n.kind, n.nodes[0], n.why), "weight": Fact.at(n.weight, n.out)},
        )
        for n in norms_found
    ]


# -- adaptive norms and residual norms -------------------------------------------------------------


def modulations(graph: Graph, norms_found: list[Norm]) -> list[Match]:
    """``norm(x) * (1 + scale) + shift``: a norm whose output is scaled by one plus a tensor
    computed at run time (not a weight) and shifted."""
    out: list[Match] = []
    for norm in norms_found:
        for mul in graph.downstream(norm.out, limit=12):
            if mul.op != "mul":
                continue
            scale = next((a for a in mul.args if _one_plus_runtime(a)), None)
            if scale is None:
                continue
            shift = next((u for u in graph.downstream(mul, limit=6) if u.op == "add"), None)
            if shift is None:
                continue  # a scaled norm without a shift (temperature, gating): not adaLN
            facts = {
                "norm": Fact.at(norm.kind, norm.nodes[0], norm.why),
                "modulation": Fact.at("norm(x) * (1 + scale)" + (" + shift" if shift else ""), mul),
                "norm_weight": Fact.at(norm.weight, norm.out),
            }
            out.append(Match("adaln", [*norm.nodes, mul] + ([shift] if shift else []), facts))
            break
    return out


def _one_plus_runtime(value: Any) -> bool:
    v = source(value)
    if not (isinstance(v, Node) and v.op == "add"):
        return False
    ones = [a for a in v.args if number(a) == 1.0]
    rest = [a for a in v.args if isinstance(a, Node)]
    return bool(ones) and bool(rest) and not any(is_weight(a) for a in rest)


def residual_norms(graph: Graph, norms_found: list[Norm]) -> list[Match]:
    """``h = x + y`` normalised and also kept as the next residual (the add-then-norm fusion)."""
    out: list[Match] = []
    for norm in norms_found:
        h = source(norm.x, frozenset({"same", "contiguous"}))
        if not (
            isinstance(h, Node)
            and h.op == "add"
            and len([a for a in h.args if isinstance(a, Node)]) == 2
        ):
            continue
        if any(is_weight(a) for a in h.args):
            continue  # an embedding plus a position table: not a residual
        others = [
            u
            for u in graph.uses(h)
            if u not in norm.nodes and u.op in ("add", "same", "view", "sub")
        ]
        scaled = all(isinstance(a, Node) and a.op == "mul" for a in h.args)
        if not (others or scaled) or h.owner is None:
            # a sum of two scaled branches (residual * alpha + out * beta) is the fusion's
            # two inputs even when the block keeps the normalised value as its residual
            continue
        if owner_module([h, *norm.nodes]) is not h.owner.module_owner():
            continue  # the sum of one block normalised by the next: not one module's fusion
        out.append(
            Match(
                "residual_norm",
                [h, *norm.nodes],
                {
                    "norm": Fact.at(norm.kind, norm.nodes[0], norm.why),
                    "residual": Fact.at(
                        bool(others),
                        h,
                        "the sum is normalised and kept as the residual"
                        if others
                        else "the sum of two scaled branches is normalised",
                    ),
                },
            )
        )
    return out
