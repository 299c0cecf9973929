"""``kb show`` as functions: a record whole, one section of it, or its brief card.

The cuts themselves are :mod:`kb.api.recordview`'s; this is the verb's choice among
them and its errors.  An unknown name is the caller's to word (the CLI exits 1 with
suggestions, the MCP tool points at search), so it is not an error here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kb.api.recordview import Record

if TYPE_CHECKING:
    from kb.catalog.compiled import Catalog


def section_of(rec: Record, name: str) -> str:
    """The record field ``name`` means; UsageError naming the sections when none."""
    from kb.api.errors import UsageError
    from kb.api.recordview import section_key, section_names

    key = section_key(rec, name)
    if key is None:
        raise UsageError(
            f"{rec['name']} has no section {name!r}; sections: {', '.join(section_names(rec))}"
        )
    return key


def view(
    rec: Record, *, section: str | None = None, brief: bool = False, lang: str = "en"
) -> Record:
    """The ``--format json`` document: the record (for an operator, with ``emulated``:
    whether kb.emulate runs it), ``{kind, name, SECTION}`` or the card."""
    from kb.api.errors import UsageError
    from kb.api.recordview import brief as card
    from kb.api.recordview import section as cut

    if brief and section:
        raise UsageError("give section or brief, not both")
    if brief:
        return card(rec, lang)
    if section:
        return cut(rec, section_of(rec, section))
    if rec.get("kind") == "operator":
        from kb.emulate.names import emulated

        return {**rec, "emulated": emulated(rec["name"])}
    return rec


def suggestions(catalog: Catalog, name: str) -> list[str]:
    """Record names close to a name that matched none."""
    from kb.core.fuzzy import suggest

    return suggest(name, catalog.names())


def known_without_record(name: str) -> Record | None:
    """What upstream says of an operator no record describes (``_npu_dtype_cast``): its
    schema(s) and where they come from; None when torch_npu does not define the name.

    The answer is not a record: ``kb show`` still exits as for an unknown name.
    """
    from kb.catalog.knownops import load

    try:
        known = load().get(name)
    except (OSError, ValueError, KeyError):
        return None
    if known is None:
        return None
    return {
        "name": known.name,
        "record": None,
        "known_from": known.origin,
        "namespace": known.namespace,
        "role": known.role,
        "schemas": list(known.schemas),
    }
