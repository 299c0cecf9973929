"""The checkpoint's configuration decides what the code leaves to it (issue 29 item 3):
``kb scan --model-config``, ``model-config`` in ``[tool.kb]``, the MCP ``scan`` tool's
``model_config``; without it the plan asks instead of choosing.

``model_by_config.py`` picks its feed-forward activation from a table by a config key and
its router scoring by a config string; its JSON nests the values under ``text_config``
and spells them as other repositories do (``hidden_act``, ``score_func``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kb.api.errors import UsageError
from kb.api.scan import scan as api_scan
from kb.cli import main

PLAN = Path(__file__).resolve().parent / "fixtures" / "modelplan"
MODEL = PLAN / "model_by_config.py"
CONFIG = PLAN / "model_by_config.json"
BAD = PLAN / "model_config_bad.json"


def _plan(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["scan", str(MODEL), "--no-config", "--format", "json", *extra])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _entry(doc: dict[str, Any], module: str) -> dict[str, Any]:
    found = [e for e in doc["plan"] if e["module"] == module]
    assert len(found) == 1, [e["module"] for e in doc["plan"]]
    return found[0]


def _facts(doc: dict[str, Any], module: str) -> dict[str, Any]:
    return next(m for m in doc["inventory"] if m["module"] == module)


def test_without_a_config_the_undecided_facts_are_questions(capsys) -> None:
    doc = _plan(capsys)
    ffn = _facts(doc, "ConfiguredFeedForward")
    assert ffn["facts"]["activation"] == "unknown"
    assert any("config.activation decides" in u for u in ffn["unknown"])
    entry = _entry(doc, "ConfiguredFeedForward")
    assert "config-activation" in entry["prerequisites"]
    (stage,) = entry["stages"]
    assert any("silu or gelu or gelu_tanh" in q for q in stage["questions"])
    router = _entry(doc, "ConfiguredRouter")
    assert _facts(doc, "ConfiguredRouter")["facts"]["scoring"] == "unknown"
    assert "config-scoring" in router["prerequisites"]
    (gate,) = router["stages"]  # a size the port passes from its config: asked, not a prerequisite
    assert "topk: config.num_experts_per_tok" in gate["questions"]
    # planned for the first scoring the code names, but nothing the scoring decides is
    # written (the chain's norm_type is another router's)
    assert "norm_type" not in gate.get("args", {})


def test_the_config_decides_activation_scoring_and_sizes(capsys) -> None:
    doc = _plan(capsys, "--model-config", str(CONFIG))
    assert _facts(doc, "ConfiguredFeedForward")["facts"]["activation"] == "gelu_tanh"
    (ffn, *_) = [e for e in doc["plan"] if e["module"] == "ConfiguredFeedForward"]
    (stage,) = ffn["stages"]
    assert stage["operator"] == "npu_geglu" and stage["args"]["approximate"] == 1
    assert stage["args"]["activate_left"] is True  # the gate is the first half
    assert "questions" not in stage and not any(
        p.startswith("config-") for p in ffn["prerequisites"]
    )
    router = _entry(doc, "ConfiguredRouter")
    assert router["chain"] == "moe-gate-sigmoid"
    (gate,) = router["stages"]
    assert gate["args"]["norm_type"] == 1 and gate["args"]["k"] == 4


def test_a_bad_config_is_an_error_with_file_and_line(capsys) -> None:
    capsys.readouterr()
    assert main(["scan", str(MODEL), "--no-config", "--plan", "--model-config", str(BAD)]) == 2
    err = capsys.readouterr().err
    assert f"{BAD}:4:1: not JSON" in err and "Traceback" not in err
    assert main(["scan", str(MODEL), "--no-config", "--model-config", str(PLAN / "none.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_tool_kb_model_config_is_relative_to_the_table(tmp_path: Path, capsys) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(CONFIG.read_text(encoding="utf-8"))
    (tmp_path / "model.py").write_text(MODEL.read_text(encoding="utf-8"))
    (tmp_path / "pyproject.toml").write_text('[tool.kb]\nmodel-config = "ckpt/config.json"\n')
    capsys.readouterr()
    assert main(["scan", str(tmp_path / "model.py"), "--format", "json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert _facts(doc, "ConfiguredRouter")["facts"]["scoring"] == "sigmoid"
    (tmp_path / "ckpt" / "config.json").write_text('{"dim": 8,\n "x": [1, 2}\n')
    assert main(["scan", str(tmp_path / "model.py")]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml: [tool.kb]: model-config:" in err
    assert "config.json:2:" in err and "not JSON" in err


def test_the_api_and_tool_take_the_config() -> None:
    doc = api_scan(path=str(MODEL), model_config=str(CONFIG), product="atlas-a3")
    assert _facts(doc, "ConfiguredFeedForward")["facts"]["activation"] == "gelu_tanh"
    with pytest.raises(UsageError, match="not JSON"):
        api_scan(path=str(MODEL), model_config=str(BAD))
