"""The compiled cache is keyed on every file that decides what a valid record is."""

from __future__ import annotations

from kb.catalog.codekey import CODE_LAYERS, code_inputs
from tests.test_architecture import GRAPH, MODULES, ROOT


def _closure(start: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo += [t for t, _ in GRAPH.get(module, ())]
    return seen


def test_the_key_covers_what_the_catalog_imports() -> None:
    keyed = {path for _name, path in code_inputs()}
    catalog = {m for m in MODULES if m.startswith("kb.catalog")}
    needed = {str(MODULES[m]) for m in _closure(catalog) if m != "kb"}
    assert needed - keyed == set(), "code the records are validated by but the cache ignores"


def test_the_key_names_signature_binding_and_release_data() -> None:
    names = {name for name, _path in code_inputs()}
    assert "<code>/catalog/signature.py" in names
    assert "<code>/catalog/binding.py" in names
    assert "<code>/data/releases.json" in names
    assert all(name.split("/")[1] in (*CODE_LAYERS, "data") for name in names)
    assert (ROOT / "kb" / "data" / "releases.json").exists()
