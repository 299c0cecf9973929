"""One condition, one wording: ``kb show``, the site page and ``kb check`` findings all
word a rule's ``when`` clause with :func:`kb.catalog.wording.when_words`, so a tensor
clause with both ``dtype_in`` and ``format_in`` names both everywhere."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kb.api.check import check_text
from kb.catalog.compiled import open_catalog
from kb.catalog.wording import MESSAGE, TEXT, Notation, condition_words, when_words
from kb.cli import main
from site_plugins.common import SiteData
from site_plugins.operator_rules import MARKDOWN
from site_plugins.operators import operator_page

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "site_records"
NZ_ONLY = "{tensor: gamma, format_in: [FRACTAL_NZ]}"
NZ_AND_DTYPES = "{tensor: gamma, dtype_in: [float16, bfloat16], format_in: [FRACTAL_NZ]}"


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The site fixture records, with the NZ rule's clause naming dtypes as well."""
    root = tmp_path / "records"
    shutil.copytree(FIXTURES, root)
    path = root / "operators" / "norm" / "npu_fixture_norm.yaml"
    text = path.read_text(encoding="utf-8")
    assert NZ_ONLY in text
    path.write_text(text.replace(NZ_ONLY, NZ_AND_DTYPES), encoding="utf-8")
    monkeypatch.setenv("KB_RECORDS_DIR", str(root))
    return root


def test_show_page_and_findings_word_dtype_and_format(records: Path, capsys) -> None:
    catalog = open_catalog(records)
    rec = catalog.get("npu_fixture_norm")
    assert rec is not None
    rule = next(r for r in rec["rules"] if r["id"] == "nz-gamma-needs-mode")

    assert main(["show", "npu_fixture_norm"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    text = "gamma dtype in ['float16', 'bfloat16'] and gamma format in ['FRACTAL_NZ']"
    assert when_words(rule, TEXT) == text
    assert f"nz-gamma-needs-mode: when {text}: requires mode" in shown

    page = operator_page(rec, SiteData.from_records(catalog.records()))
    words = "`gamma` dtype ∈ {`float16`, `bfloat16`} and `gamma` format ∈ {`FRACTAL_NZ`}"
    assert when_words(rule, MARKDOWN) == words
    assert f"when {words}, pass `mode`" in page

    candidates = (
        "version: 1\ncandidates:\n  - module: norm\n    status: candidate\n"
        "    operator: npu_fixture_norm\n"
        "    tensors: {gamma: {dtype: bfloat16, format: FRACTAL_NZ}}\n"
    )
    found = [f.message for f in check_text(candidates, "c.yaml", catalog=catalog)]
    said = "when gamma is float16/bfloat16 and gamma is FRACTAL_NZ)"
    assert when_words(rule, MESSAGE) == said[len("when ") : -1]
    assert any(said in m for m in found), found


@pytest.mark.parametrize(
    ("cond", "text"),
    [
        ({"arg": "mode", "equals": 2}, "mode == 2"),
        ({"arg": "layout", "in": ["TND", "BSND"]}, "layout in ['TND', 'BSND']"),
        ({"arg": "layout", "not_in": ["TND"]}, "layout not in ['TND']"),
        ({"tensor": "x", "format_in": ["ND"]}, "x format in ['ND']"),
        ({"present": "bias"}, "bias given"),
        ({"absent": "bias"}, "bias not given"),
        ({"product": ["atlas-a3"]}, "product in ['atlas-a3']"),
        ({"quantization": ["w8a8"]}, "quantization in ['w8a8']"),
    ],
)
def test_each_clause_kind_has_its_words(cond: dict[str, object], text: str) -> None:
    assert condition_words(cond, TEXT) == text


def test_a_notation_needs_every_phrase() -> None:
    with pytest.raises(ValueError, match="a phrase for each"):
        Notation(name=str, value=str, values=str, phrases={"equals": "{subject}={value}"})
