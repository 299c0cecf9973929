"""``kb port PATH -o OUT`` and ``kb verify ORIGINAL PORTED --model-config F``."""

from __future__ import annotations

import argparse
import json
import sys

from kb.api.errors import FOUND, OK


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "port",
        help="write the fused torch_npu port of planned model code",
        description="Rewrite the spans of PATH (a file or a folder) that kb scan --plan\n"
        "plans into the stages' fused calls with the derived arguments, each keeping\n"
        "its original code behind KB_PORT_UNFUSED=1; prerequisites the port cannot do\n"
        "and modules the plan leaves unknown get a comment. Needs the [port] extra.",
        epilog="examples:\n"
        "  kb port model.py -o model_npu.py --product atlas-a2 --diff\n"
        "  kb port src/mymodel -o /tmp/mymodel_npu --model-config config.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", metavar="FILE|DIR")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="file or folder to write")
    p.add_argument("--product", help="plan for this product (as kb scan)")
    p.add_argument("--quant", help="quantization scheme (as kb scan --quantization)")
    p.add_argument("--parallel", help="parallel mode (as kb scan --parallel)")
    p.add_argument("--model-config", help="the checkpoint's config.json / params.json")
    p.add_argument("--diff", action="store_true", help="print the unified diff")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run_port, path_args=("path", "output", "model_config"))


def add_verify_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    v = sub.add_parser(
        "verify",
        help="prove a port on the CPU: per stage and module errors vs the original",
        description="Build ORIGINAL and PORTED at a tiny size (the config's sizes shrunk)\n"
        "with one set of random weights, run the port under kb.emulate and report\n"
        "every stage's and module's max abs/rel error against the dtype's tolerance.\n"
        "Needs the [emulate] extra (torch==2.13.0) and the model's own imports.",
        epilog="examples:\n"
        "  kb verify model.py model_npu.py --model-config config.json\n"
        "  kb verify model.py model_npu.py --model-config params.json --module Block\n\n"
        "Exit status: 0 every stage within tolerance, 1 a stage or module over it,\n"
        "2 unusable input or what could not be imported (named).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("original")
    v.add_argument("ported")
    v.add_argument("--model-config", required=True)
    v.add_argument("--module", action="append", default=[], metavar="CLASS")
    v.add_argument("--phases", default="", help="prefill,decode (default: both)")
    v.add_argument("--dtypes", default="", help="float32,bfloat16 (default: both)")
    v.add_argument("--product", help="judge the emulated calls for this product")
    v.add_argument("--format", choices=("text", "json"), default="text")
    v.set_defaults(func=run_verify, path_args=("original", "ported", "model_config"))


def run_port(args: argparse.Namespace) -> int:
    from kb.api.port import port
    from kb.text.port import port_text

    doc = port(
        args.path,
        args.output,
        product=args.product,
        quantization=args.quant,
        parallel=args.parallel,
        model_config=args.model_config,
    )
    if args.format == "json":
        if not args.diff:
            for f in doc["files"]:
                f.pop("diff", None)
        print(json.dumps(doc, indent=2))
    else:
        print(port_text(doc, diff=args.diff))
    return OK


def run_verify(args: argparse.Namespace) -> int:
    import warnings

    from kb.api.port import verify
    from kb.text.port import verify_text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        doc = verify(
            args.original,
            args.ported,
            args.model_config,
            modules=args.module,
            phases=tuple(p for p in args.phases.split(",") if p) or None,
            dtypes=tuple(d for d in args.dtypes.split(",") if d) or None,
            product=args.product,
        )
    sys.stdout.flush()
    print(json.dumps(doc, indent=2) if args.format == "json" else verify_text(doc))
    return OK if doc["passed"] else FOUND
