"""Strict site builds: the real records, the hostile fixtures, and ``kb site`` itself."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from site_builds import FIXTURES, FixtureSite, RealSite, build, fixture_config

from kb.catalog.compiled import open_catalog
from kb.cli import main
from site_plugins.rules import load_rules


class Scan(HTMLParser):
    """Script bodies, event-handler attributes and the <title> of one page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.handlers: list[str] = []
        self.ids: list[str] = []
        self.classes: list[str] = []
        self.links: list[tuple[str, str]] = []  # (class, href) of every <a>
        self.text = ""
        self.title = ""
        self._in: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag if tag in ("script", "title") else None
        self.handlers += [f"{tag} {k}={v}" for k, v in attrs if k.startswith("on")]
        self.ids += [v or "" for k, v in attrs if k == "id"]
        self.classes += [f"{tag}.{v}" for k, v in attrs if k == "class"]
        if tag == "a":
            got = dict(attrs)
            self.links.append((got.get("class") or "", got.get("href") or ""))

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "title":
            self.title += data
        else:
            self.text += data


def test_real_records_build_strictly_with_a_page_for_everything(real_site: RealSite) -> None:
    site = real_site.path
    catalog = open_catalog()
    dirs = {"operator": "operators", "chain": "chains", "tree": "trees", "playbook": "playbooks"}
    for kind, folder in dirs.items():
        for name in catalog.names(kind):
            assert (site / folder / name / "index.html").is_file(), (kind, name)
    for rule in load_rules():
        assert (site / "rules" / rule.code / "index.html").is_file(), rule.code
    for page in (
        "operators",
        "categories",
        "status",
        "chains",
        "trees",
        "rules",
        "cli",
        "matrices/products",
        "matrices/quantization",
        "matrices/versions",
    ):
        assert (site / page / "index.html").is_file(), page


def test_search_index_is_kbs_own_and_bilingual(real_site: RealSite) -> None:
    """Material's lunr index is a stub; kb's index (the CLI's ranking data) holds the
    records, their Chinese bigrams and the other pages' titles."""
    site = real_site.path
    stub = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert stub["docs"] == [] and stub["config"]["lang"] == ["en", "zh"]
    head = json.loads((site / "search" / "kb" / "docs.json").read_text(encoding="utf-8"))
    names = [d[0] for d in head["docs"]]
    assert "npu_prefetch" in names and "prefetch" in names
    assert any(p[1] == "Checker rules" or "KB204" in p[1] for p in head["pages"])
    from site_plugins.search_index import shard_of

    shard = json.loads(
        (site / "search" / "kb" / f"s{shard_of('预取')}.json").read_text(encoding="utf-8")
    )
    assert names.index("npu_prefetch") in shard["t"]["预取"][::2]


def test_cli_reference_page_is_generated(real_site: RealSite) -> None:
    site = real_site.path
    html = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "kb:cli-reference" not in html
    assert "usage: kb site build" in html and "usage: kb check" in html


def test_hostile_fixture_records_do_not_inject(fixture_site: FixtureSite) -> None:
    pages = list(fixture_site.path.rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        scan = Scan(page.read_text(encoding="utf-8"))
        assert not [s for s in scan.scripts if "alert" in s], page
        assert not [h for h in scan.handlers if "alert" in h], page
        assert "<" not in scan.title, page
    attention = Scan(
        (fixture_site.path / "operators" / "npu_fixture_attention" / "index.html").read_text()
    )
    assert "Hostile text <script>alert('summary')</script> with a | pipe" in attention.text
    assert {"signature", "parameters"} <= set(attention.ids)


def test_fixture_diagrams_are_html_that_needs_no_script(fixture_site: FixtureSite) -> None:
    """Tree and chain diagrams reach the built page as HTML boxes and links (sanitized,
    minified), and no page or asset of the site carries a diagram script."""
    tree = (fixture_site.path / "trees" / "fixture-tree" / "index.html").read_text()
    scan = Scan(tree)
    assert scan.classes.count("div.kb-diagram kb-map") == 1
    assert scan.classes.count("div.kb-branches") == 2  # one per question
    assert ("kb-node kb-node--chain", "../../chains/fixture-decode-chain/") in scan.links
    chain = (fixture_site.path / "chains" / "fixture-decode-chain" / "index.html").read_text()
    assert Scan(chain).classes.count("div.kb-diagram kb-flow") == 1
    for page in fixture_site.path.rglob("*.html"):
        assert "mermaid" not in page.read_text(encoding="utf-8").lower(), page
    assert not [p for p in fixture_site.path.rglob("*.js") if "mermaid" in p.name.lower()]


def test_failed_build_leaves_the_previous_site(
    tmp_path: Path, fixture_site: FixtureSite, capsys
) -> None:
    site = tmp_path / "site"
    shutil.copytree(fixture_site.path, site)
    before = (site / "index.html").read_bytes()
    broken = tmp_path / "records"
    shutil.copytree(FIXTURES, broken)
    (broken / "operators" / "norm" / "npu_fixture_norm.yaml").write_text(
        "kind: operator\nname: npu_fixture_norm\n", encoding="utf-8"
    )
    config = fixture_config(tmp_path / "cfg")
    assert build("-f", str(config), "--records", str(broken), "--site-dir", str(site)) == 1
    err = capsys.readouterr().err
    assert "do not validate" in err and "was left as it was" in err
    assert (site / "index.html").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg", "records", "site"]


def test_successful_build_replaces_the_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("old")
    (site / "stale.html").write_text("old")
    (site / ".kb-site").write_text("")  # a previous kb build (issue 24: only those are replaced)
    config = fixture_config(tmp_path / "cfg")
    assert build("-f", str(config), "--records", str(FIXTURES), "--site-dir", str(site)) == 0
    assert not (site / "stale.html").exists()
    assert "Fixture site" in (site / "index.html").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg", "site"]


def test_refuses_to_replace_a_directory_that_is_not_a_site(tmp_path: Path, capsys) -> None:
    target = tmp_path / "notes"
    target.mkdir()
    (target / "todo.txt").write_text("keep me")
    assert build("--site-dir", str(target)) == 2
    assert "does not look like a built site" in capsys.readouterr().err
    assert (target / "todo.txt").read_text() == "keep me"


def test_missing_mkdocs_gives_an_install_hint(monkeypatch, capsys) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "mkdocs" else real(n, *a)
    )
    assert build() == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "kb site: the site needs mkdocs, which is not installed: pip install '.[site]'"
    )


def test_site_without_action_prints_help(capsys) -> None:
    assert main(["site"]) == 2
    assert "build" in capsys.readouterr().err


def test_the_built_site_keeps_its_weight_budgets(real_site: RealSite) -> None:
    """Issue 13's size budgets, measured on the real build (the time budget is in the log)."""
    from kb.cli.site import BUDGET_OPERATOR_PAGE_KB, BUDGET_SITE_MB, measure, report

    figures = measure(real_site.path)
    assert figures.total_mb <= BUDGET_SITE_MB, figures
    assert 0 < figures.operator_page_kb <= BUDGET_OPERATOR_PAGE_KB, figures
    line = report(real_site.path, 1.0)
    assert f"{figures.pages} pages, {figures.total_mb:.1f} MB" in line
    assert "budget" not in line  # build time is the benchmark's business


def test_theme_files_no_page_loads_are_not_shipped(real_site: RealSite) -> None:
    assets = real_site.path / "assets" / "javascripts"
    assert not list(real_site.path.glob("assets/**/*.map"))
    shipped = {p.name for p in (assets / "lunr" / "min").iterdir()}
    assert "lunr.zh.min.js" in shipped and "lunr.multi.min.js" in shipped
    assert "lunr.de.min.js" not in shipped and not (assets / "lunr" / "wordcut.js").exists()


def test_sitemap_and_404_use_the_site_url(real_site: RealSite) -> None:
    import xml.etree.ElementTree as ET

    sitemap = (real_site.path / "sitemap.xml").read_text(encoding="utf-8")
    assert sitemap.count("<loc>") == len(list(real_site.path.rglob("index.html")))
    ns = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    urls = ET.fromstring(sitemap).findall(f"{ns}url")  # well-formed, one <loc> per <url>
    assert len(urls) > 400 and all(u.find(f"{ns}loc") is not None for u in urls)
    site_url = f"http://127.0.0.1:{real_site.port}/"
    assert f"<loc>{site_url}operators/npu_mla_prolog_v3/</loc>" in sitemap
    not_found = (real_site.path / "404.html").read_text(encoding="utf-8")
    assert "/assets/stylesheets/kb.css" in not_found and "../" not in not_found


def test_pages_carry_the_site_url_they_were_built_for(fixture_site: FixtureSite) -> None:
    page = (fixture_site.path / "operators" / "npu_fixture_norm" / "index.html").read_text()
    site_url = f"http://127.0.0.1:{fixture_site.port}/"
    canonical = re.search(r"<link href=\"?([^ \">]+)\"? rel=\"?canonical", page)
    assert canonical and canonical.group(1) == f"{site_url}operators/npu_fixture_norm/"
    assert '"navigation.instant"' in page  # the sitemap lists this address: links swap


def test_a_build_for_no_known_address_has_no_canonical_links(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Issue 23: without KB_SITE_URL no page names a localhost address, and instant
    navigation (which would follow nothing) is off, said in the build log, not silent."""
    monkeypatch.delenv("KB_SITE_URL", raising=False)
    site = tmp_path / "site"
    config = fixture_config(tmp_path / "cfg")
    assert (
        main(
            [
                "site",
                "build",
                "-f",
                str(config),
                "--records",
                str(FIXTURES),
                "--site-dir",
                str(site),
            ]
        )
        == 0
    )
    assert "instant navigation off" in capsys.readouterr().err
    pages = list(site.rglob("*.html"))
    assert len(pages) > 10
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"rel=\"?canonical", text) and "http://127.0.0.1" not in text, page
        assert "navigation.instant" not in text, page
    # a sitemap lists absolute URLs: none at all rather than one without any <loc>
    assert not (site / "sitemap.xml").exists() and not (site / "sitemap.xml.gz").exists()


def test_search_index_is_lean(real_site: RealSite) -> None:
    """A search fetches docs.json and a few shards: each small, none the whole index."""
    directory = real_site.path / "search" / "kb"
    assert (directory / "docs.json").stat().st_size <= 170_000
    shards = sorted(directory.glob("s*.json"))
    assert len(shards) >= 64
    assert max(p.stat().st_size for p in shards) <= 30_000


def test_search_attributes_are_stripped_only_from_pages_that_have_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Material's search plugin strips ``data-search-*="…"`` attributes from every page
    with a regular expression tried at each character; the kb plugin runs that pass only
    on a page holding such an attribute, and every page is still indexed by kb's titles
    hook.  (Valueless ``data-search-exclude`` is not what the pass strips.)"""
    from types import SimpleNamespace

    from material.plugins.search import plugin as material_search
    from mkdocs.config import load_config

    config = load_config(str(Path(__file__).resolve().parent.parent / "mkdocs.yml"))
    for name, plugin in config.plugins.items():
        if name.endswith("search"):
            plugin.on_config(config)  # makes Material's index, as a build would
    ours = config.plugins["kb-records"]
    ours.on_pre_build(config=config)
    passes: list[str] = []
    real_sub = material_search.re.sub

    def counted(pattern: Any, repl: Any, string: str, *args: Any, **kwargs: Any) -> str:
        passes.append(string)
        return str(real_sub(pattern, repl, string, *args, **kwargs))

    monkeypatch.setattr(material_search.re, "sub", counted)

    def page(content: str) -> Any:
        return SimpleNamespace(
            content=content,
            file=SimpleNamespace(src_uri="guides/x.md"),
            url="guides/x/",
            meta={},
            title="X",
            toc=[],
        )

    plain = page('<h2 id="a" data-search-exclude>A</h2><p>words</p>')
    valued = page('<p data-search-boost="2">words</p>')
    for each in (plain, valued):
        config.plugins.on_page_context({}, page=each, config=config, nav=None)
    assert plain.content == '<h2 id="a" data-search-exclude>A</h2><p>words</p>'
    assert valued.content == "<p>words</p>"
    assert passes == ['<p data-search-boost="2">words</p>']
    assert [e["location"] for e in ours.other_pages] == ["guides/x/", "guides/x/"]
