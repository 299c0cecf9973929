"""Page generators on the fixture records: the sections each page type must have."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from kb.compiled import open_catalog
from site_plugins import md
from site_plugins.autolink import autolink
from site_plugins.chains import chain_page
from site_plugins.cli_help import cli_reference
from site_plugins.common import SiteData
from site_plugins.generate import generate
from site_plugins.matrices import availability, release_key, version_matrix
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


def test_operator_page_has_every_section(data: SiteData) -> None:
    page = operator_page(data.operators["npu_fixture_norm"], data)
    assert page.startswith("# npu_fixture_norm\n")
    assert headings(page) == [
        "Signature",
        "Parameters",
        "Returns",
        "Constraints",
        "Checkable rules",
        "Quantization",
        "Products and phases",
        "torch_npu versions",
        "Graph mode",
        "Fused steps",
        "Examples",
        "Related operators",
        "Used in",
        "Upstream",
        "Search keywords",
    ]
    assert "[stable](../status/stable.md){ .kb-badge .kb-badge--stable }" in page
    assert '=== "English"' in page and '=== "中文"' in page
    assert (
        "| Name | Type | Default | Dtypes | Formats | Shapes | Allowed values | Description |"
        in page
    )
    assert "| `mode`<br>*keyword-only* | `int` | `0` |" in page
    assert "`0` ≤ `epsilon` (small positive)" in page
    assert "**`out`**<br>*mutated in place*" in page
    # A constraint links to its rule, and the rule carries that anchor.
    assert "[`mode-two-int8`](#rule-mode-two-int8)" in page
    assert "### mode-two-int8 { #rule-mode-two-int8 }" in page
    assert "- **When** `mode` = `2` and product ∈ {`atlas-a3`}" in page
    assert "- **Then** pass `mode`; `mode` ∈ {`1`, `2`}" in page
    # Quantization: how to select the scheme.
    assert "| `mode` = `2` | `gamma`: `int8` | `atlas-a3` |" in page
    assert "- **First release:** `2.5.1`" in page and "| `2.6.0` |" in page
    assert "```python\nimport torch_npu\n" in page
    # Reverse lookups: the chain stage and the tree leaf that name this operator.
    assert (
        "- chain [Fixture chain" in page
        and "../chains/fixture-decode-chain.md), stage `norm`" in page
    )
    assert "- decision tree [Fixture attention tree](../trees/fixture-tree.md)" in page
    assert "(https://example.invalid/docs/npu_fixture_norm%20%28page%29.md)" in page


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
    assert not {"script", "img", "em", "b"} & tags.names
    assert not {"onerror", "onclick"} & tags.attributes
    assert not any(h.startswith("javascript") for h in tags.hrefs)
    assert '&lt;script&gt;alert("description")&lt;/script&gt;' in html
    # The stray fence in the description did not swallow the page: later sections exist.
    assert re.findall(r"<h2 id=\"([a-z-]+)\"", html)[:3] == ["signature", "parameters", "returns"]
    table = html.split('<h2 id="parameters"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert [row.count("<td") for row in rows] == [8, 8]
    assert "<code>T|ND</code>" in table and "<code>&lt;b&gt;</code>" in table


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
    assert "output &quot;projection&quot;" not in page and 'output "projection" &#124; end' in page
    mermaid = page.split("```mermaid\n")[1].split("```")[0]
    assert 'subgraph p0["prefill"]' in mermaid and 'subgraph p1["decode"]' in mermaid
    assert 'click s0_0 href "../../operators/npu_fixture_norm/" "Open npu_fixture_norm"' in mermaid
    assert "- `rope-precompute`: Precompute cos and sin once per step." in page
    assert "- Model &lt;script&gt;" in page


def test_tree_page_links_leaves_and_reads_as_a_list(data: SiteData) -> None:
    page = tree_page(data.trees["fixture-tree"], data)
    generated = generate(data).pages
    mermaid = page.split("```mermaid\n")[1].split("```")[0]
    # Labels are quoted and escaped: no raw quote, angle bracket or tag inside one.
    assert (
        "q0[\"Which #quot;architecture#quot; #lt;script#gt;alert('q')#lt;/script#gt; #amp; more?\"]"
        in mermaid
    )
    hrefs = re.findall(r'click \w+ href "([^"]+)"', mermaid)
    assert len(hrefs) == 3
    built = {md.page_url(p) for p in generated}
    for href in hrefs:
        assert posixpath.normpath(posixpath.join("trees/fixture-tree", href)) + "/" in built
    assert 'q1 -->|"decode"| c0' in mermaid and 'q1 -->|"restart"| q0' in mermaid
    outline = page.split("## Questions")[1]
    assert "- **Which phase?** (`--phase`)" in outline
    assert "→ chain [`fixture-decode-chain`](../chains/fixture-decode-chain.md)" in outline
    assert (
        "→ operators [`npu_fixture_attention_v2`](../operators/npu_fixture_attention_v2.md)"
        in outline
    )
    assert "→ back to *Which" in outline  # the cycle is named, not expanded forever


def test_playbook_page(data: SiteData) -> None:
    page = playbook_page(data.playbooks["fixture-prefetch"], data)
    assert page.startswith("# Fixture prefetch playbook · 权重预取测试手册\n")
    assert headings(page) == [
        "Operator classes",
        "Sizing max_size",
        "Success criteria",
        "Failure signals",
        "Related",
        "Search keywords",
    ]
    assert "[`npu_fixture_attention_v2`](../operators/npu_fixture_attention_v2.md)" in page
    assert "| only once its output exists |" in page


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


def test_missing_rule_registry_gives_no_rules_but_broken_ones_raise(tmp_path, monkeypatch) -> None:
    assert load_rules("kb.check.no_such_registry") == []
    (tmp_path / "broken_registry.py").write_text("import no_such_dependency\nRULES = ()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):
        load_rules("broken_registry")


def test_matrices(data: SiteData) -> None:
    pages = generate(data).pages
    products = pages["matrices/products.md"]
    assert "| Operator | Category | `ascend-950` | `atlas-a3` | `atlas-a2` |" in products
    quant = pages["matrices/quantization.md"]
    assert "| Operator | `bf16` | `w8a8` | `kv-int8` |" in quant
    versions = version_matrix(data)
    assert "| Operator | `2.5` | `2.6` | `2.7` |" in versions
    assert (
        "| [`npu_fixture_attention_v2`](../operators/npu_fixture_attention_v2.md) | – | new | ✓ |"
        in versions
    )
    assert "| [`npu_fixture_norm`](../operators/npu_fixture_norm.md) | new | Δ | ✓ |" in versions
    assert (
        "| [`npu_fixture_norm`](../operators/npu_fixture_norm.md) | `2.5.1` |   | `2.6.0` |"
        in versions
    )
    v2 = data.operators["npu_fixture_attention_v2"]
    norm = data.operators["npu_fixture_norm"]
    assert [availability(v2, r) for r in ("2.5.1", "2.6.0rc1", "2.6.0", "2.7.1")] == [
        "–",
        "new",
        "✓",
        "✓",
    ]
    assert [availability(norm, r) for r in ("2.5.1", "2.6.0", "2.7.1")] == ["new", "Δ", "✓"]
    assert "No release information yet: [`npu_fixture_attention`]" in versions


def test_release_order() -> None:
    releases = ["2.8.0", "2.7.1.post2", "2.7.1", "2.7.1rc1", "2.10.0"]
    assert sorted(releases, key=release_key) == [
        "2.7.1rc1",
        "2.7.1",
        "2.7.1.post2",
        "2.8.0",
        "2.10.0",
    ]


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
