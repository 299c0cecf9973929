"""Scenarios from public NPU ports, run through `kb advise --format json`.

Each scenario in tests/data/advise_scenarios.yaml names the situation (tree + answers),
the operators the port calls there (with the call site) and the arguments it sets. The
advice must contain those operators with those arguments, must not recommend the ones
listed as absent, and call sites inside the shared vLLM-Ascend corpus must really name
the operator on the cited line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.cli import main

SCENARIOS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "advise_scenarios.yaml").read_text(encoding="utf-8")
)
_ROOT = Path(__file__).resolve().parents[1]
CORPUS = next(
    (
        p / "shared" / "corpus" / "vllm-ascend"
        for p in (_ROOT.parent, _ROOT.parent.parent)
        if (p / "shared" / "corpus" / "vllm-ascend").is_dir()
    ),
    None,
)
CORPUS_COMMIT = "182b75ea84ff13ece27b57391331ef8935410aea"


def run(capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]) -> dict[str, Any]:
    argv = ["advise", scenario["tree"], "--format", "json", "--no-input"]
    for key, value in scenario["answers"].items():
        argv += [f"--{key}", str(value)]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result: dict[str, Any] = json.loads(captured.out)
    return result


def offered(result: dict[str, Any], ranked: bool = True) -> list[dict[str, Any]]:
    """Every call the advice offers: chain stages (with ``ranked``, of the ranked
    alternatives too - the selector puts the most practiced chain first and the other
    ports' chains for the same facts after it), and leaf operators as bare calls."""
    chains = result["chains"] + (result["alternatives"] if ranked else [])
    calls = [st for chain in chains for st in chain["stages"]]
    staged = {st["operator"] for st in calls}
    calls += [
        {"operator": op, "args": {}, "passed": {}} for op in result["operators"] if op not in staged
    ]
    return calls


def matches(call: dict[str, Any], expected: dict[str, Any]) -> bool:
    if call["operator"] != expected["op"]:
        return False
    args, passed = call.get("args") or {}, call.get("passed") or {}
    if any(args.get(k) != v for k, v in (expected.get("args") or {}).items()):
        return False
    return all(name in passed or name in args for name in expected.get("passed") or [])


def test_there_are_at_least_twenty_scenarios_from_public_ports() -> None:
    assert len(SCENARIOS) >= 20
    assert len({s["id"] for s in SCENARIOS}) == len(SCENARIOS)
    repos = {e["repo"] for s in SCENARIOS for e in s["expect"]}
    assert {"hicann/cann-recipes-infer", "vllm-project/vllm-ascend"} <= repos


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
def test_advice_matches_what_the_port_calls(
    capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]
) -> None:
    result = run(capsys, scenario)
    assert result["outcome"] == "advice", result["verdict"]
    if scenario.get("chains"):
        assert [c["name"] for c in result["chains"]] == scenario["chains"]
    calls = offered(result)
    # a call the advice names as an alternative (another version, ranked second)
    others = [st for alt in result.get("alternatives") or [] for st in alt["stages"]]
    for expected in scenario["expect"]:
        where = f"{expected['path']}:{expected['line']}"
        pool = others if expected.get("alternative") else calls
        assert any(matches(c, expected) for c in pool), (
            f"{scenario['id']}: the port calls {expected['op']} at {where} with "
            f"{expected.get('args') or {}} / {expected.get('passed') or []}; the advice offers "
            f"{[(c['operator'], c.get('args')) for c in calls if c['operator'] == expected['op']]}"
        )
    recommended = {c["operator"] for c in offered(result, ranked=False)}
    for op in scenario.get("absent") or []:
        assert op not in recommended, f"{scenario['id']}: {op} does not belong on this path"


@pytest.mark.skipif(CORPUS is None, reason="the shared corpus is not present")
def test_call_sites_in_the_corpus_name_the_operator() -> None:
    assert CORPUS is not None
    checked = 0
    for scenario in SCENARIOS:
        for e in scenario["expect"]:
            path = CORPUS / e["path"]
            if (
                e["repo"] != "vllm-project/vllm-ascend"
                or e["commit"] != CORPUS_COMMIT
                or not path.is_file()
            ):
                continue
            line = path.read_text(encoding="utf-8").splitlines()[e["line"] - 1]
            assert e["op"] in line, (scenario["id"], e["path"], e["line"], line)
            checked += 1
    assert checked >= 8
