"""Issue 23's terminal findings: input checks and messages that read correctly."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.cli import main

SITE_RECORDS = Path(__file__).resolve().parent / "fixtures" / "site_records"


def test_a_shape_with_an_empty_dimension_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for shape in ("7168x", "x7168", "7168xx18432"):
        assert main(["prefetch-size", "--shape", shape]) == 2
        assert "empty dimension" in capsys.readouterr().err
    assert main(["prefetch-size", "--shape", "7168x18432"]) == 0


def test_scanning_nothing_says_why_without_a_summary(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    assert main(["scan", str(tmp_path / "nonexistent")]) == 2
    captured = capsys.readouterr()
    assert "0 files" not in captured.out + captured.err
    assert "cannot read" in captured.err and "no Python files found" in captured.err


def test_counts_agree_with_their_nouns(capsys: pytest.CaptureFixture[str]) -> None:
    """One chain, playbook and tree, four operators: singular and plural in one summary
    (the site's fixture records; the shipped store's validation is tested elsewhere)."""
    assert main(["validate", "--records", str(SITE_RECORDS)]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1 chain," in summary and "4 operators," in summary, summary
    assert "1 playbook," in summary and "1 tree;" in summary, summary


def test_an_empty_allowed_value_is_shown_as_quotes() -> None:
    from kb.check.rules.scalars import _shown_value

    assert ", ".join(map(_shown_value, ["", "fullmesh"])) == "'', fullmesh"


def test_one_exit_status_paragraph_per_verb(capsys: pytest.CaptureFixture[str]) -> None:
    for verb in ("scan", "mcp", "show", "tree", "search"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        assert capsys.readouterr().out.count("Exit status:") == 1, verb


def test_every_help_fits_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb.cli import VERBS

    monkeypatch.setenv("COLUMNS", "80")
    for verb in VERBS:
        with pytest.raises(SystemExit):
            main([verb.replace("_", "-"), "--help"])
        lines = capsys.readouterr().out.splitlines()
        assert lines and max(len(line) for line in lines) <= 80, verb


def test_advise_help_lists_every_tree(capsys: pytest.CaptureFixture[str]) -> None:
    from kb.catalog.compiled import open_catalog

    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(name in out for name in open_catalog().names("tree"))


def test_a_long_record_ends_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "npu_fused_infer_attention_score_v2"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "--brief" in err and "--section NAME" in err
    assert main(["show", "npu_rms_norm", "--brief"]) == 0
    assert capsys.readouterr().err == ""


def test_a_multi_line_message_keeps_its_lines_but_none_at_the_margin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kb.cli import _say

    _say("kb advise: pick one of:\n  gqa  grouped\n::error::forged\x1b[2J")
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ["kb advise: pick one of:", "  gqa  grouped"]
    assert err[2].startswith("  ::error::forged") and "\x1b" not in err[2]
