"""One table per vocabulary: no second list of its values outside kb/vocab.

A tuple, list, set or dict literal (a ``Literal[...]`` too) in kb/ or site_plugins/
holding two or more members of one vocabulary — call-path prefixes, dtype names,
product ids, phases, graph modes, operator statuses — is a second table that will
one day disagree with the first (it did: search lacked ``torch.ops.atb.``).  Use the
names kb.vocab derives from its rows instead.  The allow-list holds record-specific
data that only looks like a vocabulary, each entry with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kb import vocab
from kb.vocab import parallel

ROOT = Path(__file__).resolve().parent.parent

VOCABULARIES: dict[str, frozenset[str]] = {
    "call-path prefix": frozenset(vocab.LOOSE_CALL_PREFIXES)
    | frozenset(vocab.NAMESPACE_PATHS.values()),
    "dtype": frozenset(d.name for d in vocab.DTYPES),
    "parallel mode": frozenset(parallel.PARALLEL_MODES),
    "communication-domain prerequisite": frozenset(parallel.PARALLEL_OF_PREREQUISITE),
    "product": frozenset(vocab.PRODUCT_IDS),
    "phase": frozenset(vocab.PHASES),
    "graph mode": frozenset(vocab.GRAPH_MODES),
    "status": frozenset(vocab.STATUSES),
    "quantization scheme": frozenset(vocab.SCHEMES) | frozenset(vocab.AMBIGUOUS_SCHEMES),
}

#: (file, scope) → why the literal there is not a second vocabulary table.  The scope
#: is the dotted name of the enclosing class/function/assignment ("*": the whole file).
ALLOWED: dict[tuple[str, str], str] = {}


def _strings(nodes: list[ast.expr | None]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


class _Finder(ast.NodeVisitor):
    """Every container literal with ≥2 members of one vocabulary, with its scope."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.scope: list[str] = []
        self.found: list[tuple[str, str, str]] = []

    def _scoped(self, name: str, node: ast.AST) -> None:
        self.scope.append(name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node.name, node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node.name, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        self._scoped(target.id if isinstance(target, ast.Name) else "<assign>", node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._scoped(node.target.id if isinstance(node.target, ast.Name) else "<assign>", node)

    def _check(self, node: ast.AST, groups: list[set[str]]) -> None:
        for members in groups:
            for name, values in VOCABULARIES.items():
                hit = members & values
                if len(hit) >= 2:
                    scope = ".".join(self.scope) or "<module>"
                    where = f"{self.path}:{getattr(node, 'lineno', 0)} {scope}"
                    self.found.append((scope, where, f"{name} {sorted(hit)}"))
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._check(node, [_strings(list(node.elts))])

    visit_List = visit_Tuple  # type: ignore[assignment]
    visit_Set = visit_Tuple  # type: ignore[assignment]

    def visit_Dict(self, node: ast.Dict) -> None:
        self._check(node, [_strings(list(node.keys)), _strings(list(node.values))])


def duplicates(root: Path) -> list[str]:
    """``file:line scope: vocabulary [members]`` for every second table under ``root``."""
    out: list[str] = []
    for top in ("kb", "site_plugins"):
        for file in sorted((root / top).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            if rel.startswith("kb/vocab/") or (rel, "*") in ALLOWED:
                continue
            finder = _Finder(rel)
            finder.visit(ast.parse(file.read_text(encoding="utf-8"), rel))
            out += [
                f"{where}: {what}"
                for scope, where, what in finder.found
                if (rel, scope) not in ALLOWED
            ]
    return out


def test_no_second_vocabulary_table() -> None:
    found = duplicates(ROOT)
    assert not found, "second vocabulary tables (use kb.vocab):\n" + "\n".join(found)


def test_allow_list_entries_still_needed() -> None:
    """An allow-list entry whose file or literal is gone must go too."""
    for (rel, scope), reason in ALLOWED.items():
        assert reason
        assert (ROOT / rel).is_file(), rel
        if scope != "*":
            finder = _Finder(rel)
            finder.visit(ast.parse((ROOT / rel).read_text(encoding="utf-8"), rel))
            assert any(s == scope for s, _, _ in finder.found), (rel, scope)


@pytest.mark.parametrize(
    "source",
    [
        'PREFIXES = ("torch_npu.", "torch.ops.npu.")',
        'def f(m):\n    return m in ("aclgraph", "torchair")',
        'BYTES = {"bfloat16": 2, "float16": 2}',
        'from typing import Literal\nP = Literal["prefill", "decode", "both"]',
        'TOKENS = {"a3": "atlas-a3", "a2": "atlas-a2"}',
    ],
)
def test_finder_sees_a_second_table(source: str) -> None:
    finder = _Finder("example.py")
    finder.visit(ast.parse(source))
    assert finder.found


@pytest.mark.parametrize(
    "source",
    [
        'KINDS = ("fusion", "prefetch")',
        'TYPES = ("bool", "int", "float")',
        'ONE = {"phase": "decode", "operator": "npu_prefetch"}',
    ],
)
def test_finder_ignores_other_literals(source: str) -> None:
    finder = _Finder("example.py")
    finder.visit(ast.parse(source))
    assert not finder.found


# -- the rows themselves -----------------------------------------------------------


def test_scanner_dtype_constants_are_rows_records_may_not_name() -> None:
    """torch_npu's uint1/float6 constants are dtypes the scanner knows; records do not use them."""
    for name in ("uint1", "float6_e3m2", "float6_e2m3"):
        assert name in vocab.TORCH_NPU_DTYPE_ATTRS
        assert name not in vocab.CANONICAL["dtype"]
        assert vocab.normalize("dtype", name) is None
    assert {
        "half",
        "float",
        "double",
        "long",
        "int",
        "short",
        "cfloat",
        "chalf",
    } <= vocab.TORCH_DTYPE_ATTRS
    assert "hifloat8" in vocab.TORCH_NPU_DTYPE_ATTRS and "hifloat8" not in vocab.TORCH_DTYPE_ATTRS
    assert vocab.normalize("dtype", "torch.half") == "float16"
    assert vocab.normalize("dtype", 292) == vocab.normalize("dtype", "torch.float8_e4m3fn")


def test_scheme_element_types_are_dtypes() -> None:
    for name, scheme in vocab.SCHEMES.items():
        for role in vocab.QUANT_ROLES:
            for dtype in getattr(scheme, role):
                assert dtype.removeprefix("mx:") in vocab.DTYPE_NAMES, (name, role, dtype)


def test_every_spelling_names_one_value() -> None:
    """An alias shared by two rows would make the derived dict keep only the last."""
    for rows, spellings in (
        (vocab.PRODUCTS, lambda p: (*p.code_words, *p.aliases)),
        (vocab.DTYPES, lambda d: (*d.torch_aliases, *d.aliases)),
        (vocab.PHASE_ROWS, lambda p: p.aliases),
        (parallel.PARALLEL_ROWS, lambda p: (p.name, *p.aliases)),
        (tuple(vocab.SCHEMES.values()), lambda s: s.aliases),
    ):
        seen = [a for row in rows for a in spellings(row)]  # type: ignore[operator]
        assert len(seen) == len(set(seen)), sorted(a for a in seen if seen.count(a) > 1)


def test_one_status_rank_order() -> None:
    """Deprecated stands lowest: its page says to stop using it; undocumented only lacks a page."""
    ranked = sorted(vocab.STATUSES, key=vocab.STATUS_RANK.__getitem__, reverse=True)
    assert ranked == ["stable", "beta", "undocumented", "deprecated"]
    assert sorted(vocab.STATUSES, key=vocab.STATUS_PRIOR.__getitem__, reverse=True) == ranked


def test_captured_graph_modes_are_the_record_fields() -> None:
    from kb.catalog.models import GraphMode

    assert tuple(f for f in GraphMode.model_fields if f != "notes") == vocab.CAPTURED_GRAPH_MODES


def test_call_paths_of_records_use_the_table() -> None:
    from kb.catalog.compiled import open_catalog

    prefixes = {
        c.rsplit(".", 1)[0] + "."
        for r in open_catalog().records("operator")
        for c in r.get("calls") or []
    }
    assert prefixes == set(vocab.CALL_PREFIXES)


def test_the_advice_trees_ask_parallel_modes_of_the_table() -> None:
    """``kb advise moe --parallel`` and ``kb scan --parallel`` speak one vocabulary: every
    option of a tree question keyed ``parallel`` is a row of kb/vocab/parallel.py, and every
    prerequisite a row names is one some chain record states."""
    from kb.catalog.compiled import open_catalog

    cat = open_catalog()
    asked = {
        o["value"]
        for t in cat.records("tree")
        for node in t.get("nodes") or []
        if node.get("key") == "parallel"
        for o in node.get("options") or []
    }
    assert asked and asked <= set(parallel.PARALLEL_MODES), asked
    stated = {p["id"] for c in cat.records("chain") for p in c.get("prerequisites") or []}
    assert set(parallel.PARALLEL_OF_PREREQUISITE) <= stated
    assert (
        vocab.normalize("parallel", "Expert") == "ep" and vocab.normalize("parallel", "sp") is None
    )
