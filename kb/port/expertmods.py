"""An expert loop over one module per expert (an ``nn.ModuleList`` of GLU MLPs) rewritten
as the same routed pass as a stacked-weight loop (:mod:`kb.port.experts`).

Read from the computation, never from names.  In a method of the planned class, a ``for``
statement whose body calls an element of a module list of the class (``self.L[i](x)``, a
name bound to ``self.L[i]``, or the loop target over ``self.L`` / ``enumerate(self.L)``) and
adds the result into a tensor of the method (``acc.index_add_(0, rows, y)`` or
``acc[rows] += y``) is the loop.  The hidden states are what the expert's input is taken
from (through the loop's own assignments, subscripts and method calls), the routing
weights what multiplies the expert's output, the expert ids what ``one_hot`` is taken of
(or what is compared with the loop variable).  A loop that scales the experts' inputs
instead is left with a note.  The expert class is the class the module list is built from;
its forward must be ``down(act(gate(x)) * up(x))`` over ``nn.Linear`` attributes: the
activated projection is the gate, whatever its name.

The loop is kept, unchanged, in a local function (the unfused side, on a copy of the
accumulator); the fused side adds the routed pass to the accumulator.  The experts' weights
are stacked once, at the first fused call, and kept on the module (``_kb_stacked_experts``);
the original parameters and their names stay, so a checkpoint loads as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from kb.port import expertsorted
from kb.port.expertsorted import _root
from kb.port.spans import (
    Stage,
    _assigns,
    _init_facts,
    _passing,
    code,
    dotted,
    glu_parts,
    one_arg,
    projection,
)

STACK_NOTE = (
    "the experts' weights are stacked from {lst} at the first fused call and kept on the "
    "module (rebuilt when a weight tensor is replaced or changed in place); after loading "
    "other weights into a running model, clear {owner}._kb_stacked so they are stacked again"
)


@dataclass
class ModLoop:
    """What the fused call needs, as code of the method's own names."""

    index: int  # the loop's position in the method body
    acc: str
    x: str
    ids: str
    weights: str
    experts: str  # the module list attribute
    gate: str
    up: str
    down: str


def _env(node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """Name -> value of every assignment under ``node`` (a tuple target maps each name to
    the whole value)."""
    out: dict[str, cst.BaseExpression] = {}

    class _V(cst.CSTVisitor):
        def visit_Assign(self, a: cst.Assign) -> None:
            for t in a.targets:
                names = (
                    [e.value for e in t.target.elements]
                    if isinstance(t.target, cst.Tuple)
                    else [t.target]
                )
                for n in names:
                    if isinstance(n, cst.Name):
                        out[n.value] = a.value

    node.visit(_V())
    return out


def _module_lists(init: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> dict[str, str]:
    """Module-list attribute -> the file's class its elements are built from (in any
    method: __init__ or a setup method it calls)."""
    out: dict[str, str] = {}
    for st in init.body.body:
        if not isinstance(st, cst.FunctionDef):  # __init__ or a setup method it calls
            continue
        for t, v in _env_self(st):
            if not (isinstance(v, cst.Call) and dotted(v.func).endswith("ModuleList")):
                continue
            found = _built(v, classes)
            if len(set(found)) == 1:
                out[t] = found[0]
    return out


def _built(node: cst.CSTNode, classes: dict[str, cst.ClassDef]) -> list[str]:
    """The file's classes called under ``node``."""
    found: list[str] = []

    class _C(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            if dotted(c.func) in classes:
                found.append(dotted(c.func))

    node.visit(_C())
    return found


def _calls_and_adds(
    loop: cst.For, callees: set[str]
) -> tuple[list[cst.Call], list[tuple[str, cst.BaseExpression]]]:
    """The expert calls in ``loop`` and its sums into a tensor: (accumulator, added)."""
    calls: list[cst.Call] = []
    adds: list[tuple[str, cst.BaseExpression]] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            if _is_expert(c, callees):
                calls.append(c)
            if (
                dotted(c.func).endswith(".index_add_")
                and len(c.args) == 3
                and code(c.args[0].value) == "0"
            ):
                adds.append((code(c.func).rsplit(".", 1)[0], c.args[2].value))

        def visit_AugAssign(self, a: cst.AugAssign) -> None:
            if isinstance(a.operator, cst.AddAssign) and isinstance(a.target, cst.Subscript):
                adds.append((code(a.target.value), a.value))

    loop.visit(_V())
    return calls, adds


def _env_self(fn: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    """(attribute, value) of each ``self.<attribute> = value`` in ``fn``."""
    return [(n[5:], v) for n, v in _assigns(fn) if n.startswith("self.") and n.count(".") == 1]


def expert_glu(cls: cst.ClassDef) -> tuple[str, str, str] | str:
    """(gate, up, down) linear attributes of ``down(act(gate(x)) * up(x))``, or why not."""
    linears = _init_facts(cls)[0]
    fwd = next(
        (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"),
        None,
    )
    if fwd is None:
        return f"the expert class {cls.name.value} has no forward"
    out = _returned(fwd)
    if out is None:
        return f"the expert class {cls.name.value} does not return one value from its forward"
    down = projection(out, linears)
    inner = one_arg(out)
    parts = glu_parts(inner, linears) if isinstance(inner, cst.BinaryOperation) else None
    if down is None or parts is None:
        return (
            f"the expert class {cls.name.value} does not compute down(act(gate(x)) * up(x)) "
            "over its nn.Linear attributes"
        )
    gate = projection(one_arg(parts[0]) or parts[0], linears)
    up = projection(cst.parse_expression(parts[1]), linears)
    if gate is None or up is None or gate[1] != up[1]:
        return f"the expert class {cls.name.value}: gate and up are not projections of one input"
    return gate[0], up[0], down[0]


class _Inline(cst.CSTTransformer):
    """Names replaced by the values assigned to them earlier (attribute and keyword names
    kept)."""

    def __init__(self, env: dict[str, cst.BaseExpression]) -> None:
        self.env = env

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        value = self.env.get(updated.value)
        return (
            value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            if value is not None and not isinstance(value, cst.Name)
            else (value or updated)
        )

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def _returned(fn: cst.FunctionDef) -> cst.BaseExpression | None:
    """The one returned value of a straight-line function, its names replaced by what
    was assigned to them before."""
    env: dict[str, cst.BaseExpression] = {}
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    for st in body:
        if not isinstance(st, cst.SimpleStatementLine):
            continue
        for small in st.body:
            if isinstance(small, cst.Return):
                value = None if small.value is None else small.value.visit(_Inline(env))
                return value if isinstance(value, cst.BaseExpression) else None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                value = small.value.visit(_Inline(env))
                if isinstance(target, cst.Name) and isinstance(value, cst.BaseExpression):
                    env[target.value] = value
    return None


def _expert_callees(loop: cst.For, lists: dict[str, str]) -> tuple[set[str], str]:
    """Callee spellings that call one expert module in ``loop``, and the list attribute."""
    callees: set[str] = set()
    owner = ""
    it = loop.iter
    target: cst.BaseExpression = loop.target
    if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and it.args:
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            target = target.elements[1].value
        it = it.args[0].value
    base = dotted(it)
    if base.startswith("self.") and base[5:] in lists and isinstance(target, cst.Name):
        callees.add(target.value)
        owner = base[5:]
    for name, value in _env(loop.body).items():
        if isinstance(value, cst.Subscript):
            b = dotted(value.value)
            if b.startswith("self.") and b[5:] in lists:
                callees.add(name)
                owner = b[5:]
    for attr in lists:
        callees.add(f"self.{attr}[")
    return callees, owner


def _is_expert(node: cst.CSTNode, callees: set[str]) -> bool:
    if not isinstance(node, cst.Call):
        return False
    f = code(node.func)
    return f in callees or any(f.startswith(c) and c.endswith("[") for c in callees)


def _contains(node: cst.CSTNode, callees: set[str], env: dict[str, Any], depth: int = 0) -> bool:
    if depth > 12:
        return False
    hit = False

    class _V(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            nonlocal hit
            hit = hit or _is_expert(c, callees)

        def visit_Name(self, n: cst.Name) -> None:
            nonlocal hit
            if n.value in env and not hit:
                hit = _contains(env[n.value], callees, env, depth + 1)

    node.visit(_V())
    return hit


def _scale_of(node: cst.CSTNode, callees: set[str], env: dict[str, Any], depth: int = 0) -> Any:
    """The factor multiplying the expert's output in ``node`` (None: not found)."""
    if depth > 12:
        return None
    if isinstance(node, cst.Name) and node.value in env:
        return _scale_of(env[node.value], callees, env, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if _contains(a, callees, env) and not _contains(b, callees, env):
                return b
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _scale_of(node.func.value, callees, env, depth + 1)  # .to(dtype), .view(...)
    return None


def read_loop(
    fn: cst.FunctionDef, lists: dict[str, str]
) -> tuple[int, dict[str, str], str] | str | None:
    """(index, parts, list attribute) of the expert loop in ``fn``; why not; None: no loop."""
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    outer = _env(fn)
    params = {p.name.value for p in fn.params.params}
    for i, st in enumerate(body):
        if not isinstance(st, cst.For):
            continue
        callees, owner = _expert_callees(st, lists)
        env = _env(st.body)
        calls, adds = _calls_and_adds(st, callees)
        if not calls:
            continue
        if not owner:
            owner = next(
                a for a in lists if any(code(c.func).startswith(f"self.{a}[") for c in calls)
            )
        if len(calls) == 1 and not adds:  # tokens sorted by expert, the outputs put back
            found = expertsorted.read(fn, outer)
            return found if isinstance(found, str) else (-1, found, owner)
        if len(calls) != 1 or len(adds) != 1:
            return f"the expert loop calls {len(calls)} expert(s) and adds {len(adds)} result(s)"
        acc, added = adds[0]
        arg = one_arg(calls[0])
        if arg is None:
            return "the expert module is called with more than one argument"
        x = _root(arg, env)
        if _contains_product(arg, env):
            return "the routing weights scale the experts' inputs, not their outputs"
        scale = _scale_of(added, callees, env)
        if scale is None:
            return "nothing multiplies the experts' outputs (the routing weights)"
        weights = _root(scale, env)
        ids = _ids(fn, st, env)
        known = set(outer) | params
        missing = [
            n
            for n, v in (
                ("hidden states", x),
                ("weights", weights),
                ("ids", ids),
                ("accumulator", acc),
            )
            if v not in known
        ]
        if missing:
            return f"cannot trace the loop's {', '.join(missing)} to names of {fn.name.value}"
        bound = (set(env) | _names(st.target)) - {acc}
        later = bound & set().union(*(_names(s) for s in body[i + 1 :]))
        if later:
            return f"names the loop binds are read after it ({', '.join(sorted(later))})"
        before = params.union(*(set(_env(s)) for s in body[:i]))
        carried = ",".join(sorted(bound & before))  # rebound in the loop: passed in by value
        return i, {"acc": acc, "x": x, "weights": weights, "ids": ids, "carried": carried}, owner
    return None


def _names(node: cst.CSTNode) -> set[str]:
    """Every name under ``node`` (attribute names left out)."""
    out: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, a: cst.Attribute) -> bool:
            a.value.visit(self)
            return False

    node.visit(_V())
    return out


def _contains_product(node: cst.CSTNode, env: dict[str, Any], depth: int = 0) -> bool:
    """Whether the expert's input is a product (the inputs scaled before the expert)."""
    if depth > 12:
        return False
    if isinstance(node, cst.Name) and node.value in env:
        return _contains_product(env[node.value], env, depth + 1)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Multiply):
            return True
        return _contains_product(node.left, env, depth + 1) or _contains_product(
            node.right, env, depth + 1
        )
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _contains_product(node.func.value, env, depth + 1)
    if isinstance(node, cst.Subscript):
        return _contains_product(node.value, env, depth + 1)
    return False


def _ids(fn: cst.FunctionDef, loop: cst.For, env: dict[str, Any]) -> str:
    """What ``one_hot`` is taken of in ``fn``, else what the loop compares with its variable."""
    found: list[str] = []
    targets = {code(loop.target)}
    if isinstance(loop.target, cst.Tuple):
        targets |= {code(e.value) for e in loop.target.elements}

    class _V(cst.CSTVisitor):
        def visit_Call(self, c: cst.Call) -> None:
            if dotted(c.func).rsplit(".", 1)[-1] == "one_hot" and c.args:
                found.append(_root(c.args[0].value, {}))

        def visit_Comparison(self, c: cst.Comparison) -> None:
            one = c.comparisons[0]
            if (
                len(c.comparisons) == 1
                and isinstance(one.operator, cst.Equal)
                and code(one.comparator) in targets
            ):
                found.append(_root(c.left, env))

    fn.visit(_V())
    return found[0] if found else ""


def rewrite(porter: Any, cls: cst.ClassDef, s: Stage) -> cst.ClassDef | None:
    """The class with its expert loop as one ``_kb_stage``; a note when it cannot be; None
    when the class keeps no module list of the file's classes (stacked weights)."""
    name = cls.name.value
    original = porter.classes.get(name, cls)
    lists = _module_lists(original, porter.classes)
    if not lists:
        return None
    why = "no module list of a class of this file (the experts) in __init__"
    body = list(cls.body.body)
    for k, fn in enumerate(body):
        if not (isinstance(fn, cst.FunctionDef) and lists):
            continue
        found = read_loop(fn, lists)
        if found is None:
            continue
        if isinstance(found, str):
            why = found
            break
        index, parts, owner = found
        glu = expert_glu(porter.classes[lists[owner]])
        if isinstance(glu, str):
            why = glu
            break
        if s.facts.get("activation") != "silu":
            why = f"activation {s.facts.get('activation')!r}: SwiGLU experts only"
            break
        return _write(porter, cls, s, k, fn, index, parts, owner, glu)
    porter.notes.setdefault(name, []).append(
        f"stage {s.mapping} ({s.operator}) not rewritten: {why}"
    )
    return cls


def _weights_note(porter: Any, name: str, owner: str, glu: tuple[str, str, str]) -> None:
    porter.result.weights[f"{name}.{owner}"] = {
        "merge": "stacked on a new first axis at the first fused call (biases too): gate_up "
        "[E, H, 2I] gate first, down [E, I, H]",
        "from": [f"{owner}.*.{n}.weight" for n in glu],
        "prerequisite": "stacked-expert-weights",
    }
    porter.notes.setdefault(name, []).append(STACK_NOTE.format(lst=f"self.{owner}", owner="self"))


def _write_method(
    porter: Any, cls: cst.ClassDef, s: Stage, k: int, fn: cst.FunctionDef, fused: str
) -> cst.ClassDef:
    """The method's body becomes the stage; the original is kept as _kb_unfused_<name>."""
    name, method = cls.name.value, fn.name.value
    unfused = f"self._kb_unfused_{method}({', '.join(_passing(fn.params))})"
    porter.cls.append(name)
    stage = porter._emit(s, fn, fused, unfused, covers=["swiglu"])
    porter.cls.pop()
    porter.result.done.add((name, "swiglu"))
    new_fn = fn.with_changes(body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return(stage)])]))
    old = fn.with_changes(
        name=cst.Name(f"_kb_unfused_{method}"), leading_lines=[cst.EmptyLine()], decorators=[]
    )
    body = list(cls.body.body)
    body[k : k + 1] = [new_fn, old]
    return cls.with_changes(body=cls.body.with_changes(body=body))


def _write(
    porter: Any,
    cls: cst.ClassDef,
    s: Stage,
    k: int,
    fn: cst.FunctionDef,
    index: int,
    parts: dict[str, str],
    owner: str,
    glu: tuple[str, str, str],
) -> cst.ClassDef:
    name = cls.name.value
    gate, up, down = glu
    porter.result.helpers += ["_kb_moe_experts", "_kb_stacked_experts"]
    stacked = f"_kb_stacked_experts(self, {owner!r}, {(gate, up, down)!r})"
    _weights_note(porter, name, owner, glu)
    if index < 0:  # the whole method is the routed pass
        routed = f"_kb_moe_experts({parts['x']}, {parts['ids']}, {parts['weights']}, *{stacked})"
        return _write_method(porter, cls, s, k, fn, routed)
    acc = parts["acc"]
    fused = (
        f"{acc} + _kb_moe_experts({parts['x']}, {parts['ids']}, {parts['weights']}, "
        f"*{stacked}).reshape({acc}.shape).to({acc}.dtype)"
    )
    helper = f"_kb_expert_loop_{len(porter.result.stages) + 1}"
    porter.cls.append(name)
    stage = porter._emit(s, fn.body.body[index], fused, f"{helper}({acc})", covers=["swiglu"])
    porter.cls.pop()
    porter.result.done.add((name, "swiglu"))
    loop = fn.body.body[index]
    assert isinstance(loop, cst.For)
    carried = "".join(f", {n}={n}" for n in parts["carried"].split(",") if n)
    inner = cst.parse_module(
        f"def {helper}({acc}{carried}):\n    {acc} = {acc}.clone()\n    pass\n    return {acc}\n"
    ).body[0]
    assert isinstance(inner, cst.FunctionDef) and isinstance(inner.body, cst.IndentedBlock)
    stmts: list[cst.BaseStatement] = [
        *inner.body.body[:1],
        loop.with_changes(leading_lines=[]),
        *inner.body.body[2:],
    ]
    inner = inner.with_changes(
        body=inner.body.with_changes(body=stmts), leading_lines=loop.leading_lines
    )
    assign = cst.parse_statement(f"{acc} = {code(stage)}\n")
    new_body = list(fn.body.body)
    new_body[index : index + 1] = [inner, assign]
    body = list(cls.body.body)
    body[k] = fn.with_changes(body=fn.body.with_changes(body=new_body))
    return cls.with_changes(body=cls.body.with_changes(body=body))


HELPERS: dict[str, str] = {
    "_kb_moe_experts": '''

def _kb_moe_experts(x, ids, weights, w_gate_up, w_down, b_gate_up=None, b_down=None, act=None):
    """Every expert in one routed pass: tokens sorted by expert, two grouped matmuls (with
    the experts' biases, when they have them) around SwiGLU (or ``act``, the model's own
    activation, run unfused between them), the rows weighted and summed back (expert ids
    outside [0, E) are dropped)."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    ids = ids.reshape(rows.shape[0], -1).to(torch.int32)
    experts = w_gate_up.shape[0]
    expanded, order, counts, _ = torch_npu.npu_moe_init_routing_v2(
        rows, ids, active_num=ids.numel(), expert_num=experts, expert_tokens_num_type=1,
        expert_tokens_num_flag=True, active_expert_range=[0, experts], quant_mode=-1)
    # a bias is float32 beside bfloat16 x, else x's dtype (the operator's dtype table)
    bias_dtype = torch.float32 if x.dtype == torch.bfloat16 else x.dtype
    bias = None if b_gate_up is None else [b_gate_up.to(bias_dtype)]
    h = torch_npu.npu_grouped_matmul([expanded], [w_gate_up.to(x.dtype)], bias=bias,
                                     group_list=counts, split_item=3, group_type=0,
                                     group_list_type=1)[0]
    h = torch_npu.npu_swiglu(h) if act is None else act(h)
    bias = None if b_down is None else [b_down.to(bias_dtype)]
    h = torch_npu.npu_grouped_matmul([h], [w_down.to(x.dtype)], bias=bias, group_list=counts,
                                     split_item=3, group_type=0, group_list_type=1)[0]
    out = torch_npu.npu_moe_finalize_routing(
        h, None, None, None, weights.reshape(ids.shape).to(h.dtype), order, None,
        drop_pad_mode=2)
    return out.reshape(shape).to(x.dtype)
''',
    "_kb_stacked_experts": '''

def _kb_stacked_experts(owner, name, parts):
    """The weights of one module per expert (``owner.<name>``, projections ``parts`` =
    gate, up, down) stacked for the grouped matmuls: gate_up [E, H, 2I] gate first, down
    [E, I, H], and their biases when the projections have them.  Built once, at the first
    fused call, and kept on ``owner``; rebuilt when a weight tensor is replaced or changed
    in place.  Inference only (no gradient reaches the modules' own parameters)."""
    mods = list(getattr(owner, name))
    layers = [[getattr(m, p) for m in mods] for p in parts]
    stamp = tuple((l.weight.data_ptr(), l.weight._version) for ls in layers for l in ls)
    cache = owner.__dict__.setdefault("_kb_stacked", {})
    if cache.get(name, (None,))[0] != stamp:
        with torch.no_grad():
            gate, up, down = ([l.weight for l in ls] for ls in layers)
            gate_up = torch.cat([torch.stack(gate), torch.stack(up)], 1).transpose(1, 2)
            w_down = torch.stack(down).transpose(1, 2)
            biases = [[l.bias for l in ls] for ls in layers]
            b_gate_up = b_down = None
            if any(b is not None for bs in biases for b in bs):
                zero = [[l.weight.new_zeros(l.weight.shape[0]) if l.bias is None else l.bias
                         for l in ls] for ls in layers]
                b_gate_up = torch.cat([torch.stack(zero[0]), torch.stack(zero[1])], 1)
                b_down = torch.stack(zero[2])
        cache[name] = (stamp, (gate_up.contiguous(), w_down.contiguous(), b_gate_up, b_down))
    return cache[name][1]
''',
}
