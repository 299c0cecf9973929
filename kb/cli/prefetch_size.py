"""``kb prefetch-size``: theoretical and conservative ``max_size`` for npu_prefetch."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "prefetch-size",
        help="compute max_size for npu_prefetch (dense or MoE weights)",
        description="Compute the bytes of a weight and the conservative max_size to start "
        "npu_prefetch with. Formulas, the conservative factor and the tuning ladder come "
        "from the prefetch playbook record.",
        epilog="examples:\n"
        "  kb prefetch-size --shape 7168x18432 --dtype bf16\n"
        "  kb prefetch-size --hidden 7168 --intermediate 18432 --gate-up\n"
        "  kb prefetch-size --moe --hidden 7168 --moe-intermediate 2048 "
        "--experts-per-rank 16 --moe-tp 1 --gmm 1 --dtype int8\n"
        "  kb prefetch-size --hidden 6144 --intermediate 12288 --gate-up --tp 2 "
        "--window-us 40 --bandwidth 1200 --l2 96MiB",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--shape", metavar="KxN", help="weight shape, e.g. 7168x18432 (any rank)")
    p.add_argument("--dtype", default="bf16",
                   help="weight dtype: bf16 (default), fp16, fp32, int8, int4, fp8 …")  # fmt: skip
    p.add_argument("--hidden", metavar="H", help="hidden size")
    p.add_argument("--intermediate", metavar="I",
                   help="dense MLP intermediate size (with --hidden)")  # fmt: skip
    p.add_argument("--gate-up", action="store_true",
                   help="the weight is a merged gate_up_proj (2 x intermediate)")  # fmt: skip
    p.add_argument("--moe", action="store_true", help="size MoE grouped-matmul expert weights")
    p.add_argument("--moe-intermediate", metavar="I", help="MoE expert intermediate size")
    p.add_argument("--experts-per-rank", metavar="E", help="routed experts held by one rank")
    p.add_argument("--moe-tp", metavar="T", default="1", help="moe TP size (default 1)")
    p.add_argument("--gmm", choices=("1", "2"),
                   help="GMM1 (gate+up, w13) or GMM2 (down, w2); both when omitted")  # fmt: skip
    p.add_argument("--tp", metavar="T", default="1",
                   help="TP degree a dense weight is sharded by; sizes are per rank (default 1)")  # fmt: skip
    p.add_argument("--factor", help="override the playbook's conservative factor (0 < f <= 1)")
    p.add_argument("--window-us", metavar="US",
                   help="window duration in microseconds (with --bandwidth): cap max_size "
                   "at what the window can move")  # fmt: skip
    p.add_argument("--bandwidth", metavar="GBPS",
                   help="bandwidth available to the prefetch in GB/s (with --window-us)")
    p.add_argument("--l2", metavar="SIZE",
                   help="L2 capacity the prefetch may use (bytes or e.g. 96MiB): cap max_size at it")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.advice.prefetch_size import PLAYBOOK, SizeInputError, render
    from kb.cli import UsageError
    from kb.cli._common import catalog_or_exit

    try:
        requests = _requests(args)
        factor = _factor(args.factor)
        cap_inputs = _caps(args)
    except SizeInputError as exc:
        raise UsageError(str(exc)) from None
    playbook = catalog_or_exit().get(PLAYBOOK)
    if playbook is None or playbook.get("kind") != "playbook":
        print(f"kb prefetch-size: the {PLAYBOOK!r} playbook record is missing", file=sys.stderr)
        return 1
    from kb.advice.prefetch_size import cap, compute

    try:
        caps = [cap(playbook, fid, inputs) for fid, inputs in cap_inputs]
        sizes = [compute(playbook, fid, label, inputs, args.dtype, factor, caps)
                 for fid, label, inputs in requests]  # fmt: skip
    except SizeInputError as exc:
        raise UsageError(str(exc)) from None
    if args.format == "json":
        print(json.dumps({"playbook": PLAYBOOK, "results": [s.as_dict() for s in sizes]}, indent=2))
    else:
        sys.stdout.write(render(sizes, playbook))
    return 0


def _positive(flag: str, value: str | None) -> int:
    from kb.advice.prefetch_size import SizeInputError

    if value is None:
        raise SizeInputError(f"{flag} is required here")
    text = value.strip().replace("_", "")
    if not text.isdigit() or int(text) <= 0:
        raise SizeInputError(f"{flag} {value!r} must be a positive whole number")
    return int(text)


def _positive_number(flag: str, value: str) -> float:
    from kb.advice.prefetch_size import SizeInputError

    try:
        number = float(value)
    except ValueError:
        raise SizeInputError(f"{flag} {value!r} is not a number") from None
    if not (number > 0) or number == float("inf"):
        raise SizeInputError(f"{flag} {value!r} must be a positive number")
    return number


def _caps(args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    """(playbook formula id, inputs) of every cap the flags ask for."""
    from kb.advice.prefetch_size import CAP_L2, CAP_WINDOW, SizeInputError
    from kb.check.values import SizeError, parse_size

    out: list[tuple[str, dict[str, float]]] = []
    if (args.window_us is None) != (args.bandwidth is None):
        raise SizeInputError("--window-us and --bandwidth go together: the window cap is "
                             "window time x bandwidth")  # fmt: skip
    if args.window_us is not None:
        out.append((CAP_WINDOW, {"window_us": _positive_number("--window-us", args.window_us),
                                 "bandwidth_gbps": _positive_number("--bandwidth", args.bandwidth)}))  # fmt: skip
    if args.l2 is not None:
        try:
            l2 = parse_size(args.l2)
        except SizeError as exc:
            raise SizeInputError(f"--l2: {exc}") from None
        if l2 is None:
            raise SizeInputError(f"--l2 {args.l2!r} names something kb cannot size; give bytes "
                                 "or e.g. '96MiB'")  # fmt: skip
        if l2 <= 0:
            raise SizeInputError(f"--l2 {args.l2!r} must be above 0")
        out.append((CAP_L2, {"l2_bytes": l2}))
    return out


def _factor(value: str | None) -> float | None:
    from kb.advice.prefetch_size import SizeInputError

    if value is None:
        return None
    try:
        f = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise SizeInputError(f"--factor {value!r} is not a number (e.g. 0.5 or 50%)") from None
    if not (0 < f <= 1):
        raise SizeInputError(f"--factor {value!r} must be above 0 and at most 1")
    return f


def _requests(args: argparse.Namespace) -> list[tuple[str, str, dict[str, Any]]]:
    """(formula id, label, inputs) for every size the flags ask for."""
    from kb.advice.prefetch_size import (
        FORMULA_GATE_UP,
        FORMULA_GMM,
        FORMULA_HIDDEN_INTERMEDIATE,
        FORMULA_SHAPE,
        FORMULA_SQUARE,
        SizeInputError,
        parse_shape,
    )

    moe_only = [f for f, v in (("--moe-intermediate", args.moe_intermediate),
                               ("--experts-per-rank", args.experts_per_rank),
                               ("--gmm", args.gmm)) if v is not None]  # fmt: skip
    tp = _positive("--tp", args.tp)
    if args.moe:
        if tp != 1:
            raise SizeInputError("--tp shards dense weights; for expert weights use --moe-tp")
        if args.shape or args.intermediate or args.gate_up:
            raise SizeInputError("--moe sizes expert weights from --hidden, --moe-intermediate, "
                                 "--experts-per-rank and --moe-tp; drop --shape/--intermediate/--gate-up")  # fmt: skip
        missing = [f for f, v in (("--hidden", args.hidden),
                                  ("--moe-intermediate", args.moe_intermediate),
                                  ("--experts-per-rank", args.experts_per_rank)) if v is None]  # fmt: skip
        if missing:
            raise SizeInputError(
                f"--moe needs {', '.join(missing)} (and optionally --moe-tp, --gmm 1|2)"
            )
        inputs = {"hidden": _positive("--hidden", args.hidden),
                  "moe_intermediate": _positive("--moe-intermediate", args.moe_intermediate),
                  "experts_per_rank": _positive("--experts-per-rank", args.experts_per_rank),
                  "moe_tp": _positive("--moe-tp", args.moe_tp)}  # fmt: skip
        if inputs["moe_intermediate"] % inputs["moe_tp"]:
            raise SizeInputError(f"--moe-intermediate {inputs['moe_intermediate']} is not divisible by "
                                 f"--moe-tp {inputs['moe_tp']}")  # fmt: skip
        gmms = [int(args.gmm)] if args.gmm else [1, 2]
        names = {1: "GMM1 (gate+up, w13) per rank", 2: "GMM2 (down, w2) per rank"}
        return [(FORMULA_GMM[g], names[g], inputs) for g in gmms]
    if moe_only:
        raise SizeInputError(f"{', '.join(moe_only)} only apply with --moe")
    if args.shape:
        if args.hidden or args.intermediate or args.gate_up:
            raise SizeInputError("give either --shape or --hidden/--intermediate, not both")
        dims = parse_shape(args.shape)
        elements = 1
        for d in dims:
            elements *= d
        label = "weight " + " x ".join(str(d) for d in dims) + (f" / tp {tp}" if tp > 1 else "")
        return [(FORMULA_SHAPE, label, {"elements": elements, "tp": tp})]
    if args.hidden is None:
        raise SizeInputError("say which weight to size: --shape KxN, or --hidden H [--intermediate I "
                             "[--gate-up]], or --moe with its sizes (see kb prefetch-size --help)")  # fmt: skip
    hidden = _positive("--hidden", args.hidden)
    per_rank = f" / tp {tp}" if tp > 1 else ""
    if args.intermediate is None:
        if args.gate_up:
            raise SizeInputError("--gate-up needs --intermediate")
        return [(FORMULA_SQUARE, f"hidden x hidden projection ({hidden} x {hidden})" + per_rank,
                 {"hidden": hidden, "tp": tp})]  # fmt: skip
    inter = _positive("--intermediate", args.intermediate)
    if args.gate_up:
        return [(FORMULA_GATE_UP, f"gate_up_proj ({hidden} x 2*{inter})" + per_rank,
                 {"hidden": hidden, "intermediate": inter, "tp": tp})]  # fmt: skip
    return [(FORMULA_HIDDEN_INTERMEDIATE, f"hidden x intermediate matrix ({hidden} x {inter})" + per_rank,
             {"hidden": hidden, "intermediate": inter, "tp": tp})]  # fmt: skip
