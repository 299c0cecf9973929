"""``kb check`` names chains through the one selector (issue 31, item 4).

Where a candidate's chain is unknown (KB303) or does not stage its operator (KB304), the
finding names the chains that do stage the operator and fit the list's target - product,
torch_npu release, phase - in the order :func:`kb.catalog.select.select` ranks them, the
same choice ``kb advise`` and ``kb scan --plan`` make.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.catalog.compiled import open_catalog
from kb.catalog.select import select
from kb.cli import main

LIST = """\
version: 1
target: {{product: atlas-a3{release}}}
candidates:
  - module: model.layers.*.self_attn
    phase: decode
    operator: npu_sparse_flash_attention
    status: adopt
    chain: {chain}
"""


def findings(tmp_path: Path, capsys: pytest.CaptureFixture[str], **fmt: str) -> list[dict]:
    path = tmp_path / "list.yaml"
    path.write_text(LIST.format(**{"release": "", **fmt}), encoding="utf-8")
    main(["check", str(path), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    return [f for f in doc["findings"] if f["code"] in ("KB303", "KB304")]


def expected(facts: dict[str, str]) -> list[str]:
    catalog = open_catalog()
    out = []
    for fit in select(catalog, facts).fitting:
        chain = catalog.get(fit.chain) or {}
        if any(st["operator"] == "npu_sparse_flash_attention" for st in chain["stages"]):
            out.append(fit.chain)
    return out


def test_an_operator_outside_its_chain_gets_the_chains_the_selector_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (found,) = findings(tmp_path, capsys, chain="mla-absorb-decode")
    names = expected({"product": "atlas-a3", "phase": "decode"})
    assert names, "some shipped chain stages the sparse attention"
    assert found["message"].endswith(
        f"chains that stage npu_sparse_flash_attention and fit the target: {', '.join(names[:3])}"
    ), found["message"]


def test_an_unknown_chain_gets_them_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (found,) = findings(tmp_path, capsys, chain="mla-indexer-sparce")
    assert "fit the target: mla-indexer-sparse" in found["message"], found["message"]


def test_the_target_release_rules_chains_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch_npu 2.7.1 ships none of the sparse-attention chains' operators: none is named."""
    (found,) = findings(tmp_path, capsys, chain="mla-absorb-decode", release=", torch_npu: 2.7.1")
    assert "fit the target" not in found["message"]
