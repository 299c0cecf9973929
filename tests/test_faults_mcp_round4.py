"""Attacks on ``kb mcp`` (issue 35 class A, issue 31): an agent or a client that asks
for too much, sends malformed envelopes, or damages the cache under a running server.

- slots: calls over their budget are stopped, so they give their slot back; a search
  and a small scan after sixteen abandoned scans are answered.
- reference: ``null`` or ``[]`` for a required tensor is a caller error naming it;
  shapes whose product overflows and outputs too large to send are refused; the
  server's own memory does not grow with what a reference computes.
- ids: a request whose id is a float, a boolean, an array, an object or null gets an
  "invalid request" reply with id null (JSON-RPC 2.0), never silence.
- index: a truncated segment, term table or stored-fields file under a running
  server changes no answer and kills nothing (no memory-mapped read); an edit after
  the damage still rebuilds the index.
- paths: 5,000 characters, 3,000 levels, a pyproject nested 50,000 deep are caller
  errors with a message; the server reads the C++ registrations the CLI reads.
- arguments: an argument a tool does not have is a tool error naming it; every CLI
  option that changes an answer has a tool argument.

Servers run as real subprocesses; ``KB_FAULTS_CODE=/path/to/checkout`` runs them (and
the CLI) from another checkout, e.g. an older main, to show the attacks fail there.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import operator_yaml
from tests.test_faults_mcp import RawServer
from tests.test_faults_mcp import _env as fault_env

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

pytest.importorskip("mcp", reason="the mcp extra is not installed")

REPO = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("KB_FAULTS_CODE") or REPO)
SLOW_UNIT = (
    "import torch\nimport torch_npu\n\n\ndef f{i}(x, g, w):\n"
    "    y = torch_npu.npu_rms_norm(x, g, epsilon=1e-6)[0]\n"
    "    z = torch.matmul(y, w)\n    return torch.nn.functional.silu(z) * z\n\n"
)
#: About 1 MB of source: many seconds of scanning, far past a 3 s budget.
SLOW_TEXT = "".join(SLOW_UNIT.replace("{i}", str(i)) for i in range(6000))


def _env(**extra: str) -> dict[str, str]:
    return {**fault_env(CODE), **extra}


class Server(RawServer):
    """``kb mcp`` from :data:`CODE` on a pipe, initialized, with one-call helpers."""

    def __init__(self, *args: str, cwd: Path = CODE, **env: str) -> None:
        super().__init__(*args, cwd=cwd, code=CODE, **env)
        self.initialize(60)

    def call(self, id: int, tool: str, arguments: dict[str, Any]) -> None:
        self.request(id, "tools/call", {"name": tool, "arguments": arguments})

    def answer(self, id: int, tool: str, arguments: dict[str, Any], timeout: float = 60) -> Any:
        """The result of one call (waiting for its reply)."""
        self.call(id, tool, arguments)
        got = self.reply(timeout)
        assert got.get("id") == id, str(got)[:300]
        return got["result"]


@pytest.fixture
def server(tmp_path: Path) -> Any:
    started: list[Server] = []

    def start(*args: str, cwd: Path = CODE, **env: str) -> Server:
        env.setdefault("KB_CACHE_DIR", os.environ.get("KB_CACHE_DIR") or str(tmp_path / "cache"))
        one = Server(*args, cwd=cwd, **env)
        started.append(one)
        return one

    yield start
    for one in started:
        one.proc.kill()
        one.close()


def _text(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content", []))


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(stat[1])
    found, todo = set(), [pid]
    while todo:
        here = todo.pop()
        kids = [p for p, parent in parents.items() if parent == here]
        found.update(kids)
        todo += kids
    return found


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


# --------------------------------------------------------------------------- slots


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts processes through /proc")
def test_abandoned_scans_give_back_their_slots(server: Any) -> None:
    """Sixteen and more scans over a 3 s budget, all at once: each is answered as over
    budget, nothing of them keeps running, and a search and a small scan sent after
    them are answered (with threads that cannot be stopped, both waited for a slot
    until their own budget ran out)."""
    one = server("--time-budget", "3")
    assert one.answer(1, "search", {"query": "rms norm"})["structuredContent"]["results"]
    slow = range(100, 120)
    for id in slow:
        one.call(id, "scan", {"text": SLOW_TEXT})
    got = {}
    while set(slow) - set(got):
        reply = one.reply(120)
        got[reply["id"]] = reply
    for id in slow:
        assert got[id]["result"]["isError"], str(got[id])[:300]
        assert "3 s time budget" in _text(got[id]["result"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # helpers (a fork server) may stay; no call does
        left = _descendants(one.proc.pid) - _children(one.proc.pid)
        if not left:
            break
        time.sleep(0.2)
    assert not left, f"stopped calls still running: {sorted(left)}"
    found = one.answer(2, "search", {"query": "moe routing"})
    assert not found.get("isError"), _text(found)
    small = one.answer(3, "scan", {"text": "import torch_npu\n\nx = 1\n"})
    assert not small.get("isError"), _text(small)
    assert "Traceback" not in one.close()


def _children(pid: int) -> set[int]:
    kids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid:
                    kids.add(int(entry))
    return kids


# --------------------------------------------------------------------------- reference


@pytest.mark.parametrize(
    ("args", "kwargs", "said"),
    [
        ([None], {}, "args[0] (input) is a required tensor"),
        ([[]], {}, "args[0] (input) is a required tensor"),
        ([3], {}, "args[0] (input) is a required tensor"),
        ([], {"input": None}, "input is a required tensor"),
        ([{"shape": [4096] * 8}], {}, "elements per array"),  # 2**96 wraps to 0 in int64
        ([{"shape": [2**40, 0]}], {}, ""),  # zero elements: nothing to refuse or to build
        ([{"data": [[[[[[[[[[1.0]]]]]]]]]]}], {}, "nests more than 8 levels"),
        ([{"shape": [64, 64]}] * 17, {}, "in all arrays of one call"),
    ],
    ids=["null", "empty", "number", "null-keyword", "overflow", "zero", "deep", "total"],
)
def test_reference_arguments_are_bounded_before_anything_is_built(
    server: Any, args: list[Any], kwargs: dict[str, Any], said: str
) -> None:
    one = server()
    result = one.answer(1, "reference", {"name": "npu_swiglu", "args": args, "kwargs": kwargs})
    text = _text(result)
    assert "failed inside the server" not in text, text
    if said:
        assert result["isError"], text
        assert said in text, text
    assert not one.answer(2, "rules", {"code": "KB101"}).get("isError")  # still serving


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the server's peak memory")
def test_a_reference_output_too_large_to_send_leaves_the_server_small(server: Any) -> None:
    """2048 x 1 times 1 x 2048: 4.2 million outputs from 4,096 input elements.  The call
    is refused (over the reference's work cap, too large to send, or over its memory
    budget) and the server process
    itself does not grow by what the reference built."""
    one = server()
    assert not one.answer(1, "search", {"query": "grouped matmul"}).get("isError")
    before = _peak_rss_mib(one.proc.pid)
    result = one.answer(
        2,
        "reference",
        {"name": "npu_grouped_matmul", "args": [[{"shape": [2048, 1]}], [{"shape": [1, 2048]}]]},
        timeout=120,
    )
    text = _text(result)
    assert result["isError"], text[:300]
    assert any(word in text for word in ("above the cap", "memory", "elements")), text
    grown = _peak_rss_mib(one.proc.pid) - before
    assert grown < 64, f"the server grew by {grown:.0f} MiB"
    assert not one.answer(3, "rules", {"code": "KB101"}).get("isError")


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(
    "id", [1.5, 2.0, True, False, [1], {"a": 1}, None], ids=lambda v: json.dumps(v)
)
def test_a_request_with_an_unusable_id_gets_an_invalid_request_reply(server: Any, id: Any) -> None:
    one = server()
    one.send(json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
    got = one.reply(15)
    assert got["id"] is None, got
    assert got["error"]["code"] == -32600, got
    assert "id" in got["error"]["message"], got
    one.request(5, "tools/list")  # and the server goes on
    assert one.reply(15)["id"] == 5


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "extra": 1},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "result": {}},
        {"jsonrpc": "2.0", "id": 7},
    ],
    ids=["unknown-member", "request-and-response", "neither"],
)
def test_an_envelope_that_is_not_json_rpc_is_refused_with_its_id(
    server: Any, message: dict[str, Any]
) -> None:
    one = server()
    one.send(json.dumps(message))
    got = one.reply(15)
    assert got["id"] == 7 and got["error"]["code"] == -32600, got


# --------------------------------------------------------------------------- index


def test_a_truncated_index_under_a_running_server_changes_no_answer(
    server: Any, tmp_path: Path
) -> None:
    records = tmp_path / "records" / "operators"
    records.mkdir(parents=True)
    for name in ("npu_alpha", "npu_beta", "npu_gamma"):
        (records / f"{name}.yaml").write_text(operator_yaml(name, keyword=f"{name}word"), "utf-8")
    cache = tmp_path / "cache"
    one = server(KB_RECORDS_DIR=str(records.parent), KB_CACHE_DIR=str(cache))
    query = {"query": "test operator npu_betaword"}
    first = one.answer(1, "search", query)["structuredContent"]
    assert first["results"][0]["name"] == "npu_beta", first
    index = [d for d in cache.iterdir() if d.name.startswith("index-")]
    assert index, list(cache.iterdir())
    cut = 0
    for folder in index:
        for file in folder.iterdir():
            if file.is_file() and file.stat().st_size > 64:
                os.truncate(file, file.stat().st_size // 3)
                cut += 1
    assert cut >= 2
    again = one.answer(2, "search", query)["structuredContent"]
    assert again == first
    (records / "npu_alpha.yaml").write_text(
        operator_yaml("npu_alpha", keyword="freshword"), encoding="utf-8"
    )
    fresh = one.answer(3, "search", {"query": "freshword"})["structuredContent"]
    assert [r["name"] for r in fresh["results"]][:1] == ["npu_alpha"], fresh
    fifos = 0
    for folder in cache.iterdir():  # the index of these records, its files now FIFOs
        if folder.name.startswith("index-"):
            for file in folder.iterdir():
                if file.is_file() and file.suffix in (".json", ".sqlite"):
                    file.unlink()
                    os.mkfifo(file)
                    fifos += 1
    assert fifos >= 2
    os.utime(records / "npu_alpha.yaml")  # same content: the same index is opened again
    later = one.answer(4, "search", {"query": "freshword"}, timeout=60)["structuredContent"]
    assert later == fresh
    assert one.proc.poll() is None
    assert "Traceback" not in one.close()


# --------------------------------------------------------------------------- paths


def test_absurd_paths_and_a_deep_pyproject_are_caller_errors(server: Any, tmp_path: Path) -> None:
    root = tmp_path / "root"
    deep = root / "deep"
    deep.mkdir(parents=True)
    (deep / "pyproject.toml").write_text(
        "[tool.kb]\nproduct = " + "[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8"
    )
    (deep / "model.py").write_text("import torch_npu\n\nx = 1\n", encoding="utf-8")
    one = server("--root", str(root), cwd=root)
    cases = {
        "a" * 5000: "characters long",
        "/".join(["d"] * 3000): "levels",
        "x" * 300 + "/model.py": "bytes long",
    }
    id = 0
    for path, said in cases.items():
        for tool in ("check", "scan"):
            id += 1
            result = one.answer(id, tool, {"path": path})
            assert result["isError"], (tool, said)
            assert said in _text(result), (tool, _text(result)[:300])
    result = one.answer(99, "scan", {"path": "deep"})
    text = _text(result)
    assert result["isError"] and "nested too deeply" in text, text[:300]
    assert "failed inside the server" not in text
    assert "Traceback" not in one.close()


NATIVE = """\
#include <torch/library.h>
TORCH_LIBRARY(gatelib, m) {
  m.def("fused_gate(Tensor x, Tensor w, float alpha=1.0) -> Tensor");
}
"""
CALLER = """\
import torch
import torch_npu  # noqa: F401


def gate(x, w):
    return torch.ops.gatelib.fused_gate(x, w, beta=2.0)
"""


def test_the_server_reads_the_native_registrations_the_cli_reads(
    server: Any, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg" / "csrc").mkdir(parents=True)
    (tree / "pkg" / "csrc" / "gate.cpp").write_text(NATIVE, encoding="utf-8")
    (tree / "pkg" / "model.py").write_text(CALLER, encoding="utf-8")
    env = {**_env(), "KB_CACHE_DIR": str(tmp_path / "cache")}
    cli = subprocess.run(
        [sys.executable, "-m", "kb", "scan", "pkg", "--format", "json"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    by_cli = json.loads(cli.stdout)["findings"]
    assert any(f["code"] == "KB104" and "beta" in f["message"] for f in by_cli), by_cli
    one = server(cwd=tree, KB_CACHE_DIR=str(tmp_path / "cache"))
    by_mcp = one.answer(1, "scan", {"path": "pkg"})["structuredContent"]["findings"]
    assert by_mcp == by_cli


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("search", {"query": "rms norm", "tp": 2}, "'tp'"),
        ("scan", {"text": "x = 1\n", "plans": True}, "'plans'"),
        ("prefetch_size", {"shape": [8, 8], "tensor_parallel": 2}, "'tensor_parallel'"),
        ("show", {"name": "npu_rms_norm", "made_up": 1, "other": 2}, "'made_up', 'other'"),
    ],
    ids=["search-tp", "scan-plans", "prefetch-tensor-parallel", "show-two"],
)
def test_an_argument_a_tool_does_not_have_is_a_tool_error_naming_it(
    server: Any, tool: str, arguments: dict[str, Any], named: str
) -> None:
    one = server()
    result = one.answer(1, tool, arguments)
    assert result["isError"], _text(result)[:300]
    assert named in _text(result), _text(result)


#: CLI options that change nothing in an answer's document, and why (the rest must
#: each be an argument of the matching tool).
NOT_ANSWERS = {
    "format": "the tools always answer the JSON document",
    "color": "presentation of text output",
    "verbose": "text output only",
    "jobs": "how many processes read files, not what they find",
    "emit_candidates": "writes a file; the server never writes",
    "verify": "imports and runs the model's code; the server reads code, never runs it",
    "no_input": "the tool never prompts (always as --no-input)",
}
#: CLI destination -> tool argument, where the names differ.
RENAMED = {
    "paths": "path",
    "files": "path",
    "quantization": "quant",
    "no_fusion": "fusion",
    "no_config": "use_config",
    "model_config": "model_config",
}
VERBS = {
    "search": "search",
    "show": "show",
    "list": "list",
    "check": "check",
    "scan": "scan",
    "advise": "advise",
    "tree": "tree",
    "prefetch-size": "prefetch_size",
    "rules": "rules",
}


def test_every_cli_option_that_changes_an_answer_is_a_tool_argument() -> None:
    import argparse

    from kb.cli import build_parser
    from kb.mcp.server import build

    async def schemas() -> dict[str, set[str]]:
        from mcp import Client

        async with Client(build()) as client:
            tools = (await client.list_tools()).tools
        for tool in tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name
        return {t.name: set(t.input_schema.get("properties", {})) for t in tools}

    import anyio

    published = anyio.run(schemas)
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for verb, tool in VERBS.items():
        for action in sub.choices[verb]._actions:
            dest = action.dest
            if dest in ("help", "func") or dest in NOT_ANSWERS:
                continue
            if verb in ("search", "show", "tree", "rules", "advise") and not action.option_strings:
                continue  # the positional (query, name, tree, code) is the first argument
            if verb == "advise" and dest == "tree":
                continue
            if RENAMED.get(dest, dest) not in published[tool]:
                missing.append(f"{verb} {action.option_strings or dest} -> {tool}")
    assert not missing, "CLI options without a tool argument:\n" + "\n".join(missing)


def test_scan_plan_parallel_and_prefetch_tp_answer_as_the_cli(server: Any, tmp_path: Path) -> None:
    model = REPO / "tests" / "fixtures" / "modelplan" / "modeling_moe_softmax.py"
    env = {**_env(), "KB_CACHE_DIR": str(tmp_path / "cache")}

    def cli(*argv: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "kb", *argv, "--format", "json"],
            cwd=CODE,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        return json.loads(done.stdout)

    one = server(KB_CACHE_DIR=str(tmp_path / "cache"))
    rel = str(model.relative_to(REPO))
    planned = one.answer(
        1,
        "scan",
        {"path": rel, "plan": True, "fusion": False, "parallel": "ep", "product": "atlas-a3"},
    )["structuredContent"]
    assert planned == cli(
        "scan", rel, "--plan", "--no-fusion", "--parallel", "ep", "--product", "atlas-a3"
    )
    assert planned["plan"] and not [f for f in planned["findings"] if f["code"].startswith("KB6")]
    sized = one.answer(
        2, "prefetch_size", {"hidden": 6144, "intermediate": 12288, "gate_up": True, "tp": 2}
    )
    assert sized["structuredContent"] == cli(
        "prefetch-size", "--hidden", "6144", "--intermediate", "12288", "--gate-up", "--tp", "2"
    )


def test_scan_returns_the_port_diff_read_inside_the_root(server: Any, tmp_path: Path) -> None:
    """Issue 33: the scan tool returns what ``kb port --diff`` shows (stages, notes, diff),
    reading inside the server's root and writing nothing; a model outside the root is
    refused as any path is."""
    pytest.importorskip("libcst")
    data = tmp_path / "root"
    data.mkdir()
    for name in ("dense_llm.py", "dense_llm.json"):
        (data / name).write_bytes((REPO / "tests" / "data" / "port" / name).read_bytes())
    one = server("--root", str(data), KB_CACHE_DIR=str(tmp_path / "cache"))
    got = one.answer(
        1,
        "scan",
        {"path": "dense_llm.py", "plan": True, "port_diff": True, "model_config": "dense_llm.json"},
        timeout=180,
    )["structuredContent"]
    (ported,) = got["port"]["files"]
    assert "+import torch_npu" in ported["diff"]
    assert {s["mapping"] for s in ported["stages"].values()} >= {"rms_norm", "swiglu"}
    assert sorted(p.name for p in data.iterdir()) == ["dense_llm.json", "dense_llm.py"]
    refused = one.answer(2, "scan", {"path": "../outside.py", "port_diff": True})
    assert refused.get("isError") is True
