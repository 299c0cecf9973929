"""The built site in Debian's headless Chromium: it renders, searches, draws diagrams.

The site is built from the real records, served from 127.0.0.1 on a free port, and
driven through Playwright with the system browser (never a downloaded one).  A failing
test leaves a screenshot in test-artifacts/.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kb.cli import main
from kb.compiled import open_catalog

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
#: Material draws Mermaid into a closed shadow root; open it so the test can see the SVG.
OPEN_SHADOW_ROOTS = (
    "const attach = Element.prototype.attachShadow;"
    "Element.prototype.attachShadow = function (init) {"
    "  return attach.call(this, Object.assign({}, init, {mode: 'open'}));"
    "};"
)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("browser") / "site"
    assert main(["site", "build", "-q", "--site-dir", str(site)]) == 0
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def tree_url(site_url: str) -> str:
    trees = open_catalog().names("tree")
    assert trees, "no decision tree record: the tree test needs one"
    return f"{site_url}trees/{trees[0]}/"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


class Page:
    """A browser page that records console errors (screenshots: screenshot_on_failure)."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(OPEN_SHADOW_ROOTS)
    try:
        yield Page(context.new_page(), request.node.name)
    finally:
        context.close()


@contextmanager
def screenshot_on_failure(p: Page) -> Iterator[None]:
    try:
        yield
        assert not p.errors, f"console errors: {p.errors}"
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        p.page.screenshot(path=str(ARTIFACTS / f"{p.name}.png"), full_page=True)
        raise


def search(p: Page, base: str, query: str) -> list[str]:
    """Type into Material's search box; the result links, best first."""
    p.page.goto(base)
    box = p.page.locator("input.md-search__input")
    box.click()
    box.fill(query)
    box.press("End")
    p.page.wait_for_selector(".md-search-result__item", timeout=15000)
    links = p.page.locator(".md-search-result__item > a.md-search-result__link")
    return [links.nth(i).get_attribute("href") or "" for i in range(links.count())]


def test_home_page_renders(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(site_url)
        title = page.page.locator("article h1").first.inner_text()
        assert title.rstrip("¶").strip() == "torch_npu fused operators"
        tabs = page.page.locator(".md-tabs__link").all_inner_texts()
        assert [t.strip() for t in tabs][:3] == ["Home", "Guides", "Operators"]
        assert page.page.locator(".md-search__input").is_visible()


def test_search_finds_an_operator_by_name_first(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "npu_mla_prolog_v3")
        assert hits and "/operators/npu_mla_prolog_v3/" in hits[0], hits[:5]


def test_search_finds_the_prefetch_page_for_a_chinese_query(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "权重预取")
        wanted = ("/playbooks/prefetch/", "/operators/npu_prefetch/", "/guides/prefetch-workflow/")
        assert hits and any(w in hits[0] for w in wanted), hits[:5]


def test_decision_tree_renders_as_svg_with_links(page: Page, tree_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(tree_url)
        svg = page.page.locator(".mermaid svg").first
        svg.wait_for(state="visible", timeout=15000)
        assert page.page.locator(".mermaid svg .node").count() >= 3
        links = page.page.locator(".mermaid svg a")
        assert links.count() >= 1
        links.first.click()
        page.page.wait_for_load_state()
        assert page.page.url != tree_url
        assert page.page.locator("article h1").count() == 1


def test_operator_page_shows_its_parameter_table(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}operators/npu_mla_prolog_v3/")
        table = page.page.locator("h2#parameters ~ .md-typeset__scrollwrap table").first
        headers = [h.strip() for h in table.locator("th").all_inner_texts()]
        assert headers[:4] == ["Name", "Type", "Default", "Dtypes"]
        first_row = table.locator("tbody tr").first.inner_text()
        assert "token_x" in first_row and "bfloat16" in first_row
        copy_button = 'button[data-md-type="copy"]'  # Material's code copy button
        page.page.wait_for_selector(copy_button, state="attached", timeout=10000)
