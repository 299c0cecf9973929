"""Warm latency of ``kb mcp`` tools through the SDK's stdio client: medians per call.

usage: python scripts/bench_mcp.py [--runs N] [--json]

Starts ``kb mcp`` once (what an agent's client does), waits for it to answer, then
times each tool call round trip (JSON-RPC over stdio, validation, the tool itself).
Beside the median it reports the server's own CPU time per call (Linux: read from
``/proc``), which a loaded machine changes far less than the round trip: on an idle
machine the round trip is about the server's and the client's CPU time together.  The
machine's load average is printed with the numbers.  On a busy machine,
``chrt -f 10 python scripts/bench_mcp.py`` (real-time scheduling, where permitted; the
server inherits it) keeps other processes' time slices out of the round trips.
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
BUDGETS_MS = {"mcp-search": 5.0}
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
    return {name: wall for name, (wall, _cpu, _client) in measure_detail(runs).items()}


def measure_detail(runs: int) -> dict[str, tuple[float, float | None, float]]:
    """(median round-trip ms, server CPU ms per call or None, client CPU ms per call)
    for each of :data:`CALLS`."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith("KB_")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kb", "mcp"], env=env, cwd=str(ROOT)
    )
    results: dict[str, tuple[float, float | None, float]] = {}

    async def run() -> None:
        async with Client(params) as client:
            server = _server_pid()
            for name, tool, args in CALLS:
                first = await client.call_tool(tool, args)  # warm-up (and a sanity check)
                if first.is_error:
                    raise SystemExit(f"{tool} {args} failed: {first.content}")
                samples = []
                before, mine = _cpu_ms(server), time.process_time()
                for _ in range(runs):
                    start = time.perf_counter()
                    await client.call_tool(tool, args)
                    samples.append((time.perf_counter() - start) * 1000)
                after, spent = _cpu_ms(server), (time.process_time() - mine) * 1000 / runs
                cpu = None if before is None or after is None else (after - before) / runs
                results[name] = (statistics.median(samples), cpu, spent)

    anyio.run(run)
    return results


def _server_pid() -> int | None:
    """The ``kb mcp`` process this one started (Linux), else None."""
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if stat[1] == me and b"mcp" in cmd:
            return int(pid)
    return None


def _cpu_ms(pid: int | None) -> float | None:
    """User plus system CPU time of ``pid`` so far, in milliseconds."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    results = measure_detail(ns.runs)
    if ns.json:
        doc = {
            k: {
                "median_ms": round(w, 2),
                "server_cpu_ms": None if c is None else round(c, 2),
                "client_cpu_ms": round(m, 2),
            }
            for k, (w, c, m) in results.items()
        }
        print(json.dumps({"load": load(), **doc}, indent=2))
        return 0
    print(f"load average: {load()} ({os.cpu_count()} cores)")
    print(
        f"{'measure (warm)':<18}{'median ms':>10}{'server cpu':>12}{'client cpu':>12}{'budget':>9}"
    )
    for name, (ms, cpu, client) in results.items():
        budget = BUDGETS_MS.get(name)
        mark = "" if budget is None else ("  ok" if ms <= budget else "  OVER")
        shown = f"{cpu:.2f}" if cpu is not None else "-"
        print(f"{name:<18}{ms:>10.2f}{shown:>12}{client:>12.2f}{budget if budget else '':>9}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
