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
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page

from site_plugins import build_cache, md, search_index
from site_plugins.autolink import autolink
from site_plugins.breaks import table_breaks
from site_plugins.cli_help import MARKER, cli_reference
from site_plugins.common import KIND_DIRS, SiteData
from site_plugins.generate import Generated, NavItem, generate
from site_plugins.page_cache import PageCache
from site_plugins.rules import check_examples, load_rules
from site_plugins.sanitize import sanitize

log = logging.getLogger("mkdocs.plugins.kb-records")

DEFAULT_GUIDES = [
    "guides/fusion-workflow.md",
    "guides/prefetch-workflow.md",
    "guides/emulate.md",
    "guides/port.md",
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
        self.other_pages: list[dict[str, str]] = []
        self.digests: dict[str, str] = {}
        self.indexing: subprocess.Popen[bytes] | None = None
        self.nav: Navigation | None = None

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        from kb.catalog.compiled import StoreInvalid, is_current, open_catalog
        from kb.core.paths import records_dir

        if self.config.records:
            base_dir = Path(config.config_file_path or ".").parent
            self.root = (base_dir / self.config.records).resolve()
        else:
            self.root = records_dir()
        # records that changed need a new search index: start it now, beside the
        # compile it waits for (it opens the catalog this process compiles)
        early = None if is_current(self.root) else _spawn_index(self.root)
        try:
            catalog = open_catalog(self.root)
        except StoreInvalid as exc:
            _stop(early)
            shown = "\n".join(f"  {p}" for p in exc.problems[:20])
            raise PluginError(
                f"the records under {self.root} do not validate ({len(exc.problems)} "
                f"problem(s)); run 'kb validate':\n{shown}"
            ) from None
        if early is not None and catalog.in_memory:
            _stop(early)
            early = None
        self.indexing = early if early is not None else _index_beside(catalog)
        records = list(catalog.records())
        self.digests = catalog.digests()
        rules = load_rules()
        reports = check_examples(sorted(rules, key=lambda r: str(r.code)), catalog, records)
        self.data = SiteData.from_records(records, rules, config.use_directory_urls)
        self.data.rule_reports = reports
        _no_instant_without_site_url(config)
        self.pages = PageCache(self.root, config)
        return config

    def on_pre_build(self, *, config: MkDocsConfig) -> None:
        """Material's search plugin would parse every page's HTML (and segment its Chinese
        with jieba) for an index the site replaces with kb's own: take only the titles
        of the pages that are not records, from each page's table of contents."""
        self.other_pages = []
        for name, plugin in config.plugins.items():
            index: Any = getattr(plugin, "search_index", None)
            if name.endswith("search") and hasattr(index, "add_entry_from_context"):
                index.add_entry_from_context = self._search_titles
                _attributes_cleaned_only_where_present(config, plugin)

    def _search_titles(self, page: Page) -> None:
        src = page.file.src_uri
        if src not in self.generated.pages:
            self.other_pages += search_index.page_titles(page)
        elif not _is_record_page(src):
            # a rule or index page by its title: its sections ("Why it matters" on every
            # rule page) would only repeat themselves in the search's download
            self.other_pages += search_index.page_titles(page)[:1]

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        self.data.generation = self.pages.generation(self.data, self.digests)
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
        self.pages.start_rendering(files)
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
            return self._rendering(page, markdown)
        if MARKER in markdown:
            markdown = markdown.replace(MARKER, build_cache.cli_reference(cli_reference))
        if self.config.autolink:
            markdown = autolink(markdown, src, self.data)
        return self._rendering(page, markdown)

    def _rendering(self, page: Page, markdown: str) -> str:
        self.pages.rendering(page, markdown)
        return markdown

    def on_page_content(self, html: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
        """Sanitize pages made from record text (hand-written pages are trusted); let
        identifiers in every table wrap at underscores.  A restored page already is."""
        if page.file.src_uri in self.pages.restored:
            return html
        if page.file.src_uri in self.generated.pages:
            html = sanitize(html)
        html = table_breaks(html)
        self.pages.rendered(page, html)
        return html

    def on_nav(self, nav: Navigation, *, config: MkDocsConfig, files: Files) -> Navigation:
        """Every page exists now: render the generated ones the cache lacks on every core."""
        self.nav = nav
        from site_plugins.prerender import prerender

        missing = self.pages.missing(self.generated.pages)

        def content(page: Page, html: str) -> str:
            return config.plugins.on_page_content(html, page=page, config=config, files=files)

        markdown = {src: read[0] for src, read in missing.items()}
        for src, payload in prerender(markdown, config, files, content).items():
            self.pages.adopt(src, missing[src], payload)
        return nav

    def on_env(self, env: Any, *, config: MkDocsConfig, files: Files) -> Any:
        """Every page is rendered, so every title is known: key the outputs, and let a
        page whose output is stored skip the theme's template."""
        self.pages.start_output(self.nav)
        self.pages.wrap_templates(env)
        return env

    def on_post_page(self, output: str, *, page: Page, config: MkDocsConfig) -> str:
        return self.pages.finish(page, output, self._finish_page)

    def _finish_page(self, output: str) -> str:
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

    def on_build_error(self, *, error: Exception) -> None:
        pages: PageCache | None = getattr(self, "pages", None)  # None: on_config failed
        if pages is not None:
            pages.close(commit=False)

    def on_post_build(self, *, config: MkDocsConfig) -> None:
        """Write kb's search index (the CLI's ranking, sharded) in place of lunr's, and
        drop theme files no page loads (source maps, lunr languages not configured)."""
        site = Path(config.site_dir)
        self._write_search(site)
        self._write_llms(site, config)
        _no_sitemap_without_site_url(site, config)
        if not self.config.minify:
            return
        for path in site.glob("assets/**/*.map"):
            path.unlink()
        for name in config.extra_css:  # ours, written for people: comments and indentation
            path = site / name
            if path.suffix == ".css" and path.is_file():
                path.write_text(_minified_css(path.read_text(encoding="utf-8")), encoding="utf-8")
        for path in site.glob("assets/javascripts/kb*.js"):
            path.write_text(_stripped_js(path.read_text(encoding="utf-8")), encoding="utf-8")
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
        self.pages.close(commit=True)

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

        lunr = site / "search" / "search_index.json"
        material: dict[str, Any] = {}
        if lunr.is_file():
            material = json.loads(lunr.read_text(encoding="utf-8"))
        material["docs"] = material.get("docs") or self.other_pages
        record_urls = set()
        for bucket in (self.data.operators, self.data.chains, self.data.trees, self.data.playbooks):
            for name in bucket:
                path = self.data.path(name)
                if path:
                    record_urls.add(md.page_url(path, self.data.directory_urls))
        pages = search_index.other_pages(material, record_urls)
        if self.indexing is not None:
            self.indexing.wait()  # built beside the pages; a failure is rebuilt below
            self.indexing = None
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


#: What Material's search plugin strips from every page (with an optional space before).
_VALUED_SEARCH_ATTRIBUTE = re.compile(r'data-search-\w+="[^"]+"')


def _attributes_cleaned_only_where_present(config: MkDocsConfig, plugin: Any) -> None:
    """Material's search plugin indexes each page (kb's titles, above) and then strips
    its ``data-search-*="…"`` attributes with a regular expression tried at every
    character of the page (a tenth of a second per build, rebuilds included); a page with
    no such attribute (found by its literal start) is left as that pass would leave it."""
    events = config.plugins.events["page_context"]
    material = plugin.on_page_context

    def page_context(context: Any, *, page: Page, config: MkDocsConfig, nav: Any) -> Any:
        if _VALUED_SEARCH_ATTRIBUTE.search(page.content or ""):
            return material(context, page=page, config=config, nav=nav)
        if plugin.config.enabled:
            plugin.search_index.add_entry_from_context(page)
        return None

    for i, method in enumerate(events):
        if method == material:
            events[i] = page_context


#: Material's search worker in the page configuration (its hash changes per release).
_WORKER = re.compile(
    r'("search":\s*")([^"]*?)assets/javascripts/workers/search\.[0-9a-f]+\.min\.js"'
)


_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_CSS_SPACE = re.compile(r"\s*([{};,>])\s*")


def _minified_css(text: str) -> str:
    """A stylesheet without comments and layout (kb.css holds no strings or urls that
    could contain them; a third of its bytes, on every cold page)."""
    text = _CSS_COMMENT.sub("", text)
    text = _CSS_SPACE.sub(r"\1", text)
    return re.sub(r"\s+", " ", text).replace(";}", "}").strip() + "\n"


def _stripped_js(text: str) -> str:
    """kb's scripts without whole-line comments and indentation.  Lines stay lines, so
    automatic semicolon insertion reads the code as before; only comments that fill
    their lines go (kb.js and the worker put no code after a comment's closing mark)."""
    out: list[str] = []
    block = False
    for line in text.splitlines():
        code = line.strip()
        if block:
            block = "*/" not in code
            continue
        if code.startswith("/*"):
            block = "*/" not in code
            continue
        if code and not code.startswith("//"):
            out.append(code)
    return "\n".join(out) + "\n"


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


def _index_beside(catalog: Any) -> subprocess.Popen[bytes] | None:
    """Start building the search index of changed records in a process of its own.

    kb's search index (what the site's search shards are made from) is rebuilt after
    any record edit, and it needs none of the pages: built beside them, on the other
    core, it costs a one-record rebuild nothing it would not pay for the pages anyway.
    None when the index is already there (or lives in memory).
    """
    from kb.index.searchindex import open_terms

    if catalog.in_memory:
        return None
    table = open_terms(catalog)
    if table is not None:
        table.close()
        return None
    return _spawn_index(catalog.root)


def _spawn_index(root: Path) -> subprocess.Popen[bytes] | None:
    """``kb index`` of ``root`` in a process of its own (None when it cannot start)."""
    env = {**os.environ, "KB_RECORDS_DIR": str(root)}
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "kb", "index"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    """End an index build that is no longer wanted (the records did not compile)."""
    if proc is not None:
        proc.terminate()
        proc.wait()


_LOC = re.compile(r"<loc>([^<]*)</loc>")


def _no_sitemap_without_site_url(site: Path, config: MkDocsConfig) -> None:
    """A sitemap lists absolute URLs; without ``site_url`` MkDocs writes one with no
    ``<loc>`` at all, which crawlers reject: ship none rather than an empty one.  With
    one, keep only the addresses: MkDocs stamps every page with the build's date and
    "daily", which says nothing, and instant navigation fetches the sitemap on every
    cold page load (63 KB of the 300 KB a cold page and a search may cost, issue 34)."""
    paths = [site / "sitemap.xml", site / "sitemap.xml.gz"]
    if not config.site_url:
        for path in paths:
            path.unlink(missing_ok=True)
        return
    if not paths[0].is_file():
        return
    import gzip

    locs = _LOC.findall(paths[0].read_text(encoding="utf-8"))
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "".join(f"<url><loc>{loc}</loc></url>\n" for loc in locs)
        + "</urlset>\n"
    )
    paths[0].write_text(text, encoding="utf-8")
    paths[1].write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))


def _kb_search_worker(html: str) -> str:
    """Material runs any worker that speaks its protocol; kb's ranks like ``kb search``."""
    return _WORKER.sub(r'\1\2assets/javascripts/kb-search-worker.js"', html, count=1)


def _search_langs(config: MkDocsConfig) -> list[str]:
    for name, plugin in config.plugins.items():
        if name.endswith("search"):
            return list(getattr(plugin.config, "lang", None) or [])
    return []


def _is_record_page(src_uri: str) -> bool:
    """Record pages are in kb's own search index; other generated pages (indexes, rule
    pages, matrices) are listed by title like the hand-written ones."""
    top = src_uri.split("/", 1)[0]
    return top in KIND_DIRS.values() and not src_uri.endswith("index.md")
