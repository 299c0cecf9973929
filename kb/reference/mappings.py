"""The fusion patterns: unfused PyTorch code -> a fused operator with derived arguments.

One table, plain data (no numpy), so the planner can read it cheaply.  A row is one
pattern, whole: what the unfused code computes (in words), the operator and how its
arguments are meant, and - its :class:`Pattern` - which modules it matches (their kind
and facts, as the model reader states them), the steps it asks of the records' chains,
how each argument derives from the module's facts, and the proof in :mod:`kb.reference`
that builds the unfused computation in numpy on random inputs and compares it with the
reference operator called with those arguments.  The planner's dispatch, the ids it can
emit and the proof registry are read from here; a mapping whose proof does not pass
must not be proposed (``tests/test_reference_mappings.py`` holds every id to a passing
proof, and the planner re-runs it with each module's own facts and arguments).

The public shape of a row (read by the planner, ``kb port`` and ``kb verify``; keep it
stable): :class:`~kb.reference.patterns.Mapping` ``(id, unfused, target, arguments, also,
notes, pattern)``, its operators ``target`` then ``also``; ``pattern`` a
:class:`~kb.reference.patterns.Pattern` with the **facts** it matches (``on``: module kind
prefix and the fact values allowed, ``PRESENT``/``ABSENT`` for stated or not), the
**steps** it asks of the records' chains, the **argument derivation** (``args``: each
:class:`~kb.reference.patterns.Arg` takes a module fact through ``values``, else is
``fixed``; ``tensor`` arguments are wired by the port, ``ops`` limits one to some of the
row's operators), and the **proof** (``proof``: ``module.function[:bound]`` of
:mod:`kb.reference`; ``proves``: the facts its unfused side is written with, so the
re-proof runs it with the module's values).  A stage is proposed only with one of the
row's own operators: no proof vouches for an operator it does not run.
"""

from __future__ import annotations

from kb.reference.mappings_attention import ATTENTION_ROWS
from kb.reference.patterns import ABSENT, Mapping, Pattern, arg, on

#: the operators of the rotary rows whose pairing is an argument
_ROTARY = ("npu_rotary_mul", "npu_apply_rotary_pos_emb")
_GATE_K = ("npu_moe_gating_top_k", "npu_moe_gating_top_k_softmax")
#: experts whose projections add a bias: each grouped matmul takes the experts' biases
_EXPERT_BIAS = arg("bias", "expert_bias", tensor=True, ops=("npu_grouped_matmul",))


MAPPINGS: tuple[Mapping, ...] = (
    Mapping(
        "rms_norm",
        "x * rsqrt(mean(x**2, -1) + eps) * weight, computed in float32",
        "npu_rms_norm",
        "input=x, gamma=weight, epsilon=eps; take output 0",
        pattern=Pattern(
            (
                on("norm.rms", weight=("weight", "none")),
                on("attention", qk_norm=("rms",)),
                on("attention.mla"),
            ),
            ("rms_norm",),
            proof="dense.rms_norm",
        ),
    ),
    Mapping(
        "rms_norm_one_plus_w",
        "Gemma: x * rsqrt(mean(x**2, -1) + eps) * (1 + weight)",
        "npu_rms_norm",
        "input=x, gamma=1 + weight (precomputed once), epsilon=eps; output 0",
        also=("npu_gemma_rms_norm",),
        notes="npu_gemma_rms_norm(x, weight) takes the raw weight",
        pattern=Pattern(
            (on("norm.rms", weight=("1 + weight",)),),
            ("rms_norm",),
            proof="dense.rms_norm_one_plus_w",
        ),
    ),
    Mapping(
        "add_rms_norm",
        "h = x + residual; y = rms_norm(h) * weight; both h and y used",
        "npu_add_rms_norm",
        "x1=x, x2=residual, gamma=weight, epsilon=eps; y is output 0, "
        "the new residual h is output 2",
        pattern=Pattern(
            (on("layer.decoder", norm=("rms",)), on("attention.mla")),
            ("residual_add", "rms_norm"),
            proof="dense.add_rms_norm",
        ),
    ),
    Mapping(
        "layer_norm",
        "F.layer_norm(x, (H,), weight, bias, eps) in inference",
        "npu_layer_norm_eval",
        "input=x, normalized_shape=[H], weight, bias, eps",
        pattern=Pattern(
            (on("norm.layer"), on("attention", qk_norm=("layer",))),
            ("layer_norm",),
            proof="dense.layer_norm",
        ),
    ),
    Mapping(
        "rope_half",
        "q * cos + rotate_half(q) * sin with cos = cat(freqs, freqs).cos()",
        "npu_rotary_mul",
        "input=q, r1=cos, r2=sin, rotary_mode='half' (cos/sin broadcast "
        "to q); q and k together: npu_apply_rotary_pos_emb(q, k, cos, sin, layout='BSND')",
        also=("npu_apply_rotary_pos_emb",),
        pattern=Pattern(
            (on("attention", rope=("half",)),),
            ("rope",),
            (arg("rotary_mode", "rope", {"half": "half"}, ops=_ROTARY),),
            proof="planned.rope",
            proves=("rope",),
        ),
    ),
    Mapping(
        "rope_interleave",
        "view_as_complex(x.float().unflatten(-1, (-1, 2))) * freqs_cis, "
        "view_as_real(...).flatten(-2): rotation of adjacent pairs",
        "npu_rotary_mul",
        "input=x, r1=freqs_cis.real repeated twice per pair "
        "(repeat_interleave(2, -1)), r2=freqs_cis.imag likewise, rotary_mode='interleave'",
        pattern=Pattern(
            (on("attention", rope=("interleave",)), on("attention.mla")),
            ("rope",),
            (arg("rotary_mode", "rope", {"interleave": "interleave"}, ops=_ROTARY),),
            proof="planned.rope",
            proves=("rope",),
        ),
    ),
    Mapping(
        "rope_deinterleave",
        "DeepSeek MLA: x.view(..., D/2, 2).transpose(-1, -2).reshape(..., D), "
        "then q * cos + rotate_half(q) * sin",
        "npu_interleave_rope",
        "x=x [B, N, S, D], cos, sin in the half layout ([B, 1, S, D]); the output is in the "
        "de-interleaved order, not the input's",
        pattern=Pattern(
            (on("attention", rope=("interleave",)), on("attention.mla")),
            ("rope",),
            proof="dense.rope_deinterleave",
        ),
    ),
    Mapping(
        "swiglu",
        "gate, up = x.chunk(2, -1); silu(gate) * up (gate first)",
        "npu_swiglu",
        "input=x (the merged gate_up projection), dim=-1",
        pattern=Pattern(
            (
                on("mlp.glu", activation=("silu",), glu=("first",)),
                on("moe.experts", activation=("silu",), glu=("first", ABSENT)),
            ),
            ("swiglu",),
            proof="planned.swiglu",
            proves=("glu",),
        ),
    ),
    Mapping(
        "swiglu_dynamic_quant",
        "silu(gate) * up with gate the left half, then per-token "
        "int8 quant (scale = rowmax|y| / 127)",
        "npu_dequant_swiglu_quant",
        "x=x, activate_left=True, quant_mode=1; the default activate_left=False activates "
        "the right half",
        pattern=Pattern((), ("swiglu", "dynamic_quantize"), proof="dense.swiglu_dynamic_quant"),
    ),
    Mapping(
        "geglu",
        "gate, up = x.chunk(2, -1); gelu(gate, approximate='tanh') * up",
        "npu_geglu",
        "input=x, dim=-1, approximate=1 (0 for the erf GELU), activate_left=True "
        "(the default False activates the right half); take output 0",
        pattern=Pattern(
            (on("mlp.glu", activation=("gelu", "gelu_tanh"), glu=("first", "second")),),
            ("gelu", "mul"),
            (
                arg("approximate", "activation", {"gelu": 0, "gelu_tanh": 1}),
                arg("activate_left", "glu", {"first": True, "second": False}),
            ),
            proof="planned.geglu",
            proves=("activation", "glu"),
        ),
    ),
    Mapping(
        "gelu_tanh",
        "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))",
        "npu_gelu",
        "input=x, approximate='tanh'",
        notes="npu_fast_gelu is x * sigmoid(1.702 x), a different curve: not this mapping",
        pattern=Pattern(
            (
                on("mlp.plain", activation=("gelu_tanh",)),
                on("moe.experts", activation=("gelu_tanh",), glu=("none", ABSENT)),
            ),
            ("gelu",),
            (arg("approximate", "activation", {"gelu_tanh": "tanh"}),),
            proof="planned.gelu_any",
            proves=("activation",),
        ),
    ),
    Mapping(
        "quick_gelu",
        "x * sigmoid(1.702 * x) (QuickGELU, CLIP's activation)",
        "npu_fast_gelu",
        "input=x",
        notes="the Atlas A2/A3 kernel computes exactly this; the training and inference series "
        "use another formula (npu_fast_gelu's record): small numeric differences there",
        pattern=Pattern(
            (on("mlp.plain", activation=("quick_gelu",)),),
            ("gelu",),
            proof="dense.quick_gelu",
            proves=("activation",),
        ),
    ),
    Mapping(
        "router_softmax_topk",
        "w, ids = topk(softmax(logits.float(), -1), k); w /= w.sum(-1) when norm_topk_prob",
        "npu_moe_gating_top_k_softmax",
        "x=logits, k=k; outputs (w, ids, "
        "row_idx); the operator does not renormalise: with norm_topk_prob divide w by its sum after",
        also=("npu_moe_gating_top_k",),
        notes="equivalently npu_moe_gating_top_k(logits, k, norm_type=0)",
        pattern=Pattern(
            (
                on(
                    "moe.router",
                    scoring=("softmax",),
                    order=("score_then_topk",),
                    bias=(False, ABSENT),
                    groups=(1, ABSENT),
                ),
            ),
            ("gating", "top_k", "softmax"),
            (
                arg("k", "topk", ops=_GATE_K),
                arg("norm_type", fixed=0, ops=("npu_moe_gating_top_k",)),
            ),
            proof="sparse.router_softmax_topk",
        ),
    ),
    Mapping(
        "router_softmax_bias_topk",
        "s = softmax(logits); ids = topk(s + bias, k); w = s[ids]",
        "npu_moe_gating_top_k",
        "x=logits, k=k, bias=bias, norm_type=0 (no renorm in softmax mode)",
        pattern=Pattern(
            (on("moe.router", scoring=("softmax",), order=("score_then_topk",), bias=(True,)),),
            ("gating", "top_k", "softmax", "bias_add"),
            (
                arg("k", "topk"),
                arg("norm_type", fixed=0),
                arg("bias", "bias", {True: "bias"}, tensor=True),
            ),
            proof="sparse.router_softmax_bias_topk",
        ),
    ),
    Mapping(
        "router_sigmoid_bias_group_topk",
        "DeepSeek-V3: s = sigmoid(logits); group score = sum "
        "of the top-2 of (s + bias) per group; keep topk_group groups; ids = topk(s + bias); "
        "w = s[ids] / (sum + 1e-20) * routed_scaling_factor",
        "npu_moe_gating_top_k",
        "x=logits, k=k, bias=bias, k_group=topk_group, group_count=n_group, "
        "group_select_mode=1, norm_type=1, routed_scaling_factor, eps=1e-20",
        notes="norm_type=1 always renormalises the chosen weights; group_select_mode=0 scores "
        "a group by its max instead",
        pattern=Pattern(
            (on("moe.router", scoring=("sigmoid",), order=("score_then_topk",), bias=(True,)),),
            ("gating", "top_k", "sigmoid", "bias_add"),
            (
                arg("k", "topk"),
                arg("norm_type", fixed=1),
                arg("k_group", "topk_groups", absent=1),
                arg("group_count", "groups", absent=1),
                arg("group_select_mode", "group_score", {"top2_sum": 1, "max": 0}, absent=1),
                arg("routed_scaling_factor", "scale", absent=1.0),
                arg("bias", "bias", {True: "bias"}, tensor=True),
            ),
            proof="planned.router_grouped",
            proves=("groups", "topk_groups", "scale", "group_score"),
        ),
    ),
    Mapping(
        "router_topk_then_sigmoid",
        "Llama-4: vals, ids = topk(logits, k); w = sigmoid(vals) (no renormalisation)",
        "npu_moe_gating_top_k",
        "x=logits, k=k, norm_type=1, out_flag=True; ids = output 1; w = "
        "take_along_dim(output 2 (the sigmoid of every expert), ids); output 0 is renormalised "
        "and is NOT w",
        pattern=Pattern(
            (on("moe.router", scoring=("sigmoid",), order=("topk_then_score",)),),
            ("gating", "top_k", "sigmoid"),
            (arg("k", "topk"), arg("norm_type", fixed=1), arg("out_flag", fixed=True)),
            proof="sparse.router_topk_then_sigmoid",
        ),
    ),
    Mapping(
        "moe_experts_loop",
        "for each expert e: rows routed to e -> expert MLP; out[t] += "
        "w[t, j] * mlp_e(x[t]) over the token's top-k",
        "npu_moe_init_routing_v2",
        "expanded_x, expanded_row_idx, counts, _ = npu_moe_init_routing_v2(x, ids, "
        "expert_num=E, active_expert_range=[0, E], expert_tokens_num_flag=True, "
        "expert_tokens_num_type=1); h = npu_grouped_matmul([expanded_x], [w1], "
        "group_list=counts, group_list_type=1, group_type=0, split_item=3); activation; "
        "y = npu_grouped_matmul([h], [w2], ...); out = npu_moe_finalize_routing(y, None, "
        "None, None, w, expanded_row_idx, ids, drop_pad_mode=2, k=K)",
        also=("npu_grouped_matmul", "npu_moe_finalize_routing"),
        notes="expanded_row_idx is indexed token-major (t * K + j): drop_pad_mode=2; "
        "drop_pad_mode=0 reads it expert-slot-major",
        pattern=Pattern(
            (
                on(
                    "moe.experts",
                    form=("loop over masks", "loop over sorted tokens", "loop over one_hot masks"),
                ),
            ),
            ("grouped_matmul", "expert_routing"),
            (_EXPERT_BIAS,),
            proof="sparse.moe_experts_loop",
            proves=("expert_bias",),
        ),
    ),
    Mapping(
        "moe_experts_loop_permute",
        "the same expert loop",
        "npu_moe_token_permute",
        "p, order = npu_moe_token_permute(x, ids); counts per expert -> npu_grouped_matmul "
        "(group_list_type=1); out = npu_moe_token_unpermute(y, order, probs=w)",
        also=("npu_grouped_matmul", "npu_moe_token_unpermute"),
        pattern=Pattern(
            (
                on(
                    "moe.experts",
                    form=("loop over masks", "loop over sorted tokens", "loop over one_hot masks"),
                ),
            ),
            ("grouped_matmul", "token_permute"),
            proof="sparse.moe_experts_loop_permute",
        ),
    ),
    Mapping(
        "dynamic_quant_int8_matmul",
        "s = absmax(x, -1) / 127; xq = round(x / s); y = (xq @ wq) * s[:, None] * w_scale",
        "npu_dynamic_quant",
        "xq, s = npu_dynamic_quant(x); y = npu_quant_matmul(xq, wq, w_scale, pertoken_scale=s, "
        "output_dtype=bfloat16)",
        also=("npu_quant_matmul",),
        pattern=Pattern(
            (on("mlp"), on("moe.experts"), on("layer.decoder"), on("attention")),
            ("dynamic_quantize", "matmul", "dequantize"),
            proof="dense.dynamic_quant_int8_matmul",
        ),
    ),
    Mapping(
        "weight_only_int8_matmul",
        "x @ ((wq + offset) * scale) (+ bias)",
        "npu_weight_quant_batchmatmul",
        "x, weight=wq, antiquant_scale=scale, "
        "antiquant_offset=offset (per channel; antiquant_group_size=g per group)",
        pattern=Pattern((), ("matmul", "dequantize"), proof="dense.weight_only_int8_matmul"),
    ),
    Mapping(
        "gelu",
        "nn.GELU() / F.gelu(x): 0.5 * x * (1 + erf(x / sqrt(2)))",
        "npu_gelu",
        "input=x, approximate='none' (the default)",
        notes="npu_fast_gelu is x * sigmoid(1.702 x), a different curve: not this mapping",
        pattern=Pattern(
            (
                on("mlp.plain", activation=("gelu",)),
                on("moe.experts", activation=("gelu",), glu=("none", ABSENT)),
            ),
            ("gelu",),
            (arg("approximate", "activation", {"gelu": "none"}),),
            proof="planned.gelu_any",
            proves=("activation",),
        ),
    ),
    Mapping(
        "router_sigmoid_topk",
        "s = sigmoid(logits); w, ids = topk(s, k); w /= w.sum(-1) when "
        "norm_topk_prob (no bias, no groups)",
        "npu_moe_gating_top_k",
        "x=logits, k=k, norm_type=1, out_flag=True; ids = output 1; renormalised: w = output 0; "
        "not renormalised: w = take_along_dim(output 2, ids)",
        notes="norm_type=1 always renormalises output 0; routed_scaling_factor multiplies it",
        pattern=Pattern(
            (
                on(
                    "moe.router",
                    scoring=("sigmoid",),
                    order=("score_then_topk",),
                    bias=(False, ABSENT),
                    groups=(1, ABSENT),
                ),
            ),
            ("gating", "top_k", "sigmoid"),
            (
                arg("k", "topk"),
                arg("norm_type", fixed=1),
                arg("out_flag", "renormalize", {False: True, True: False}),
            ),
            proof="planned.router_sigmoid_topk",
            proves=("renormalize",),
        ),
    ),
    Mapping(
        "router_topk_then_softmax",
        "vals, ids = topk(logits, k); w = softmax(vals, -1)",
        "npu_moe_gating_top_k_softmax",
        "x=logits, k=k; ids = output 1; w = output 0 / "
        "output 0.sum(-1, keepdim=True) (softmax over the k chosen equals the full softmax "
        "at ids renormalised)",
        also=("npu_moe_gating_top_k",),
        notes="equivalently npu_moe_gating_top_k(logits, k, norm_type=0) and the same division",
        pattern=Pattern(
            (on("moe.router", scoring=("softmax",), order=("topk_then_score",)),),
            ("gating", "top_k", "softmax"),
            (
                arg("k", "topk", ops=_GATE_K),
                arg("norm_type", fixed=0, ops=("npu_moe_gating_top_k",)),
            ),
            proof="more.router_topk_then_softmax",
        ),
    ),
    Mapping(
        "moe_experts_bmm",
        "stacked expert weights [E, H, F]: every token through every "
        "expert by bmm, summed with a dense [T, E] routing matrix (zero where not chosen)",
        "npu_moe_init_routing_v2",
        "as moe_experts_loop: the dense matrix's nonzero columns are "
        "ids and w (topk of the router); w1[e], w2[e] are the per-expert weights",
        also=("npu_grouped_matmul", "npu_moe_finalize_routing"),
        pattern=Pattern(
            (on("moe.experts", form=("batched matmul",)),),
            ("grouped_matmul", "expert_routing"),
            proof="more.moe_experts_bmm",
        ),
    ),
    Mapping(
        "dequant_swiglu_quant",
        "W8A8: h = int32 gate_up result * weight_scale[channel] * "
        "activation_scale[token]; silu(gate) * up (gate the left half); per-token int8 quant",
        "npu_dequant_swiglu_quant",
        "x=the int32 result, weight_scale, activation_scale, "
        "activate_left=True, quant_mode=1; grouped expert weights: weight_scale [E, 2H], "
        "group_index = tokens per expert",
        pattern=Pattern(
            (
                on("mlp.glu", activation=("silu",), glu=("first", "second")),
                on("moe.experts", activation=("silu",), glu=("first", "second", ABSENT)),
            ),
            ("dequantize", "swiglu", "quantize"),
            (
                arg("activate_left", "glu", {"first": True, "second": False}, absent=True),
                arg("quant_mode", fixed=1),
            ),
            proof="more.dequant_swiglu_quant",
        ),
    ),
    Mapping(
        "add_rms_norm_quant",
        "W8A8 static: h = x + residual; y = rms_norm(h) * weight; "
        "q = clamp(round(y / scale + offset), -128, 127), per-tensor scale and offset",
        "npu_add_rms_norm_quant",
        "x1=x, x2=residual, gamma=weight, scales1=scale expanded to "
        "weight's shape, zero_points1=offset likewise (int32), epsilon=eps, div_mode=True; q is "
        "output 0, h output 2",
        notes="div_mode=False multiplies: pass 1/scale then",
        pattern=Pattern(
            (on("layer.decoder", norm=("rms",)),),
            ("residual_add", "rms_norm", "quantize"),
            proof="more.add_rms_norm_quant",
        ),
    ),
    Mapping(
        "adaln_layer_norm",
        "adaLN: layer_norm(x) (affine or not) * (1 + scale) + shift, with scale and shift per "
        "sample from the conditioning",
        "npu_layer_norm_eval",
        "per sample b: input=x[b], normalized_shape=[H], weight=(1 + scale[b]) times the norm's "
        "weight (ones without one), bias=shift[b] plus (1 + scale[b]) times the norm's bias, eps",
        notes="the operator's weight and bias have the normalized shape: one call per sample "
        "(a batch of one is a single call)",
        pattern=Pattern(
            (on("norm.adaln", norm=("layer",)),), ("layer_norm",), proof="planned.adaln_layer_norm"
        ),
    ),
    *ATTENTION_ROWS,
)

BY_ID: dict[str, Mapping] = {m.id: m for m in MAPPINGS}
