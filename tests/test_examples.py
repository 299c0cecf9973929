"""The shipped example candidate lists report exactly what their comments claim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb.api.check import check_paths
from kb.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


def claimed(path: Path) -> set[tuple[int, str]]:
    """(line, code) for every ``# expect: KBnnn, …`` comment in the file."""
    out = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _EXPECT.search(line)
        if m:
            out |= {(number, code.strip()) for code in m.group(1).split(",") if code.strip()}
    return out


def test_there_are_clean_lists_and_lists_with_defects() -> None:
    with_defects = [p.name for p in FILES if claimed(p)]
    clean = [p.name for p in FILES if not claimed(p)]
    assert len(with_defects) >= 2 and len(clean) >= 2, (with_defects, clean)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_findings_are_exactly_the_expect_comments(path: Path) -> None:
    found = {(f.line, f.code) for f in check_paths([path])}
    assert found == claimed(path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_clean_lists_exit_0_and_drafts_exit_1(path: Path, capsys) -> None:
    """The drafts are meant to hold errors; the clean lists hold no finding at all."""
    assert main(["check", str(path)]) == (1 if claimed(path) else 0)
    assert ("no findings" in capsys.readouterr().out) == (not claimed(path))


def test_draft_typo_suggests_the_real_operator() -> None:
    findings = check_paths([EXAMPLES / "deepseek-v3-a2-draft.yaml"])
    typo = next(f for f in findings if f.code == "KB101")
    assert "npu_mla_prolog_v3" in typo.message
