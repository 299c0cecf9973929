"""Every generated page and the navigation that lists them, from one SiteData."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from site_plugins import indexes
from site_plugins.chains import chain_page
from site_plugins.common import (
    Record,
    SiteData,
    category_label,
    category_path,
    nav_title,
    record_path,
    rule_path,
    status_path,
)
from site_plugins.matrices import MATRICES
from site_plugins.names import NAMES_PATH, names_json
from site_plugins.operator_lists import categories, statuses
from site_plugins.operators import operator_page
from site_plugins.playbooks import playbook_page
from site_plugins.rules import rule_family, rule_page, rule_title, rules_index
from site_plugins.trees import tree_page

NavItem = str | dict[str, Any]


@dataclass
class Generated:
    pages: dict[str, str] = field(default_factory=dict)
    nav: list[NavItem] = field(default_factory=list)
    #: Non-page files (docs-relative path → text), e.g. the names for "did you mean".
    assets: dict[str, str] = field(default_factory=dict)


def generate(data: SiteData) -> Generated:
    out = Generated()
    pages = out.pages
    out.assets[NAMES_PATH] = names_json(data)

    pages["operators/index.md"] = data.page(
        "operators/index.md", lambda: indexes.all_operators(data)
    )
    pages["categories/index.md"] = data.page(
        "categories/index.md", lambda: indexes.category_index(data)
    )
    pages["status/index.md"] = data.page("status/index.md", lambda: indexes.status_index(data))
    # Categories sit one level down so the theme renders them collapsible: with a few
    # hundred operators an always-open sidebar is unusable.
    categories_nav: list[NavItem] = ["categories/index.md"]
    operators_nav: list[NavItem] = ["operators/index.md", {"By category": categories_nav}]
    status_nav: list[NavItem] = ["status/index.md"]
    for status in statuses(data):
        path = status_path(status)
        pages[path] = data.page(path, partial(indexes.status_page, data, status))
        status_nav.append({nav_title(status.capitalize()): status_path(status)})
    operators_nav.append({"By status": status_nav})
    for cat in categories(data):
        pages[category_path(cat)] = data.page(
            category_path(cat), partial(indexes.category_page, data, cat)
        )
        section: list[NavItem] = [category_path(cat)]
        for name in sorted(n for n, o in data.operators.items() if o["category"] == cat):
            path = record_path("operator", name)
            pages[path] = data.page(path, _of(operator_page, data.operators, name, data))
            section.append({nav_title(name): path})
        categories_nav.append({nav_title(category_label(cat)): section})
    out.nav.append({"Operators": operators_nav})

    pages["chains/index.md"] = data.page("chains/index.md", lambda: indexes.chains_index(data))
    chains_nav: list[NavItem] = ["chains/index.md"]
    by_module: dict[str, list[NavItem]] = {}
    for name, chain in sorted(data.chains.items(), key=lambda kv: (kv[1]["module"], kv[0])):
        path = record_path("chain", name)
        pages[path] = data.page(path, _of(chain_page, data.chains, name, data))
        by_module.setdefault(chain["module"], []).append({nav_title(chain["title"]["en"]): path})
    chains_nav += [{nav_title(category_label(m)): items} for m, items in by_module.items()]
    out.nav.append({"Chains": chains_nav})

    pages["trees/index.md"] = data.page("trees/index.md", lambda: indexes.trees_index(data))
    trees_nav: list[NavItem] = ["trees/index.md"]
    for name, tree in sorted(data.trees.items()):
        path = record_path("tree", name)
        pages[path] = data.page(path, _of(tree_page, data.trees, name, data))
        trees_nav.append({nav_title(tree["title"]["en"]): path})
    out.nav.append({"Decision trees": trees_nav})

    books_nav: list[NavItem] = []
    for name, book in sorted(data.playbooks.items()):
        path = record_path("playbook", name)
        pages[path] = data.page(path, _of(playbook_page, data.playbooks, name, data))
        books_nav.append({nav_title(book["title"]["en"]): path})
    if books_nav:
        out.nav.append({"Playbooks": books_nav})

    matrices_nav: list[NavItem] = []
    for path, (title, render) in MATRICES.items():
        pages[path] = data.page(path, partial(render, data))
        matrices_nav.append({nav_title(title): path})
    out.nav.append({"Matrices": matrices_nav})

    pages["rules/index.md"] = rules_index(data.rules)
    rules_nav: list[NavItem] = ["rules/index.md"]
    families: dict[str, list[NavItem]] = {}
    for rule in data.rules:
        path = rule_path(rule.code)
        pages[path] = rule_page(rule, data.rule_reports.get(rule.code))
        families.setdefault(rule_family(rule), []).append({nav_title(rule_title(rule)): path})
    # one (pruned) level per family, as operators have categories: a rule page's
    # navigation lists its own family, not all 60 rules
    rules_nav.append({"By family": [{name: items} for name, items in families.items()]})
    out.nav.append({"Checker rules": rules_nav})
    return out


def _of(
    render: Callable[[Record, SiteData], str], bucket: dict[str, Record], name: str, data: SiteData
) -> Callable[[], str]:
    """The page of record ``name``, its record read when the page is made (and noted)."""
    return lambda: render(bucket[name], data)
