"""KB6xx: unfused PyTorch patterns that a torch_npu fused operator (or chain) replaces.

Each detector recognises one written-out computation in a function body by its
ingredients (a squared mean and an rsqrt is an RMSNorm; a softmax feeding a topk is a
router) and names the primitive *steps* it computes, from the records' ``fuses``
vocabulary.  Which operator or chain to use is then looked up in the records
(:mod:`kb.scan.offers`) -- the operators whose ``fuses`` cover the steps, best
documented first, proven chains preferred -- never from a table in this code.  Findings are ``info``: an opportunity,
not a defect.  ``kb scan --emit-candidates`` turns them into a candidate list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kb.lint.unit import RuleUnit
from kb.scan.fnindex import FnIndex
from kb.scan.fnindex import dotted as _name
from kb.scan.fnindex import last_part as _last
from kb.scan.interp import segment


class PatternRule(RuleUnit):
    """A fusion-opportunity rule: its detector and the steps it reports."""

    fronts = ("scan",)
    language = "python"
    severity = "info"
    steps: tuple[str, ...] = ()

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        """(first node, last node, steps, description) per match in one function."""
        return iter(())


# -- small AST helpers -----------------------------------------------------------------------


def _is_const(node: ast.AST, *values: object) -> bool:
    return isinstance(node, ast.Constant) and node.value in values


def _span(nodes: list[ast.AST]) -> tuple[ast.AST, ast.AST]:
    ordered = sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return ordered[0], max(ordered, key=lambda n: getattr(n, "end_lineno", 0) or 0)


def _calls_named(fn: FnIndex, *names: str) -> list[ast.Call]:
    return [c for n in names for c in fn.by_last.get(n.lower(), [])]


# -- detectors --------------------------------------------------------------------------------


class HandwrittenRmsNorm(PatternRule):
    code = "KB601"
    name = "handwritten-rms-norm"
    summary = "RMSNorm written out (square, mean over the last axis, rsqrt, scale): one fused call does it."
    why = (
        "Each step of a hand-written RMSNorm is a separate kernel with its own trip through "
        "memory; the fused norm reads the activation once. Most decoder layers run two per "
        "layer, so the saving repeats across the whole model."
    )
    fail = (
        "import torch\n\n\ndef rms_norm(x, weight, eps=1e-6):\n"
        "    variance = x.pow(2).mean(-1, keepdim=True)\n"
        "    return weight * (x * torch.rsqrt(variance + eps))\n"
    )
    fix = (
        "import torch_npu\n\n\ndef rms_norm(x, weight, eps=1e-6):\n"
        "    return torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]\n"
    )
    steps = ("rms_norm",)

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        squares: list[ast.AST] = [
            c
            for c in _calls_named(fn, "pow", "square")
            if _last(_name(c.func)) == "square" or any(_is_const(a, 2, 2.0) for a in c.args)
        ]
        squares += [
            n for n in fn.binops if isinstance(n.op, ast.Pow) and _is_const(n.right, 2, 2.0)
        ]
        means = _calls_named(fn, "mean")
        roots = _calls_named(fn, "rsqrt")
        if not (squares and means and roots):
            return
        text = " ".join(segment(lines, m) for m in means)
        if "-1" not in text and "dim" not in text:
            return
        if any(isinstance(n.op, ast.Sub) and "mean" in segment(lines, n) for n in fn.binops):
            return  # x - mean: a LayerNorm
        first, last = _span([*squares, *means, *roots])
        yield first, last, self.steps, "RMSNorm written out"


class ResidualAddThenNorm(PatternRule):
    code = "KB602"
    name = "residual-add-then-norm"
    summary = (
        "A residual add immediately followed by an RMSNorm: the add-and-norm fuses into one call."
    )
    why = (
        "Decoder layers add the residual and normalise the sum twice per layer; the fused "
        "operator returns both the normalised output and the new residual from one read, "
        "saving a full pass over the hidden states."
    )
    fail = (
        "class Layer:\n    def forward(self, hidden_states, residual):\n"
        "        hidden_states = residual + hidden_states\n"
        "        residual = hidden_states\n"
        "        hidden_states = self.post_attention_layernorm(hidden_states)\n"
        "        return hidden_states, residual\n"
    )
    fix = (
        "import torch_npu\n\n\nclass Layer:\n    def forward(self, hidden_states, residual):\n"
        "        hidden_states, _, residual = torch_npu.npu_add_rms_norm(\n"
        "            residual, hidden_states, self.post_attention_layernorm.weight)\n"
        "        return hidden_states, residual\n"
    )
    steps = ("residual_add", "rms_norm")

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        for body in fn.bodies:
            for i, stmt in enumerate(body):
                if not (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.value, ast.BinOp)
                    and isinstance(stmt.value.op, ast.Add)
                ):
                    continue
                operands = (_name(stmt.value.left), _name(stmt.value.right))
                if not any("residual" in o.lower() for o in operands):
                    continue
                for later in body[i + 1 : i + 4]:
                    norm = [
                        c
                        for c in ast.walk(later)
                        if isinstance(c, ast.Call) and "norm" in _last(_name(c.func))
                    ]
                    if norm:
                        yield stmt, later, self.steps, "residual add followed by a norm"
                        break


class RotateHalfRope(PatternRule):
    code = "KB603"
    name = "rotate-half-rope"
    summary = (
        "RoPE written with rotate_half (x*cos + rotate_half(x)*sin): a fused rotary call does it."
    )
    why = (
        "rotate_half slices, negates and concatenates, then two multiplies and an add follow, "
        "for query and key separately; the fused rotary kernels do it in one pass (for q and "
        "k together in npu_apply_rotary_pos_emb)."
    )
    fail = (
        "import torch\n\n\ndef rotate_half(x):\n    x1, x2 = x.chunk(2, dim=-1)\n"
        "    return torch.cat((-x2, x1), dim=-1)\n\n\ndef apply_rope(q, cos, sin):\n"
        "    return q * cos + rotate_half(q) * sin\n"
    )
    fix = (
        "import torch_npu\n\n\ndef apply_rope(q, cos, sin):\n"
        "    return torch_npu.npu_rotary_mul(q, cos, sin)\n"
    )
    steps = ("rope",)

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        calls = _calls_named(
            fn, "rotate_half", "_rotate_half", "rotate_every_two", "rotate_neox", "rotate_gptj"
        )
        if calls:
            first, last = _span(list(calls))
            yield first, last, self.steps, "rotary embedding via rotate_half"


class GatedActivation(PatternRule):
    code = "KB604"
    name = "gated-activation"
    summary = "A gated MLP activation written out (silu(gate) * up, gelu(gate) * up): the GLU kernels fuse it."
    why = (
        "The activation and the product are two kernels over the widest tensor of the MLP; the "
        "fused GLU reads the concatenated gate/up projection once. Check the variant first: a "
        "clamped GLU (GPT-OSS style, alpha and a limit) is not plain SwiGLU."
    )
    fail = (
        "import torch.nn.functional as F\n\n\ndef mlp(self, x):\n"
        "    return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))\n"
    )
    fix = (
        "import torch_npu\n\n\ndef mlp(self, x):\n"
        "    return self.down_proj(torch_npu.npu_swiglu(self.gate_up_proj(x), dim=-1))\n"
    )
    steps = ("silu", "mul")

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        clamped = bool(_calls_named(fn, "clamp", "clamp_", "clip"))
        silu_in_file: bool | None = None
        for node in fn.binops:
            if not isinstance(node.op, ast.Mult):
                continue
            for side in (node.left, node.right):
                if not isinstance(side, ast.Call):
                    continue
                act = _last(_name(side.func))
                if act in ("silu", "swish") and clamped:
                    yield node, node, ("silu", "mul", "clamp"), "clamped SiLU-gated product"
                elif act in ("silu", "swish"):
                    yield node, node, ("silu", "mul"), "SiLU-gated product (SwiGLU)"
                elif act in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
                    yield node, node, ("gelu", "mul"), "GELU-gated product (GeGLU)"
                elif act in ("act_fn", "activation_fn", "act"):
                    if silu_in_file is None:
                        silu_in_file = any("silu" in line.lower() for line in lines)
                    if not silu_in_file:
                        continue
                    yield (
                        node,
                        node,
                        ("silu", "mul"),
                        "gated product through act_fn (SiLU in this file)",
                    )
                else:
                    continue
                break


class SoftmaxTopkGate(PatternRule):
    code = "KB605"
    name = "softmax-topk-gate"
    summary = "A MoE router written out (softmax or sigmoid scores, then topk): the gating kernels fuse it."
    why = (
        "The router scores every expert, picks the top k and often renormalises; fused gating "
        "does it in one kernel. A correction bias on sigmoid scores (DeepSeek-V3) or on "
        "softmax scores needs the gate that takes a bias, not the plain softmax one."
    )
    fail = (
        "import torch\n\n\ndef route(logits, k):\n"
        "    probs = torch.softmax(logits, dim=-1, dtype=torch.float)\n"
        "    weights, ids = torch.topk(probs, k, dim=-1)\n    return weights, ids\n"
    )
    fix = (
        "import torch_npu\n\n\ndef route(logits, k):\n"
        "    weights, ids, _ = torch_npu.npu_moe_gating_top_k_softmax(logits, k=k)\n"
        "    return weights, ids\n"
    )
    steps = ("gating", "softmax", "top_k")

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        topk = _calls_named(fn, "topk")
        if not topk:
            return
        soft = _calls_named(fn, "softmax")
        sig = _calls_named(fn, "sigmoid")
        if not (soft or sig):
            return
        score = "sigmoid" if sig and not soft else "softmax"
        steps: tuple[str, ...] = ("gating", score, "top_k")
        text = segment(lines, fn.node).lower()
        if "bias" in text and "correction" in text:
            steps += ("bias_add",)
        first, last = _span([*topk, *(sig or soft)])
        later = min((c.lineno, c.col_offset) for c in topk) < min(
            (c.lineno, c.col_offset) for c in sig or soft
        )
        yield (
            first,
            last,
            steps,
            (
                f"topk then {score} over the kept logits (MoE router)"
                if later
                else f"{score} scores then topk (MoE router)"
            ),
        )


class AttentionWrittenOut(PatternRule):
    code = "KB606"
    name = "attention-written-out"
    summary = "Attention computed by scaled_dot_product_attention or softmax(QK^T)V: the fused attention kernels do it."
    why = (
        "A written-out attention materialises the score matrix; the NPU's fused attention "
        "streams it and reads a paged KV cache directly. Which kernel fits depends on the "
        "phase and the cache layout (see 'kb advise attention')."
    )
    fail = (
        "import torch.nn.functional as F\n\n\ndef attend(q, k, v):\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
    )
    fix = (
        "import torch_npu\n\n\ndef attend(q, k, v, heads):\n"
        "    return torch_npu.npu_fused_infer_attention_score_v2(\n"
        '        q, k, v, num_query_heads=heads, input_layout="BNSD", sparse_mode=3)[0]\n'
    )
    steps = ("attention", "softmax")

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        for c in _calls_named(fn, "scaled_dot_product_attention"):
            yield c, c, self.steps, "scaled_dot_product_attention"
        soft = _calls_named(fn, "softmax")
        if not soft:
            return
        products: list[ast.AST] = [n for n in fn.binops if isinstance(n.op, ast.MatMult)]
        products += _calls_named(fn, "matmul", "bmm")
        transposed = _calls_named(fn, "transpose", "mT")
        if soft and len(products) >= 2 and transposed:
            first, last = _span([*products, *soft])
            yield first, last, self.steps, "softmax(QK^T)V written out"


class RepeatKv(PatternRule):
    code = "KB607"
    name = "repeat-kv"
    summary = "Key/value heads repeated for grouped-query attention: the fused attention takes the KV head count."
    why = (
        "repeat_kv copies the KV cache num_heads / num_kv_heads times before attention; the "
        "fused attention kernels read the grouped heads directly (num_key_value_heads), so the "
        "copy and its memory go away."
    )
    fail = (
        "def attend(self, q, k, v):\n    k = repeat_kv(k, self.num_key_value_groups)\n"
        "    v = repeat_kv(v, self.num_key_value_groups)\n    return self.core(q, k, v)\n"
    )
    fix = (
        "import torch_npu\n\n\ndef attend(self, q, k, v):\n"
        "    return torch_npu.npu_fused_infer_attention_score_v2(\n"
        "        q, k, v, num_query_heads=self.num_heads,\n"
        '        num_key_value_heads=self.num_kv_heads, input_layout="BNSD")[0]\n'
    )
    steps = ("attention",)

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        calls = _calls_named(fn, "repeat_kv", "_repeat_kv")
        # not linear
        softmax_attention = bool(_calls_named(fn, "softmax", "scaled_dot_product_attention"))
        calls += [
            c
            for c in _calls_named(fn, "repeat_interleave")
            if softmax_attention
            and any(k in segment(lines, c).lower() for k in ("kv", "key", "value", "k_", "v_"))
        ]
        if calls:
            first, last = _span(list(calls))
            yield first, last, self.steps, "KV heads repeated for GQA"


class IndexPutCacheWrite(PatternRule):
    code = "KB608"
    name = "index-put-cache-write"
    summary = "A KV cache written by indexing (cache[slots] = k, index_copy_): the cache writers do it in one call."
    why = (
        "Writing K and V into the cache with Python indexing launches a scatter per tensor; the "
        "fused writers take a slot mapping (paged) or positions (contiguous) and write K and V "
        "together, and some also fuse the norm and RoPE before the write."
    )
    fail = (
        "def write(k_cache, v_cache, k, v, slots):\n"
        "    k_cache[slots] = k\n    v_cache[slots] = v\n"
    )
    fix = (
        "import torch_npu\n\n\ndef write(k_cache, v_cache, k, v, slots):\n"
        "    torch_npu.npu_scatter_pa_kv_cache(k, v, k_cache, v_cache, slots)\n"
    )
    steps = ("kv_cache_write",)

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        hits: list[ast.AST] = list(fn.cache_stores)
        if hits:
            first, last = _span(hits)
            yield first, last, self.steps, "KV cache written by indexing"


class SeparateQkvRopeCache(PatternRule):
    code = "KB609"
    name = "separate-qkv-rope-cache"
    summary = "Separate q/k/v projections feeding RoPE and a cache write: a reference chain covers the module."
    why = (
        "When projections, RoPE, the cache write and attention are separate steps, the module "
        "matches a whole reference chain rather than one operator; the chain lists the fused "
        "stages and their prerequisites (a merged qkv weight, a paged cache, RoPE tables)."
    )
    fail = (
        "class Attn:\n    def forward(self, x, cos, sin, cache, slots):\n"
        "        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)\n"
        "        q, k = apply_rotary_pos_emb(q, k, cos, sin)\n"
        "        cache.update(k, v, slots)\n        return self.attn(q, k, v)\n"
    )
    fix = (
        "import torch_npu\n\n\nclass Attn:\n    def forward(self, x, cos, sin, k_cache, v_cache, slots):\n"
        "        q, k, v = self.qkv_proj(x).split(self.sizes, dim=-1)\n"
        "        q, k = torch_npu.npu_apply_rotary_pos_emb(q, k, cos, sin)\n"
        "        torch_npu.npu_scatter_pa_kv_cache(k, v, k_cache, v_cache, slots)\n"
        "        return self.attn(q, k_cache, v_cache)\n"
    )
    steps = ("q_projection", "kv_projection", "rope", "kv_cache_write")

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        names = fn.named
        proj = {p: [c for n, c in names if n.endswith(p)] for p in ("q_proj", "k_proj", "v_proj")}
        if not all(proj.values()):
            return
        rope = [c for n, c in names if "rotary" in n or "rope" in n or n.endswith("rotate_half")]
        cache: list[ast.AST] = [
            c
            for n, c in names
            if ("cache" in n or "past_key_value" in n)
            and n.rsplit(".", 1)[-1] in ("update", "write", "store", "append", "copy_")
        ]
        cache += fn.cache_stores
        if rope and cache:
            first, last = _span([*proj["q_proj"], *proj["k_proj"], *proj["v_proj"], *rope, *cache])
            yield first, last, self.steps, "separate q/k/v projections, RoPE and a cache write"


class PerTokenQuantWrittenOut(PatternRule):
    code = "KB610"
    name = "per-token-quant-written-out"
    summary = "Dynamic per-token int8 quantization written out (abs-max per row, scale, round, cast): one call does it."
    why = (
        "Quantizing activations per token by hand takes an abs, a max, a divide, a round, a "
        "clamp and a cast; the fused dynamic quantization returns the int8 tensor and its "
        "per-token scales in one kernel, in the layout the quantized matmuls expect."
    )
    fail = (
        "import torch\n\n\ndef quant(x):\n"
        "    scale = x.abs().amax(dim=-1, keepdim=True) / 127.0\n"
        "    q = torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)\n"
        "    return q, scale\n"
    )
    fix = "import torch_npu\n\n\ndef quant(x):\n    return torch_npu.npu_dynamic_quant(x)\n"
    steps = ("dynamic_quantize",)

    def detect(
        self, fn: FnIndex, lines: list[str]
    ) -> Iterator[tuple[ast.AST, ast.AST, tuple[str, ...], str]]:
        absmax = [c for c in _calls_named(fn, "amax", "max") if "abs" in segment(lines, c)]
        if not absmax:
            return
        text = segment(lines, fn.node)
        if "127" not in text or "int8" not in text:
            return
        rounds = _calls_named(fn, "round", "round_")
        if rounds:
            first, last = _span([*absmax, *rounds])
            yield first, last, self.steps, "per-token int8 quantization written out"


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Fusion opportunities (scan)"

RULES: tuple[PatternRule, ...] = (
    HandwrittenRmsNorm(),
    ResidualAddThenNorm(),
    RotateHalfRope(),
    GatedActivation(),
    SoftmaxTopkGate(),
    AttentionWrittenOut(),
    RepeatKv(),
    IndexPutCacheWrite(),
    SeparateQkvRopeCache(),
    PerTokenQuantWrittenOut(),
)
