"""``kb tree`` as a function: one decision tree record, or every tree with its flags."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog


def tree(catalog: Catalog, name: str | None = None) -> dict[str, Any]:
    """The ``--format json`` document: ``{"trees": [{name, summary, flags}]}`` without a
    name, else the tree record; UsageError for a name that is not a tree."""
    from kb.advice.advise import flags

    if not name:
        return {
            "trees": [
                {"name": t["name"], "summary": t["summary"]["en"], "flags": flags(t)}
                for t in catalog.records("tree")
            ]
        }
    return tree_record(catalog, name)


def tree_record(catalog: Catalog, name: str) -> dict[str, Any]:
    """The decision tree ``name`` (``kb tree``, ``kb advise``, the MCP tools): NotFound with
    a did-you-mean among trees, UsageError for a record of another kind."""
    from kb.api.errors import NotFound, UsageError

    rec = catalog.get(name)
    tree_names = catalog.names("tree")
    names = ", ".join(tree_names)
    if rec is None:
        raise NotFound(
            f"no decision tree named {name!r}{tree_hint(name, tree_names)}; trees: {names}"
        )
    if rec["kind"] != "tree":
        raise UsageError(
            f"{rec['name']!r} is a {rec['kind']}, not a decision tree (try 'kb show "
            f"{rec['name']}'); trees: {names}"
        )
    return rec  # type: ignore[no-any-return]


def tree_hint(name: str, trees: list[str]) -> str:
    """A did-you-mean among trees only (operators would be noise here)."""
    from kb.core.fuzzy import suggest

    hits = suggest(name, trees)
    return f" (did you mean {', '.join(hits)}?)" if hits else ""
