"""llms.txt and the Markdown copies of pages (site_plugins/llms.py), without a site build."""

from __future__ import annotations

from kb.catalog.compiled import open_catalog
from site_plugins.common import SiteData
from site_plugins.generate import generate
from site_plugins.llms import llms_txt, markdown_copies


def _data() -> SiteData:
    return SiteData.from_records(list(open_catalog().records()))


def test_llms_txt_lists_every_record_with_its_summary() -> None:
    data = _data()
    text = llms_txt(data, "torch_npu fused operators", "what it is")
    assert text.startswith("# torch_npu fused operators\n\n> what it is\n")
    for name in [*data.operators, *data.chains, *data.trees, *data.playbooks]:
        assert f"- [{name}](" in text, name
    assert "- [npu_rms_norm](operators/npu_rms_norm/): RMSNorm" in text
    assert "- [attention](trees/attention/index.md)" in text


def test_chain_tree_and_playbook_pages_ship_their_markdown() -> None:
    data = _data()
    pages = generate(data).pages
    copies = markdown_copies(data, pages)
    assert copies["chains/mla-absorb-decode/index.md"] == pages["chains/mla-absorb-decode.md"]
    assert "trees/moe/index.md" in copies and "playbooks/prefetch/index.md" in copies
    assert not [p for p in copies if p.startswith("operators/")]  # budget: see the module
    data.directory_urls = False
    assert markdown_copies(data, pages) == {}
