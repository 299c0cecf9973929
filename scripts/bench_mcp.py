"""Warm latency of ``kb mcp`` tools through the SDK's stdio client: medians per call.

usage: python scripts/bench_mcp.py [--runs N] [--json]

Starts ``kb mcp`` once (what an agent's client does), waits for it to answer, then
times each tool call round trip (JSON-RPC over stdio, validation, the tool itself).
``scripts/benchmark.py`` runs this too when the mcp extra is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUDGETS_MS = {"mcp-search": 10.0}
#: (measure, tool, arguments); the search query is the CLI benchmark's.
CALLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("mcp-floor", "rules", {"code": "KB101"}),  # a tiny tool: the protocol's own cost
    ("mcp-search", "search", {"query": "paged attention decode"}),
    ("mcp-search-typo", "search", {"query": "npu_mla_prolog_v4"}),
    ("mcp-show", "show", {"name": "npu_mla_prolog_v3"}),
    ("mcp-show-brief", "show", {"name": "npu_mla_prolog_v3", "brief": True}),
    ("mcp-check", "check", {"path": "examples/qwen3-moe-a2.yaml"}),
)


def measure(runs: int) -> dict[str, float]:
    """Median milliseconds per call for each of :data:`CALLS` (warm server)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith("KB_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kb", "mcp"], env=env, cwd=str(ROOT)
    )
    results: dict[str, float] = {}

    async def run() -> None:
        async with Client(params) as client:
            for name, tool, args in CALLS:
                first = await client.call_tool(tool, args)  # warm-up (and a sanity check)
                if first.is_error:
                    raise SystemExit(f"{tool} {args} failed: {first.content}")
                samples = []
                for _ in range(runs):
                    start = time.perf_counter()
                    await client.call_tool(tool, args)
                    samples.append((time.perf_counter() - start) * 1000)
                results[name] = statistics.median(samples)

    anyio.run(run)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    results = measure(ns.runs)
    if ns.json:
        print(json.dumps({k: round(v, 2) for k, v in results.items()}, indent=2))
        return 0
    print(f"{'measure (warm)':<18}{'median ms':>10}{'budget':>9}")
    for name, ms in results.items():
        budget = BUDGETS_MS.get(name)
        mark = "" if budget is None else ("  ok" if ms <= budget else "  OVER")
        print(f"{name:<18}{ms:>10.2f}{budget if budget else '':>9}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
