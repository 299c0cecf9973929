"""``kb mcp`` through the official SDK's stdio client: a real subprocess, real JSON-RPC.

The tool calls are data: each :class:`Case` row names a tool, its arguments and what
must come back (a result equal to a CLI command's ``--format json`` document, a check
on the structured result, or a tool error containing some text).  One server runs all
rows, bad arguments first, and must still answer afterwards.  A new tool is covered by
adding rows here (and its name to ``TOOL_NAMES``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kb.cli import main
from tests.conftest import operator_yaml

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DRAFT = EXAMPLES / "deepseek-v3-a2-draft.yaml"
TOOL_NAMES = {
    "search",
    "show",
    "list",
    "check",
    "scan",
    "advise",
    "tree",
    "prefetch_size",
    "rules",
    "reference",
}
SCAN_DEFECTS = ROOT / "tests" / "fixtures" / "scan" / "resolution" / "defects.py"


@dataclass(frozen=True)
class Case:
    """One tool call and what it must give."""

    id: str
    tool: str
    args: dict[str, Any]
    cli: list[str] | None = None  # the result equals this command's --format json document
    check: Callable[[dict[str, Any]], bool] | None = None  # a predicate on the result
    error: str | None = None  # a tool error whose text contains this
    drop: tuple[str, ...] = ()  # keys the tool adds to the CLI document
    wrap: Callable[[Any], Any] = field(default=lambda doc: doc)  # CLI document → tool shape


def _names(doc: dict[str, Any]) -> list[str]:
    return [r["name"] for r in doc["results"]]


BAD = [
    Case("search-empty", "search", {"query": ""}, error="at least 1 character"),
    Case("search-missing-query", "search", {}, error="query"),
    Case(
        "search-limit-0",
        "search",
        {"query": "rope", "limit": 0},
        error="greater than or equal to 1",
    ),
    Case("search-bad-kind", "search", {"query": "rope", "kind": "recipe"}, error="kind"),
    Case("search-bad-release", "search", {"query": "rope", "torch_npu": "9.9"}, error="9.9"),
    Case("show-typo", "show", {"name": "npu_rms_nrom"}, error="did you mean: npu_rms_norm"),
    Case(
        "show-bad-section",
        "show",
        {"name": "npu_rms_norm", "section": "recipes"},
        error="no section 'recipes'",
    ),
    Case(
        "show-brief-and-section",
        "show",
        {"name": "npu_rms_norm", "brief": True, "section": "parameters"},
        error="not both",
    ),
    Case("show-wrong-type", "show", {"name": 42}, error="valid string"),
    Case("list-bad-product", "list", {"product": "Z9"}, error="unknown product 'Z9'"),
    Case("check-nothing", "check", {}, error="give either text"),
    Case("scan-nothing", "scan", {}, error="give either path"),
    Case("scan-missing-path", "scan", {"path": "nonexistent/model"}, error="no such file"),
    Case(
        "scan-outside-root",
        "scan",
        {"path": "/nonexistent/model"},
        error="outside the server's root",
    ),
    Case(
        "scan-bad-product",
        "scan",
        {"text": "x = 1\n", "product": "atlas-z9"},
        error="unknown product",
    ),
    Case("scan-bad-select", "scan", {"text": "x = 1\n", "select": ["KB999"]}, error="KB999"),
    Case(
        "scan-bad-parallel",
        "scan",
        {"text": "x = 1\n", "parallel": "sp"},
        error="unknown parallel mode",
    ),
    Case("check-both", "check", {"text": "version: 1", "path": str(DRAFT)}, error="not both"),
    Case(
        "check-missing-file", "check", {"path": "nonexistent/candidates.yaml"}, error="cannot read"
    ),
    Case(
        "check-outside-root",
        "check",
        {"path": "../candidates.yaml"},
        error="outside the server's root",
    ),
    Case("check-stdin", "check", {"path": "-"}, error="standard input"),
    Case("check-bad-select", "check", {"text": "version: 1\n", "select": ["KB999"]}, error="KB999"),
    Case("advise-unknown-tree", "advise", {"tree": "recipes"}, error="no decision tree"),
    Case(
        "advise-bad-answer",
        "advise",
        {"tree": "attention", "answers": {"arch": "rnn"}},
        error="not an answer",
    ),
    Case(
        "advise-unknown-flag",
        "advise",
        {"tree": "attention", "answers": {"colour": "red"}},
        error="has no flag --colour",
    ),
    Case("tree-not-a-tree", "tree", {"name": "npu_rms_norm"}, error="not a decision tree"),
    Case("prefetch-nothing", "prefetch_size", {}, error="say which weight to size"),
    Case(
        "prefetch-moe-incomplete",
        "prefetch_size",
        {"moe": True, "hidden": 7168},
        error="--moe needs",
    ),
    Case("prefetch-bad-gmm", "prefetch_size", {"shape": [8, 8], "gmm": 3}, error="gmm"),
    Case("rules-unknown", "rules", {"code": "KB999"}, error="no rule 'KB999'"),
    Case("reference-unknown", "reference", {"name": "npu_no_such_op"}, error="no operator record"),
    Case(
        "reference-too-big",
        "reference",
        {"name": "npu_swiglu", "args": [{"shape": [100, 100]}]},
        error="4096 elements",
    ),
    Case(
        "reference-ragged",
        "reference",
        {"name": "npu_swiglu", "args": [{"data": [[1, 2], [3]]}]},
        error="rectangular",
    ),
    Case(
        "reference-bad-dtype",
        "reference",
        {"name": "npu_swiglu", "args": [{"data": [1, 2], "dtype": "float64"}]},
        error="not one the record lists",
    ),
    Case(
        "reference-bad-keyword",
        "reference",
        {"name": "npu_swiglu", "args": [{"data": [1, 2]}], "kwargs": {"axis": 0}},
        error="no parameter 'axis'",
    ),
    Case("no-such-tool", "recipes", {}, error="recipes"),
]

GOOD = [
    Case(
        "search",
        "search",
        {"query": "moe routing", "limit": 5},
        cli=["search", "moe routing", "--limit", "5"],
        check=lambda d: "npu_moe_init_routing_v2" in _names(d)[:3],
    ),
    Case(
        "search-release",
        "search",
        {"query": "rms norm", "torch_npu": "2.1.0.post8"},
        cli=["search", "rms norm", "--torch-npu", "2.1.0.post8"],
        check=lambda d: d["torch_npu"]["exact"] is True,
    ),
    Case(
        "search-zh",
        "search",
        {"query": "权重预取", "kind": "operator"},
        cli=["search", "权重预取", "--kind", "operator"],
        check=lambda d: _names(d)[0] == "npu_prefetch",
    ),
    Case("show", "show", {"name": "torch_npu.npu_rms_norm"}, cli=["show", "npu_rms_norm"]),
    Case(
        "show-section",
        "show",
        {"name": "npu_mla_prolog_v3", "section": "params"},
        cli=["show", "npu_mla_prolog_v3", "--section", "parameters"],
        check=lambda d: set(d) == {"kind", "name", "parameters"},
    ),
    Case(
        "show-brief",
        "show",
        {"name": "npu_fused_infer_attention_score_v2", "brief": True},
        cli=["show", "npu_fused_infer_attention_score_v2", "--brief"],
        check=lambda d: d["torch_npu"] == "2.1.0.post17, 2.6.0.post3+",
    ),
    Case(
        "list",
        "list",
        {"category": "moe", "product": "A2"},
        cli=["list", "--category", "moe", "--product", "A2"],
        check=lambda d: len(d["results"]) > 5,
    ),
    Case("list-kind", "list", {"kind": "tree"}, cli=["list", "--kind", "tree"]),
    Case(
        "check-path",
        "check",
        {"path": str(DRAFT)},
        cli=["check", str(DRAFT)],
        check=lambda d: d["summary"]["errors"] == 8,
    ),
    Case(
        "check-text",
        "check",
        {"text": DRAFT.read_text(encoding="utf-8"), "ignore": ["KB110"]},
        check=lambda d: (
            {f["code"] for f in d["findings"]}
            == {"KB101", "KB104", "KB107", "KB202", "KB301", "KB302", "KB304", "KB307"}
            and {f["file"] for f in d["findings"]} == {"<text>"}
        ),
    ),
    Case(
        "scan-path",
        "scan",
        {"path": str(SCAN_DEFECTS), "fusion": False},
        cli=["scan", str(SCAN_DEFECTS), "--no-fusion"],
        check=lambda d: d["summary"]["errors"] == 6 and d["summary"]["calls"] >= 8,
    ),
    Case(
        "scan-text",
        "scan",
        {
            "text": "import torch_npu\n\n\ndef f(x, g):\n    return torch_npu.npu_rms_norm(x, g, eps=1)\n"
        },
        check=lambda d: (
            [(f["line"], f["code"], f["file"]) for f in d["findings"]] == [(5, "KB104", "<text>")]
        ),
    ),
    Case(
        "scan-plan",
        "scan",
        {
            "text": (
                ROOT / "tests" / "fixtures" / "modelplan" / "modeling_moe_softmax.py"
            ).read_text(encoding="utf-8"),
            "product": "atlas-a3",
        },
        check=lambda d: (
            {m["kind"] for m in d["inventory"]} >= {"moe.router", "moe.experts"}
            and any(
                e.get("chain") in ("moe-gate-softmax", "moe-gate-softmax-gating-top-k")
                for e in d["plan"]
            )
        ),
    ),  # either proven softmax-router chain
    Case(
        "scan-model-config",
        "scan",
        {
            "path": str(ROOT / "tests" / "fixtures" / "modelplan" / "model_by_config.py"),
            "model_config": str(ROOT / "tests" / "fixtures" / "modelplan" / "model_by_config.json"),
            "product": "atlas-a3",
        },
        check=lambda d: any(
            m["module"] == "ConfiguredRouter" and m["facts"]["scoring"] == "sigmoid"
            for m in d["inventory"]
        ),
    ),
    Case(
        "scan-plan-ep",
        "scan",
        {
            "text": (
                ROOT / "tests" / "fixtures" / "modelplan" / "modeling_moe_softmax.py"
            ).read_text(encoding="utf-8"),
            "product": "atlas-a3",
            "parallel": "ep",
        },
        check=lambda d: (
            {e.get("chain") for e in d["plan"] if e["kind"] == "moe.experts"}
            == {"moe-ep-alltoall-token-permute"}  # the selector's first (issue 31)
        ),
    ),
    Case(
        "check-clean",
        "check",
        {"path": str(EXAMPLES / "qwen3-moe-a2.yaml")},
        check=lambda d: d["findings"] == [] and d["summary"]["candidates"] == 10,
    ),
    Case(
        "advise-complete",
        "advise",
        {"tree": "attention", "answers": {"arch": "mla", "--indexer": "yes", "phase": "decode"}},
        cli=[
            "advise",
            "attention",
            "--arch",
            "mla",
            "--indexer",
            "yes",
            "--phase",
            "decode",
            "--no-input",
        ],
        check=lambda d: (
            d["complete"] is True
            and d["needed"] == []
            and d["chains"][0]["name"] == "mla-indexer-sparse-split"  # first by practice
        ),
    ),
    Case(
        "advise-needs-answers",
        "advise",
        {"tree": "attention", "answers": {"arch": "mla"}},
        check=lambda d: (
            d["complete"] is False
            and d["needed"][0]["flag"] == "--indexer"
            and {o["value"] for o in d["needed"][0]["options"]} == {"no", "yes", "yes-c8"}
            and d["answers"] == {"--arch": "mla"}
        ),
    ),
    Case(
        "advise-number",
        "advise",
        {"tree": "moe", "answers": {"moe": "yes"}},
        check=lambda d: d["complete"] is False and d["needed"][0]["flag"].startswith("--"),
    ),
    Case("tree-list", "tree", {}, cli=["tree"], check=lambda d: len(d["trees"]) >= 4),
    Case("tree", "tree", {"name": "attention"}, cli=["tree", "attention"]),
    Case(
        "prefetch-shape",
        "prefetch_size",
        {"shape": [7168, 18432], "dtype": "bf16"},
        cli=["prefetch-size", "--shape", "7168x18432", "--dtype", "bf16"],
        check=lambda d: d["results"][0]["theoretical_bytes"] == 7168 * 18432 * 2,
    ),
    Case(
        "prefetch-moe",
        "prefetch_size",
        {
            "moe": True,
            "hidden": 7168,
            "moe_intermediate": 2048,
            "experts_per_rank": 16,
            "gmm": 1,
            "dtype": "int8",
        },
        cli=[
            "prefetch-size",
            "--moe",
            "--hidden",
            "7168",
            "--moe-intermediate",
            "2048",
            "--experts-per-rank",
            "16",
            "--gmm",
            "1",
            "--dtype",
            "int8",
        ],
    ),
    Case(
        "rules-prefix",
        "rules",
        {"code": "KB4"},
        cli=["rules", "KB4"],
        check=lambda d: all(r["code"].startswith("KB4") for r in d["rules"]),
    ),
    Case(
        "rules-one",
        "rules",
        {"code": "KB406"},
        cli=["rules", "KB406"],
        wrap=lambda doc: {"rules": [doc]},
    ),
    Case(
        "reference-run",
        "reference",
        {
            "name": "torch_npu.npu_swiglu",
            "args": [{"data": [[0.0, 1.0, 2.0, 3.0]], "dtype": "float16"}],
        },
        check=lambda d: (
            d["outputs"][0]["shape"] == [1, 2]
            and d["outputs"][0]["dtype"] == "float16"
            and abs(d["outputs"][0]["data"][0][1] - 1 / (1 + 2.718281828**-1) * 3) < 1e-2
            and d["semantics"]["sources"]
        ),
    ),
    Case(
        "reference-list",
        "reference",
        {},
        check=lambda d: (
            len(d["operators"]) >= 25 and any(m["id"] == "rope_half" for m in d["mappings"])
        ),
    ),
]

CASES = BAD + GOOD  # bad ones first: the good ones then prove the server survived them


def server_params(**env: str) -> StdioServerParameters:
    keep = {k: os.environ[k] for k in ("KB_CACHE_DIR", "KB_RECORDS_DIR") if k in os.environ}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "kb", "mcp"], env={**keep, **env}, cwd=str(ROOT)
    )


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run every case and the listings through one server; return what came back."""
    log = tmp_path_factory.mktemp("mcp") / "server.log"
    got: dict[str, Any] = {"calls": {}}

    async def run() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(server_params(), errlog=errlog)) as client:
                got["tools"] = (await client.list_tools()).tools
                for case in CASES:
                    got["calls"][case.id] = await client.call_tool(case.tool, case.args)
                got["tools_after"] = (await client.list_tools()).tools
                got["resources"] = (await client.list_resources()).resources
                got["templates"] = (await client.list_resource_templates()).resource_templates
                got["chain"] = await client.read_resource("kb://chain/moe-tp-routing")
                got["resource_errors"] = []
                for uri in ("kb://operator/npu_no_such_op", "kb://chain/npu_rms_norm"):
                    try:
                        await client.read_resource(uri)
                    except Exception as exc:  # the SDK raises the JSON-RPC error
                        got["resource_errors"].append(str(exc))
                got["prompts"] = (await client.list_prompts()).prompts
                got["fusion"] = await client.get_prompt("fusion", {"product": "atlas-a3"})
                got["prefetch"] = await client.get_prompt("prefetch", {"graph_mode": "aclgraph"})

    anyio.run(run)
    got["log"] = log.read_text()
    return got


def cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    code = main([*argv, "--format", "json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_tool_call(case: Case, session: dict[str, Any], capsys) -> None:
    result = session["calls"][case.id]
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if case.error is not None:
        assert result.is_error, f"{case.id}: expected a tool error, got {text[:300]}"
        assert case.error in text, text
        return
    assert not result.is_error, text
    doc = result.structured_content
    assert doc is not None
    assert json.loads(text) == doc  # the text block carries the same document
    if case.cli is not None:
        expected = case.wrap(cli_json(case.cli, capsys))
        assert {k: v for k, v in doc.items() if k not in case.drop} == expected
    if case.check is not None:
        assert case.check(doc), json.dumps(doc, ensure_ascii=False)[:1000]


def test_every_tool_is_listed_with_schemas(session: dict[str, Any]) -> None:
    tools = {t.name: t for t in session["tools"]}
    assert set(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.description and tool.output_schema, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint
        props = tool.input_schema.get("properties", {})
        assert all(p.get("description") for p in props.values()), tool.name
    assert tools["search"].input_schema["required"] == ["query"]
    assert {c.tool for c in GOOD} == TOOL_NAMES, "every tool has a good case"
    assert {c.tool for c in BAD} >= TOOL_NAMES, "every tool has a bad case"


def test_server_survives_bad_arguments(session: dict[str, Any]) -> None:
    assert {t.name for t in session["tools_after"]} == TOOL_NAMES
    assert "Traceback" not in session["log"], session["log"][-2000:]


def test_records_are_resources(session: dict[str, Any]) -> None:
    uris = {str(r.uri) for r in session["resources"]}
    assert {
        "kb://operator/npu_rms_norm",
        "kb://chain/moe-tp-routing",
        "kb://tree/attention",
        "kb://playbook/prefetch",
    } <= uris
    assert len(uris) > 300
    templates = {t.uri_template for t in session["templates"]}
    assert templates == {f"kb://{k}/{{name}}" for k in ("operator", "chain", "tree", "playbook")}
    chain = json.loads(session["chain"].contents[0].text)
    assert chain["name"] == "moe-tp-routing" and chain["stages"]
    assert len(session["resource_errors"]) == 2
    assert "npu_no_such_op" in session["resource_errors"][0]


def test_workflow_prompts_come_from_the_records(session: dict[str, Any]) -> None:
    assert {p.name for p in session["prompts"]} == {"fusion", "prefetch"}
    fusion = session["fusion"].messages[0].content.text
    assert "product: atlas-a3" in fusion
    assert "attention: " in fusion and "arch (gqa/mha/mla)" in fusion  # the tree, from its record
    assert "`advise`" in fusion and "`check`" in fusion
    prefetch = session["prefetch"].messages[0].content.text
    assert "conservative factor 0.5" in prefetch and "0.1, 0.3, 0.5, 0.7, 1.0" in prefetch
    assert "communication (all_reduce" in prefetch  # the unsafe window class, from the playbook


# --------------------------------------------------------------------------- live edits


def test_an_edited_record_is_picked_up_without_a_restart(tmp_path: Path) -> None:
    records = tmp_path / "records"
    (records / "operators").mkdir(parents=True)
    alpha = records / "operators" / "npu_alpha.yaml"
    alpha.write_text(operator_yaml("npu_alpha", keyword="alphaword"), encoding="utf-8")
    (records / "operators" / "npu_beta.yaml").write_text(
        operator_yaml("npu_beta"), encoding="utf-8"
    )
    params = server_params(KB_RECORDS_DIR=str(records), KB_CACHE_DIR=str(tmp_path / "cache"))
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with Client(params) as client:
            seen["before"] = await client.call_tool("show", {"name": "npu_alpha", "brief": True})
            alpha.write_text(
                operator_yaml("npu_alpha", keyword="freshword").replace(
                    "Test operator npu_alpha.", "Edited operator npu_alpha with a new summary."
                ),
                encoding="utf-8",
            )
            seen["after"] = await client.call_tool("show", {"name": "npu_alpha", "brief": True})
            seen["search"] = await client.call_tool("search", {"query": "freshword"})
            alpha.write_text("kind: operator\nname: [broken\n", encoding="utf-8")
            seen["broken"] = await client.call_tool("show", {"name": "npu_beta"})
            seen["still_broken"] = await client.call_tool("search", {"query": "beta"})
            seen["broken_listing"] = (await client.list_resources()).resources
            try:
                await client.read_resource("kb://operator/npu_beta")
            except Exception as exc:  # the SDK raises the JSON-RPC error
                seen["broken_read"] = str(exc)
            alpha.write_text(operator_yaml("npu_alpha"), encoding="utf-8")
            (records / "operators" / "npu_gamma.yaml").write_text(
                operator_yaml("npu_gamma"), encoding="utf-8"
            )
            seen["fixed"] = await client.call_tool("show", {"name": "npu_gamma", "brief": True})
            seen["resources"] = (await client.list_resources()).resources

    anyio.run(run)
    assert seen["before"].structured_content["summary"] == "Test operator npu_alpha."
    assert (
        seen["after"].structured_content["summary"]
        == "Edited operator npu_alpha with a new summary."
    )
    assert [r["name"] for r in seen["search"].structured_content["results"]][:1] == ["npu_alpha"]
    for key in ("broken", "still_broken"):
        assert seen[key].is_error
        assert "do not validate" in seen[key].content[0].text
        assert "npu_alpha.yaml" in seen[key].content[0].text
    assert seen["broken_listing"] == []
    assert "do not validate" in seen["broken_read"]
    assert not seen["fixed"].is_error
    assert "kb://operator/npu_gamma" in {str(r.uri) for r in seen["resources"]}


# --------------------------------------------------------------------------- without the extra


def test_kb_mcp_without_the_extra_says_how_to_install(monkeypatch, capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.split(".")[0] == "mcp" else real(name, *a),
    )
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'torch-npu-kb[mcp]'" in err and "Traceback" not in err
