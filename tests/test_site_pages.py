"""Page generators on the fixture records: the sections each page type must have."""

from __future__ import annotations

import copy
import posixpath
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from kb.catalog.compiled import open_catalog
from site_plugins import products, versions
from site_plugins.autolink import autolink
from site_plugins.chains import chain_page
from site_plugins.cli_help import cli_reference
from site_plugins.common import SiteData
from site_plugins.generate import generate
from site_plugins.matrices import version_matrix
from site_plugins.operators import operator_page, pretty_signature
from site_plugins.playbooks import playbook_page
from site_plugins.rules import load_rules, rule_page, rules_index
from site_plugins.trees import tree_page

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "site_records"


class Tags(HTMLParser):
    """Tag names, attribute names and link targets of an HTML fragment."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attributes: set[str] = set()
        self.hrefs: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.attributes |= {name for name, _ in attrs}
        self.hrefs += [value or "" for name, value in attrs if name == "href"]


@dataclass
class StubRule:
    code: str = "KB999"
    name: str = "stub-rule"
    severity: str = "warning"
    summary: str = "A stub rule <b>for</b> the tests."
    why: str = "Because | pipes and `code` must render."
    fail: str = "version: 1\ncandidates:\n  - module: x  # ```\n"
    fix: str = "version: 1\ncandidates: []\n"


@pytest.fixture(scope="module")
def data() -> SiteData:
    catalog = open_catalog(FIXTURES)
    return SiteData.from_records(catalog.records(), [StubRule()])


def headings(page: str, level: int = 2) -> list[str]:
    return re.findall(rf"^{'#' * level} (.+?)(?: \{{.*\}})?$", page, re.M)


def test_operator_page_answers_first_and_has_every_section(data: SiteData) -> None:
    page = operator_page(data.operators["npu_fixture_norm"], data)
    assert page.startswith("# npu_fixture_norm\n")
    assert headings(page) == [
        "Example",
        "Signature",
        "What it does",
        "Parameters",
        "Returns",
        "Constraints",
        "Quantization",
        "Checkable rules",
        "torch_npu releases",
        "Graph mode",
        "Fused steps",
        "Used in production by",
        "Used in chains and trees",
        "Related operators",
        "Upstream",
    ]
    # The card comes before the first section: status, call, products, range, schemes.
    card = page.split("## Example")[0]
    assert "[stable](../status/stable.md){ .kb-badge .kb-badge--stable }" in card
    assert "**Fixture norm operator for the site tests.**" in card
    assert "Call\n:   `torch_npu.npu_fixture_norm` · `torch.ops.npu.npu_fixture_norm`" in card
    assert "Pass\n:   `x`, `gamma`, `out`" in card
    assert (
        'kb-chip--yes" title="Atlas A3 training/inference series: documented as supported"' in card
    )
    assert "torch_npu\n:   `2.5.1+`" in card
    assert '<span class="kb-chip kb-chip--scheme">w8a8-static</span>' in card
    # Search terms ride with the page's first section, hidden from readers.
    assert '<p class="kb-terms" hidden>fixture norm · site test · 测试归一化</p>' in card
    assert "Search keywords" not in page
    # The first example comes before the signature; English and Chinese words in tabs.
    assert page.index("import torch_npu") < page.index("## Signature")
    assert '=== "English"' in page and '=== "中文"' in page
    # Parameters: a list, never a wide table.
    params = page.split("## Parameters")[1].split("## Returns")[0]
    assert "| Name |" not in params
    assert "**`mode`** · `int` · default `0` · *keyword-only*\n:   values `0`, `1`, `2`" in params
    assert "`0` ≤ `epsilon` (small positive)" in params
    assert "**`out`** · `Tensor` · required · *mutated in place*" in params
    assert '<span class="kb-chip kb-chip--dtype">bfloat16</span>' in params
    # A constraint links to its rule, and the folded rule carries that anchor.
    assert "[`mode-two-int8`](#rule-mode-two-int8)" in page
    assert "- **mode-two-int8**{ #rule-mode-two-int8 }: when `mode` = `2` and product" in page
    assert '??? success "2 rules kb check applies"' in page
    # Quantization detail folded: how to select each scheme.
    assert '??? abstract "2 schemes and how to select each"' in page
    assert "select: `mode` = `2`" in page
    # Releases as ranges; the full history of the schema folded.
    assert "Ships in `2.5.1+`" in page
    # Reverse lookups: the chain stage and the tree leaf that name this operator.
    assert (
        "- chain [Fixture chain" in page
        and "../chains/fixture-decode-chain.md), stage `norm`" in page
    )
    assert "- decision tree [Fixture attention tree](../trees/fixture-tree.md)" in page
    assert "(https://example.invalid/docs/npu_fixture_norm%20%28page%29.md)" in page


def test_production_evidence_links_every_call_site(data: SiteData) -> None:
    page = operator_page(data.operators["npu_fixture_norm"], data)
    section = page.split("## Used in production by")[1].split("\n## ")[0]
    assert "**example-org/serving-engine** at `0123456789ab`: 2 call sites" in section
    url = "https://github.com/example-org/serving-engine/blob/0123456789abcdef0123456789abcdef01234567"
    assert f"- [`engine/layers/norm.py:42`]({url}/engine/layers/norm.py#L42)" in section
    assert (
        "`epsilon` = `1e-06`, `mode` = `2` · on Atlas A3 · `decode` · fused residual path"
        in section
    )
    assert (
        f"- [`engine/layers/norm_quant.py:7`]({url}/engine/layers/norm_quant.py#L7)\n"
        in section + "\n"
    )
    # No evidence, no section.
    other = operator_page(data.operators["npu_fixture_attention_v2"], data)
    assert "Used in production" not in other


def test_superseded_operator_warns_and_links_both_ways(data: SiteData) -> None:
    old = operator_page(data.operators["npu_fixture_attention"], data)
    new = operator_page(data.operators["npu_fixture_attention_v2"], data)
    assert '!!! warning "Deprecated"' in old
    assert "Use [`npu_fixture_attention_v2`](npu_fixture_attention_v2.md) instead." in old
    assert "- **Supersedes:** [`npu_fixture_attention`](npu_fixture_attention.md)" in new


def test_hostile_operator_text_is_escaped(data: SiteData) -> None:
    page = operator_page(data.operators["npu_fixture_attention"], data)
    cfg = load_config(str(ROOT / "mkdocs.yml"))
    html = markdown.Markdown(
        extensions=cfg.markdown_extensions, extension_configs=cfg.mdx_configs
    ).convert(page)
    tags = Tags(html)
    assert not {"script", "img", "b"} & tags.names
    assert "&lt;em&gt;now&lt;/em&gt;" in html  # record markup shows as text
    assert not {"onerror", "onclick"} & tags.attributes
    assert not any(h.startswith("javascript") for h in tags.hrefs)
    assert '&lt;script&gt;alert("description")&lt;/script&gt;' in html
    # The stray fence in the description did not swallow the page: later sections exist.
    sections = re.findall(r"<h2[^>]* id=\"([a-z-]+)\"", html)
    assert sections[:4] == ["example", "signature", "what-it-does", "parameters"]
    assert "returns" in sections
    params = html.split('id="parameters"')[1].split('id="returns"')[0]
    assert params.count("<dt>") == 2
    assert "<code>T|ND</code>" in params and "<code>&lt;b&gt;</code>" in params
    assert "<code>[B, S, N|D]</code> (layout &#124; BSND)" in params


def test_long_signatures_are_wrapped_without_changing_tokens() -> None:
    schema = (
        "f("
        + ", ".join(f"Tensor a{i}" for i in range(12))
        + ', *, str m="x,y") -> (Tensor, Tensor)'
    )
    pretty = pretty_signature(schema)
    assert pretty.splitlines()[0] == "f(" and len(pretty.splitlines()) == 16
    assert re.sub(r"\s+", "", pretty) == re.sub(r"\s+", "", schema)
    assert pretty_signature("f(Tensor x) -> Tensor") == "f(Tensor x) -> Tensor"


def test_chain_page_has_stages_per_phase_and_a_diagram(data: SiteData) -> None:
    page = chain_page(data.chains["fixture-decode-chain"], data)
    assert page.startswith('# Fixture chain "quoted" ‹b›bold‹/b›\n')
    assert headings(page) == [
        "Stages",
        "Flow",
        "Prefill vs decode",
        "Prerequisites",
        "Reference models",
        "See also",
    ]
    assert headings(page, 3) == ["Prefill", "Decode"]
    prefill, decode = page.split("### Prefill")[1].split("### Decode")
    assert "`sparse_mode` = `3`" in prefill and "Causal mask" in prefill
    assert "`sparse_mode`" not in decode.split("## Flow")[0]
    assert "plain torch: `out = x @ w_o`" in page
    stages = page.split("## Flow")[0]
    assert "output &quot;projection&quot;" not in stages
    assert 'output "projection" &#124; end' in stages
    flow = page.split("## Flow")[1].split("## Prefill vs decode")[0]
    lanes = re.findall(r'<p class="kb-flow__title">(\w+)</p>', flow)
    assert lanes == ["prefill", "decode"]
    assert (
        '<a class="kb-node kb-node--operator" href="../../operators/npu_fixture_norm/">'
        '<span class="kb-node__stage">norm</span> <code>npu_fixture_norm</code></a>' in flow
    )
    # Record text stays text inside the boxes; plain torch is a box without a link.
    assert "output &quot;projection&quot; | end</span> plain torch</span>" in flow
    assert "- `rope-precompute`: Precompute cos and sin once per step." in page
    assert "- Model &lt;script&gt;" in page


def test_chain_variants_are_branches_of_one_step(data: SiteData) -> None:
    """Stages of one name (one per scheme) draw as one step with a branch per scheme,
    each labelled, not as steps one after another."""
    chain = copy.deepcopy(data.chains["fixture-decode-chain"])
    chain.update(phases=["decode"], quantization=["bf16", "w8a8"])
    chain["stages"] = [
        {"stage": "norm", "operator": "npu_fixture_norm"},
        {"stage": "attn", "operator": "npu_fixture_attention_v2", "quantization": ["bf16"]},
        {"stage": "attn", "operator": "npu_fixture_attention_v2", "quantization": ["w8a8"]},
        {"stage": "out", "operator": "plain-torch", "quantization": ["w8a8"]},
    ]
    flow = chain_page(chain, data).split("## Flow")[1]
    steps = re.findall(r'<li class="(kb-flow__step[^"]*)">', flow)
    assert steps == ["kb-flow__step", "kb-flow__step kb-flow__step--fork", "kb-flow__step"]
    fork = flow.split('<span class="kb-flow__fork">attn: one of</span>')[1].split("</ul>")[0]
    schemes = re.findall(r'<span class="kb-flow__scheme">([^<]+)</span>', fork)
    assert schemes == ["bf16", "w8a8"]
    assert fork.count('href="../../operators/npu_fixture_attention_v2/"') == 2
    assert '<span class="kb-flow__scheme">only w8a8</span>' in flow  # a one-scheme stage


def test_tree_page_is_a_map_and_one_step_per_question(data: SiteData) -> None:
    page = tree_page(data.trees["fixture-tree"], data)
    generated = generate(data).pages
    assert "```mermaid" not in page
    overview = page.split("## Map")[1].split("## Steps")[0]
    assert overview.count('class="kb-diagram kb-map"') == 1  # the map is the only diagram
    # Every question is a box linking to its step; record text is escaped, not markup.
    assert (
        '<a class="kb-node kb-node--question" href="#q-arch">1. Which &quot;architecture&quot; '
        "&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt; &amp; more?</a>" in overview
    )
    # The answers that lead on label the branches; the cycle is a link back, not a copy.
    assert (
        '<ul><li><span class="kb-edge"><code>mha</code></span>'
        '<a class="kb-node kb-node--question" href="#q-phase">2. Which phase?</a>' in overview
    )
    assert (
        '<span class="kb-edge"><code>restart</code></span>'
        '<a class="kb-node kb-node--next" href="#q-arch">step 1</a>' in overview
    )
    # Each step hangs its answers off the question as branches; leaves are boxes that
    # link to built pages.
    steps = page.split("## Steps")[1]
    assert steps.count('<div class="kb-branches" markdown>') == 2
    hrefs = re.findall(r"\]\(([^)#]+)\)\{ \.kb-node \.kb-node--(?:chain|operator) \}", steps)
    assert len(hrefs) == 3
    for href in hrefs:
        assert posixpath.normpath(posixpath.join("trees", href)) in generated
    # The steps fold, carry an anchor, and list the same answers as text.
    assert '???+ question "Step 2 · Which phase?"' in page
    assert "    Flag `--phase`\n    {: #q-phase }" in page
    assert "→ chain [`fixture-decode-chain`](../chains/fixture-decode-chain.md)" in page
    assert (
        "→ operators [`npu_fixture_attention_v2`](../operators/npu_fixture_attention_v2.md)" in page
    )
    assert "→ then [step 1](#q-arch){ .kb-node .kb-node--next }: Which" in page  # a link back
    # Chinese only in its tab; the English view carries no Chinese.
    english, chinese = page.split('=== "中文"')
    assert not re.search(r"[\u4e00-\u9fff]", english)
    assert "1. 哪种架构？ (`--arch`: `mha`, `other`)" in chinese.split("## Map")[0]
    assert not re.search(r"[\u4e00-\u9fff]", chinese.split("## Map", 1)[1].replace("测试树", ""))


def test_playbook_page(data: SiteData) -> None:
    page = playbook_page(data.playbooks["fixture-prefetch"], data)
    assert page.startswith("# Fixture prefetch playbook · 权重预取测试手册\n")
    assert headings(page) == [
        "Operator classes",
        "Sizing max_size",
        "Success criteria",
        "Failure signals",
        "Related",
    ]
    assert '<p class="kb-terms" hidden>' in page.split("## Operator classes")[0]
    assert "[`npu_fixture_attention_v2`](../operators/npu_fixture_attention_v2.md)" in page
    assert "<br>window: only once its output exists |" in page


def test_rule_pages_from_rule_units(data: SiteData) -> None:
    page = rule_page(StubRule(), "candidates.yaml:3:5: KB999 warning: stub\n")
    assert page.startswith("# KB999 stub-rule\n")
    assert headings(page) == [
        "What it checks",
        "Why it matters",
        "Failing example",
        "Fixed example",
    ]
    assert "A stub rule &lt;b&gt;for&lt;/b&gt; the tests." in page
    assert "````yaml\nversion: 1\ncandidates:\n  - module: x  # ```\n````" in page
    assert "KB999 warning: stub" in page
    index = rules_index(data.rules)
    assert "| [`KB999`](KB999.md) | stub-rule | warning |" in index
    assert "No checker rules" in rules_index([])


def test_scan_rule_pages_show_python_and_the_scan_command() -> None:
    from kb.rules import BY_CODE
    from site_plugins.rules import check_examples, rule_family

    rule = BY_CODE["KB503"]
    report = check_examples([rule], open_catalog())[rule.code]
    assert report.startswith("model.py:") and "KB503" in report  # kb scan ran on the snippet
    page = rule_page(rule, report)
    assert "````python\n" in page or "```python\n" in page
    assert "`kb scan --select KB503 model.py` on the failing example prints" in page
    # only the page's own rule ran: a new rule never rewrites this page
    assert set(re.findall(r"\bKB\d{3}\b", report)) == {"KB503"}
    assert "run by `kb scan`" in page
    assert rule_family(rule) == "KB5xx Python calls (scan)"
    assert rule_family(BY_CODE["KB106"]) == "KB1xx Operator calls"


def test_missing_rule_registry_gives_no_rules_but_broken_ones_raise(tmp_path, monkeypatch) -> None:
    assert load_rules("kb.check.no_such_registry") == []
    (tmp_path / "broken_registry.py").write_text("import no_such_dependency\nRULES = ()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):
        load_rules("broken_registry")


def test_matrices_group_by_category_under_a_filter(data: SiteData) -> None:
    pages = generate(data).pages
    products_page = pages["matrices/products.md"]
    assert products_page.startswith("---\nhide:\n  - toc\n---\n# Operator × product")
    assert '<div class="kb-filter" data-kb-filter="kb-matrix" hidden>' in products_page
    assert products_page.count("<div data-kb-group markdown>") == 2  # attention, norm
    assert "### Attention { #attention }" in products_page
    header = products_page.split("<thead><tr>")[1].split("</tr>")[0]
    assert '<span title="Ascend 950PR/950DT">950</span>' in header
    assert header.count("<th") == 1 + len(products.families())
    norm_row = products_page.split("npu_<wbr>fixture_<wbr>norm</code></a>")[1].split("</tr>")[0]
    marks = re.findall(r"kb-mark--(\w+)", norm_row)
    norm = data.operators["npu_fixture_norm"]
    assert marks == [products.support(norm, p) for p in products.families()]
    assert marks[:3] == ["undocumented", "yes", "yes"]
    quant = pages["matrices/quantization.md"]
    assert '<td><span class="kb-chip kb-chip--scheme">bf16</span> ' in quant
    assert (
        '<span class="kb-chip kb-chip--scheme">w8a8-static</span></td>'
        '<td style="text-align: right">1</td>' in quant
    )
    # the row says how the activation scale is made and that "w8a8" also names another scheme
    static_row = quant.split('kb-chip--scheme">w8a8-static</span></td>')[1].split("</tr>")[0]
    assert "calibrated offline" in static_row and "<code>w8a8</code> <em>shared</em>" in static_row


def test_version_matrix_shows_ranges_not_release_lines(data: SiteData) -> None:
    page = version_matrix(data)
    assert "<th>Added in</th><th>Ships in</th>" in page
    assert "<td><code>2.5.1</code></td><td><code>2.5.1+</code></td>" in page
    runs = [["2.1.0.post17", "2.1.0.post17"], ["2.6.0.post3", None]]
    backport = dict(
        data.operators["npu_fixture_attention_v2"],
        versions={"first": "2.1.0.post17", "ranges": runs},
    )
    assert versions.ranges_text(backport) == "2.1.0.post17, 2.6.0.post3+"
    shown = SiteData.from_records([backport])
    assert "<code>2.1.0.post17, 2.6.0.post3+</code>" in version_matrix(shown)
    words = operator_page(backport, shown)
    assert "Ships in `2.1.0.post17, 2.6.0.post3+` (a gap between runs is a release line" in words


def test_signature_changes_are_diffs_in_release_order() -> None:
    old = "f(Tensor x) -> Tensor"
    new = "f(Tensor x, *, int mode=0) -> Tensor"
    changes = [
        {"release": "2.8.0", "schema": old},
        {"release": "2.7.1.post4", "schema": new},
        {"release": "2.1.0.post17", "schema": old},
    ]
    op = {"versions": {"changes": changes}}
    assert versions.changes(op) == [("2.7.1.post4", ["+ int mode=0"]), ("2.8.0", ["- mode"])]


def test_product_support_folds_sub_series_into_their_family(monkeypatch) -> None:
    """New vocabulary ids need no code: sub-series fold into family columns."""
    from kb import vocab

    family = {"atlas-a2-training": "atlas-a2", "atlas-a2-inference": "atlas-a2"}
    monkeypatch.setattr(vocab, "PRODUCT_FAMILY", family, raising=False)
    canon = dict(vocab.CANONICAL)
    canon["product"] = (*vocab.CANONICAL["product"], *family)
    monkeypatch.setattr(vocab, "CANONICAL", canon)
    assert "atlas-a2-training" not in products.families() and "atlas-a2" in products.families()
    only_inference = {"products": ["atlas-a2-inference"], "unsupported_products": ["atlas-a3"]}
    assert products.support(only_inference, "atlas-a2") == products.PARTIAL
    assert products.support(only_inference, "atlas-a2-inference") == products.YES
    assert products.support(only_inference, "atlas-a2-training") == products.UNKNOWN
    assert products.support(only_inference, "atlas-a3") == products.NO
    assert products.support({"products": ["atlas-a2"]}, "atlas-a2-training") == products.YES
    both_out = {"unsupported_products": list(family)}
    assert products.support(both_out, "atlas-a2") == products.NO
    assert "◐ Atlas A2" in products.chips(only_inference)
    assert "✗ Atlas A3" in products.chips(only_inference)


def test_every_record_and_rule_gets_a_page_and_a_nav_entry(data: SiteData) -> None:
    out = generate(data)
    expected = {f"operators/{n}.md" for n in data.operators} | {
        f"chains/{n}.md" for n in data.chains
    }
    expected |= {f"trees/{n}.md" for n in data.trees} | {
        f"playbooks/{n}.md" for n in data.playbooks
    }
    expected |= {
        "rules/KB999.md",
        "operators/index.md",
        "categories/index.md",
        "status/index.md",
        "categories/norm/index.md",
        "status/deprecated.md",
        "matrices/versions.md",
    }
    assert expected <= set(out.pages)
    nav_paths = set(re.findall(r"'([\w/.\-]+\.md)'", repr(out.nav)))
    assert nav_paths == set(out.pages)
    # Every Markdown link between generated pages resolves to a generated page.
    for path, text in out.pages.items():
        for target in re.findall(r"\]\((?!https?:)([^)#\s]+\.md)(?:#[^)]*)?\)", text):
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            assert resolved in out.pages, (path, target)


def test_autolink_links_operator_code_spans_in_prose_only(data: SiteData) -> None:
    text = (
        "Use `npu_fixture_norm` or `torch_npu.npu_fixture_norm`, not `unknown_op`.\n"
        "Already [`npu_fixture_norm`](x.md). Chains like `fixture-decode-chain` stay.\n"
        "```python\nnpu = `npu_fixture_norm`\n```\n"
    )
    out = autolink(text, "guides/g.md", data).splitlines()
    assert out[0] == (
        "Use [`npu_fixture_norm`](../operators/npu_fixture_norm.md) or "
        "[`torch_npu.npu_fixture_norm`](../operators/npu_fixture_norm.md), not `unknown_op`."
    )
    assert out[1] == "Already [`npu_fixture_norm`](x.md). Chains like `fixture-decode-chain` stay."
    assert out[3] == "npu = `npu_fixture_norm`"


def test_cli_reference_comes_from_the_parser() -> None:
    text = cli_reference()
    assert text.startswith("### kb\n\n```text\nusage: kb ")
    assert "### kb site build\n\n```text\nusage: kb site build " in text
    assert "--site-dir SITE_DIR" in text
