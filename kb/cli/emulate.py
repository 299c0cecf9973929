"""``kb emulate -- COMMAND``: run a command with torch_npu emulated on the CPU."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "emulate",
        help="run a port with torch_npu emulated on the CPU",
        description="Run COMMAND (typically 'python my_port.py') with kb.emulate's torch_npu\n"
        "importable: every operator with a numpy reference runs on the CPU through\n"
        "torch_npu.<op>, torch.ops.npu.<op> and torch_npu.atb.<op>, each call judged by\n"
        "its record as kb check would (a call the record rejects raises CallRejected);\n"
        "device placement and streams are no-ops; an operator without a reference\n"
        "raises NotEmulated. A leading 'python' is the interpreter kb runs in. Needs\n"
        "the [emulate] extra (torch==2.13.0). docs/guides/emulate.md has a worked port.",
        epilog="examples:\n"
        "  kb emulate -- python my_port.py\n"
        "  kb emulate --product atlas-a2 -- python examples/emulate/compare_qwen.py\n"
        "  kb emulate -- python -m pytest tests/test_my_port.py\n\n"
        "Exit status: COMMAND's own; 2 when there is no command, the product is unknown\n"
        "or the program does not exist.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--product", help="judge calls for this product (as target.product in kb check)")
    p.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS]",
        help="the command to run, after --",
    )
    p.set_defaults(func=run, path_args=("argv",))


def run(args: argparse.Namespace) -> int:
    from kb.api.errors import UsageError
    from kb.emulate.run import command
    from kb.emulate.session import _product

    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    try:
        product = _product(args.product)
        return command(argv, product)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    finally:
        sys.stdout.flush()
