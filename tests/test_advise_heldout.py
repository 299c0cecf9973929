"""Held-out scenarios (issue 31): ports no earlier scenario set read, judged honestly.

tests/data/advise_scenarios_heldout.yaml names each situation with the flags a user would
give, the port's call (file and line) and a judgement: right, partly, wrong or none.  A
scenario judged right must meet every expectation through ``kb advise --no-input``; the
others are strict expected failures - the day a gap is fixed the test fails until the
file says so.  Every cited line, where the port's mirror is present, names the operator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_advise_unseen_ports import _line, matches, offered, run


def fits(call: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The unseen sets' match, and stricter: an argument the port leaves None is not passed
    an expression, and one the port gives a value (``valued``) is not left None."""
    if not matches(call, expected):
        return False
    args, passed = call.get("args") or {}, call.get("passed") or {}
    nulls = [k for k, v in (expected.get("args") or {}).items() if v is None]
    if any(k in passed for k in nulls):
        return False
    return all(k in passed or args.get(k) is not None for k in expected.get("valued") or [])


SCENARIOS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "advise_scenarios_heldout.yaml").read_text(encoding="utf-8")
)
JUDGEMENTS = ("right", "partly", "wrong", "none")
#: Ports read for these scenarios, where a fetched mirror lives (the test skips without it).
MIRRORS = {
    "hicann/cann-recipes-infer": Path("/work/.mirror/hicann+cann-recipes-infer/repo"),
    "Ascend/MindIE-SD": Path("/work/.mirror/Ascend+MindIE-SD/repo"),
    "jd-opensource/xllm": Path("/work/.mirror/jd-opensource+xllm/repo"),
}


def meets(capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]) -> None:
    """Every expectation of the scenario, asserted."""
    result = run(capsys, scenario)
    assert result["outcome"] == scenario.get("outcome", "advice"), result["verdict"]
    names = [c["name"] for c in result["chains"]]
    if scenario.get("chains"):
        assert names == scenario["chains"], names
    if scenario.get("rank_first"):
        assert names[:1] == [scenario["rank_first"]], names
    alternatives = [c["name"] for c in result["alternatives"]]
    assert set(scenario.get("alternatives") or []) <= set(alternatives), alternatives
    assumed = [a["flag"] for a in result["assumed"]]
    assert set(scenario.get("assumed") or []) <= set(assumed), assumed
    calls = offered(result)
    for e in scenario["expect"]:
        assert any(fits(c, e) for c in calls), (
            f"{e['repo']} calls {e['op']} at {e['path']}:{e['line']} with {e.get('args') or {}}; "
            f"offered {[(c['operator'], c.get('args')) for c in calls if c['operator'] == e['op']]}"
        )
    for op in scenario.get("absent") or []:
        assert op not in {c["operator"] for c in calls}, f"{op} does not belong on this path"


def _param(s: dict[str, Any]) -> Any:
    marks = (
        []
        if s["judged"] == "right"
        else [pytest.mark.xfail(strict=True, reason=f"judged {s['judged']}: {s.get('gap', '')}")]
    )
    return pytest.param(s, id=s["id"], marks=marks)


def test_the_set_is_new_situations_judged_honestly() -> None:
    assert len({s["id"] for s in SCENARIOS}) == len(SCENARIOS) >= 20
    for s in SCENARIOS:
        assert s["judged"] in JUDGEMENTS and s["judged_before"] in JUDGEMENTS, s["id"]
        assert s["judged"] == "right" or s.get("gap"), f"{s['id']}: a miss names its gap"
        assert s["expect"] or s.get("cited"), s["id"]
    right = sum(s["judged"] == "right" for s in SCENARIOS)
    assert right >= 18, f"{right}/{len(SCENARIOS)} right"


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_advice_offers_what_the_port_calls(
    capsys: pytest.CaptureFixture[str], scenario: dict[str, Any]
) -> None:
    meets(capsys, scenario)


def test_cited_call_sites_name_the_operator() -> None:
    checked = 0
    for s in SCENARIOS:
        # ``call``: what the cited line names where a C++ engine calls the operator's
        # kernel through its own wrapper (xLLM), else the torch_npu operator itself
        sites = [(e, e.get("call", e["op"])) for e in s["expect"]]
        if s.get("cited"):
            sites.append((s["cited"], s["cited"]["text"]))
        for e, needle in sites:
            text = _line(e["repo"], e["commit"], e["path"], e["line"], MIRRORS)
            if text is None:
                continue
            assert needle in text, (s["id"], e["path"], e["line"], text)
            checked += 1
    if not checked:
        pytest.skip("no port mirror is present")
    assert checked >= 20
