"""Scenarios from ports the first scenarios never read, through `kb advise --no-input`.

tests/data/advise_scenarios_unseen.yaml names each situation with only the answers a user
would know; common cases must be assumed and reported, the port's chain must be the path's
own or a ranked alternative, and every cited call site in the shared corpus must name the
operator on that line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.cli import main

SCENARIOS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "advise_scenarios_unseen.yaml").read_text(encoding="utf-8")
)
_ROOT = Path(__file__).resolve().parents[1]
_SHARED = next(
    (
        p / "shared" / "corpus"
        for p in (_ROOT.parent, _ROOT.parent.parent)
        if (p / "shared" / "corpus").is_dir()
    ),
    None,
)
#: The corpus folders and the commit each was taken at (../shared/corpus/README.md).
CORPUS = {
    "vllm-project/vllm-ascend": ("vllm-ascend", "182b75ea84ff13ece27b57391331ef8935410aea"),
    "Ascend/MindIE-LLM": ("mindie-llm", "8b4871ad31f592aa863f6255760e4934484d78e4"),
    "DeepLink-org/dlinfer": ("dlinfer", "a50184e3734e5799bd4cec484d3a2ac46a36ae86"),
}
#: Ports not in the corpus, read from a fetched mirror when one is present.
MIRRORS = {
    "Ascend/MindIE-SD": Path("/work/.mirror/Ascend+MindIE-SD/repo"),
    "vllm-project/vllm-ascend": Path("/work/.mirror/vllm-project+vllm-ascend/repo"),
    "sgl-project/sgl-kernel-npu": Path("/work/.mirror/sgl-project+sgl-kernel-npu/repo"),
}
UNSEEN = {"Ascend/MindIE-LLM", "DeepLink-org/dlinfer", "Ascend/MindIE-SD"}


def run(capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]) -> dict[str, Any]:
    argv = ["advise", scenario["tree"], "--format", "json", "--no-input"]
    for key, value in scenario["answers"].items():
        argv += [f"--{key}", str(value)]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err or captured.out[-2000:]
    result: dict[str, Any] = json.loads(captured.out)
    return result


def offered(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every call the advice offers: the path's chains, its ranked alternatives, leaf operators."""
    calls = [st for chain in result["chains"] + result["alternatives"] for st in chain["stages"]]
    staged = {st["operator"] for st in calls}
    calls += [
        {"operator": op, "args": {}, "passed": {}} for op in result["operators"] if op not in staged
    ]
    return calls


def matches(call: dict[str, Any], expected: dict[str, Any]) -> bool:
    if call["operator"] != expected["op"]:
        return False
    if expected.get("overload") and call.get("overload") != expected["overload"]:
        return False
    args, passed = call.get("args") or {}, call.get("passed") or {}
    if any(args.get(k) != v for k, v in (expected.get("args") or {}).items()):
        return False
    return all(name in passed or name in args for name in expected.get("passed") or [])


def test_twenty_scenarios_from_ports_not_read_before() -> None:
    assert len({s["id"] for s in SCENARIOS}) == len(SCENARIOS)
    unseen = [
        s
        for s in SCENARIOS
        if {e["repo"] for e in s["expect"]} & UNSEEN or (s.get("cited") or {}).get("repo") in UNSEEN
    ]
    assert len(unseen) >= 20


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
def test_advice_offers_what_the_port_calls(
    capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]
) -> None:
    result = run(capsys, scenario)
    assert result["outcome"] == scenario.get("outcome", "advice"), result["verdict"]
    if scenario.get("chains"):
        assert [c["name"] for c in result["chains"]] == scenario["chains"]
    alternatives = [c["name"] for c in result["alternatives"]]
    assert set(scenario.get("alternatives") or []) <= set(alternatives), alternatives
    assumed = [a["flag"] for a in result["assumed"]]
    assert set(scenario.get("assumed") or []) <= set(assumed), assumed
    calls = offered(result)
    for expected in scenario["expect"]:
        assert any(matches(c, expected) for c in calls), (
            f"{scenario['id']}: {expected['repo']} calls {expected['op']} at {expected['path']}:{expected['line']} "
            f"with {expected.get('args') or {}} / {expected.get('passed') or []}; the advice offers "
            f"{[(c['operator'], c.get('args')) for c in calls if c['operator'] == expected['op']]}"
        )
    recommended = {c["operator"] for c in calls}
    for op in scenario.get("absent") or []:
        assert op not in recommended, f"{scenario['id']}: {op} does not belong on this path"


def _line(
    repo: str, commit: str, path: str, line: int, mirrors: dict[str, Path] | None = None
) -> str | None:
    """The cited line, from the shared corpus or a fetched mirror (``mirrors``, default
    this set's); None when neither holds the file."""
    if repo in CORPUS and _SHARED is not None:
        folder, at = CORPUS[repo]
        file = _SHARED / folder / path
        if at == commit and file.is_file():
            return file.read_text(encoding="utf-8").splitlines()[line - 1]
    mirror = (MIRRORS if mirrors is None else mirrors).get(repo)
    if mirror is None or not mirror.is_dir():
        return None
    shown = subprocess.run(
        ["git", f"--git-dir={mirror}", "show", f"{commit}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return shown.stdout.splitlines()[line - 1] if shown.returncode == 0 else None


@pytest.mark.skipif(_SHARED is None, reason="the shared corpus is not present")
def test_cited_call_sites_name_the_operator() -> None:
    checked = 0
    for scenario in SCENARIOS:
        for e in scenario["expect"]:
            text = _line(e["repo"], e["commit"], e["path"], e["line"])
            if text is None:
                continue
            assert e["op"] in text, (scenario["id"], e["path"], e["line"], text)
            checked += 1
    assert checked >= 20
