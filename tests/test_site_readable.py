"""Issue 23's page findings: chips a phone can tell apart, product names, matrix order."""

from __future__ import annotations

import re

from kb.catalog.compiled import open_catalog
from site_plugins import products
from site_plugins.chains import chain_page
from site_plugins.common import SiteData
from site_plugins.matrices import _by_category


def _data() -> SiteData:
    return SiteData.from_records(list(open_catalog().records()))


def test_product_chips_read_differently_without_a_tooltip() -> None:
    shorts = [products.short(p) for p in products.families()]
    assert len(set(shorts)) == len(shorts), shorts
    assert products.short("atlas-a3") == "Atlas A3"  # short where nothing clashes


def test_chain_pages_name_products_as_people_do() -> None:
    data = _data()
    chain = next(c for c in data.chains.values() if "atlas-a2" in (c.get("products") or []))
    page = chain_page(chain, data)
    line = next(x for x in page.splitlines() if x.startswith("**Products:**"))
    assert "Atlas A2" in line and "`atlas-a2`" not in line


def test_internal_kernels_sort_after_the_public_api_in_matrices() -> None:
    for _, ops in _by_category(_data()):
        names = [o["name"] for o in ops]
        private = [n.startswith("_") for n in names]
        assert private == sorted(private), names


def test_scheme_variants_are_branches_of_one_step() -> None:
    """mla-absorb-decode runs one of three mla_prolog settings (bf16, w8a8-dynamic, w8a8c8): one
    numbered step with three branches, not steps 3, 4 and 5 of one pipeline."""
    from site_plugins.chains import stage_groups

    data = _data()
    chain = data.chains["mla-absorb-decode"]
    page = chain_page(chain, data)
    stages = page[page.index("## Stages") : page.index("## Flow")]
    assert "**mla_prolog**: one of, by scheme" in stages
    assert stages.count("**mla_prolog**") == 1
    numbered = [ln for ln in stages.splitlines() if ln[:1].isdigit()]
    assert len(numbered) == len(stage_groups(chain["stages"]))
    flow = page[page.index("## Flow") :]
    fork = flow.split('<span class="kb-flow__fork">mla_prolog: one of</span>')[1].split("</ul>")[0]
    labels = re.findall(r'<span class="kb-flow__scheme">([^<]+)</span>', fork)
    assert labels == ["bf16", "w8a8-dynamic", "w8a8c8"]  # branches are labelled in the diagram
