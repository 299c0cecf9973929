"""A rebuild reuses what did not change, and never serves a stale page.

The site caches generated Markdown by what it read of the records and rendered pages by
the digest of their inputs (site_plugins/reads.py, site_plugins/page_cache.py).  After a
one-word edit of one record, a rebuild with the cache must equal, byte for byte, a build
of the edited records with an empty cache: the record's page and every page that shows
its data (indexes, matrices, the chain and tree that name it, llms.txt, the search
index) change, and only a few pages are rendered again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from site_builds import FIXTURES, fixture_config

from kb.cli import main

EDITED = "operators/norm/npu_fixture_norm.yaml"
BEFORE = "Fixture norm operator for the site tests."
AFTER = "Fixture norm operator for the site checks."


def _files(site: Path) -> dict[str, bytes]:
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file() and p.name != ".kb-site"
    }


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pages rendered from Markdown in this process (a restored page does not call
    this; worker processes rendering a cold cache's pages are not counted)."""
    from mkdocs.structure.pages import Page

    done: list[str] = []
    real = Page.render

    def counted(self: Any, config: Any, files: Any) -> None:
        done.append(self.file.src_uri)
        real(self, config, files)

    monkeypatch.setattr(Page, "render", counted)
    return done


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The templates jinja compiled from their source in this process."""
    from jinja2 import Environment

    done: list[str] = []
    real = Environment.compile

    def counted(self: Any, source: Any, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        done.append(str(name))
        return real(self, source, name, *args, **kwargs)

    monkeypatch.setattr(Environment, "compile", counted)
    return done


def _build(config: Path, records: Path, site: Path, cache: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setenv("KB_CACHE_DIR", str(cache))
    argv = ["site", "build", "-q", "-f", str(config), "--records", str(records)]
    assert main([*argv, "--site-dir", str(site)]) == 0


@pytest.fixture
def warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(mkdocs.yml, records, cache) after one build of the fixture records."""
    monkeypatch.delenv("KB_SITE_URL", raising=False)
    monkeypatch.delenv("KB_RECORDS_DIR", raising=False)
    records = tmp_path / "records"
    shutil.copytree(FIXTURES, records)
    config = fixture_config(tmp_path / "cfg")
    cache = tmp_path / "cache"
    _build(config, records, tmp_path / "first", cache, monkeypatch)
    return config, records, cache


def test_a_one_word_edit_rebuilds_what_shows_it_and_nothing_stale(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    renders: list[str],
    compiles: list[str],
    warm: tuple[Path, Path, Path],
) -> None:
    config, records, cache = warm  # built after the counters were set up
    first = _files(tmp_path / "first")
    pages = sum(1 for name in first if name.endswith(".html"))

    compiled = list(compiles)
    renders.clear()
    compiles.clear()
    _build(config, records, tmp_path / "again", cache, monkeypatch)
    assert renders == []  # nothing changed: nothing rendered
    # the page templates' code is kept with the pages (what the theme compiles in an
    # environment of its own while reading the configuration is compiled again)
    assert len(compiles) < len(compiled) / 4 and "main.html" not in compiles, compiles
    assert _files(tmp_path / "again") == first

    path = records / EDITED
    text = path.read_text(encoding="utf-8")
    assert BEFORE in text
    path.write_text(text.replace(BEFORE, AFTER), encoding="utf-8")

    renders.clear()
    _build(config, records, tmp_path / "edited", cache, monkeypatch)
    edited = _files(tmp_path / "edited")
    assert 0 < len(renders) < pages // 2, renders

    _build(config, records, tmp_path / "fresh", tmp_path / "fresh-cache", monkeypatch)
    fresh = _files(tmp_path / "fresh")
    assert sorted(edited) == sorted(fresh)
    stale = [name for name in fresh if edited[name] != fresh[name]]
    assert stale == [], stale

    changed = {name for name in fresh if first.get(name) != fresh[name]}
    assert "operators/npu_fixture_norm/index.html" in changed
    assert "llms.txt" in changed and "search/kb/docs.json" in changed
    shows = [n for n, b in fresh.items() if n.endswith(".html") and AFTER.encode() in b]
    assert len(shows) > 1 and set(shows) <= changed  # every page showing the summary


def test_a_page_depends_on_what_it_asked_of_every_record_not_on_all_of_them() -> None:
    """An operator page lists the operators that supersede it (it asks every operator):
    it is made again when that answer changes, and not when an unrelated record does."""
    from site_plugins.common import SiteData
    from site_plugins.reads import Generation

    def op(name: str, **extra: object) -> dict[str, object]:
        return {"kind": "operator", "name": name, "supersedes": [], **extra}

    store: dict[str, dict[str, Any]] = {}
    made: list[str] = []

    def page(records: list[dict[str, object]]) -> str:
        data = SiteData.from_records(records)
        data.generation = Generation(
            data.buckets(), data.reads, "base", store.get, store.__setitem__
        )

        def make() -> str:
            made.append("npu_a")
            return ",".join(data.successors("npu_a"))

        return data.page("operators/npu_a.md", make)

    assert page([op("npu_a"), op("npu_b", supersedes=["npu_a"]), op("npu_c")]) == "npu_b"
    assert page([op("npu_a"), op("npu_b", supersedes=["npu_a"]), op("npu_c", x=1)]) == "npu_b"
    assert made == ["npu_a"]  # npu_c changed, and npu_a's page did not ask about it
    assert page([op("npu_a"), op("npu_b"), op("npu_c", supersedes=["npu_a"])]) == "npu_c"
    assert made == ["npu_a", "npu_a"]


def test_a_page_listing_every_record_depends_on_the_fields_it_reads_of_them() -> None:
    """A page made from every operator's summary is made again when a summary changes,
    not when a description does; one that uses the records whole, on any change."""
    from site_plugins.common import SiteData
    from site_plugins.reads import Generation

    store: dict[str, dict[str, Any]] = {}
    made: list[str] = []

    def pages(b_summary: str, b_description: str) -> tuple[str, str]:
        records = [
            {"kind": "operator", "name": "npu_a", "summary": "A.", "description": "Aa."},
            {
                "kind": "operator",
                "name": "npu_b",
                "summary": b_summary,
                "description": b_description,
            },
        ]
        data = SiteData.from_records(records)
        data.generation = Generation(
            data.buckets(), data.reads, "base", store.get, store.__setitem__
        )

        def summaries() -> str:
            made.append("summaries")
            return " ".join(op["summary"] for op in data.operators.values())

        def whole() -> str:
            made.append("whole")
            return str(sorted(len(dict(op)) for _, op in data.operators.items()))

        return data.page("index.md", summaries), data.page("whole.md", whole)

    assert pages("B.", "Bb.") == ("A. B.", "[4, 4]")
    assert made == ["summaries", "whole"]
    assert pages("B.", "Bb, reworded.") == ("A. B.", "[4, 4]")
    assert made == ["summaries", "whole", "whole"]  # the description: only the whole reader
    assert pages("B, reworded.", "Bb, reworded.") == ("A. B, reworded.", "[4, 4]")
    assert made == ["summaries", "whole", "whole", "summaries", "whole"]


def test_every_derived_answer_at_once_equals_each_asked_alone() -> None:
    """A build checks a stored page's derived reads from one pass per question; each
    answer must be what the page itself got asking for one name (shipped records)."""
    from kb.catalog.compiled import open_catalog
    from site_plugins.common import SiteData
    from site_plugins.reads import DERIVED, _every_answer

    data = SiteData.from_records(open_catalog().records())
    buckets = data.buckets()
    names = set().union(*(dict.keys(b) for b in buckets.values()))
    for question, (_, answer) in DERIVED.items():
        every = _every_answer(buckets, question)
        assert every is not None, question
        asked = {n: answer(buckets, n) for n in names}
        assert {n: every.get(n, []) for n in names} == asked, question
        assert any(asked.values()), question  # the records exercise this question


def test_a_shared_input_change_renders_every_page_as_a_fresh_build_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: tuple[Path, Path, Path]
) -> None:
    """A new page (a navigation entry on every page) and another theme colour (in every
    page's template output): no stored page output is served, the result is a fresh
    build's."""
    config, records, cache = warm
    first = _files(tmp_path / "first")
    (config.parent / "docs" / "extra.md").write_text("# Extra guide\n\nMore.\n", "utf-8")
    text = config.read_text(encoding="utf-8")
    assert "primary: indigo" in text
    config.write_text(text.replace("primary: indigo", "primary: teal"), encoding="utf-8")
    _build(config, records, tmp_path / "warm", cache, monkeypatch)
    _build(config, records, tmp_path / "fresh", tmp_path / "fresh-cache", monkeypatch)
    again, fresh = _files(tmp_path / "warm"), _files(tmp_path / "fresh")
    assert again == fresh
    html = [n for n in first if n.endswith(".html")]
    assert html and all(fresh[n] != first[n] for n in html)
    assert b"Extra guide" in fresh["cli/index.html"]  # a guide lists the other guides


def test_a_damaged_page_entry_is_rendered_again_never_served(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    warm: tuple[Path, Path, Path],
    renders: list[str],
) -> None:
    import sqlite3

    config, records, cache = warm
    first = _files(tmp_path / "first")
    (store,) = cache.glob("site-pages-*.sqlite")
    con = sqlite3.connect(store)
    with con:  # every payload altered, its digest kept: bit rot
        con.execute("UPDATE pages SET payload = replace(payload, 'Fixture', 'Fixturf')")
    con.close()
    _build(config, records, tmp_path / "rotted", cache, monkeypatch)
    assert _files(tmp_path / "rotted") == first
    assert renders  # rendered again, not restored

    store.write_bytes(b"this is not a database" * 64)
    renders.clear()
    _build(config, records, tmp_path / "garbage", cache, monkeypatch)
    assert _files(tmp_path / "garbage") == first
    assert renders
    renders.clear()
    _build(config, records, tmp_path / "healed", cache, monkeypatch)
    assert _files(tmp_path / "healed") == first
    assert renders == []  # the store was replaced, and serves again


def test_stored_pages_are_fetched_once_and_their_use_refreshed_once_a_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renderings a build will ask for come in one query and are not read again when
    MkDocs asks; a damaged one is not fetched; a page's last use is written again only
    once it is a day old, and a page unused for the keeping time is dropped."""
    import sqlite3
    import time
    from types import SimpleNamespace

    from site_plugins import page_cache

    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    config = SimpleNamespace()
    first = page_cache.PageCache(tmp_path, config)
    for key in ("fresh", "old", "rotten", "gone"):
        first.keep(key, {"content": key})
    first.close(commit=True)
    con = sqlite3.connect(first.path)
    now = time.time()
    with con:
        con.execute("UPDATE pages SET used = ? WHERE key = 'fresh'", (now - 3600,))
        con.execute("UPDATE pages SET used = ? WHERE key = 'old'", (now - 2 * 86400,))
        con.execute("UPDATE pages SET payload = '{}' WHERE key = 'rotten'")
        con.execute("UPDATE pages SET used = ? WHERE key = 'gone'", (now - 15 * 86400,))

    cache = page_cache.PageCache(tmp_path, config)
    queries: list[str] = []
    cache._con.set_trace_callback(queries.append)  # type: ignore[union-attr]
    cache.fetch(["fresh", "old", "rotten", "missing"])
    assert len([q for q in queries if q.startswith("SELECT")]) == 1
    queries.clear()
    assert cache._load("fresh") == {"content": "fresh"} and cache._load("old") is not None
    assert queries == []  # served from what was fetched
    assert cache._load("rotten") is None  # its digest fails: never served
    cache.close(commit=True)
    used = dict(con.execute("SELECT key, used FROM pages"))
    assert used["fresh"] == pytest.approx(now - 3600)  # used within the day: not rewritten
    assert used["old"] > now - 60  # a day old: its use is noted again
    assert "gone" not in used
    con.close()
