"""An expert loop rewritten as one routed pass: routing init, two grouped matmuls around
the gated activation, finalize.

Read from the loop's computation, never from names: the token-to-expert ids are what
``one_hot`` is taken of, the routing weights the forward parameter a subscript of which
multiplies an expert's output, the hidden states the remaining parameter.  The expert
weights are the class attributes indexed per expert inside ``linear(x, self.W[e])``
(stored ``[E, out, in]``) or ``x @ self.W[e]`` (stored ``[E, in, out]``), in the order the
loop applies them: two (gate and up packed, then down) or three (gate, up, down, the gate
being the one whose product the activation reaches).  A loop with biases, another
activation or any other shape is left as it is, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kb.port import clippedglu
from kb.port.spans import code, dotted, one_arg


@dataclass
class Loop:
    """What the fused call needs, as code of the forward's own names."""

    x: str
    ids: str
    weights: str
    gate_up: str  # [E, H, 2I], gate half first
    down: str  # [E, I, H]
    biases: str = ""  # ", b_gate_up, b_down" when the experts add biases
    act: str = ""  # ", act=<callable>": the activation between the grouped matmuls
    note: str = ""  # what the port did with that activation


class _Reader(cst.CSTVisitor):
    def __init__(self, params: list[str]) -> None:
        self.params = params
        self.ids: list[str] = []
        self.scaled: list[str] = []
        self.applied: list[tuple[str, str]] = []  # (attribute, "linear" | "matmul")
        self.biases: list[str] = []
        self.bias_of: dict[str, str] = {}  # weight attribute -> its bias attribute
        self.called: dict[str, str] = {}  # name -> callee of the one-argument call assigned
        self.left_of: dict[str, str] = {}  # weight attribute -> code of what it multiplies
        self.activated: list[cst.BaseExpression] = []
        self.assigned: dict[str, str] = {}

    def _expert_weight(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Subscript):
            base = dotted(node.value)
            if base.startswith("self.") and base.count(".") == 1:
                return base[5:]
        return None

    def _applied_in(self, node: cst.BaseExpression) -> str | None:
        """The expert weight of ``x @ self.W[e]`` or ``linear(x, self.W[e])``."""
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
            return self._expert_weight(node.right)
        if isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] in (
            "linear",
            "matmul",
        ):
            args = [a.value for a in node.args if a.keyword is None]
            return self._expert_weight(args[1]) if len(args) >= 2 else None
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        inner = one_arg(node.value)
        if inner is not None and isinstance(node.value, cst.Call):
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.called[t.target.value] = dotted(node.value.func)
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.assigned[t.target.value] = code(node.value)
            elif isinstance(t.target, cst.Tuple):
                for el in t.target.elements:
                    if isinstance(el.value, cst.Name):
                        self.assigned[el.value.value] = code(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        callee = dotted(node.func).rsplit(".", 1)[-1]
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if callee == "one_hot" and args and isinstance(args[0], cst.Name):
            self.ids.append(args[0].value)
        elif callee == "linear" and len(args) >= 2:
            attr = self._expert_weight(args[1])
            if attr:
                self.applied.append((attr, "linear"))
                self.left_of[attr] = code(args[0])
                given = [b for b in args[2:]]
                given += [a.value for a in node.args if a.keyword and a.keyword.value == "bias"]
                self.biases += [code(b) for b in given]
                for b in given:
                    if self._expert_weight(b):
                        self.bias_of[attr] = f"self.{self._expert_weight(b)}"
        elif callee in ("matmul", "mm") and len(args) == 2:
            attr = self._expert_weight(args[1])
            if attr:
                self.applied.append((attr, "matmul"))
        elif one_arg(node) is not None and callee not in ("int", "float", "len", "range"):
            self.activated.append(args[0])

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.MatrixMultiply):
            attr = self._expert_weight(node.right)
            if attr:
                self.applied.append((attr, "matmul"))
                self.left_of[attr] = code(node.left)
        if isinstance(node.operator, cst.Add):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                bias = self._expert_weight(side)
                if bias:
                    self.biases.append(code(side))
                    w = self._applied_in(other)
                    if w:
                        self.bias_of[w] = f"self.{bias}"
        if isinstance(node.operator, cst.Multiply):
            for side in (node.left, node.right):
                value = side.value if isinstance(side, cst.Subscript) else None
                if isinstance(value, cst.Name) and value.value in self.params:
                    self.scaled.append(value.value)


def _stored(attr: str, how: str) -> str:
    """The weight as [E, in, out], the grouped matmul's layout."""
    return f"self.{attr}.transpose(1, 2)" if how == "linear" else f"self.{attr}"


def read(
    fwd: cst.FunctionDef, facts: dict[str, object], cls: cst.ClassDef | None = None
) -> Loop | str:
    """The loop's parts, or why the forward is not one this rewrite can write."""
    glu, clamped = str(facts.get("glu", "")), bool(facts.get("clamped_glu"))
    if not clamped and facts.get("activation") != "silu":
        return f"activation {facts.get('activation')!r}: SwiGLU experts only"
    params = [p.name.value for p in fwd.params.params][1:]
    r = _Reader(params)
    fwd.visit(r)
    ids = [n for n in r.ids if n in params]
    if not ids:
        return "no one_hot of a forward parameter (the expert ids) in the loop"
    scaled = [n for n in r.scaled if n in params and n != ids[0]]
    if not scaled:
        return "no forward parameter scales the experts' outputs (the routing weights)"
    rest = [p for p in params if p not in (ids[0], scaled[0])]
    if not rest:
        return "no hidden-states parameter"
    loose = [b for b in r.biases if b.split("[", 1)[0] not in r.bias_of.values()]
    if loose:
        return f"the experts add a bias ({loose[0]}) not tied to one of their projections"
    order: list[tuple[str, str]] = []
    for attr, how in r.applied:
        if attr not in [a for a, _ in order]:
            order.append((attr, how))
    act = note = ""
    if clamped:  # the model's own activation between the matmuls, unfused
        if len(order) != 2:
            return "a clamped GLU over other than one packed gate/up weight"
        left = r.left_of.get(order[1][0], "")
        act = r.called.get(left, "")
        if not act or not (act.startswith("self.") or act.isidentifier()):
            return "cannot tell which call computes the clamped activation"
        method = next(
            (
                m
                for m in (cls.body.body if cls is not None else [])
                if isinstance(m, cst.FunctionDef) and f"self.{m.name.value}" == act
            ),
            None,
        )
        clipped = clippedglu.fused(method) if method is not None else None
        if clipped is not None:
            note = CLIPPED_NOTE.format(act, **clipped[1])
            act = clipped[0]
        else:
            note = ACT_NOTE.format(act)
    if len(order) == 2:
        (gu, how_gu), (down, how_down) = order
        packed, b_gu = _stored(gu, how_gu), r.bias_of.get(gu, "")
        if act:
            pass  # the activation reads the halves as the model packs them
        elif glu == "second":  # the activation reaches the second half: swap the halves
            packed = f"torch.cat(tuple(reversed({packed}.chunk(2, dim=2))), dim=2)"
            if b_gu:
                b_gu = f"torch.cat(tuple(reversed({b_gu}.chunk(2, dim=1))), dim=1)"
        elif glu != "first":
            return f"the gated half is {glu!r}, not first or second"
        gate_up = packed
    elif len(order) == 3:
        down, how_down = order[2]
        reached = " ".join(
            r.assigned.get(code(a), code(a)) if isinstance(a, cst.Name) else code(a)
            for a in r.activated
        )
        gates = [(a, h) for a, h in order[:2] if f"self.{a}[" in reached]
        if len(gates) != 1:
            return "cannot tell which of the two input projections the activation reaches"
        (gate, how_g) = gates[0]
        (up, how_u) = next(p for p in order[:2] if p[0] != gate)
        gate_up = f"torch.cat([{_stored(gate, how_g)}, {_stored(up, how_u)}], dim=2)"
        bg, bu = r.bias_of.get(gate, ""), r.bias_of.get(up, "")
        if bool(bg) != bool(bu):
            return "only one of the gate and up projections adds a bias"
        b_gu = f"torch.cat([{bg}, {bu}], dim=1)" if bg else ""
    else:
        return f"{len(order)} per-expert weights applied; two or three are written"
    b_down = r.bias_of.get(down, "")
    biases = f", {b_gu or None}, {b_down or None}" if b_gu or b_down else ""
    return Loop(
        rest[0],
        ids[0],
        scaled[0],
        gate_up,
        _stored(down, how_down),
        biases,
        f", act={act}" if act else "",
        note,
    )


ACT_NOTE = (
    "the experts' clamped GLU stays in torch ({}) between the two fused grouped matmuls: "
    "npu_swiglu has no clamp, and npu_clipped_swiglu (min(A, limit) * sigmoid(alpha * A) * "
    "(clip(B, -limit, limit) + bias)) is used only where the activation reads as exactly that"
)
CLIPPED_NOTE = (
    "the experts' clamped GLU ({}) reads as npu_clipped_swiglu's formula: called between "
    "the grouped matmuls with alpha={alpha}, limit={limit}, bias={bias}, interleaved=True"
)
