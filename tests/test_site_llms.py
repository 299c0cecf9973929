"""llms.txt and the Markdown copies of pages (site_plugins/llms.py), without a site build."""

from __future__ import annotations

import posixpath
import re

from kb.catalog.compiled import open_catalog
from site_plugins import md
from site_plugins.common import SiteData
from site_plugins.generate import generate
from site_plugins.llms import llms_txt, markdown_copies, plain


def _data() -> SiteData:
    return SiteData.from_records(list(open_catalog().records()))


def test_llms_txt_lists_every_record_with_its_summary() -> None:
    data = _data()
    text = llms_txt(data, "torch_npu fused operators", "what it is")
    assert text.startswith("# torch_npu fused operators\n\n> what it is\n")
    for name in [*data.operators, *data.chains, *data.trees, *data.playbooks]:
        assert f"- [{name}](" in text, name
    assert "- [npu_rms_norm](operators/npu_rms_norm/index.md): RMSNorm" in text
    assert "- [attention](trees/attention/index.md)" in text


def test_every_record_page_ships_its_markdown_and_links_resolve() -> None:
    data = _data()
    pages = generate(data).pages
    copies = markdown_copies(data, pages)
    names = [*data.operators, *data.chains, *data.trees, *data.playbooks]
    assert len(copies) == len(names)
    built = {md.page_url(p) for p in pages}
    for path, text in copies.items():
        # page markup is gone: no chips, wrappers, folds, tabs, attribute lists, diagrams
        assert not re.search(
            r"<span|<div|</div>|^\s*(\?\?\?|!!!|===) |\{ ?[.#:]|kb:diagram", text, re.M
        ), path
        for target in re.findall(r"\]\((?!https?:|#)([^)\s]+)\)", text):
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if resolved.endswith("index.md"):
                assert resolved in copies, (path, target)
            else:
                assert resolved.split("#")[0] + "/" in built, (path, target)
    data.directory_urls = False
    assert markdown_copies(data, pages) == {}


def test_operator_markdown_is_compact_and_carries_the_facts() -> None:
    data = _data()
    copies = markdown_copies(data, generate(data).pages)
    op = copies["operators/npu_mla_prolog_v3/index.md"]
    assert op.startswith("# npu_mla_prolog_v3\n")
    for heading in ("## Signature", "## Parameters", "## Constraints", "## Quantization"):
        assert f"\n{heading}\n" in op, heading
    assert "npu_mla_prolog_v3(\n    Tensor token_x," in op
    assert "**`weight_dq`** · `Tensor` · required\n:   dtype `bfloat16`" in op
    assert "format `FRACTAL_NZ` · shape `[He, Hcq]`" in op
    assert "✓ Atlas A3" in op
    assert "## Example" not in op and "## Used in production by" not in op  # HTML has them
    operators = sum(len(t.encode()) for p, t in copies.items() if p.startswith("operators/"))
    assert operators < 2_500_000  # the site's 25 MB budget (kb site build) has room for it


def test_chain_copy_keeps_variants_as_branches_without_the_diagram() -> None:
    data = _data()
    copies = markdown_copies(data, generate(data).pages)
    chain = copies["chains/mla-absorb-decode/index.md"]
    assert "## Flow" not in chain
    assert "**mla_prolog**: one of, by scheme\n    - *bf16* → [`npu_mla_prolog_v3`]" in chain
    assert "(../../operators/npu_mla_prolog_v3/index.md)" in chain


def test_plain_turns_page_markup_into_markdown() -> None:
    page = (
        "---\nhide:\n  - toc\n---\n# T\n\n"
        '<p class="kb-terms" hidden>a · b</p>\n\n'
        "## Head { data-search-exclude }\n\n"
        '<div class="kb-params" markdown>\n\n**`x`** · dtype <span class="kb-chip kb-chip--dtype">'
        'bfloat16</span> <span class="kb-chip kb-chip--yes" title="t">✓ Atlas A2</span>\n\n</div>\n\n'
        '???+ question "Step 1 · Which &quot;one&quot;?"\n\n    Flag `--x`\n    {: #q-x }\n\n'
        "    - [`c`](../chains/c.md){ .kb-node .kb-node--chain } or [r](../rules/KB1.md#a)\n\n"
        "After.\n"
    )
    out = plain(page, "trees/t.md", {"trees/t.md", "chains/c.md"})
    assert out == (
        "# T\n\n## Head\n\n**`x`** · dtype `bfloat16` ✓ Atlas A2\n\n"
        '**Step 1 · Which "one"?**\n\nFlag `--x`\n\n'
        "- [`c`](../../chains/c/index.md) or [r](../../rules/KB1/#a)\n\nAfter.\n"
    )
