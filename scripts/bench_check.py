"""Benchmark ``kb check`` on a 500-candidate list, cold process, against its 500 ms budget.

Writes a realistic candidate list (fusion candidates for every layer of a 61-layer MoE
model, prefetch points, a few seeded defects) into a temporary directory, warms the
compiled record cache once, then times fresh ``python -m kb check`` processes and
``python -c pass`` for comparison.  Prints the medians; exits 1 when the median is over
budget.  Run: ``.venv/bin/python scripts/bench_check.py [--runs 11] [--candidates 500]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_MS = 500.0

FUSION = [
    (
        "input_layernorm",
        "npu_rms_norm",
        "both",
        "    tensors:\n      self: {dtype: bfloat16, format: ND, shape: [T, 7168]}\n",
    ),
    (
        "self_attn",
        "npu_mla_prolog_v3",
        "decode",
        "    chain: mla-absorb-decode\n    quantization: w8a8-dynamic\n"
        "    args: {cache_mode: PA_NZ, weight_quant_mode: 2}\n    tensors:\n"
        "      token_x: {dtype: int8, format: ND}\n      weight_dq: {dtype: int8, format: FRACTAL_NZ}\n"
        "      cache_index: {dtype: int64}\n      dequant_scale_x: {dtype: float32}\n"
        "      dequant_scale_w_dq: {dtype: float32}\n      dequant_scale_w_uq_qr: {dtype: float32}\n"
        "      dequant_scale_w_dkv_kr: {dtype: float32}\n",
    ),
    (
        "self_attn.core",
        "npu_fused_infer_attention_score_v2",
        "decode",
        "    chain: mla-absorb-decode\n    args: {sparse_mode: 0, input_layout: TND_NTD,"
        " actual_seq_qlen: [1], actual_seq_kvlen: [4096]}\n",
    ),
    ("post_attention_layernorm", "npu_add_rms_norm", "both", ""),
    ("mlp.gate", "npu_moe_gating_top_k", "both", "    args: {k: 8}\n"),
    ("mlp.dispatch", "npu_moe_distribute_dispatch_v2", "decode", ""),
    ("mlp.experts", "npu_grouped_matmul", "both", ""),
    ("mlp.act", "npu_dequant_swiglu_quant", "both", ""),
]
DEFECTS = [
    ("self_attn", "npu_mla_prolog_v4", "decode", ""),  # unknown operator
    ("input_layernorm", "npu_rms_norm", "both", "    args: {eps: 1.0e-6}\n"),  # unknown arg
    ("self_attn", "npu_mla_prolog_v2", "decode", ""),  # deprecated
    ("mlp.gate", "npu_moe_gating_top_k_softmax", "decode", "    status: not-applicable\n"),
]
PREFETCH = """\
  - kind: prefetch
    module: model.layers.{layer}.mlp
    phase: decode
    target: down_proj
    target_op: grouped_matmul
    weight: {{shape: [16, 2048, 7168], dtype: int8}}
    dependency: {{name: "swiglu output", op: swiglu}}
    max_size: {size}
    switch: enable_prefetch
    switch_default: false
    validated: {validated}
"""


def candidate_list(n: int) -> str:
    """A candidate list with ``n`` entries: mostly sound, one in ten with a defect."""
    out = [
        "version: 1",
        "model: bench-moe-61",
        "target:",
        "  product: atlas-a3",
        '  torch_npu: "2.9.0"',
        "  quantization: w8a8-dynamic",
        "  graph_mode: torchair",
        "candidates:",
    ]
    count = 0
    layer = 0
    while count < n:
        for i, (module, op, phase, extra) in enumerate(FUSION):
            if count >= n:
                break
            if count % 10 == 9:
                module, op, phase, extra = DEFECTS[(count // 10) % len(DEFECTS)]
            out.append(
                f"  - module: model.layers.{layer}.{module}\n    phase: {phase}\n"
                f"    operator: {op}\n{extra}".rstrip("\n")
            )
            count += 1
            if i == 3 and count < n:
                size = "300MiB" if layer % 7 == 0 else "100MiB"
                out.append(
                    PREFETCH.format(
                        layer=layer, size=size, validated=str(layer % 2 == 0).lower()
                    ).rstrip("\n")
                )
                count += 1
        layer += 1
    return "\n".join(out) + "\n"


TENSORS = {
    "npu_rms_norm": ("self", "gamma"),
    "npu_add_rms_norm": ("x1", "x2", "gamma"),
    "npu_grouped_matmul": ("x", "weight"),
    "npu_dequant_swiglu_quant": ("x",),
}


def detailed_candidate_list(n: int) -> str:
    """``n`` candidates written the way a thorough port plan writes them (~360 bytes each:
    evidence, notes, tensor dtypes, formats and shapes): the 10,000-candidate stress list."""
    out = [
        "version: 1",
        "model: bench-moe-61-detailed",
        "target:",
        "  product: atlas-a3",
        '  torch_npu: "2.9.0"',
        "  quantization: w8a8-dynamic",
        "candidates:",
    ]
    layer = 0
    while len(out) - 7 < n:
        for module, op, phase, _extra in FUSION:
            if len(out) - 7 >= n:
                break
            tensors = "".join(
                f"      {t}: {{dtype: bfloat16, format: ND, shape: [B, S, 1, 7168]}}\n"
                for t in TENSORS.get(op, ("x",))
            )
            out.append(
                f"  - module: model.layers.{layer}.{module}\n    phase: {phase}\n"
                f"    operator: {op}\n    status: candidate\n"
                f"    replaces: the eager {module.split('.')[-1]} code\n"
                f"    evidence: modeling_deepseek.py line {100 + layer} calls the eager op\n"
                f"    notes: layer {layer} of 61, shapes as in every layer\n"
                f"    tensors:\n{tensors}".rstrip("\n")
            )
        layer += 1
    return "\n".join(out) + "\n"


def median_ms(argv: list[str], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument(
        "--detailed",
        action="store_true",
        help="candidates with evidence, notes and tensor shapes (~360 bytes each)",
    )
    parser.add_argument("--budget-ms", type=float, default=BUDGET_MS)
    args = parser.parse_args()
    budget = args.budget_ms
    with tempfile.TemporaryDirectory(prefix="kb-bench-check-") as tmp:
        path = Path(tmp) / "candidates.yaml"
        make = detailed_candidate_list if args.detailed else candidate_list
        path.write_text(make(args.candidates), encoding="utf-8")
        cmd = [sys.executable, "-m", "kb", "check", "--format", "json", str(path)]
        warm = subprocess.run(cmd, capture_output=True, text=True, check=False)  # builds the cache
        if warm.returncode not in (0, 1):
            print(warm.stderr, file=sys.stderr)
            return 2
        report = json.loads(warm.stdout)
        check_ms, check_all = median_ms(cmd, args.runs)
        base_ms, _ = median_ms([sys.executable, "-c", "pass"], args.runs)
    summary = report["summary"]
    print(
        f"candidates: {summary['candidates']} in {path.name} "
        f"({summary['errors']} errors, {summary['warnings']} warnings found)"
    )
    print(
        f"kb check, cold process: median {check_ms:.0f} ms over {args.runs} runs "
        f"(min {min(check_all):.0f}, max {max(check_all):.0f})"
    )
    print(f"python -c pass:         median {base_ms:.0f} ms")
    print(f"kb check over bare interpreter start: {check_ms - base_ms:.0f} ms")
    verdict = "within" if check_ms <= budget else "OVER"
    print(f"budget {budget:.0f} ms: {verdict}")
    return 0 if check_ms <= budget else 1


if __name__ == "__main__":
    raise SystemExit(main())
