"""``kb mcp``: serve the knowledge base to coding agents over the Model Context Protocol."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

INSTALL_HINT = "pip install 'torch-npu-kb[mcp]' (in a checkout: bash scripts/setup.sh mcp)"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from kb.mcp.prompts import PROMPTS
    from kb.mcp.tools import TOOLS

    p = sub.add_parser(
        "mcp",
        help="serve the knowledge base as MCP tools for coding agents (stdio)",
        description="Run an MCP server on standard input/output. Tools: "
        f"{', '.join(t.name for t in TOOLS)} (JSON-schema'd arguments, results shaped like "
        "the CLI's --format json). Resources: kb://operator/NAME, kb://chain/NAME, "
        f"kb://tree/NAME, kb://playbook/NAME. Prompts: {', '.join(p.name for p in PROMPTS)}. "
        "Records and the index stay open; an edited record is picked up on the next call. "
        "Quick tools answer on the server's event loop; scan, reference and large checks "
        "run in child processes stopped at their time budget. "
        "An agent client starts this command itself: see docs/mcp.md. Needs the mcp "
        "extra: " + INSTALL_HINT + ".",
        epilog="Exit status: 0 when the client closes the connection, 2 when the mcp package "
        "is not installed or --root is not a directory.",
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        help="the directory whose files the check and scan tools may read (paths "
        "are relative to it; symlinks leading out of it are refused); default: "
        "the working directory",
    )
    p.add_argument(
        "--time-budget",
        metavar="SECONDS",
        type=_seconds,
        default=60.0,
        help="the longest one tool call may take before it ends with an error; a long "
        "call (scan, reference) is stopped then (default: 60)",
    )
    p.add_argument(
        "--memory-budget",
        metavar="MIB",
        type=_mebibytes,
        default=2048,
        help="the memory one long call (scan, reference, a large check) may allocate, "
        "in MiB; past it the call ends with an error (default: 2048)",
    )
    p.set_defaults(func=run, path_args=("root",))


def _mebibytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 64 <= value <= 1024 * 1024:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of MiB in [64, 1048576]")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 86400]")
    return value


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("mcp.server") is None:
        print(
            f"kb mcp: the MCP server needs the 'mcp' package, which is not installed: "
            f"{INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    root = getattr(args, "root", None)
    if root is not None and not os.path.isdir(root):
        print(f"kb mcp: --root {root}: not a directory", file=sys.stderr)
        return 2
    from kb.mcp.server import serve

    serve(root, getattr(args, "time_budget", 60.0), getattr(args, "memory_budget", 2048))
    return 0
