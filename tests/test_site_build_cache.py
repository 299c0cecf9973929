"""The site build reuses rule-example reports and the CLI reference by content hash:
nothing reruns when nothing changed, an edited record reruns exactly the examples that
read it, and a damaged cache is rebuilt, never trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kb.catalog.compiled import open_catalog
from kb.core.paths import PACKAGE_DIR
from kb.rules import RULES
from site_plugins import build_cache, rules

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy

EDITED = "npu_rms_norm"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "records"
    shutil.copytree(PACKAGE_DIR / "records", root)
    return root


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The snippets actually run (check or scan), in order."""
    ran: list[str] = []
    for name in ("_check_example", "_scan_example"):
        real = getattr(rules, name)

        def counted(text: str, catalog: Any, code: str, real: Any = real) -> str:
            ran.append(text)
            return str(real(text, catalog, code))

        monkeypatch.setattr(rules, name, counted)
    return ran


def _codes(ran: list[str]) -> set[str]:
    return {r.code for r in RULES if r.fail in ran}


def _sees_edit(read: list[str], catalog: Any, field: str) -> bool:
    """Does a stored read see an edit of ``field`` of one operator?"""
    what, arg, _ = read
    if what == "get":
        return bool(catalog.resolve(arg) == EDITED)
    if what == "get-fields":
        spelling, names = json.loads(arg)
        return bool(catalog.resolve(spelling) == EDITED) and field in names
    if what == "fields":
        kind, names = json.loads(arg)
        return kind in ("operator", "") and field in names
    return what == "all" or (what == "records" and arg in ("operator", ""))


def _edit(tree: Path, old: str, new: str) -> None:
    path = tree / "operators" / "norm" / f"{EDITED}.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), "utf-8")


def test_examples_rerun_only_when_what_they_read_changed(tree: Path, runs: list[str]) -> None:
    catalog = open_catalog(tree)
    first = rules.check_examples(RULES, catalog)
    assert _codes(runs) == {r.code for r in RULES} and len(first) == len(RULES)

    runs.clear()
    assert rules.check_examples(RULES, catalog) == first
    assert runs == []

    for field, old, new in (
        # read by no example: checks read an operator's parameters, not its prose
        ("description", "replace a hand-written", "replace a handwritten"),
        ("parameters", "Added under the square root", "Added below the square root"),
    ):
        stored = build_cache.load(build_cache.examples_name(catalog))["entries"]
        readers = {
            code
            for code, entry in stored.items()
            if any(_sees_edit(r, catalog, field) for r in entry["reads"])
        }
        assert readers != set(stored)
        assert bool(readers) == (field == "parameters")
        _edit(tree, old, new)
        edited = open_catalog(tree)
        assert edited.content != catalog.content

        runs.clear()
        again = rules.check_examples(RULES, edited)
        assert _codes(runs) == readers
        build_cache.store(build_cache.examples_name(edited), {})  # forget: run all afresh
        assert rules.check_examples(RULES, edited) == again
        catalog = edited


def test_examples_are_trusted_without_comparing_reads_only_on_the_same_content(
    tree: Path, runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports proven against the catalog's content are reused without one read being
    compared; a stored content of another catalog proves nothing."""
    catalog = open_catalog(tree)
    some = [r for r in RULES if r.code in ("KB003", "KB104", "KB303")]
    first = rules.check_examples(some, catalog)
    compared: list[object] = []
    real = build_cache.ReadDigests.still

    def still(self: Any, stored: object) -> bool:
        compared.append(stored)
        return bool(real(self, stored))

    monkeypatch.setattr(build_cache.ReadDigests, "still", still)
    runs.clear()
    assert rules.check_examples(some, catalog) == first
    assert runs == [] and compared == []
    name = build_cache.examples_name(catalog)
    payload = build_cache.load(name)
    build_cache.store(name, {**payload, "content": "another"})
    assert rules.check_examples(some, catalog) == first
    assert runs == [] and len(compared) == len(some)
    # on another content, a report whose reads no longer give what they gave runs again
    entries = payload["entries"]
    entries["KB104"]["reads"] = [[w, a, "0" * 32] for w, a, _ in entries["KB104"]["reads"]]
    build_cache.store(name, {"content": "another", "entries": entries})
    compared.clear()
    assert rules.check_examples(some, catalog) == first
    assert _codes(runs) == {"KB104"}


def test_a_damaged_cache_is_rebuilt(tree: Path, runs: list[str]) -> None:
    catalog = open_catalog(tree)
    some = RULES[:3]
    first = rules.check_examples(some, catalog)
    path = (
        build_cache.cache_dir()
        / f"site-{build_cache.CACHE_VERSION}-{build_cache.examples_name(catalog)}.json"
    )
    path.write_text(path.read_text(encoding="utf-8").replace("KB", "XB"), encoding="utf-8")
    runs.clear()
    assert rules.check_examples(some, catalog) == first
    assert _codes(runs) == {r.code for r in some}


def test_cli_reference_is_rendered_once_per_code_version(tree: Path) -> None:
    calls: list[int] = []

    def render() -> str:
        calls.append(1)
        return "### kb\n"

    assert build_cache.cli_reference(render) == "### kb\n"
    assert build_cache.cli_reference(render) == "### kb\n"
    assert calls == [1]


def test_search_index_is_built_once_per_records_and_inputs(tree: Path) -> None:
    """The site's search files come back from the cache, identical, until a record,
    the other inputs (page URLs, other pages' titles) or the code change."""
    calls: list[int] = []

    def render() -> dict[str, str]:
        calls.append(1)
        return {"search/kb/docs.json": f'{{"n":{len(calls)}}}', "search/kb/s0.json": "{}"}

    catalog = open_catalog(tree)
    first = build_cache.search_files(catalog, "pages-a", render)
    assert build_cache.search_files(catalog, "pages-a", render) == first
    assert calls == [1]
    assert build_cache.search_files(catalog, "pages-b", render) != first  # other inputs
    path = tree / "operators" / "norm" / f"{EDITED}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("replace a hand-written", "replace a handwritten"), "utf-8")
    edited = open_catalog(tree)
    assert edited.content != catalog.content
    build_cache.search_files(edited, "pages-b", render)
    assert calls == [1, 1, 1]


def test_cached_search_index_equals_a_fresh_one(tree: Path) -> None:
    """What the cache gives back is the index, byte for byte (on the small fixture
    records: the real ones take a whole build's worth of scoring)."""
    from site_plugins import search_index
    from site_plugins.common import SiteData

    catalog = open_catalog(PACKAGE_DIR.parent / "tests" / "fixtures" / "site_records")
    data = SiteData.from_records(catalog.records())
    fresh = search_index.build(catalog, data, [["cli/", "CLI", "cli"]])
    assert build_cache.search_files(catalog, "x", lambda: fresh) is fresh
    assert build_cache.search_files(catalog, "x", lambda: {}) == fresh


def test_a_record_read_whole_counts_every_field(tree: Path) -> None:
    log = build_cache.ReadLog(open_catalog(tree))
    first = next(iter(log.records("operator")))
    assert first.get("fuses") is not None or "fuses" not in first
    kind, names = json.loads(next(arg for what, arg in log.reads if what == "fields"))
    assert (kind, names) == ("operator", ["fuses"])
    dict(first)  # copying reads every field
    assert ("records", "operator") in log.reads


def test_a_record_got_by_name_counts_the_fields_read(tree: Path) -> None:
    """A record got by name is compared by the fields read of it (its truth reads none);
    a copy reads it whole; the catalog's content, a memo key, is not offered (a memo hit
    would hide the reads behind it) and reads nothing."""
    log = build_cache.ReadLog(open_catalog(tree))
    body = log.get(f"torch_npu.{EDITED}")
    assert body and body["parameters"] and "returns" in body
    assert log.reads == {
        ("get-fields", json.dumps([f"torch_npu.{EDITED}", ["parameters", "returns"]]))
    }
    assert getattr(log, "content", "") == ""
    assert log.get("no_such_operator") is None
    assert ("get", "no_such_operator") in log.reads
    assert {**body}["name"] == EDITED
    assert ("get", f"torch_npu.{EDITED}") in log.reads
    assert not any(what in ("get-fields", "all") for what, _ in log.reads)
    digests = build_cache.ReadDigests(open_catalog(tree))
    _edit(tree, "replace a hand-written", "replace a handwritten")
    edited = build_cache.ReadDigests(open_catalog(tree))
    fields = ("get-fields", json.dumps([EDITED, ["parameters"]]))
    prose = ("get-fields", json.dumps([EDITED, ["description"]]))
    assert digests(fields) == edited(fields) and digests(prose) != edited(prose)


def test_search_stems_follow_an_edit_as_a_fresh_build_sees_it(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Record words are split once per record content: after an edit the stems hold
    the edited record's new word and are what a build with an empty cache makes; a
    damaged store is split again, not trusted."""
    from site_plugins import search_index

    search_index._stems(open_catalog(tree))
    path = tree / "operators" / "norm" / f"{EDITED}.yaml"
    text = path.read_text(encoding="utf-8")
    assert "hand-written" in text
    path.write_text(text.replace("hand-written", "reconfigurations", 1), "utf-8")
    edited = open_catalog(tree)
    split: list[str] = []
    real = search_index._words

    def counted(rec: dict[str, Any]) -> set[str]:
        split.append(rec["name"])
        return real(rec)

    monkeypatch.setattr(search_index, "_words", counted)
    warm = search_index._stems(edited)
    assert split == [EDITED]
    assert warm["reconfigurations"] != "reconfigurations"
    for stored in (tmp_path / "cache").glob("site-*-stems-*.json"):
        stored.write_text(stored.read_text().replace('"norm"', '"nrom"'), "utf-8")
    split.clear()
    assert search_index._stems(edited) == warm
    assert len(split) > 1  # the damaged store was split again
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cold"))
    assert search_index._stems(open_catalog(tree)) == warm
