"""Render the generated pages the cache lacks on every core, before MkDocs asks for them.

Markdown rendering is the largest part of a build with an empty page cache, and MkDocs
renders one page after another.  Once the navigation exists, the plugin knows each
generated page's Markdown, so the pages whose rendering is not stored are rendered in
forked worker processes (one per core) exactly as MkDocs would (``Page.render`` with the
same configuration and files, then the plugin's content hooks), and handed to
:class:`~site_plugins.page_cache.PageCache` as if they had been stored.  A page whose
rendering logs a warning is left to MkDocs, which renders it again and logs the
warning itself; where ``fork`` is missing, or there is one core, nothing changes.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

#: Fewer misses than this are rendered in the build process (forking costs more).
MIN_PAGES = 24

#: What the forked workers read (set just before the fork, inherited by the children).
_JOB: dict[str, Any] = {}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        self.seen = True


def _worker_start() -> None:
    """A worker ends quietly when the pool ends it (kb's own SIGTERM handler, inherited
    through the fork, would raise in it) and leaves Ctrl-C to the build process."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _render(chunk: list[tuple[str, str]]) -> list[tuple[str, dict[str, Any] | None]]:
    """In a worker: (page path, payload, or None when its rendering logged a warning)."""
    config, files, content = _JOB["config"], _JOB["files"], _JOB["content"]
    logger = logging.getLogger("mkdocs")
    # the build process logs what matters: a page that warns is rendered there again
    logger.handlers, logger.propagate = [], False
    out: list[tuple[str, dict[str, Any] | None]] = []
    for src, markdown in chunk:
        handler = _Collect()
        logger.addHandler(handler)
        try:
            page = files.get_file_from_path(src).page
            page.markdown = markdown
            page.render(config, files)
            html = content(page, page.content)
        except Exception:
            handler.seen = True
        finally:
            logger.removeHandler(handler)
        if handler.seen:
            out.append((src, None))
            continue
        out.append((src, _payload(page, html)))
    return out


def _payload(page: Any, html: str) -> dict[str, Any]:
    from site_plugins.page_cache import _toc_tokens

    return {
        "content": html,
        "toc": _toc_tokens(page.toc),
        "title": page._title_from_render,
        "anchors": sorted(page.present_anchor_ids or ()),
        "links": {f.src_uri: anchors for f, anchors in (page.links_to_anchors or {}).items()},
    }


def prerender(
    pages: dict[str, str],
    config: Any,
    files: Any,
    content: Callable[[Any, str], str],
) -> dict[str, dict[str, Any]]:
    """Render ``pages`` (path → Markdown) in worker processes; path → payload for each
    page rendered without a warning.  ``content`` is the plugin's content hook."""
    workers = min(os.cpu_count() or 1, 4)
    if workers < 2 or len(pages) < MIN_PAGES:
        return {}
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return {}
    items = sorted(pages.items())
    chunks = [items[i :: workers * 4] for i in range(workers * 4)]
    _JOB.update(config=config, files=files, content=content)
    try:
        pool = context.Pool(workers, initializer=_worker_start)
    except OSError:
        _JOB.clear()
        return {}
    try:
        done = pool.map(_render, chunks)
        pool.close()
    except (OSError, RuntimeError):
        pool.terminate()
        return {}
    finally:
        pool.join()
        _JOB.clear()
    return {src: payload for part in done for src, payload in part if payload is not None}
