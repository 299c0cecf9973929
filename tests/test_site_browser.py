"""The built site in Debian's headless Chromium, at a desktop (1280 px) and a phone (390 px).

The real site and the fixture site are built once per test session (tests/site_builds.py),
served from 127.0.0.1 on a free port, and driven through Playwright with the system
browser (never a downloaded one).  A failing test leaves a screenshot in
test-artifacts/.  What is checked is what a reader meets: operator, tree and matrix
pages whose tables and diagrams fit their box, chain variants drawn as branches, product
chips a phone can read, search that forgives a typo and ranks like the CLI, filters,
diagrams that link without any diagram script, page Markdown for agents, and record
text that cannot run script.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from site_builds import FixtureSite, RealSite

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
#: How long a page may take to show what a test waits for.  Waits end as soon as the page
#: is there: this bounds a hang on a loaded machine, it asserts no speed (the benchmark
#: measures that).
PATIENCE_MS = 60_000
WIDTHS = {"desktop": 1280, "phone": 390}
#: Every visible table and diagram in the article that is wider than its box: a table
#: wider than its scroll wrapper (or the article), a wrapper that scrolls sideways, a
#: diagram reaching past the article or a box reaching past its diagram; and a page
#: that scrolls sideways.
TOO_WIDE = """() => {
  const article = document.querySelector("article");
  const box = article.getBoundingClientRect();
  const out = [];
  const visible = e => e.getClientRects().length > 0 && e.getBoundingClientRect().width > 0;
  for (const t of article.querySelectorAll("table")) {
    if (!visible(t)) continue;
    const wrap = t.closest(".md-typeset__scrollwrap") || t.parentElement;
    const w = t.getBoundingClientRect().width;
    if (w > wrap.clientWidth + 1 || wrap.scrollWidth > wrap.clientWidth + 1)
      out.push(`table ${Math.round(w)}px in ${wrap.clientWidth}px: ${t.innerText.slice(0, 40)}`);
  }
  for (const d of article.querySelectorAll(".kb-diagram")) {
    if (!visible(d)) continue;
    const r = d.getBoundingClientRect();
    if (r.right > box.right + 1) out.push(`diagram ${Math.round(r.width)}px past the article`);
    for (const n of d.querySelectorAll(".kb-node")) {
      const nr = n.getBoundingClientRect();
      if (nr.right > r.right + 1) out.push(`box past its diagram: ${n.innerText.slice(0, 40)}`);
    }
  }
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1)
    out.push(`page ${root.scrollWidth}px wide in ${root.clientWidth}px`);
  return out;
}"""

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
    pytest.mark.heavy,  # builds both sites and drives Chromium: started first
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(http.server.ThreadingHTTPServer):
    #: Chromium opens several connections per page; on a loaded machine the default
    #: backlog of 5 overflows, the kernel drops the SYNs and the browser's retries back
    #: off past a page load's patience.
    request_queue_size = 128


@contextmanager
def serve(directory: Path, port: int) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = Server(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site_url(real_site: RealSite) -> Iterator[str]:
    with serve(real_site.path, real_site.port) as url:
        yield url


@pytest.fixture(scope="module")
def fixture_url(fixture_site: FixtureSite) -> Iterator[str]:
    with serve(fixture_site.path, fixture_site.port) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=PATIENCE_MS)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


class Page:
    """A browser page that records console errors, dialogs and requests off the site."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))

        def dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)

    def offsite(self, base: str) -> list[str]:
        return [u for u in self.requests if not u.startswith((base, "data:", "blob:"))]


def open_page(browser: Any, request: pytest.FixtureRequest, width: int) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(PATIENCE_MS)
    try:
        yield Page(context.new_page(), f"{request.node.name}")
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    yield from open_page(browser, request, WIDTHS["desktop"])


@pytest.fixture(params=list(WIDTHS))
def sized_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    yield from open_page(browser, request, WIDTHS[request.param])


@contextmanager
def screenshot_on_failure(p: Page) -> Iterator[None]:
    try:
        yield
        assert not p.errors, f"console errors: {p.errors}"
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in p.name)
        p.page.screenshot(path=str(ARTIFACTS / f"{safe}.png"), full_page=True)
        raise


def open_search(p: Page, base: str, query: str) -> None:
    """Search from ``base`` (loaded first), or from the current page when it is empty."""
    if base:  # the search box works once the theme's script ran, before images and fonts
        p.page.goto(base, wait_until="domcontentloaded")
    p.page.locator("label.md-search__icon, .md-search__input").first.click()
    box = p.page.locator("input.md-search__input")
    box.fill(query)
    box.press("End")


#: Results shown; a search box that closed again (on a loaded machine a content swap's
#: late events can close it right after the click that opened it) is opened again.
RESULTS_SHOWN = """() => {
  const toggle = document.getElementById("__search");
  const input = document.querySelector("input.md-search__input");
  if (toggle && !toggle.checked && input) { input.blur(); input.focus(); }
  const item = document.querySelector(".md-search-result__item");
  return !!item && item.getClientRects().length > 0;
}"""

#: The same, and a query typed before the search worker answered is passed on again as
#: the keyup Material queries on: for tests about what a search finds or loads, not about
#: how the text arrived (the pasted-query test keeps RESULTS_SHOWN, which never types).
#: Material sends a value only when it differs from the last one sent, so a query whose
#: keyup it never saw (a content swap that re-mounts the box under the typing) is sent
#: again every few seconds by passing through the empty value.  A worker that failed says
#: so on the console, which every test asserts clean.
RESULTS_OF_TYPED = """() => {
  const item = document.querySelector(".md-search-result__item");
  if (!!item && item.getClientRects().length > 0) return true;
  const toggle = document.getElementById("__search");
  const input = document.querySelector("input.md-search__input");
  if (!input) return false;
  // a content swap's late events can close the box after the click that opened it, and
  // Material only reopens it on a focus change it has not seen: open it as its label does
  if (toggle && !toggle.checked) { toggle.click(); input.focus(); }
  window.__kbPolls = (window.__kbPolls || 0) + 1;
  if (window.__kbPolls % 12 === 0 && input.value) {
    const value = input.value;
    input.value = "";
    input.dispatchEvent(new KeyboardEvent("keyup"));
    input.value = value;
  }
  input.dispatchEvent(new KeyboardEvent("keyup"));
  return false;
}"""

#: What the search box shows, for the message of a search that never answered.
SEARCH_STATE = """() => {
  const toggle = document.getElementById("__search");
  const input = document.querySelector("input.md-search__input");
  const meta = document.querySelector(".md-search-result__meta");
  return {
    url: location.href,
    open: toggle ? toggle.checked : null,
    value: input ? input.value : null,
    focused: document.activeElement === input,
    meta: meta ? meta.textContent : null,
    items: document.querySelectorAll(".md-search-result__item").length,
  };
}"""


def search(p: Page, base: str, query: str) -> list[str]:
    """Type into Material's search box; the result links, best first."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    open_search(p, base, query)
    try:
        p.page.wait_for_function(RESULTS_OF_TYPED, polling=250)
    except PlaywrightTimeout:
        state = p.page.evaluate(SEARCH_STATE)
        raise AssertionError(
            f"no results for {query!r}: {state}; console: {p.errors}; "
            f"requests: {[u for u in p.requests if '/search' in u]}"
        ) from None
    links = p.page.locator(".md-search-result__item > a.md-search-result__link")
    return [links.nth(i).get_attribute("href") or "" for i in range(links.count())]


def wait_for_title(p: Page, title: str) -> None:
    """Instant navigation changes the URL before it swaps the content: wait for the page
    (whether it arrives by a swap or by a full load)."""
    from playwright.sync_api import expect

    expect(p.page.locator("article.md-content__inner h1")).to_have_text(
        re.compile("^" + re.escape(title))
    )


# -- pages that fit ----------------------------------------------------------------------

FITTING_PAGES = [
    "operators/npu_mla_prolog_v3/",
    "operators/npu_fused_infer_attention_score_v2/",
    "operators/",
    "categories/",
    "status/stable/",
    "chains/",
    "rules/",
    "playbooks/prefetch/",
    "candidate-list/",
    "contributing/",
    "trees/moe/",
    "trees/attention/",
    "chains/mla-absorb-decode/",
    "matrices/products/",
    "matrices/quantization/",
    "matrices/versions/",
]
#: Table text broken inside a token: a line break inside one text node that does not
#: follow white space, a hyphen, a slash, a comma or Chinese text and its punctuation
#: (which break between characters; identifiers break only at the <wbr>
#: the site puts after underscores, which starts a new text node).
BROKEN_TOKENS = """() => {
  const out = [];
  const range = document.createRange();
  for (const cell of document.querySelectorAll("article table td, article table th")) {
    if (!cell.getClientRects().length) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      let top = null;
      for (let i = 0; i < text.length; i++) {
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (!rects.length) continue;
        const t = Math.round(rects[0].top);
        if (top !== null && t > top + 2 && !/[\\s\\-\\/,\\u3000-\\u303f\\u3400-\\u9fff\\uff00-\\uffef]/.test(text[i - 1]) && !/\\s/.test(text[i]))
          out.push(text.slice(Math.max(0, i - 12), i) + "|" + text.slice(i, i + 12));
        top = t;
      }
    }
  }
  return out;
}"""


@pytest.mark.parametrize("path", FITTING_PAGES)
def test_tables_and_diagrams_fit_their_box(sized_page: Page, site_url: str, path: str) -> None:
    p = sized_page
    with screenshot_on_failure(p):
        p.page.goto(site_url + path)
        p.page.wait_for_load_state("networkidle")
        assert p.page.locator("article.md-content__inner h1").count() == 1
        assert p.page.evaluate(TOO_WIDE) == []
        assert p.page.evaluate(BROKEN_TOKENS) == []  # no "KB00" / "1"
        assert p.offsite(site_url) == []


@pytest.mark.parametrize(
    "path",
    ["operators/npu_fused_infer_attention_score_v2/", "chains/gqa-paged-fa-v1/", "rules/KB101/"],
)
def test_nav_labels_show_whole_and_distinct(sized_page: Page, site_url: str, path: str) -> None:
    """A sidebar label the theme cannot wrap is cut, and FIA v1 and v2 were cut to the
    same text: every label of the open section shows whole, and no two read the same."""
    p = sized_page
    with screenshot_on_failure(p):
        p.page.goto(site_url + path)
        p.page.wait_for_load_state("networkidle")
        labels = p.page.evaluate(
            """() => [...document.querySelectorAll("nav.md-nav--primary .md-nav__link .md-ellipsis")]
              .filter(e => e.getClientRects().length && e.closest("li:not([hidden])"))
              .map(e => [e.innerText.trim(), e.scrollWidth <= e.clientWidth + 1])"""
        )
        assert len(labels) > 5
        assert [text for text, whole in labels if not whole] == []
        siblings = p.page.evaluate(
            """() => [...document.querySelectorAll("nav.md-nav--primary .md-nav__list")].map(
              l => [...l.children].map(li => li.querySelector(":scope > .md-nav__link .md-ellipsis, :scope > label .md-ellipsis, :scope > a .md-ellipsis"))
                .filter(Boolean).map(e => e.innerText.trim()))"""
        )
        for group in siblings:
            assert len(group) == len(set(group)), group


def test_operator_page_answers_first(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}operators/npu_mla_prolog_v3/")
        card = page.page.locator("article .kb-card")
        assert "Atlas A3" in card.inner_text() and "torch_npu" in card.inner_text()
        example = page.page.locator("article h2#example ~ div.highlight").first
        signature = page.page.locator("article h2#signature")
        # The first example starts within the first two screens, before the signature.
        top = example.bounding_box()["y"]
        assert top < 1800 and top < signature.bounding_box()["y"]
        params = page.page.locator("h2#parameters ~ .kb-params dt").all_inner_texts()
        assert params[0].startswith("token_x · Tensor · required")
        # Search terms are indexed, not shown; no mermaid script on a page without diagrams.
        assert not page.page.locator("article .kb-terms").is_visible()
        assert not [u for u in page.requests if "mermaid" in u]
        page.page.wait_for_selector('button[data-md-type="copy"]', state="attached")


def test_trees_draw_a_map_and_every_step_and_fold_on_a_phone(
    browser: Any, request, site_url: str
) -> None:
    for width in WIDTHS.values():
        for p in open_page(browser, request, width):
            with screenshot_on_failure(p):
                p.page.goto(f"{site_url}trees/moe/")
                steps = p.page.locator("article details.question")
                assert steps.count() >= 5
                # the map (every question once) and each step's answers as branches,
                # drawn at every width, with no diagram script
                questions = p.page.locator("article .kb-map a.kb-node--question")
                assert questions.count() == steps.count()
                assert p.page.locator("article .kb-map").is_visible()
                branches = p.page.locator("article details.question .kb-branches")
                assert branches.count() == steps.count() and branches.first.is_visible()
                assert not [u for u in p.requests if "mermaid" in u.lower()]
                assert p.page.evaluate(TOO_WIDE) == []
                if width == WIDTHS["phone"]:
                    summary = steps.first.locator("summary")
                    summary.click()
                    assert steps.first.get_attribute("open") is None  # it folds


def test_tree_nodes_are_links(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}trees/attention/")
        links = page.page.locator("article .kb-map a.kb-node, article .kb-branches a.kb-node")
        assert links.count() >= 5
        for i in range(links.count()):
            box = links.nth(i).bounding_box()
            assert box and box["width"] > 0 and box["x"] + box["width"] <= 1280
        hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
        # (instant navigation makes every href absolute)
        question = next(i for i, h in enumerate(hrefs) if "#q-" in h)
        links.nth(question).click()
        page.page.wait_for_url("**#q-*")
        chain = next(i for i, h in enumerate(hrefs) if "chains/" in h)
        links.nth(chain).click()
        page.page.wait_for_url("**/chains/**")
        assert page.page.locator("article.md-content__inner h1").count() == 1


def test_chain_variants_are_branches_of_one_step(sized_page: Page, site_url: str) -> None:
    """A chain with scheme variants draws each variant as a labelled branch of one step
    (side by side on a desktop), never as steps one after another."""
    p = sized_page
    with screenshot_on_failure(p):
        p.page.goto(f"{site_url}chains/mla-absorb-decode/")
        p.page.wait_for_load_state("networkidle")
        forks = p.page.locator("article .kb-flow .kb-flow__step--fork")
        assert forks.count() >= 1
        fork = forks.first
        assert fork.locator(".kb-flow__fork").inner_text().endswith("one of")
        branches = fork.locator(".kb-flow__branch")
        assert branches.count() >= 2
        schemes = fork.locator(".kb-flow__scheme").all_inner_texts()
        assert len(schemes) == branches.count() and len(set(schemes)) == len(schemes)
        links = fork.locator("a.kb-node--operator")
        assert links.count() == branches.count()
        assert all(
            "/operators/" in (links.nth(i).get_attribute("href") or "")
            for i in range(links.count())
        )
        if p.page.viewport_size["width"] == WIDTHS["desktop"]:
            tops = {round(branches.nth(i).bounding_box()["y"]) for i in range(branches.count())}
            assert len(tops) == 1  # side by side
        # the stage list says the same in words
        assert p.page.locator("article li", has_text="one of, by scheme").count() >= 1
        assert p.page.evaluate(TOO_WIDE) == []
        assert not [u for u in p.requests if "mermaid" in u.lower()]


def test_product_chips_read_on_a_phone_without_hover(browser: Any, request, site_url: str) -> None:
    """Supported and unsupported products differ in text (a mark and the product's own
    name), not only in a tooltip; at 390 px every chip shows whole, inside the screen."""
    from kb.catalog.compiled import open_catalog
    from site_plugins import products

    mixed = next(
        op["name"]
        for op in open_catalog().records()
        if op.get("kind") == "operator"
        and {products.YES, products.NO} <= {products.support(op, f) for f in products.families()}
    )
    for p in open_page(browser, request, WIDTHS["phone"]):
        with screenshot_on_failure(p):
            p.page.goto(f"{site_url}operators/{mixed}/")
            chips = p.page.locator(
                "article .kb-card .kb-chip--yes, article .kb-card .kb-chip--no,"
                " article .kb-card .kb-chip--partial"
            )
            texts = chips.all_inner_texts()
            assert len(texts) >= 2 and len(set(texts)) == len(texts), texts
            marks = {t[0] for t in texts}
            assert {products.MARKS[products.YES], products.MARKS[products.NO]} <= marks
            for i in range(chips.count()):
                chip = chips.nth(i)
                assert chip.is_visible()
                box = chip.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= WIDTHS["phone"]
                assert chip.evaluate("c => c.scrollWidth <= c.clientWidth + 1"), texts[i]
            assert p.page.evaluate(TOO_WIDE) == []


def test_pages_ship_markdown_for_agents(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        index = page.page.request.get(f"{site_url}llms.txt")
        assert index.ok and "(operators/npu_rms_norm/index.md)" in index.text()
        copy = page.page.request.get(f"{site_url}operators/npu_rms_norm/index.md")
        assert copy.ok
        text = copy.text()
        assert text.startswith("# npu_rms_norm\n") and "## Parameters" in text
        assert "<span" not in text and "<div" not in text


def test_operator_filter_by_product_and_release(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}operators/")
        rows = page.page.locator("#kb-operators tbody tr")
        total = rows.count()
        assert total > 200
        visible = "#kb-operators tbody tr:not([hidden])"
        page.page.select_option("select[data-kb-attr=data-products]", "ascend-950")
        on_950 = page.page.locator(visible).count()
        assert 0 < on_950 < total
        page.page.select_option("select[data-kb-attr=data-rel]", label="2.1.0.post8")
        both = page.page.locator(visible).count()
        assert both < on_950
        page.page.fill(".kb-filter input[type=search]", "npu_mla_prolog_v3")
        assert page.page.locator(visible).count() <= 1


def test_matrix_filter_hides_empty_categories(sized_page: Page, site_url: str) -> None:
    p = sized_page
    with screenshot_on_failure(p):
        p.page.goto(f"{site_url}matrices/products/")
        groups = p.page.locator("[data-kb-group]")
        assert groups.count() > 5
        p.page.fill(".kb-filter input[type=search]", "npu_mla_prolog_v3")
        assert p.page.locator("[data-kb-group]:not([hidden])").count() == 1
        assert p.page.locator("#kb-matrix tbody tr:not([hidden])").count() == 1


def instant_navigation_ready(p: Page) -> None:
    """Material swaps content only for links its sitemap lists: wait until it has the
    sitemap (a click before that loads the page whole, which is right, but not the point)."""
    p.page.wait_for_load_state("networkidle")
    p.page.wait_for_function(
        "() => performance.getEntriesByType('resource')"
        ".some(e => e.name.endsWith('/sitemap.xml') && e.responseEnd > 0)"
    )


def test_navigation_is_instant_and_search_loads_once(page: Page, site_url: str) -> None:
    """One page load, then content swaps: the search index is fetched once per visit.
    Each step waits for what it is about (the swapped title), however long the machine
    takes; nothing here is timed."""
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}operators/npu_rms_norm/")
        instant_navigation_ready(page)
        page.page.evaluate("window.__kb_marker = 1")
        page.page.locator("nav.md-nav--primary a[href*='npu_add_rms_norm']").first.click()
        wait_for_title(page, "npu_add_rms_norm")
        assert page.page.evaluate("window.__kb_marker") == 1  # no reload
        page.page.locator(".md-tabs a[href*='trees/']").first.click()
        wait_for_title(page, "Decision trees")
        page.page.locator("article a[href*='moe/']").first.click()
        wait_for_title(page, "Which MoE")
        assert page.page.locator("article .kb-map a.kb-node").count() > 1  # drawn, no script
        hits = search(page, "", "npu_rms_norm")
        assert hits
        assert sum("search_index.json" in u for u in page.requests) == 1
        assert not [u for u in page.requests if "mermaid" in u.lower()]


# -- search ------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["权重预取", "npu_mla_prolog_v3"])
def test_a_pasted_or_composed_query_searches_without_another_key(
    page: Page, site_url: str, query: str
) -> None:
    """Text that arrives without a key (pasted, or committed by an input method) still
    searches: Material listens for keyup only, kb.js passes every input on."""
    with screenshot_on_failure(page):
        page.page.goto(site_url)
        page.page.wait_for_load_state("networkidle")
        page.page.locator("label.md-search__icon, .md-search__input").first.click()
        page.page.locator("input.md-search__input").focus()
        page.page.keyboard.insert_text(query)  # an input event, no keydown or keyup
        page.page.wait_for_function(RESULTS_SHOWN)
        first = page.page.locator(".md-search-result__item > a.md-search-result__link").first
        assert "/operators/" in (first.get_attribute("href") or "") or "/playbooks/" in (
            first.get_attribute("href") or ""
        )


def test_search_finds_an_operator_by_name_first(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "npu_mla_prolog_v3")
        assert hits and "/operators/npu_mla_prolog_v3/" in hits[0], hits[:5]


@pytest.mark.parametrize("typo", ["npu_mla_prolog_v4", "npu_mla_prlog_v3", "mla prolog v3"])
def test_a_mistyped_name_lands_on_the_operator(page: Page, site_url: str, typo: str) -> None:
    with screenshot_on_failure(page):
        open_search(page, site_url, typo)
        suggestion = page.page.locator(".kb-didyoumean a").first
        suggestion.wait_for(state="visible")
        assert suggestion.inner_text() == "npu_mla_prolog_v3"
        suggestion.click()
        page.page.wait_for_url("**/operators/npu_mla_prolog_v3/")
        wait_for_title(page, "npu_mla_prolog_v3")


def test_an_exact_name_gets_no_suggestion(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        search(page, site_url, "npu_rms_norm")
        page.page.wait_for_timeout(300)
        assert not page.page.locator(".kb-didyoumean").is_visible()


def test_search_finds_the_prefetch_page_for_a_chinese_query(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "权重预取")
        wanted = ("/playbooks/prefetch/", "/operators/npu_prefetch/", "/guides/prefetch-workflow/")
        assert hits and any(w in hits[0] for w in wanted), hits[:5]


def test_search_finds_a_task_phrase(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "paged attention decode")
        assert any("/chains/" in h or "/operators/" in h for h in hits[:5]), hits[:5]


def test_site_search_ranks_like_the_cli(page: Page, site_url: str) -> None:
    """Issue 23: one ranking.  A sample of the query set (every fourth query: names,
    typos, Chinese, task phrasings) typed into the site's search box puts the CLI's first
    result first.  (All 156 agreed when measured with scripts run by hand.)"""
    import yaml

    from kb.catalog.compiled import open_catalog
    from kb.index.search import search as cli_search

    queries = yaml.safe_load((ROOT / "tests" / "data" / "search_queries.yaml").read_text())[::4]
    catalog = open_catalog()
    with screenshot_on_failure(page):
        page.page.goto(site_url)
        misses = []
        for q in queries:
            want = cli_search(catalog, q["q"], limit=1)[0].name
            box = page.page.locator("input.md-search__input")
            if box.is_visible():
                box.fill("")
                box.press("End")
                page.page.wait_for_function(
                    "() => !document.querySelector('.md-search-result__item')"
                )
            hits = search(page, "", q["q"])
            if not hits or f"/{want}/" not in hits[0]:
                misses.append((q["q"], want, hits[:1]))
        assert not misses, misses


#: The theme's own files (Material's stylesheets, script bundle, favicon and fonts): the
#: same on every page of any Material site and cached by the browser after the first.
THEME_FILES = re.compile(
    r"/assets/(stylesheets/(main|palette)\.[0-9a-f]+\.min\.css|"
    r"javascripts/bundle\.[0-9a-f]+\.min\.js|images/favicon\.png)$"
)


def test_a_cold_page_and_its_first_search_fetch_little(page: Page, site_url: str) -> None:
    """Issue 34: a cold operator page and one search transfer at most 300 KB: the page,
    everything kb adds to it (stylesheet, scripts, names for "did you mean") and the
    search (the worker, docs.json, the shards the words hash to) and the sitemap instant
    navigation reads, measured from the browser's network events (uncompressed, as
    Python's test server sends them).  No page load pays for a whole index."""
    sizes: list[tuple[str, int]] = []
    lengths: dict[str, int] = {}

    def finished(request: Any) -> None:
        got = request.sizes()
        # a worker's script reports no body size: the server's Content-Length does
        body = max(got["responseBodySize"], lengths.get(request.url, 0))
        sizes.append((request.url, body + got["responseHeadersSize"]))

    def response(resp: Any) -> None:
        lengths[resp.url] = int(resp.headers.get("content-length") or 0)

    page.page.on("response", response)
    page.page.on("requestfinished", finished)
    with screenshot_on_failure(page):
        page.page.goto(f"{site_url}operators/npu_rms_norm/")
        page.page.wait_for_load_state("networkidle")
        assert not [u for u, _ in sizes if "/search/kb/" in u]  # nothing before a query
        hits = search(page, "", "paged attention decode")
        page.page.wait_for_load_state("networkidle")
        # result links carry ?h=: pages instant navigation preloads under the pointer
        # are the next page's cost, not this one's
        ours = [
            (u, n) for u, n in sizes if not THEME_FILES.search(u.split("?")[0]) and "?h=" not in u
        ]
        fetched = sum(n for _u, n in ours)
        assert hits and fetched <= 300_000, ours
        assert any("/search/kb/docs.json" in u for u, _ in ours)  # the search was counted


def test_chinese_search_finds_prefetch_with_no_missing_terms(page: Page, site_url: str) -> None:
    with screenshot_on_failure(page):
        hits = search(page, site_url, "权重预取")
        assert hits and "/operators/npu_prefetch/" in hits[0], hits[:3]
        assert page.page.locator(".md-search-result__terms").count() == 0


# -- record text cannot run script -------------------------------------------------------


def test_injected_links_are_inert(page: Page, fixture_url: str) -> None:
    with screenshot_on_failure(page):
        page.page.goto(f"{fixture_url}operators/npu_fixture_attention/")
        links = page.page.locator("article a")
        hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
        assert hrefs and not [h for h in hrefs if "script" in h.lower()]
        # The split link reaches the page as text (its target refused); clicking it, or
        # the text the escaper neutralized, runs nothing and goes nowhere.
        split = page.page.locator("article span", has_text="split").last
        assert split.inner_text() == "split"
        split.click()
        notes = page.page.get_by_text("See [notes](javascript:alert(5))", exact=False).first
        notes.click()
        page.page.wait_for_timeout(300)
        assert page.dialogs == []
        assert page.page.url.endswith("/operators/npu_fixture_attention/")


def test_a_poisoned_page_keeps_the_theme_and_search_working(page: Page, fixture_url: str) -> None:
    """Issue 35, class H: a record named ``__config`` (the id Material and kb.js read
    their configuration from) gets a page whose heading does not take that id, and
    words a plain JavaScript object answers from its prototype are searched like any
    other (main's worker threw on them: "No matching documents")."""
    with screenshot_on_failure(page):
        page.page.goto(f"{fixture_url}operators/__config/")
        wait_for_title(page, "__config")
        assert page.page.evaluate("() => document.getElementById('__config').tagName") == "SCRIPT"
        for word in ("constructor", "__proto__", "toString", "hasOwnProperty"):
            hits = search(page, "", f"{word} fixture norm")
            assert hits and "/operators/npu_fixture_norm/" in hits[0], (word, hits[:3])
