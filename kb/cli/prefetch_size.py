"""``kb prefetch-size``: theoretical and conservative ``max_size`` for npu_prefetch."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "prefetch-size",
        help="compute max_size for npu_prefetch (dense or MoE weights)",
        description="Compute the bytes of a weight and the conservative max_size to start\n"
        "npu_prefetch with. Formulas, the conservative factor and the tuning ladder come\n"
        "from the prefetch playbook record.",
        epilog="examples:\n"
        "  kb prefetch-size --shape 7168x18432 --dtype bf16\n"
        "  kb prefetch-size --hidden 7168 --intermediate 18432 --gate-up\n"
        "  kb prefetch-size --moe --hidden 7168 --moe-intermediate 2048 \\\n"
        "      --experts-per-rank 16 --moe-tp 1 --gmm 1 --dtype int8\n"
        "  kb prefetch-size --hidden 6144 --intermediate 12288 --gate-up --tp 2 \\\n"
        "      --window-us 40 --bandwidth 1200 --l2 96MiB",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--shape", metavar="KxN", help="weight shape, e.g. 7168x18432 (any rank)")
    p.add_argument(
        "--dtype",
        default="bf16",
        help="weight dtype: bf16 (default), fp16, fp32, int8, int4, fp8 …",
    )
    p.add_argument("--hidden", metavar="H", help="hidden size")
    p.add_argument(
        "--intermediate", metavar="I", help="dense MLP intermediate size (with --hidden)"
    )
    p.add_argument(
        "--gate-up",
        action="store_true",
        help="the weight is a merged gate_up_proj (2 x intermediate)",
    )
    p.add_argument("--moe", action="store_true", help="size MoE grouped-matmul expert weights")
    p.add_argument("--moe-intermediate", metavar="I", help="MoE expert intermediate size")
    p.add_argument("--experts-per-rank", metavar="E", help="routed experts held by one rank")
    p.add_argument("--moe-tp", metavar="T", default="1", help="moe TP size (default 1)")
    p.add_argument(
        "--gmm",
        choices=("1", "2"),
        help="GMM1 (gate+up, w13) or GMM2 (down, w2); both when omitted",
    )
    p.add_argument(
        "--tp",
        metavar="T",
        default="1",
        help="TP degree a dense weight is sharded by; sizes are per rank (default 1)",
    )
    p.add_argument("--factor", help="override the playbook's conservative factor (0 < f <= 1)")
    p.add_argument(
        "--window-us",
        metavar="US",
        help="window duration in microseconds (with --bandwidth): cap max_size "
        "at what the window can move",
    )
    p.add_argument(
        "--bandwidth",
        metavar="GBPS",
        help="bandwidth available to the prefetch in GB/s (with --window-us)",
    )
    p.add_argument(
        "--l2",
        metavar="SIZE",
        help="L2 capacity the prefetch may use (bytes or e.g. 96MiB): cap max_size at it",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.advice.prefetch_size import render
    from kb.api.prefetch_size import PlaybookMissing, document, request, sizes
    from kb.cli._common import catalog_or_exit

    req = request(
        shape=args.shape,
        dtype=args.dtype,
        hidden=args.hidden,
        intermediate=args.intermediate,
        gate_up=args.gate_up,
        moe=args.moe,
        moe_intermediate=args.moe_intermediate,
        experts_per_rank=args.experts_per_rank,
        moe_tp=args.moe_tp,
        gmm=args.gmm,
        tp=args.tp,
        factor=args.factor,
        window_us=args.window_us,
        bandwidth=args.bandwidth,
        l2=args.l2,
    )
    try:
        playbook, found = sizes(catalog_or_exit(), req)
    except PlaybookMissing as exc:
        print(f"kb prefetch-size: {exc}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(document(found), indent=2))
    else:
        sys.stdout.write(render(found, playbook))
    return 0
