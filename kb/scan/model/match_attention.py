"""Attention matched on the dataflow: softmax(q·kᵀ·scale [+ mask | sinks])·v written out, or
a kernel of another library (``scaled_dot_product_attention``, flash-attn, xformers), and
what feeds its q and k: the rotation and its pairing, q/k norms, a cache of every write
shape, repeated key/value heads.

Causality is a fact only where the code proves it: a causal flag the kernel is given, a
triangular mask, a cache that grows over calls, or the module's own ``is_causal = True``;
anything else is bidirectional, or decided by the caller when the flag or mask comes in as
an argument the reader cannot follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.scan.model.dataflow import (
    Graph,
    ancestors,
    is_weight,
    kwarg,
    owner_module,
    source,
    sources,
    symbolic,
    tensors,
)
from kb.scan.model.graph import UNKNOWN, Alt, Const, Inst, Node, Seq, Sym
from kb.scan.model.match_dense import Fact, Match, Norm
from kb.scan.model.match_rope import rope_of
from kb.scan.model.match_window import window_facts
from kb.scan.model.ops import SHAPE_OPS

_PRODUCTS = frozenset({"matmul", "einsum"})
_PROJECTIONS = frozenset({"linear", "matmul", "einsum", "conv"})
_STOP = frozenset({"linear", "input", "param", "conv", "embedding"})
#: kernel keyword -> positional index, per kernel form
_FLASH_CAUSAL = 5  # flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, ...)
_VARLEN_CAUSAL = (
    9  # flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, scale, causal, ...)
)


@dataclass
class Core:
    form: str  # sdpa | flash_attn | xformers | written
    node: Node
    q: Any
    k: Any
    v: Any
    mask: Any = None
    flag: Any = None  # the kernel's causal flag as passed
    sinks: Fact | None = None
    window: Fact | None = None
    nodes: list[Node] = field(default_factory=list)
    #: every mask or bias applied to the scores (a bias added, then a causal and a padding
    #: mask filled in); ``mask`` is the innermost, kept for what reads one
    masks: list[Any] = field(default_factory=list)


#: a match whose q and k paths the reader could not follow: it says nothing of how they are
#: rotated or normalised (:func:`kb.scan.model.entries.group` reads that elsewhere)
UNTRACED = "untraced"
#: the facts such a match cannot show
PATH_FACTS = ("rope", "qk_norm", "head_dim", "gqa")


def _mask(value: Any) -> Any:
    """A mask argument, or None when it is absent or None."""
    if value is UNKNOWN or (isinstance(value, Const) and value.value is None):
        return None
    return value


def cores(graph: Graph) -> list[Core]:
    out: list[Core] = []
    for n in graph.ops("sdpa"):
        q, k, v = (kwarg(n, name, i) for i, name in enumerate(("query", "key", "value")))
        flag = kwarg(n, "is_causal", 5)
        out.append(Core("sdpa", n, q, k, v, _mask(kwarg(n, "attn_mask", 3)), flag, nodes=[n]))
    for n in graph.ops("flash_attn"):
        fn = str(n.kw.get("fn", Const("")).value if isinstance(n.kw.get("fn"), Const) else "")
        varlen = "varlen" in fn
        packed = "qkvpacked" in fn
        q = kwarg(n, "q", 0)
        k = q if packed else kwarg(n, "k", 1)
        v = q if packed else kwarg(n, "v", 2)
        flag = kwarg(n, "causal", _VARLEN_CAUSAL if varlen else _FLASH_CAUSAL)
        core = Core("flash_attn", n, q, k, v, None, flag, nodes=[n])
        window = n.kw.get("window_size")
        if window is not None and not (
            isinstance(window, Const) and window.value in ((-1, -1), None)
        ):
            core.window = Fact.at(symbolic(window), n, "flash-attn window_size")
        sinks = next((n.kw[s] for s in ("sinks", "s_aux", "learnable_sink") if s in n.kw), None)
        if isinstance(sinks, Node):
            core.sinks = Fact.at(True, n, "sinks passed to the kernel")
        out.append(core)
    for n in graph.ops("xformers_attn"):
        bias = kwarg(n, "attn_bias", 3)
        flag = (
            Const(True)
            if isinstance(bias, Inst) and ("Causal" in bias.name or "LowerTriangular" in bias.name)
            else None
        )
        out.append(
            Core(
                "xformers",
                n,
                kwarg(n, "query", 0),
                kwarg(n, "key", 1),
                kwarg(n, "value", 2),
                bias if isinstance(bias, Node) else None,
                flag,
                nodes=[n],
            )
        )
    for n in graph.ops("softmax"):
        written = _written(graph, n)
        if written is not None:
            out.append(written)
    return out


def _written(graph: Graph, soft: Node) -> Core | None:
    """softmax(q kᵀ * scale + mask) v, read back from the softmax."""
    x: Any = soft.args[0] if soft.args else None
    mask: Any = None
    masks: list[Any] = []
    sinks: Fact | None = None
    nodes = [soft]
    for _ in range(10):
        if not isinstance(x, Node):
            return None
        if x.op in ("same", "contiguous", "view", "reshape") or (x.op == "phi" and x.args):
            x = x.args[0]  # scores laid out again ([b*h, q, k] viewed as [b, h, q, k])
        elif x.op == "add":
            parts = [a for a in x.args if isinstance(a, (Node, Alt))]
            scores = next((a for a in parts if isinstance(a, Node) and _has_product(a)), None)
            if scores is None:
                return None
            mask = next((a for a in parts if a is not scores), mask)
            masks.append(mask)
            nodes.append(x)
            x = scores
        elif x.op == "masked_fill":
            mask = x.args[1] if len(x.args) > 1 else mask
            masks.append(mask)
            x = x.args[0]
        elif x.op in ("maximum", "clamp"):  # scores clamped to the dtype's range
            scored = [a for a in x.args if isinstance(a, Node) and _has_product(a)]
            if not scored:
                return None
            x = scored[0]
        elif x.op in ("mul", "div", "sub"):
            tensor_args = [a for a in x.args if isinstance(a, Node) and _has_product(a)]
            if not tensor_args:
                return None
            x = tensor_args[0]
        elif x.op == "cat" and x.args and isinstance(x.args[0], Seq) and len(x.args[0].items) == 2:
            first, extra = x.args[0].items
            if not (isinstance(first, Node) and _has_product(first)):
                return None
            if any(is_weight(t) for t in tensors([extra])) or is_weight(extra):
                sinks = Fact.at(
                    True, x, "a learned sink column joins the scores before the softmax"
                )
            x = first
        elif x.op in _PRODUCTS:
            break
        else:
            return None
    if not (isinstance(x, Node) and x.op in _PRODUCTS):
        return None
    operands = [a for a in x.args if isinstance(a, Node)]
    # ``bias.baddbmm(batch1=q, batch2=kᵀ)``: the products by keyword
    operands += [x.kw[b] for b in ("batch1", "batch2") if isinstance(x.kw.get(b), Node)]
    if x.op == "matmul" and len(operands) == 3:  # baddbmm(mask, q, kᵀ)
        mask, operands = operands[0], operands[1:]
    if len(operands) != 2 or any(is_weight(a) for a in operands):
        return None
    q, k = operands
    v = None
    for user in graph.downstream(soft, limit=16):
        if user.op in _PRODUCTS:
            others = [
                a
                for a in user.args
                if isinstance(a, Node)
                and source(a) is not soft
                and a is not soft
                and not _reads(a, soft)
            ]
            if others and not is_weight(others[-1]):
                v = others[-1]
                nodes.append(user)
                break
    if v is None:
        return None
    nodes.append(x)
    return Core("written", soft, q, k, v, mask, None, sinks, nodes=nodes, masks=masks)


def _has_product(n: Node, depth: int = 6) -> bool:
    if n.op in _PRODUCTS:
        return True
    if depth == 0:
        return False
    return any(_has_product(o, depth - 1) for o in n.operands() if o.op not in _STOP)


def _reads(value: Node, target: Node, depth: int = 4) -> bool:
    if value is target:
        return True
    if depth == 0:
        return False
    return any(_reads(o, target, depth - 1) for o in value.operands())


# -- what feeds q and k ----------------------------------------------------------------------------


def path(value: Any, limit: int = 160) -> tuple[list[Node], list[Node]]:
    """(nodes between the projections and ``value``, the projections) of one operand."""
    nodes = ancestors(value, limit, _STOP)
    projections = [
        n
        for n in nodes
        if n.op in ("linear", "conv")
        or (n.op in ("matmul", "einsum") and any(is_weight(a) for a in n.args))
    ] or [n for n in nodes if n.op == "call"]  # a projection the reader does not follow
    reached: dict[int, bool] = {p.id: True for p in projections}
    order = {n.id: n for n in nodes}

    def derived(n: Node, depth: int = 0) -> bool:
        if n.id in reached:
            return reached[n.id]
        reached[n.id] = False
        if depth > 200:
            return False
        found = any(o.id in order and derived(o, depth + 1) for o in n.operands())
        reached[n.id] = found
        return found

    return [n for n in nodes if derived(n)], projections


def norm_on(nodes: list[Node], norms: list[Norm]) -> Norm | None:
    """The norm applied on an operand's path (a q/k norm)."""
    ids = {n.id for n in nodes}
    return next((norm for norm in norms if norm.out.id in ids), None)


def cache_of(value: Any, graph: Graph) -> Fact | None:
    """How keys are kept across calls, when the operand comes out of a store: a slot
    written and read back, an in-place index write, a concatenation with past keys handed
    in, or a cache object's ``update``.  A memo of rotation tables or masks is never read
    as keys, so it is not found here."""
    for n in ancestors(value, 120, frozenset({"linear", "param"})):
        if n.op == "setitem" and len(n.args) >= 2 and _stored(n.args[0]) and _projected(n.args[1]):
            return Fact.at("slot", n, "keys written into a preallocated cache and read back")
        if n.op in ("index_copy", "index_put", "scatter", "copy") and n.args and _stored(n.args[0]):
            return Fact.at(n.op, n, f"keys written into the cache with {n.op}")
        if n.op == "cat" and n.args and isinstance(n.args[0], Seq):
            items = n.args[0].items
            past = [i for i in items if isinstance(i, Node) and _stored(i) and not _projected(i)]
            new = [i for i in items if isinstance(i, Node) and _projected(i)]
            if past and new:
                return Fact.at("cat", n, "past keys handed in are concatenated with the new ones")
            if new and len(items) == 2 and any(i is UNKNOWN for i in items):
                # the past is what an earlier call handed back (an empty tuple on the first
                # call, so the reader sees nothing in it): joined in front of the new keys
                return Fact.at("cat", n, "keys of an earlier call are joined with the new ones")
        if (
            n.op == "method"
            and isinstance(n.kw.get("name"), Const)
            and n.kw["name"].value == "update"
            and any(_projected(a) for a in n.args[1:] if isinstance(a, Node))
        ):
            return Fact.at("update", n, "a cache object's update returns the keys so far")
        if n.op == "flash_attn" and any(k in n.kw for k in ("k_cache", "v_cache")):
            return Fact.at("kernel", n, "the kernel writes and reads the cache")
    return None


def _stored(value: Any) -> bool:
    """A tensor kept by the module or handed in: a preallocated buffer, a forward argument."""
    for s in sources(
        value,
        frozenset(
            {
                "same",
                "contiguous",
                "view",
                "transpose",
                "permute",
                "squeeze",
                "unsqueeze",
                "part",
                "getitem",
                "setitem",
            }
        )
        | {"phi"},
    ):
        if s.op in ("zeros", "ones", "full") and len(s.args) == 1 and isinstance(s.args[0], Node):
            continue  # ``empty_like(x)``: shaped like this call's tensor, made again each call
        if s.op in ("zeros", "ones", "full", "input", "state", "param") or (
            s.op == "method" and s.args
        ):
            return True
    return False


def _projected(value: Any) -> bool:
    return any(n.op in _PROJECTIONS for n in ancestors(value, 60, frozenset({"linear", "param"})))


def repeated_heads(nodes: list[Node]) -> Fact | None:
    for n in nodes:
        if n.op == "repeat_interleave" or (
            n.op == "expand"
            and n.args
            and isinstance(n.args[0], Node)
            and n.args[0].op in ("getitem", "unsqueeze")
        ):
            return Fact.at(True, n, "key/value heads repeated to the query heads")
    return None


def head_dim_of(nodes: list[Node]) -> Fact | None:
    for n in nodes:
        if n.op in ("view", "reshape") and len(n.args) >= 3:
            d = n.args[-1]
            if isinstance(d, Const) and isinstance(d.value, int) and d.value > 2:
                return Fact.at(d.value, n, "the head split's last size")
        if n.op == "rearrange":
            d = n.kw.get("D") or n.kw.get("d")
            if isinstance(d, Const) and isinstance(d.value, int):
                return Fact.at(d.value, n)
    return None


def causality(core: Core, cache: Fact | None, owner: Inst | None, cross: bool) -> Fact:
    """Causal (proven), bidirectional, or the caller's choice (see the module doc)."""
    flag = core.flag
    if isinstance(flag, Const) and flag.value is True:
        return Fact.at(True, core.node, f"{core.form} is told causal")
    seen = [m for m in (core.masks or [core.mask]) if m is not None]
    for n in (a for m in seen for a in ancestors(m, 80)):
        if n.op in ("triu", "tril"):
            return Fact.at(True, n, f"a triangular mask ({n.op})")
        if _ordered_positions(n):
            return Fact.at(True, n, "a triangular mask (key positions compared with queries')")
        if n.op == "call" and "causal" in str(n.kw.get("callee", Const("")).value).lower():
            return Fact.at(True, n, "a causal mask is built for it")
    if _causal_unless_masked(flag):
        return Fact.at(True, core.node, f"{core.form} is told causal whenever {flag.why}")
    if isinstance(flag, (Sym, Alt)):
        return Fact.at("caller", core.node, "the causal flag is the caller's argument")
    if cache is not None and not cross:
        return Fact(
            True,
            cache.file,
            cache.line,
            "a cache that grows over calls: each new query sees the keys before it",
        )
    if (
        owner is not None
        and isinstance(owner.attrs.get("is_causal"), Const)
        and owner.attrs["is_causal"].value is True
    ):
        return Fact(True, core.node.file, core.node.line, "the module's is_causal = True")
    own = owner.attrs.get("is_causal") if owner is not None else None
    if isinstance(own, Const) and own.value is False:
        return Fact(False, core.node.file, core.node.line, "the module's is_causal = False")
    if core.mask is not None and _handed_in(core.mask):
        return Fact.at("caller", core.node, "the mask comes from the caller")
    return Fact.at(
        False,
        core.node,
        "no causal flag, triangular mask or growing cache: every query sees every key",
    )


def _causal_unless_masked(flag: Any) -> bool:
    """``is_causal=mask is None`` (or ``True if mask is None else False``): the kernel runs
    causal on its own, and a mask handed in (a decode step's, over the cached keys) replaces
    the triangle it would build."""
    return (
        isinstance(flag, Alt)
        and flag.why.endswith(" is None")
        and "mask" in flag.why.lower()
        and any(isinstance(o, Const) and o.value is True for o in flag.options)
    )


def _inputs(projections: list[Node]) -> set[int]:
    """What the projections read, by node (through reshapes and casts)."""
    out: set[int] = set()
    for p in projections:
        x = source(p.args[0]) if p.args else None
        if isinstance(x, Node):
            out.add(x.id)
    return out


def _ordered_positions(n: Node) -> bool:
    """``k_pos > q_pos`` (or ``<``, ``>=``, ``<=``) on two position tensors: a triangle."""
    cmp = n.kw.get("cmp")
    if n.op != "eq" or not (isinstance(cmp, Const) and cmp.value in ("Lt", "LtE", "Gt", "GtE")):
        return False
    sides = [a for a in n.args if isinstance(a, Node)]
    return len(sides) == 2 and all(_from_positions(a) for a in sides)


#: what a position bias is computed with: shapes moved, positions and slopes combined
#: arithmetically.  A walk back from the scores' added term follows only these, so a mask
#: built by a function the reader does not see into (given the embeddings for their dtype
#: and shape) never reaches the positional encodings behind those embeddings.
_COMBINING = ("getitem", "phi", "add", "sub", "mul", "div", "neg", "pow", "exp", "cumsum")
_ARITHMETIC = SHAPE_OPS | frozenset(_COMBINING) | {"arange", "full"}


#: products a position term may be computed with (the queries times position rows)
_PRODUCTS = frozenset({"einsum", "matmul", "bmm"})


def _arithmetic_ancestors(value: Any, limit: int, also: frozenset[str] = frozenset()) -> list[Node]:
    out: list[Node] = []
    todo = [value] if isinstance(value, Node) else []
    seen = {id(v) for v in todo}
    while todo and len(out) < limit:
        here = todo.pop(0)
        out.append(here)
        if here.op == "masked_fill" and here.args and isinstance(here.args[0], Node):
            following: list[Node] = [here.args[0]]  # a padding mask filled into the bias
        elif here.op in _ARITHMETIC or here.op in also:
            following = list(here.operands())
        else:
            continue
        for o in following:
            if id(o) not in seen:
                seen.add(id(o))
                todo.append(o)
    return out


def position_bias(term: Any) -> Node | None:
    """What makes a term added to the scores a position bias rather than a mask: a
    product of token positions (``arange``, ``cumsum``) that no comparison turned into a
    mask with another factor (ALiBi: per-head slopes times distances), or a learned table
    looked up at relative positions (T5's buckets), reached through arithmetic, or through
    a product with the queries (relative-position keys: ``q`` times a table's rows, added
    to ``q·kᵀ``).  None for a mask."""
    for n in _arithmetic_ancestors(term, 300, _PRODUCTS):
        if n.op == "mul" and _positions_times_factor(n):
            return n
        if _position_table(n):
            return n
    return None


def _position_table(n: Node) -> bool:
    """A learned table looked up at relative positions: an embedding (or a parameter
    indexed) at an index computed from token positions, through any ops (T5's buckets
    take a log, a min and a comparison on the way; Swin's index is a buffer built from
    coordinates)."""
    if n.op == "embedding" and n.args and isinstance(n.args[0], Node):
        index: Any = n.args[0]
    elif n.op == "getitem" and len(n.args) >= 1 and is_weight(n.args[0]):
        index = n.kw.get("index")
    else:
        return False
    parts = index if isinstance(index, tuple) else (index,)
    return any(
        a.op in ("arange", "cumsum")
        for p in parts
        if isinstance(p, Node)
        for a in ancestors(p, 120)
    )


def _positions_times_factor(n: Node) -> bool:
    """Positions times a tensor or a real number (slopes may be built from an arange over
    the heads too: two such factors are still no mask)."""
    factors = [
        a
        for a in n.args
        if isinstance(a, Node) or (isinstance(a, Const) and isinstance(a.value, float))
    ]
    return len(factors) >= 2 and any(isinstance(a, Node) and _from_positions(a) for a in factors)


def _from_positions(value: Node) -> bool:
    """Computed from token positions by arithmetic alone (no comparison on the way)."""
    chain = _arithmetic_ancestors(value, 60)
    return any(x.op in ("arange", "cumsum") for x in chain)


def _handed_in(mask: Any) -> bool:
    return any(
        s.op == "input"
        for s in sources(
            mask, frozenset({"same", "contiguous", "view", "getitem", "unsqueeze", "expand", "phi"})
        )
    )


def attention_matches(graph: Graph, norms: list[Norm]) -> list[Match]:
    out: list[Match] = []
    for core in cores(graph):
        q_nodes, q_proj = path(core.q)
        k_nodes, k_proj = path(core.k)
        facts: dict[str, Fact] = {"form": Fact.at(core.form, core.node)}
        if not q_nodes and not k_nodes:  # q and k handed in from code the reader did not run
            facts[UNTRACED] = Fact.at(True, core.node)
        cache = cache_of(core.k, graph)
        if cache is not None:
            facts["cache"] = cache
        rope = rope_of(q_nodes, graph) or rope_of(k_nodes, graph)
        if rope is not None:
            facts["rope"] = rope
        qk = norm_on(q_nodes, norms)
        parts: list[Node] = []
        if qk is not None:
            facts["qk_norm"] = Fact.at(qk.kind, qk.nodes[0], qk.why)
            parts += qk.nodes
            k_norm = norm_on(k_nodes, norms)
            parts += k_norm.nodes if k_norm is not None else []
        rep = repeated_heads(k_nodes)
        if rep is not None or (
            core.form == "sdpa"
            and isinstance(core.node.kw.get("enable_gqa"), Const)
            and core.node.kw["enable_gqa"].value is True
        ):
            facts["gqa"] = rep or Fact.at(True, core.node, "enable_gqa")
        hd = head_dim_of(q_nodes)
        if hd is not None:
            facts["head_dim"] = hd
        if core.sinks is not None:
            facts["sinks"] = core.sinks
        if core.window is not None:
            facts["window"] = core.window
        if core.mask is not None:
            facts["mask"] = Fact.at(True, core.node, "a mask or bias is added to the scores")
            bias = next(filter(None, map(position_bias, [*core.masks, core.mask])), None)
            if bias is not None:
                facts["position_bias"] = Fact.at(
                    True,
                    bias,
                    "a position bias is added to the scores (ALiBi's per-head slopes "
                    "times distances, or a learned relative-position table)",
                )
        nodes = list(core.nodes) + q_proj[:1] + k_proj[:1]
        q_in, k_in = _inputs(q_proj), _inputs(k_proj)
        cross = bool(q_in) and bool(k_in) and not (q_in & k_in)
        if cross:
            facts["cross"] = Fact.at(
                True, k_proj[0], "keys and values project other states than the queries"
            )
        facts["causal"] = causality(core, cache, owner_module(nodes), cross)
        if core.window is None and facts["causal"].value is True:
            facts.update(window_facts(owner_module(nodes), core.node))
        out.append(Match("attention", nodes, facts, parts))
    return out
