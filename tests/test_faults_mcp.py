"""Attacks on ``kb mcp`` (issue 24: A, D, E, K): what an agent that can be talked into
anything, or a client that sends garbage, gets back from the server.

- A: a planted secret outside the server's root (absolute path, ``..``, symlinks) or in
  a file inside it that is not a candidate list never appears in any reply.
- K: every request that carries an id gets a JSON-RPC reply, however broken it is.
- D: a slow tool call does not hold up the next one; one over its time budget ends as a
  tool error that says so.
- E: a tool error always says why.

The servers run as real subprocesses (``python -m kb mcp``); raw JSON-RPC lines are read
by a thread with timeouts, so no test can hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-06-18"


def _env(code: Path = REPO) -> dict[str, str]:
    keep = {
        k: os.environ[k]
        for k in ("KB_CACHE_DIR", "KB_RECORDS_DIR", "PATH", "HOME")
        if k in os.environ
    }
    return {**keep, "PYTHONPATH": str(code)}


class RawServer:
    """``kb mcp`` on a pipe: write raw lines, read replies (one JSON object a line).
    ``code`` is the checkout it runs from (also its working directory by default, so
    ``python -m kb`` finds that checkout first); ``env`` adds or replaces variables."""

    def __init__(self, *args: str, cwd: Path | None = None, code: Path = REPO, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kb", "mcp", *args],
            cwd=cwd or code,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**_env(code), **env},
        )
        self.replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(line.decode("utf-8", "replace"))

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def request(self, id: int, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg))

    def reply(self, timeout: float = 10) -> dict[str, Any]:
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            state = "alive" if self.proc.poll() is None else f"dead, exit {self.proc.returncode}"
            raise AssertionError(f"no reply within {timeout} s (server {state})") from None
        return json.loads(line)  # type: ignore[no-any-return]

    def initialize(self, timeout: float = 30) -> None:
        self.request(
            0,
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "faults", "version": "1"},
            },
        )
        assert self.reply(timeout)["id"] == 0
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def close(self) -> str:
        """End the server; return what it wrote on standard error."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")


@pytest.fixture
def raw_server(request: pytest.FixtureRequest) -> Any:
    servers: list[RawServer] = []

    def start(*args: str, cwd: Path = REPO) -> RawServer:
        server = RawServer(*args, cwd=cwd)
        servers.append(server)
        server.initialize()
        return server

    yield start
    for server in servers:
        server.proc.kill()
        server.close()


# --------------------------------------------------------------------------- A: confinement


def _plant(tmp: Path, token: str) -> Path:
    """A root holding a non-candidate secret file and links out to secrets beside it."""
    root, outside = tmp / "root", tmp / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.yaml").write_text(
        f"password: {token}\n{token}: 1\n- {token}\n", encoding="utf-8"
    )
    (outside / "list.yaml").write_text(  # a candidate list whose values hold the secret
        f"version: 1\ntarget: {{product: {token}}}\ncandidates:\n  - kind: {token}\n",
        encoding="utf-8",
    )
    (outside / "secret.py").write_text(
        f"import torch_npu\n\n\ndef f(x, g):\n    return torch_npu.npu_rms_norm(x, g, {token}=1)\n",
        encoding="utf-8",
    )
    (tmp / "pyproject.toml").write_text(f"[tool.kb]\n{token} = 1\n", encoding="utf-8")
    (root / "secret.yaml").write_text(f"password: {token}\n{token}: [1, 2]\n", encoding="utf-8")
    (root / "list.yaml").write_text(f"password: {token}\ncandidates: []\n", encoding="utf-8")
    (root / "flow.yaml").write_text(f"[{token}, 1]\n", encoding="utf-8")
    (root / "broken.yaml").write_text(f"password: {token}\n  {token}: [\n", encoding="utf-8")
    (root / "secret.txt").write_text(f"{token} = 1\nprint({token})\n", encoding="utf-8")
    (root / "link.yaml").symlink_to(outside / "secret.yaml")
    (root / "link-list.yaml").symlink_to(outside / "list.yaml")
    (root / "link.py").symlink_to(outside / "secret.py")
    (root / "pkg").mkdir()
    (root / "pkg" / "model.py").write_text("x = 1\n", encoding="utf-8")
    (root / "pkg" / "leak.py").symlink_to(outside / "secret.py")
    (root / "pkg" / "out").symlink_to(outside, target_is_directory=True)
    (root / "out").symlink_to(outside, target_is_directory=True)
    return root


OUTSIDE = [
    "{out}/secret.yaml",
    "{out}/list.yaml",
    "{out}/secret.py",
    "../outside/secret.yaml",
    "../outside/secret.py",
    "pkg/../../outside/secret.py",
    "link.yaml",
    "link-list.yaml",
    "link.py",
    "pkg/leak.py",
    "out/secret.py",
    "out",
    "pkg/out",
    "..",
    "/",
    "/etc/passwd",
]
INSIDE = ["secret.yaml", "list.yaml", "flow.yaml", "broken.yaml", "secret.txt", "pkg", "."]


def test_no_path_taking_tool_leaks_a_planted_secret(tmp_path: Path) -> None:
    token = "SECRET" + secrets.token_hex(12)
    root = _plant(tmp_path, token)
    out = str(tmp_path / "outside")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kb", "mcp"], env=_env(), cwd=str(root)
    )
    replies: dict[tuple[str, str], Any] = {}

    async def run() -> None:
        with anyio.fail_after(60), (tmp_path / "server.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                tools = (await client.list_tools()).tools
                path_tools = sorted(
                    t.name for t in tools if "path" in t.input_schema.get("properties", {})
                )
                assert path_tools == ["check", "scan"], path_tools  # a new one: cover it here
                for tool in path_tools:
                    for raw in OUTSIDE + INSIDE:
                        path = raw.format(out=out)
                        replies[tool, path] = await client.call_tool(tool, {"path": path})

    anyio.run(run)
    for (tool, path), result in replies.items():
        shown = json.dumps(result.model_dump(mode="json"), ensure_ascii=False)
        assert token not in shown, (tool, path, shown[:800])
        if any(path == raw.format(out=out) for raw in OUTSIDE):
            assert result.is_error, (tool, path, shown[:800])
            assert "outside the server's root" in shown, (tool, path, shown[:800])
    # a non-candidate file inside the root: one finding, nothing of the file quoted
    inside = replies["check", "secret.yaml"].structured_content
    assert len(inside["findings"]) == 1 and inside["findings"][0]["code"] == "KB003"
    assert "not a candidate list" in inside["findings"][0]["message"]
    assert replies["check", "broken.yaml"].structured_content["findings"][0]["code"] == "KB001"
    scanned = replies["scan", "pkg"].structured_content
    assert scanned["summary"]["files"] == 1
    assert {s["path"] for s in scanned["skipped"]} == {os.path.join("pkg", "leak.py")}
    assert "outside the server's root" in scanned["skipped"][0]["reason"]
    assert replies["scan", "secret.txt"].is_error  # not Python source by its name
    assert token not in (tmp_path / "server.log").read_text()


def test_a_symlink_swapped_in_after_the_path_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path check passes, then the file is replaced by a link out of the root before
    it is opened (a race an attacker controlling the tree can win): the read is judged on
    the opened descriptor, so nothing of the secret comes back.  The race is made certain
    by letting the path check see the path before the swap."""
    import kb.core.paths as paths
    from kb.mcp import confine
    from kb.mcp import server as srv

    token = "SECRET" + secrets.token_hex(12)
    root = _plant(tmp_path, token)
    for name in ("race.yaml", "race.py"):
        (root / name).write_text("x = 1\n", encoding="utf-8")
    monkeypatch.setattr(paths, "_CONFINED_TO", None)  # restored after the test
    monkeypatch.setattr(confine, "_ROOT", None)
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(root)
    confine.set_root(root)
    checked = confine.inside

    def check_then_swap(path: str) -> str:
        answer = checked(path)  # the check sees a plain file inside the root ...
        target = root / path
        target.unlink()  # ... which is then swapped for a link out of it
        target.symlink_to(
            tmp_path / "outside" / ("list.yaml" if path.endswith(".yaml") else "secret.py")
        )
        return answer

    monkeypatch.setattr(confine, "inside", check_then_swap)
    shown: dict[str, str] = {}

    async def run() -> None:
        async with Client(srv.build()) as client:
            for tool, path in (("check", "race.yaml"), ("scan", "race.py")):
                result = await client.call_tool(tool, {"path": path})
                shown[tool] = json.dumps(result.model_dump(mode="json"), ensure_ascii=False)

    anyio.run(run)
    for tool, text in shown.items():
        assert token not in text, (tool, text[:800])
        assert "outside" in text, (tool, text[:800])
    assert "outside the directory kb may read" in shown["check"]


def test_root_option_confines_to_that_directory(tmp_path: Path, raw_server: Any) -> None:
    token = "SECRET" + secrets.token_hex(12)
    root = _plant(tmp_path, token)
    (root / "ok.yaml").write_text(
        (REPO / "examples" / "qwen3-moe-a2.yaml").read_text("utf-8"), encoding="utf-8"
    )
    server = raw_server("--root", str(root), cwd=tmp_path)
    calls = {
        1: "ok.yaml",
        2: "../outside/secret.yaml",
        3: "outside/secret.yaml",
        4: str(root / "ok.yaml"),
    }
    for id, path in calls.items():
        server.request(id, "tools/call", {"name": "check", "arguments": {"path": path}})
    got = {r["id"]: r for r in (server.reply() for _ in calls)}
    assert token not in json.dumps(got)
    assert got[1]["result"]["structuredContent"]["summary"]["candidates"] == 10
    assert got[4]["result"]["structuredContent"]["summary"]["candidates"] == 10
    assert got[2]["result"]["isError"], got[2]
    assert "outside the server's root" in got[2]["result"]["content"][0]["text"]
    assert got[3]["result"]["isError"], got[3]  # resolved against the root, not the cwd
    assert "cannot read" in got[3]["result"]["content"][0]["text"]


# --------------------------------------------------------------------------- K: malformed requests

DEEP = "[" * 1000 + "]" * 1000
MALFORMED = {
    1: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":5}',
    2: '{"jsonrpc":"1.0","id":2,"method":"tools/list"}',
    3: '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search",'
    '"arguments":{"query":' + DEEP + "}}}",
    4: '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search",'
    '"arguments":{"query":"\\ud800"}}}',
    5: '{"jsonrpc":"2.0","id":5,"method":"tools/list","params":[]}',
    6: '{"jsonrpc":"2.0","id":6,"method":7}',
    7: '{"jsonrpc":"2.0","id":7,"method":"tools/list",',  # cut short
    8: '{"id":8,"method":"tools/list"}',
    9: '{"jsonrpc":"2.0","method":"tools/list","id":"nine","params":"x"}',
}


def test_every_request_with_an_id_gets_a_reply(raw_server: Any) -> None:
    server = raw_server()
    for line in MALFORMED.values():
        server.send(line)
    server.send(
        b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"search",'
        b'"arguments":{"query":"\xed\xa0\x80 rms"}}}'
    )  # a raw lone surrogate: replaced
    server.send("not json at all")
    server.send('[{"jsonrpc":"2.0","id":11,"method":"tools/list"}]')
    server.request(12, "tools/list")
    got: dict[Any, dict[str, Any]] = {}
    names = {1, 2, 3, 4, 5, 6, 7, 8, "nine"}
    while not names | {10, 11, 12, None} <= set(got):  # a missing reply: reply() times out
        reply = server.reply()
        got[reply["id"]] = reply
    for id in names:
        error = got[id].get("error")
        assert error and error["code"] in (-32700, -32600, -32602), got[id]
        assert error["message"].strip(), got[id]
    assert "result" in got[10]  # decodable after replacement: answered normally
    assert got[None]["error"]["code"] == -32700  # the line that is not JSON
    assert got[11]["error"]["code"] == -32600  # batches are not part of MCP
    assert len(got[12]["result"]["tools"]) == 10  # still serving
    assert "Traceback" not in server.close()


# --------------------------------------------------------------------------- D: slow calls

SLOW_UNIT = (
    "import torch\nimport torch_npu\n\n\ndef f{i}(x, g, w):\n"
    "    y = torch_npu.npu_rms_norm(x, g, epsilon=1e-6)[0]\n"
    "    z = torch.matmul(y, w)\n    return torch.nn.functional.silu(z) * z\n\n"
)
SLOW_TEXT = "".join(SLOW_UNIT.replace("{i}", str(i)) for i in range(2000))  # ~350 KB


def _call(server: RawServer, id: int, tool: str, arguments: dict[str, Any]) -> None:
    server.request(id, "tools/call", {"name": tool, "arguments": arguments})


def test_a_slow_scan_does_not_hold_up_a_search(raw_server: Any) -> None:
    server = raw_server()
    _call(server, 1, "search", {"query": "rms norm"})  # warm the index first
    assert server.reply(30)["id"] == 1
    _call(server, 2, "scan", {"text": SLOW_TEXT})
    _call(server, 3, "search", {"query": "moe routing"})
    first = server.reply(30)
    assert first["id"] == 3, f"the search waited for the scan: {str(first)[:300]}"
    assert first["result"]["structuredContent"]["results"]


def test_a_call_over_its_time_budget_is_a_tool_error(raw_server: Any) -> None:
    server = raw_server("--time-budget", "0.2")
    # whole units (a cut inside one is a syntax error, answered before any budget runs out)
    third = "".join(SLOW_UNIT.replace("{i}", str(i)) for i in range(700))  # about a second
    _call(server, 1, "scan", {"text": third})
    reply = server.reply(30)
    assert reply["id"] == 1 and reply["result"]["isError"], str(reply)[:300]
    assert "0.2 s time budget" in reply["result"]["content"][0]["text"]
    _call(server, 2, "rules", {"code": "KB406"})  # and the server goes on
    assert not server.reply(30)["result"].get("isError")


# --------------------------------------------------------------------------- E: reasons


@pytest.mark.parametrize(
    "exc",
    [RuntimeError(), MemoryError(), KeyError("x"), ValueError(""), OSError()],
    ids=lambda e: type(e).__name__,
)
def test_a_tool_error_always_says_why(exc: BaseException, monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    from kb.mcp import server as srv
    from kb.mcp.tools import TOOLS, ToolSpec

    def broken(fn: Any) -> Any:
        @functools.wraps(fn)  # the tool's own signature and schema
        def call(**kwargs: Any) -> Any:
            raise exc

        return call

    monkeypatch.setattr(srv, "TOOLS", tuple(ToolSpec(t.name, t.title, broken(t.fn)) for t in TOOLS))
    texts: list[str] = []

    async def run() -> None:
        async with Client(srv.build()) as client:
            for name in ("search", "rules"):
                result = await client.call_tool(name, {"query": "x"} if name == "search" else {})
                assert result.is_error
                texts.append(result.content[0].text)

    anyio.run(run)
    for text in texts:
        reason = text.split(":", 1)[1].strip() if ":" in text else ""
        assert reason, text
