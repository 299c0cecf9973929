"""The ``kb-records`` MkDocs plugin: records in, Markdown pages and navigation out.

It stays thin on purpose: it asks the compiled catalog for records and the checker
for its rule units, hands them to the page generators, and registers the Markdown
with MkDocs' own ``File.generated`` (no temporary docs tree, no copy step).  The
navigation is generated too, so a new record or hand-written page needs no edit of
mkdocs.yml.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from site_plugins import build_cache, md
from site_plugins.autolink import autolink
from site_plugins.cli_help import MARKER, cli_reference
from site_plugins.common import Record, SiteData
from site_plugins.generate import Generated, NavItem, generate
from site_plugins.rules import check_examples, load_rules
from site_plugins.sanitize import sanitize

log = logging.getLogger("mkdocs.plugins.kb-records")

DEFAULT_GUIDES = [
    "guides/fusion-workflow.md",
    "guides/prefetch-workflow.md",
    "guides/emulate.md",
    "candidate-list.md",
    "cli.md",
    "contributing.md",
]


class RecordsConfig(base.Config):
    #: Record tree; default: kb's own (``KB_RECORDS_DIR`` when set).  Relative paths
    #: are taken from the directory of mkdocs.yml.
    records = c.Optional(c.Type(str))
    #: Order of hand-written pages under "Guides"; absent ones are skipped, others follow.
    guides = c.ListOfItems(c.Type(str), default=DEFAULT_GUIDES)
    #: Link record names written as code spans in hand-written pages.
    autolink = c.Type(bool, default=True)
    #: Minify the HTML of every page (minify-html; pre blocks keep their whitespace).
    minify = c.Type(bool, default=True)


class RecordsPlugin(BasePlugin[RecordsConfig]):
    def __init__(self) -> None:
        self.data = SiteData()
        self.root: Path | None = None
        self.generated = Generated()

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        from kb.catalog.compiled import StoreInvalid, open_catalog
        from kb.core.paths import records_dir

        if self.config.records:
            base_dir = Path(config.config_file_path or ".").parent
            self.root = (base_dir / self.config.records).resolve()
        else:
            self.root = records_dir()
        try:
            catalog = open_catalog(self.root)
        except StoreInvalid as exc:
            shown = "\n".join(f"  {p}" for p in exc.problems[:20])
            raise PluginError(
                f"the records under {self.root} do not validate ({len(exc.problems)} "
                f"problem(s)); run 'kb validate':\n{shown}"
            ) from None
        records = list(catalog.records())
        rules = load_rules()
        self.data = SiteData.from_records(records, rules, config.use_directory_urls)
        self.data.rule_reports = check_examples(self.data.rules, catalog)
        _teach_segmenter(records, config)
        _no_instant_without_site_url(config)
        return config

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        self.generated = generate(self.data)
        for path, text in self.generated.pages.items():
            if files.get_file_from_path(path) is not None:
                raise PluginError(
                    f"docs/{path} clashes with a page generated from the records; rename it"
                )
            files.append(File.generated(config, path, content=text))
        for path, text in self.generated.assets.items():
            files.append(File.generated(config, path, content=text))
        config.nav = self._nav(files)
        return files

    def _nav(self, files: Files) -> list[NavItem]:
        """Home, the hand-written guides (configured order first), then generated sections."""
        written = sorted(
            f.src_uri for f in files.documentation_pages() if f.src_uri not in self.generated.pages
        )
        nav: list[NavItem] = [{"Home": "index.md"}] if "index.md" in written else []
        guides: list[NavItem] = [p for p in self.config.guides if p in written]
        guides += [p for p in written if p != "index.md" and p not in guides]
        if guides:
            nav.append({"Guides": guides})
        return nav + self.generated.nav

    def on_page_markdown(
        self, markdown: str, *, page: Page, config: MkDocsConfig, files: Files
    ) -> str:
        src = page.file.src_uri
        if src in self.generated.pages:
            return markdown
        if MARKER in markdown:
            markdown = markdown.replace(MARKER, build_cache.cli_reference(cli_reference))
        if self.config.autolink:
            markdown = autolink(markdown, src, self.data)
        return markdown

    def on_page_content(self, html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
        """Sanitize pages made from record text (hand-written pages are trusted)."""
        if page.file.src_uri in self.generated.pages:
            return sanitize(html)
        return html

    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str:
        """Point the search box at kb's worker; minify each page (the theme's indentation
        is a third of its bytes)."""
        output = _kb_search_worker(output)
        if not self.config.minify:
            return output
        import minify_html

        return str(
            minify_html.minify(
                output, keep_closing_tags=False, keep_html_and_head_opening_tags=True
            )
        )

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        """Write kb's search index (the CLI's ranking, sharded) in place of lunr's, and
        drop theme files no page loads (source maps, lunr languages not configured)."""
        site = Path(config.site_dir)
        self._write_search(site)
        self._write_llms(site, config)
        if not self.config.minify:
            return
        for path in site.glob("assets/**/*.map"):
            path.unlink()
        langs = set(_search_langs(config))
        for path in site.glob("assets/javascripts/lunr/min/lunr.*.min.js"):
            lang = path.name.split(".")[1]
            if len(lang) == 2 and lang not in langs:
                path.unlink()
        # Word segmenters Material loads only for Japanese (tinyseg), Hindi and Thai.
        for name, users in (("tinyseg.js", {"ja"}), ("wordcut.js", {"hi", "th"})):
            path = site / "assets" / "javascripts" / "lunr" / name
            if path.exists() and not users & langs:
                path.unlink()

    def _write_llms(self, site: Path, config: MkDocsConfig) -> None:
        """llms.txt and the Markdown of chain, tree and playbook pages, for agents."""
        from site_plugins.llms import llms_txt, markdown_copies

        files = markdown_copies(self.data, self.generated.pages)
        files["llms.txt"] = llms_txt(self.data, config.site_name, config.site_description or "")
        for path, text in files.items():
            target = site / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def _write_search(self, site: Path) -> None:
        """kb's index from the records; Material's own index shrinks to the other pages'
        titles (inside ours) and an empty stub, so no page load fetches 2 MB."""
        from kb.catalog.compiled import open_catalog
        from site_plugins import search_index

        lunr = site / "search" / "search_index.json"
        material: dict[str, Any] = {}
        if lunr.is_file():
            material = json.loads(lunr.read_text(encoding="utf-8"))
        record_urls = set()
        for bucket in (self.data.operators, self.data.chains, self.data.trees, self.data.playbooks):
            for name in bucket:
                path = self.data.path(name)
                if path:
                    record_urls.add(md.page_url(path, self.data.directory_urls))
        pages = search_index.other_pages(material, record_urls)
        catalog = open_catalog(self.root)
        inputs = json.dumps([sorted(record_urls), pages, self.data.directory_urls])
        files = build_cache.search_files(
            catalog, inputs, lambda: search_index.build(catalog, self.data, pages)
        )
        for path, text in files.items():
            target = site / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if lunr.is_file():
            stub = {"config": material.get("config", {}), "docs": []}
            lunr.write_text(json.dumps(stub, separators=(",", ":")), encoding="utf-8")

    def on_serve(self, server: Any, *, config: MkDocsConfig, builder: Any) -> Any:
        """Rebuild when a record changes, not only when docs/ does."""
        if self.root is not None:
            server.watch(str(self.root))
        return server


#: Material's search worker in the page configuration (its hash changes per release).
_WORKER = re.compile(
    r'("search":\s*")([^"]*?)assets/javascripts/workers/search\.[0-9a-f]+\.min\.js"'
)


def _no_instant_without_site_url(config: MkDocsConfig) -> None:
    """Material's instant navigation follows only the links sitemap.xml lists, and those
    URLs come from ``site_url``.  A build for an address nobody gave (no ``KB_SITE_URL``)
    has no canonical links and no sitemap entries, so its pages load whole, said once
    here, rather than carrying a localhost address that silently turns navigation off."""
    if config.site_url:
        return
    features = list(config.theme.get("features") or [])
    kept = [f for f in features if not str(f).startswith("navigation.instant")]
    if kept != features:
        config.theme["features"] = kept
        log.info(
            "no site_url: pages carry no canonical link and load whole (instant navigation "
            "off); set KB_SITE_URL to the address the site is served at to turn both on"
        )


def _kb_search_worker(html: str) -> str:
    """Material runs any worker that speaks its protocol; kb's ranks like ``kb search``."""
    return _WORKER.sub(r'\1\2assets/javascripts/kb-search-worker.js"', html, count=1)


def _search_langs(config: MkDocsConfig) -> list[str]:
    for name, plugin in config.plugins.items():
        if name.endswith("search"):
            return list(getattr(plugin.config, "lang", None) or [])
    return []


def _teach_segmenter(records: list[Record], config: MkDocsConfig) -> None:
    """Give jieba our Chinese keywords, so search indexes 权重预取 as one term.

    Material segments Chinese text with jieba at build time whenever jieba is
    installed; without our terms it splits domain words apart and a query for the
    whole word finds nothing.
    """
    langs = _search_langs(config)
    try:
        import jieba
    except ImportError:
        if "zh" in langs:
            log.warning(
                "Chinese search needs jieba to segment text at build time: pip install '.[site]'"
            )
        return
    jieba.setLogLevel(logging.WARNING)
    _keep_jieba_cache_in_kb_cache()
    if "zh" not in langs:
        return
    for rec in records:
        for word in (rec.get("keywords") or {}).get("zh", []):
            if word.strip() and not any(ch.isspace() for ch in word):
                jieba.add_word(word)


def _keep_jieba_cache_in_kb_cache() -> None:
    """Point jieba's 9 MB dictionary cache at kb's cache dir, not $TMPDIR.

    jieba writes ``jieba.cache`` into ``tempfile.gettempdir()`` on first use unless told
    otherwise; kb promises to write only into its own cache dir.  When that dir cannot
    be created, jieba still works (it rebuilds the dictionary each time) and its
    "dump failed" log is silenced, since nothing is wrong with the build.
    """
    import jieba

    from kb.core.paths import cache_dir

    target = cache_dir() / "jieba"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        jieba.setLogLevel(logging.CRITICAL + 1)
    jieba.dt.tmp_dir = str(target)
