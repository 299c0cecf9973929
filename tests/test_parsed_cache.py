"""Record files are parsed once per content (kb.catalog.parsed): a one-record edit parses
one file, a stored parse is never served for other bytes or a damaged entry, and a
problem found in a restored document still points at its line."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.catalog import parsed as parsed_mod
from kb.catalog.parsed import ParsedFiles
from kb.catalog.store import load_store
from kb.core import yamlpos
from tests.conftest import operator_yaml


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The text of every record file the YAML parser is run on."""
    seen: list[str] = []
    real = yamlpos.load_bytes

    def counting(raw: bytes, **kwargs: object) -> yamlpos.Located:
        seen.append(raw.decode("utf-8"))
        return real(raw, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(yamlpos, "load_bytes", counting)
    yield seen


def _tree(record_tree: Callable[..., Path], related: str = "") -> Path:
    return record_tree(
        {
            "operators/npu_a_op.yaml": operator_yaml("npu_a_op", related=related),
            "operators/npu_b_op.yaml": operator_yaml("npu_b_op", keyword="second"),
        }
    )


def _store(root: Path) -> Path:
    return ParsedFiles(root).path


def test_an_unchanged_tree_is_not_parsed_again(record_tree, parses) -> None:
    root = _tree(record_tree)
    first = load_store(root)
    assert len(parses) == 2 and first.ok
    parses.clear()
    again = load_store(root)
    assert parses == []
    assert again.ok
    assert {n: r.record for n, r in again.records.items()} == {
        n: r.record for n, r in first.records.items()
    }


def test_an_edit_parses_the_edited_file_and_shows_its_new_content(record_tree, parses) -> None:
    root = _tree(record_tree)
    load_store(root)
    parses.clear()
    path = root / "operators/npu_b_op.yaml"
    path.write_text(path.read_text().replace("second", "changed"), encoding="utf-8")
    result = load_store(root)
    assert len(parses) == 1 and "changed" in parses[0]
    assert result.records["npu_b_op"].record.keywords.en == ["changed"]  # type: ignore[attr-defined]


def test_a_problem_in_a_restored_document_points_at_its_line(record_tree, parses) -> None:
    """Positions come from the text, composed again only when a problem needs one."""
    root = _tree(record_tree, related="missing_op")
    fresh = [str(p) for p in load_store(root).problems]
    parses.clear()
    restored = [str(p) for p in load_store(root).problems]
    assert parses == []
    line = next(i for i, text in enumerate(operator_yaml().splitlines(), 1) if "related:" in text)
    assert restored == fresh
    assert restored == [
        f"operators/npu_a_op.yaml:{line}:11: related[0]: 'missing_op' names no record"
    ]


def test_a_damaged_entry_is_parsed_again_not_served(record_tree, parses) -> None:
    root = _tree(record_tree)
    load_store(root)
    con = sqlite3.connect(_store(root))
    with con:  # the data changed, its digest kept: what a flipped bit looks like
        rows = con.execute("SELECT key, payload FROM parsed").fetchall()
        for key, payload in rows:
            if "npu_b_op" in payload:
                damaged = payload.replace("second", "sec0nd")
                con.execute("UPDATE parsed SET payload = ? WHERE key = ?", (damaged, key))
    con.close()
    parses.clear()
    result = load_store(root)
    assert len(parses) == 1 and "npu_b_op" in parses[0]
    assert result.records["npu_b_op"].record.keywords.en == ["second"]  # type: ignore[attr-defined]


def test_a_store_that_is_not_a_database_is_replaced(record_tree, parses) -> None:
    root = _tree(record_tree)
    load_store(root)
    _store(root).write_bytes(b"not a database at all" * 100)
    parses.clear()
    assert load_store(root).ok
    assert len(parses) == 2
    parses.clear()
    assert load_store(root).ok
    assert parses == []


def test_a_new_parser_parses_everything_again(record_tree, parses, monkeypatch) -> None:
    root = _tree(record_tree)
    load_store(root)
    parses.clear()
    monkeypatch.setattr(parsed_mod, "parser_key", lambda: "another parser")
    load_store(root)
    assert len(parses) == 2


def test_data_json_would_change_is_not_stored(record_tree, parses) -> None:
    """A value JSON cannot give back as it was (an integer key) is parsed every time."""
    root = record_tree({"notes.yaml": "kind: note\n1: one\n"})
    load_store(root)
    parses.clear()
    load_store(root)
    assert len(parses) == 1


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operators the per-record consistency checks ran on."""
    from kb.catalog import consistency

    seen: list[str] = []
    real = consistency.check_operator

    def counting(rec: Any, report: Any) -> None:
        seen.append(rec.name)
        real(rec, report)

    monkeypatch.setattr(consistency, "check_operator", counting)
    return seen


def test_a_record_that_passed_its_checks_is_checked_again_only_when_it_or_they_change(
    record_tree, checked, monkeypatch
) -> None:
    root = _tree(record_tree)
    load_store(root)
    assert sorted(checked) == ["npu_a_op", "npu_b_op"]
    checked.clear()
    assert load_store(root).ok
    assert checked == []
    path = root / "operators/npu_b_op.yaml"
    path.write_text(path.read_text().replace("second", "changed"), encoding="utf-8")
    load_store(root)
    assert checked == ["npu_b_op"]
    checked.clear()
    monkeypatch.setattr(parsed_mod, "checks_key", lambda: b"other checks")
    load_store(root)
    assert sorted(checked) == ["npu_a_op", "npu_b_op"]


def test_a_record_that_fails_its_checks_is_checked_and_reported_every_time(
    record_tree, checked
) -> None:
    text = operator_yaml("npu_a_op").replace("status: stable", "status: deprecated")
    text += "replacement_note: Use torch.\n"  # deprecated, but upstream does not say so
    root = record_tree({"operators/npu_a_op.yaml": text})
    first = [str(p) for p in load_store(root).problems]
    assert any("upstream.deprecation is empty" in p for p in first), first
    again = [str(p) for p in load_store(root).problems]
    assert again == first
    assert checked == ["npu_a_op", "npu_a_op"]
