"""Rendered pages reused by content hash: a build renders only the pages whose inputs changed.

Rendering Markdown and the theme's template is most of a build, yet a one-word edit of one
record changes the Markdown of a handful of pages.  Each page is cached twice, in kb's cache
directory, keyed by the digest of everything that goes into it:

* its **rendering** (HTML body, table of contents, title, anchors and links to other
  pages' anchors), by the code version (kb, the site plugin, Python), the libraries'
  versions, the Markdown extensions and their settings, every file's path and URL, the
  page's path, front matter and the Markdown itself, as the plugin's hooks leave it;
* its **output** (the whole HTML file, minified), by all of that, the configuration the
  theme reads, the whole navigation (every title and URL, so a renamed page re-renders
  every page that lists it) and the page's own rendering.

A page whose key is stored is restored instead of rendered; MkDocs still checks its links
to other pages' anchors from what is restored.  Nothing rendered while MkDocs logged a
warning is stored, so a strict build that failed never turns into a cached success.
Entries carry a digest of their payload, checked on load; an unreadable, corrupt or
unwritable cache only costs the rendering.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb.catalog.compiled import root_key
from kb.core.paths import cache_dir
from site_plugins.build_cache import _versions, code_version, digest
from site_plugins.reads import Generation

#: Bump when what an entry holds (or how it is keyed) changes.
CACHE_VERSION = "1"
#: Entries unused for this long are dropped after a build.
KEEP_SECONDS = 14 * 24 * 3600
#: An entry's last use is written again once it is this old (not after every build).
REFRESH_SECONDS = 24 * 3600
LIBRARIES = (
    "mkdocs",
    "mkdocs-material",
    "markdown",
    "pymdown-extensions",
    "pygments",
    "nh3",
    "minify-html",
)

log = logging.getLogger("mkdocs.plugins.kb-records")


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _toc_tokens(toc: Any) -> list[dict[str, Any]]:
    return [
        {
            "level": item.level,
            "id": item.id,
            "name": item.title,
            "children": _toc_tokens(item.children),
        }
        for item in toc or []
    ]


def nav_digest(nav: Any) -> str:
    """Every entry of the navigation: kind, title and URL, in order."""

    def walk(items: Any) -> list[Any]:
        out: list[Any] = []
        for item in items:
            out.append(
                [
                    type(item).__name__,
                    getattr(item, "title", None),
                    getattr(item, "url", None),
                    getattr(item, "meta", None),  # the theme reads icons and status there
                    walk(getattr(item, "children", None) or []),
                ]
            )
        return out

    return digest(_json(walk(nav.items)))


def config_digest(config: Any) -> str:
    """What the theme's templates read of the configuration (all of it, as text)."""
    keys = sorted(k for k in config if k not in ("plugins", "nav", "site_dir"))
    shown = {k: config.get(k) for k in keys}
    shown["theme"] = {
        "name": config.theme.name,
        "dirs": config.theme.dirs,
        **{k: config.theme.get(k) for k in sorted(config.theme.keys())},
    }
    shown["plugins"] = {name: dict(p.config) for name, p in config.plugins.items()}
    return digest(_json(shown), _theme_overrides(config.theme.dirs))


def _theme_overrides(dirs: list[str]) -> str:
    """The bytes of template directories that are not an installed theme's (a
    ``custom_dir``): installed themes are keyed by their version instead."""
    import site
    import sysconfig

    installed = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    parts = []
    for directory in dirs:
        if any(Path(directory).is_relative_to(base) for base in installed):
            continue
        for path in sorted(Path(directory).rglob("*")):
            if path.is_file():
                parts += [path.as_posix(), digest(path.read_bytes().hex())]
    return digest(*parts)


class _Warnings(logging.Handler):
    """Notes every warning MkDocs logs during a build, and the page it came with."""

    def __init__(self, config: Any) -> None:
        super().__init__(logging.WARNING)
        self.config = config
        self.any = False
        self.pages: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.any = True
        page = getattr(self.config, "_current_page", None)
        if page is not None:
            self.pages.add(page.file.src_uri)


class PageCache:
    """One build's view of the stored pages: what it found, what it made."""

    def __init__(self, root: Path, config: Any) -> None:
        self.path = cache_dir() / f"site-pages-{CACHE_VERSION}-{root_key(root)}.sqlite"
        self.config = config
        self.base = digest(code_version(), _versions(*LIBRARIES))
        self.render_base = ""
        self.output_base = ""
        self.new: dict[str, str] = {}
        self.used: set[str] = set()
        self.restored: set[str] = set()  # pages whose rendering came from the cache
        self.finished: set[str] = set()  # pages whose whole output came from the cache
        self.output_keys: dict[str, str] = {}
        self.prerendered: dict[str, dict[str, Any]] = {}  # rendered by site_plugins.prerender
        self.fetched: dict[str, dict[str, Any]] = {}  # loaded ahead of use (fetch)
        self.now = time.time()
        self.warnings = _Warnings(config)
        logging.getLogger("mkdocs").addHandler(self.warnings)
        self._con: sqlite3.Connection | None = None
        self._open()

    # -- storage --------------------------------------------------------------------

    def _open(self) -> None:
        from kb.core.cache import open_store

        schema = (
            "CREATE TABLE IF NOT EXISTS pages "
            "(key TEXT PRIMARY KEY, payload TEXT NOT NULL, digest TEXT NOT NULL, used REAL);"
        )
        self._con = open_store(self.path, schema, timeout=10)

    def _load(self, key: str) -> dict[str, Any] | None:
        if key in self.prerendered:
            return self.prerendered[key]
        if key in self.fetched:
            return self.fetched[key]
        if self._con is None:
            return None
        try:
            row = self._con.execute(
                "SELECT payload, digest, used FROM pages WHERE key = ?", (key,)
            ).fetchone()
        except sqlite3.Error:
            self._con = None
            return None
        return self._checked(key, row)

    def _checked(self, key: str, row: tuple[Any, ...] | None) -> dict[str, Any] | None:
        """The payload of a stored row that passes its digest, else None."""
        if row is None or not isinstance(row[0], str) or digest(row[0]) != row[1]:
            return None
        try:
            payload = json.loads(row[0])
        except ValueError:
            return None
        if not isinstance(payload, dict):
            return None
        if not isinstance(row[2], (int, float)) or row[2] < self.now - REFRESH_SECONDS:
            self.used.add(key)  # its last use is refreshed after the build
        return payload

    def fetch(self, keys: list[str]) -> None:
        """Load the stored payloads of ``keys`` in a few queries (not one per key): what
        this build will ask for, checked as :meth:`_load` checks them."""
        if self._con is None:
            return
        wanted = [k for k in dict.fromkeys(keys) if k not in self.fetched]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            try:
                rows = self._con.execute(
                    f"SELECT key, payload, digest, used FROM pages WHERE key IN ({marks})", part
                ).fetchall()
            except sqlite3.Error:
                self._con = None
                return
            for key, *row in rows:
                payload = self._checked(key, tuple(row))
                if payload is not None:
                    self.fetched[key] = payload

    def _remember(self, key: str, payload: dict[str, Any], src_uri: str) -> None:
        if src_uri not in self.warnings.pages:
            self.new[key] = _json(payload)

    def load(self, key: str) -> dict[str, Any] | None:
        """A stored payload (generated Markdown, site_plugins/reads.py), or None."""
        return self._load(key)

    def keep(self, key: str, payload: dict[str, Any]) -> None:
        """Store ``payload`` when the build succeeds without a warning."""
        self.new[key] = _json(payload)

    def generation(self, data: Any, digests: dict[str, str] | None = None) -> Generation:
        """Generated pages of ``data`` reused by what they read of its records
        (``digests``: each record's content digest, from the catalog)."""
        base = digest(self.base, _json([data.rule_reports, data.directory_urls]))
        return Generation(data.buckets(), data.reads, base, self.load, self.keep, digests)

    def close(self, *, commit: bool) -> None:
        """Store what this build made (unless it logged a warning) and let go."""
        logging.getLogger("mkdocs").removeHandler(self.warnings)
        con, self._con = self._con, None
        if con is None:
            return
        try:
            if commit and not self.warnings.any:
                now = self.now
                with con:
                    con.executemany(
                        "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)",
                        [(k, v, digest(v), now) for k, v in self.new.items()],
                    )
                    con.executemany(
                        "UPDATE pages SET used = ? WHERE key = ?", [(now, k) for k in self.used]
                    )
                    con.execute("DELETE FROM pages WHERE used < ?", (now - KEEP_SECONDS,))
        except sqlite3.Error as exc:
            log.debug(f"page cache not written: {exc}")
        finally:
            with contextlib.suppress(sqlite3.Error):
                con.close()

    # -- rendering ------------------------------------------------------------------

    def start_rendering(self, files: Any) -> None:
        """Key every rendering on the files as they are once the plugins added theirs."""
        config = self.config
        every = sorted((f.src_uri, f.url) for f in files)
        self.render_base = digest(
            self.base,
            _json([config.markdown_extensions, config.mdx_configs]),
            _json([config.use_directory_urls, config.validation]),
            _json(every),
        )

    def render_key(self, src_uri: str, meta: object, markdown: str) -> str:
        return digest(self.render_base, src_uri, _json(meta), markdown)

    def missing(self, pages: dict[str, str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Of ``pages`` (path → source text), those with no stored rendering, as the
        Markdown and front matter MkDocs reads from them."""
        from mkdocs.utils.meta import get_data

        read = {src: get_data(text) for src, text in pages.items()}
        keys = {src: self.render_key(src, meta, markdown) for src, (markdown, meta) in read.items()}
        self.fetch(list(keys.values()))  # MkDocs asks for each again when it renders the page
        return {src: read[src] for src, key in keys.items() if self._load(key) is None}

    def adopt(
        self, src_uri: str, read: tuple[str, dict[str, Any]], payload: dict[str, Any]
    ) -> None:
        """A rendering made elsewhere (a worker process): restored like a stored one."""
        key = self.render_key(src_uri, read[1], read[0])
        self.prerendered[key] = payload
        self.new[key] = _json(payload)

    def rendering(self, page: Any, markdown: str) -> None:
        """Before MkDocs renders ``page``: restore a stored rendering in its place."""
        key = self.render_key(page.file.src_uri, page.meta, markdown)
        page.kb_render_key = key
        stored = self._load(key)
        if stored is None:
            return

        def restore(config: Any, files: Any) -> None:
            from mkdocs.structure.toc import get_toc

            page.content = stored["content"]
            page.toc = get_toc(stored["toc"])
            page._title_from_render = stored["title"]
            page.present_anchor_ids = set(stored["anchors"])
            links = {}
            for uri, anchors in stored["links"].items():
                target = files.get_file_from_path(uri)
                if target is not None:
                    links[target] = anchors
            page.links_to_anchors = links

        page.render = restore
        self.restored.add(page.file.src_uri)

    def rendered(self, page: Any, content: str) -> None:
        """After the content hooks: store a fresh rendering."""
        src = page.file.src_uri
        key = getattr(page, "kb_render_key", None)
        if key is None or src in self.restored:
            return
        payload = {
            "content": content,
            "toc": _toc_tokens(page.toc),
            "title": page._title_from_render,
            "anchors": sorted(page.present_anchor_ids or ()),
            "links": {f.src_uri: anchors for f, anchors in (page.links_to_anchors or {}).items()},
        }
        self._remember(key, payload, src)

    # -- output ---------------------------------------------------------------------

    def start_output(self, nav: Any) -> None:
        """Key every output on the whole navigation and configuration (all pages read)."""
        self.output_base = digest(self.render_base, config_digest(self.config), nav_digest(nav))

    def wrap_templates(self, env: Any) -> None:
        """Pages whose output is stored skip the theme's template; the templates
        themselves are compiled once, not per build (jinja's bytecode, kept here)."""
        if env.bytecode_cache is None:
            env.bytecode_cache = _template_code(self)
        get_template = env.get_template

        def cached_get_template(name: Any, *args: Any, **kwargs: Any) -> Any:
            template = get_template(name, *args, **kwargs)
            # only the page template MkDocs asks for by name while building a page; what
            # jinja asks for itself (extends, include: with a parent) stays as it is
            if args or kwargs or getattr(self.config, "_current_page", None) is None:
                return template
            return _Template(template, self)

        env.get_template = cached_get_template

    def output_key(self, page: Any) -> str:
        return digest(
            self.output_base,
            page.file.src_uri,
            page.url,
            str(page.title),
            _json(page.meta),
            _json(_toc_tokens(page.toc)),
            page.content or "",
        )

    def finish(self, page: Any, output: str, process: Callable[[str], str]) -> str:
        """``on_post_page``: a stored output as it is, or a fresh one processed and kept."""
        src = page.file.src_uri
        if src in self.finished:
            return output
        final = process(output)
        key = self.output_keys.get(src)
        if key is not None:
            self._remember(key, {"html": final}, src)
        return final


class _Template:
    """A theme template that answers a page from the cache when it can."""

    def __init__(self, template: Any, cache: PageCache) -> None:
        self._template = template
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)

    def render(self, context: Any) -> str:
        page = context.get("page") if hasattr(context, "get") else None
        cache = self._cache
        if page is None or getattr(page, "file", None) is None or not cache.output_base:
            return str(self._template.render(context))
        key = cache.output_key(page)
        stored = cache._load(key)
        if stored is not None and isinstance(stored.get("html"), str):
            cache.finished.add(page.file.src_uri)
            return str(stored["html"])
        cache.output_keys[page.file.src_uri] = key
        return str(self._template.render(context))


def _template_code(cache: PageCache) -> Any:
    """A jinja bytecode cache in the page cache: compiling the theme's templates is a
    fixed cost of every build, a large part of a one-record rebuild.  Jinja keys each
    entry by the template's name and source and refuses code of another Python or jinja
    release; the entry's digest catches a damaged one."""
    import base64

    from jinja2 import BytecodeCache

    class TemplateCode(BytecodeCache):  # type: ignore[misc]
        def _key(self, bucket: Any) -> str:
            return digest(cache.base, "template", bucket.key, bucket.checksum)

        def load_bytecode(self, bucket: Any) -> None:
            stored = cache._load(self._key(bucket))
            code = stored.get("code") if stored else None
            if isinstance(code, str):
                bucket.bytecode_from_string(base64.b64decode(code))

        def dump_bytecode(self, bucket: Any) -> None:
            code = base64.b64encode(bucket.bytecode_to_string()).decode("ascii")
            cache.keep(self._key(bucket), {"code": code})

    return TemplateCode()
