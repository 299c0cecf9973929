"""Mixture-of-experts patterns matched on the dataflow: the router (scores of a projection,
softmax or sigmoid, a top-k, before or after scoring; a correction bias used only to choose,
expert groups, renormalisation, a routed scale) and the experts (a loop over experts of
any shape, or batched products over stacked expert weights).
"""

from __future__ import annotations

from typing import Any

from kb.scan.model.dataflow import (
    Graph,
    ancestors,
    choice,
    fact_value,
    is_weight,
    kwarg,
    number,
    source,
    symbolic,
)
from kb.scan.model.graph import Const, Inst, Node, Slice, Sym
from kb.scan.model.match_dense import Fact, Match

_SCORES = ("softmax", "sigmoid")
_PEEL = frozenset(
    {
        "same",
        "contiguous",
        "view",
        "squeeze",
        "unsqueeze",
        "flatten",
        "transpose",
        "permute",
        "expand",
    }
)
_ROUTING = frozenset(
    {
        "one_hot",
        "eq",
        "where",
        "nonzero",
        "argsort",
        "sort",
        "bincount",
        "scatter",
        "gather",
        "index_add",
        "scatter_add",
        "index_copy",
        "getitem",
        "part",
    }
)


#: what lies between a group top-k and the router's own top-k
_INNER = frozenset(
    {
        "part",
        "sum",
        "getitem",
        "scatter",
        "zeros",
        "repeat_interleave",
        "cast_bool",
        "masked_fill",
        "view",
        "unsqueeze",
        "expand",
        "reshape",
        "same",
        "logic",
        "neg",
    }
)


def _logits(value: Any) -> Node | None:
    """The projection a router scores: ``linear(x)`` or ``x @ weight``, also when its rows
    are repeated to every token (logits of a condition that routes the whole sample)."""
    v = source(value, _PEEL | {"phi", "repeat", "repeat_interleave"})
    if isinstance(v, Node) and (
        v.op == "linear" or (v.op in ("matmul", "einsum") and any(is_weight(a) for a in v.args))
    ):
        return v
    return None


def routers(graph: Graph) -> list[Match]:
    out: list[Match] = []
    for t in graph.ops("topk", "argmax"):  # an argmax picks the top one
        if t.op == "topk" and any(u.op == "topk" for u in graph.downstream(t, _INNER, 24)):
            continue  # a top-k inside the routing (of expert groups): the router's is the last
        x = t.args[0] if t.args else None
        k = fact_value(kwarg(t, "k", 1)) if t.op == "topk" else 1
        facts: dict[str, Fact] = {"topk": Fact.at(k, t)}
        if k == 0:  # a configuration default left unset (no expert is chosen by 0)
            facts["topk"] = Fact.at(
                "unknown",
                t,
                "k is 0 in the code's defaults: the checkpoint's configuration sets it",
            )
        nodes = [t]
        raw, x = x, source(x, _PEEL | {"phi"})
        if (
            isinstance(x, Node) and x.op == "masked_fill"
        ):  # experts of the groups not kept are masked out
            group_topk = next(
                (
                    n
                    for n in ancestors(x.args[1] if len(x.args) > 1 else None, 40)
                    if n.op == "topk"
                ),
                None,
            )
            if group_topk is not None:
                facts["groups"] = Fact.at(
                    _group_count(group_topk), group_topk, "experts scored by groups"
                )
                facts["topk_groups"] = Fact.at(fact_value(kwarg(group_topk, "k", 1)), group_topk)
                nodes.append(group_topk)
            raw, x = x.args[0], source(x.args[0], _PEEL | {"phi"})
        if isinstance(x, Node) and x.op == "add":
            bias = [
                a
                for a in x.args
                if is_weight(a) or (isinstance(source(a), Node) and source(a).op == "zeros")
            ]
            scored = [
                a for a in x.args if isinstance(a, Node) and not is_weight(a) and a not in bias
            ]
            if bias and scored:
                facts["bias"] = Fact.at(True, x, "a correction bias added to choose, not to weigh")
                raw, x = scored[0], source(scored[0], _PEEL | {"phi"})
        if isinstance(x, Node) and x.op in _SCORES:
            logits = _logits(x.args[0] if x.args else None)
            if logits is None:
                continue
            facts["scoring"] = Fact.at(x.op, x, f"{x.op} of the router's projection")
            undecided = choice(raw, _PEEL)
            if undecided is not None and len({a.op for a in undecided[0]}) > 1:
                ops = tuple(dict.fromkeys(a.op for a in undecided[0]))
                facts["scoring"] = Fact.at("unknown", x, f"{' or '.join(ops)}{undecided[1]}", ops)
            facts["order"] = Fact.at("score_then_topk", t)
            nodes += [x, logits]
        else:
            logits = _logits(x)
            if logits is None:
                continue
            scored_after = next(
                (
                    u
                    for u in graph.downstream(
                        t,
                        _PEEL
                        | {"part", "scatter", "transpose", "permute", "getitem", "masked_fill"},
                        24,
                    )
                    if u.op in _SCORES
                ),
                None,
            )
            if scored_after is None:
                continue
            facts["scoring"] = Fact.at(
                scored_after.op, scored_after, f"{scored_after.op} of the top-k values"
            )
            facts["order"] = Fact.at("topk_then_score", t)
            nodes += [scored_after, logits]
        if not _routes(graph, t):
            continue
        facts.setdefault("bias", Fact.at(False, t))
        facts.setdefault("groups", Fact.at(1, t))
        facts["renormalize"] = _renormalised(graph, t)
        scale = _scaled(graph, t)
        if scale is not None:
            facts["scale"] = scale
        out.append(Match("router", nodes, facts))
    return out


def _group_count(group_topk: Node) -> Any:
    """The groups of a grouped router: the middle size of the view it scores."""
    for n in ancestors(group_topk.args[0] if group_topk.args else None, 20):
        if n.op in ("view", "reshape") and len(n.args) >= 3:
            g = n.args[-2]
            return g.value if isinstance(g, Const) else symbolic(g)
    return "?"


def _routes(graph: Graph, t: Node) -> bool:
    """The chosen indices pick experts (a mask, a one-hot, a sort, a gather of weights) or
    leave the module to whoever does."""
    for user in graph.downstream(t, _PEEL, 24):
        if user.op in _ROUTING or user.op in ("call", "method", "mul", "div"):
            return True
    return not graph.uses(t) or True


def _renormalised(graph: Graph, t: Node) -> Fact:
    for n in graph.downstream(t, _PEEL | {"part", "gather", "getitem"}, 32):
        if n.op == "div" and len(n.args) == 2 and isinstance(n.args[1], Node):
            denom = source(n.args[1])
            if isinstance(denom, Node) and denom.op == "add":
                denom = next((a for a in denom.args if isinstance(a, Node)), denom)
                denom = source(denom)
            if isinstance(denom, Node) and denom.op == "sum":
                return Fact.at(True, n, "the chosen weights are divided by their sum")
    return Fact.at(False, t)


def _scaled(graph: Graph, t: Node) -> Fact | None:
    for n in graph.downstream(t, _PEEL | {"part", "gather", "getitem", "div"}, 32):
        if n.op == "mul":
            c = [a for a in n.args if isinstance(a, (Const, Sym))]
            if c:
                value = number(c[0])
                if value is None or value != 1.0:
                    return Fact.at(
                        value if value is not None else symbolic(c[0]), n, "routed scaling factor"
                    )
    return None


def _adds_bias(n: Node) -> bool:
    """A projection that adds a bias: a linear module built with one (``nn.Linear``'s
    default), ``F.linear`` given one, or a product plus a parameter."""
    if n.op == "linear":
        if isinstance(n.kw.get("module"), Inst):
            flag = n.kw.get("bias", Const(True))
            return not (isinstance(flag, Const) and flag.value in (False, None))
        return isinstance(kwarg(n, "bias", 2), Node)
    if n.op == "add":
        ops = list(n.operands())
        return any(is_weight(a) for a in ops) and any(
            source(a).op in ("matmul", "einsum", "bmm") for a in ops if isinstance(source(a), Node)
        )
    return False


def experts(graph: Graph, mlps: list[Match]) -> list[Match]:
    """Expert computation: products in a loop over experts accumulated into an output, or
    batched over stacked expert weights."""
    out: list[Match] = []
    loops = [
        n
        for n in graph.nodes
        if n.loop
        and n.op in ("index_add", "scatter_add", "setitem", "add", "index_copy", "cat", "stack")
    ]
    # outputs appended to a list in the loop and joined after it (one cat of the experts')
    joined = [
        (n, a)
        for n in graph.ops("cat", "stack")
        for a in [next((a for a in n.operands() if a.loop > n.loop), None)]
        if a is not None
    ]
    seen_owners: set[int] = set()
    for acc, last in [*((n, n) for n in loops), *joined]:
        if acc.op == "setitem" and not (
            isinstance(acc.kw.get("accumulate"), Const) or _is_expert_out(acc)
        ):
            continue
        # this loop, not an outer one
        body = [last, *(n for n in ancestors(last, 160) if n.loop == last.loop)]
        products = [
            n for n in body if n.op in ("linear", "matmul", "einsum") or _calls_mlp(n, mlps)
        ]
        if not products or not _selects_by_loop(body):
            continue
        outside = {n.op for n in ancestors(acc, 240) if n.loop < last.loop}
        form = (
            "loop over sorted tokens"
            if outside & {"argsort", "bincount", "sort"}
            else "loop over masks"
        )
        facts: dict[str, Fact] = {
            "form": Fact.at(form, acc, f"experts run in a loop, results {acc.op}")
        }
        inner = [
            m
            for m in mlps
            if any(n.loop for n in m.nodes) and set(map(id, m.nodes)) & set(map(id, body))
        ] or _owners_mlp(acc, mlps)
        if inner:
            facts["activation"] = inner[0].facts["activation"]
            facts["glu"] = inner[0].facts.get("glu", Fact("none"))
            if "clamped_glu" in inner[0].facts:
                facts["clamped_glu"] = inner[0].facts["clamped_glu"]
        passed = next((n for n in body if _passes_through(n)), None)
        if passed is not None:
            facts["identity_experts"] = Fact.at(
                True, passed, "some experts of the list return their input (zero-compute experts)"
            )
        biased = next((n for n in body if _adds_bias(n)), None)
        if biased is not None:
            facts["expert_bias"] = Fact.at(True, biased, "an expert's projection adds a bias")
        stacked = any(
            n.op in ("linear", "matmul") and any(_rank3(a) for a in n.args) for n in products
        )
        facts["weights"] = Fact.at("stacked" if stacked else "one module per expert", products[0])
        key = id(acc.owner) if acc.owner is not None else id(acc)
        if key in seen_owners:
            continue
        seen_owners.add(key)
        out.append(Match("experts", [acc, *products[:2]], facts))
    for n in graph.ops("einsum", "matmul"):
        if n.loop or not any(_rank3(a) for a in n.args):
            continue
        facts = {
            "form": Fact.at("batched matmul", n, "every expert's stacked weights in one product"),
            "weights": Fact.at("stacked", n),
        }
        inner = [
            m for m in mlps if n in m.nodes or any(x in m.nodes for x in ancestors(n, 6))
        ] or _owners_mlp(n, mlps)
        if inner:
            facts["activation"] = inner[0].facts["activation"]
            facts["glu"] = inner[0].facts.get("glu", Fact("none"))
            if "clamped_glu" in inner[0].facts:
                facts["clamped_glu"] = inner[0].facts["clamped_glu"]
        key = id(n.owner) if n.owner is not None else id(n)
        if key not in seen_owners:
            seen_owners.add(key)
            out.append(Match("experts", [n], facts))
    return out


def _owners_mlp(n: Node, mlps: list[Match]) -> list[Match]:
    """The gated feed-forward the experts' own module computes around them (the projections
    are expert modules, the activation between them is the owner's)."""

    def owner(x: Node) -> Inst | None:
        return x.owner.module_owner() if x.owner is not None else None

    mine = owner(n)
    return [m for m in mlps if mine is not None and m.nodes and owner(m.nodes[-1]) is mine][:1]


def _rank3(value: Any) -> bool:
    v = source(value)
    if not (isinstance(v, Node) and v.op == "param" and v.args):
        return False
    made = v.args[0]
    if isinstance(made, Node) and made.op in ("zeros", "ones", "random", "full"):
        sizes = (
            made.args[0].items
            if made.args and hasattr(made.args[0], "items") and not isinstance(made.args[0], Const)
            else made.args
        )
        if made.args and isinstance(made.args[0], Const) and isinstance(made.args[0].value, tuple):
            sizes = made.args[0].value
        return len(sizes) == 3
    return False


def _calls_mlp(n: Node, mlps: list[Match]) -> bool:
    return any(n in m.nodes for m in mlps)


#: ops that route tokens to experts (what a loop's selection descends from)
_ROUTING = frozenset({"one_hot", "topk", "argmax", "argsort", "sort", "bincount"})


def _selects_by_loop(body: list[Node]) -> bool:
    """The loop picks the tokens routed to its expert: routing ids compared with the loop
    index, a routing mask or weight indexed by it, token counts sliced by it, or the
    expert's share of dispatched tokens taken per step (``zip(chunks, experts)``)."""
    for n in body:
        for a in n.operands():
            index = a.kw.get("index")
            if (
                a.op == "part"
                and not a.loop
                and isinstance(index, Sym)
                and index.loop
                and any(u.op in _ROUTING for u in ancestors(a, 30))
            ):
                return True
        if n.op == "eq" and any(isinstance(a, Sym) and a.loop for a in n.args):
            return True
        if n.op == "getitem" and any(
            (isinstance(i, Sym) and i.loop)
            or (isinstance(i, Node) and i.loop and i.op in ("part", "getitem"))
            or (
                isinstance(i, Slice)
                and any(
                    (isinstance(b, Sym) and b.loop) or isinstance(b, Node)
                    for b in (i.lower, i.upper)
                )
            )
            for i in n.kw.get("index") or ()
        ):
            base = n.args[0] if n.args else None
            if any(a.op in _ROUTING for a in ancestors(base, 30)):
                return True
    return False


def _indexed_by_loop(body: list[Node]) -> bool:
    """The loop picks one expert's weights or rows by its index (``w[e]``, ``x[idx]``)."""
    for n in body:
        if n.op == "getitem":
            index = n.kw.get("index") or ()
            if any(isinstance(i, Sym) and i.loop for i in index):
                return True
    return False


def _is_expert_out(n: Node) -> bool:
    index = n.kw.get("index") or ()
    return any(isinstance(i, Node) for i in index)


def _passes_through(n: Node) -> bool:
    """An undecided expert call whose alternatives are a computed output and the expert's
    input itself (an identity expert in the same list as the MLPs)."""
    if n.op != "phi":
        return False
    options = list(n.operands())
    for plain in options:
        given = source(plain)
        for other in options:
            if other is plain:
                continue
            before = ancestors(other, 60)
            if any(a is given for a in before) and any(
                a.op in ("linear", "matmul") and a.loop >= n.loop for a in before
            ):
                return True  # the same input, once computed on and once handed back
    return False
