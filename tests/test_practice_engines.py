"""Shipping calls of engines the checker was not calibrated on (MindIE-LLM, dlinfer).

tests/fixtures/practice_engines/ holds candidate lists transcribed by hand from the two
engines, each candidate citing the file:line of its call.  kb check must find no error
in them, except the calls listed in ``EXPECTED_UNTIL_RECORD_FIXES``: records whose
dtype facts came from a test's inputs or an older doc and are being corrected on
another branch.  Each entry is strict: once the record is fixed the call passes and
this test fails until the entry is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kb.api.check import check_paths
from kb.audit.practice import _is_test

HERE = Path(__file__).parent
LISTS = sorted((HERE / "fixtures" / "practice_engines").glob("*.yaml"))
CORPUS = HERE.parent.parent / "shared" / "corpus"
#: (list file, evidence file:line, code) -> the record fact that rejects a shipping call.
#: Known record faults a shipping call runs into (empty: the three found while these
#: lists were transcribed, test-derived fp16-only paged attention, test-derived cache
#: value dtypes and uint8 MX scales, are fixed in the records).
EXPECTED_UNTIL_RECORD_FIXES: dict[tuple[str, str, str], str] = {}
_CITE = re.compile(r"@[0-9a-f]{7,40} (\S+\.py):(\d+)")


def _candidates() -> list[tuple[Path, dict]]:
    return [
        (p, c) for p in LISTS for c in yaml.safe_load(p.read_text(encoding="utf-8"))["candidates"]
    ]


def test_transcribed_engine_calls_pass_kb_check_but_the_known_record_faults() -> None:
    by_line = {}
    for path in LISTS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines, 1):
            by_line[(path.name, i)] = line
    cands = _candidates()
    errors = set()
    for f in check_paths(LISTS):
        if f.severity != "error":
            continue
        name = Path(f.file).name
        cand = (
            [c for p, c in cands if p.name == name][f.candidate] if f.candidate is not None else {}
        )
        cite = _CITE.search(cand.get("evidence", ""))
        errors.add((name, f"{cite.group(1)}:{cite.group(2)}" if cite else "?", f.code))
    assert errors == set(EXPECTED_UNTIL_RECORD_FIXES), (
        "new errors, or a record fixed (drop its EXPECTED_UNTIL_RECORD_FIXES entry): "
        f"{errors ^ set(EXPECTED_UNTIL_RECORD_FIXES)}"
    )


def test_the_transcription_is_large_and_cites_every_call() -> None:
    cands = _candidates()
    assert len(cands) >= 30
    engines = {c["evidence"].split("@")[0] for _, c in cands}
    assert engines == {"Ascend/MindIE-LLM", "DeepLink-org/dlinfer"}
    assert all(_CITE.search(c["evidence"]) for _, c in cands)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
def test_every_citation_points_at_a_call_of_that_operator() -> None:
    roots = {"Ascend/MindIE-LLM": CORPUS / "mindie-llm", "DeepLink-org/dlinfer": CORPUS / "dlinfer"}
    for _, cand in _candidates():
        cite = _CITE.search(cand["evidence"])
        assert cite
        source = roots[cand["evidence"].split("@")[0]] / cite.group(1)
        lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
        line = int(cite.group(2))
        window = "\n".join(lines[line - 1 : line + 1])
        assert cand["operator"] in window, (cand["evidence"], window)


def test_shipping_subtrees_are_harvested_though_named_like_examples() -> None:
    assert _is_test("examples/atb_models/atb_llm/models/x.py")
    assert not _is_test("examples/atb_models/atb_llm/models/x.py", ["examples/atb_models"])
    assert _is_test("examples/atb_models/tests/test_x.py", ["examples/atb_models/"])
    assert _is_test("tests/pythontest/x.py", ["examples/atb_models"])
