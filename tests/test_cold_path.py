"""What a cold ``kb show`` and ``kb search`` load: only the modules their answer needs.

Timing is the benchmark's (scripts/benchmark.py); this pins the modules, which decide
most of it and, unlike a timing, do not change with the machine's load.  Each command
runs twice in a fresh interpreter: the first may (re)build the caches, the second is
the cold call users make.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import operator_yaml

ROOT = Path(__file__).resolve().parent.parent

PROBE = (
    "import contextlib, io, sys\n"
    "from kb.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    rc = main(sys.argv[1:])\n"
    "print(rc, ' '.join(sorted(sys.modules)))\n"
)

#: Modules no cold show or search needs: validation (pydantic, YAML), whoosh's engine,
#: the stdlib's introspection behind dataclasses, textwrap, threads, argparse (a plain
#: show or search line is read by kb.cli.fast) with the locale and shutil it loads, and
#: whoosh's stemmer (the index holds the stems its build gave), the vocabulary tables a
#: record view or a query without a dtype does not read (kb.vocab
#: loads each table on first use).
NEVER = (
    "pydantic",
    "yaml",
    "kb.catalog.store",
    "whoosh.index",
    "whoosh.searching",
    "whoosh.lang",  # the stemmer: a query's known words take their stems from the index
    "dataclasses",
    "inspect",
    "textwrap",
    "threading",
    "shutil",
    "argparse",
    "locale",
    "kb.vocab.spellings",
    "kb.vocab.dtypes",
)


def _modules(argv: list[str]) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", PROBE, *argv]
    subprocess.run(cmd, capture_output=True, env=env, check=True)  # may build the caches
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    rc, _, names = out.strip().partition(" ")
    assert rc == "0", out
    return set(names.split())


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "npu_mla_prolog_v3"],
        ["show", "npu_mla_prolog_v3", "--format", "json"],
        ["show", "npu_rms_norm", "--brief"],
    ],
)
def test_cold_show_loads_no_validation_engine_or_introspection(argv: list[str]) -> None:
    loaded = _modules(argv)
    assert not [m for m in NEVER if m in loaded or any(x.startswith(m + ".") for x in loaded)]


@pytest.mark.parametrize(
    "query",
    ["npu_rms_norm", "torch_npu.npu_mla_prolog_v3", "paged attention decode", "权重预取"],
)
def test_cold_search_loads_no_validation_engine_or_introspection(query: str) -> None:
    loaded = _modules(["search", query])
    assert not [m for m in NEVER if m in loaded or any(x.startswith(m + ".") for x in loaded)]


def test_every_vocabulary_name_loads_from_the_module_defining_it() -> None:
    """kb.vocab imports its tables on first use: each name of ``__all__`` is found in
    ``_MODULES`` and is the very object its module holds, in a fresh interpreter too
    (where ``normalize`` must stay the function, not the module it once was named)."""
    import importlib

    import kb.vocab as vocab

    for name in vocab.__all__:
        homes = [
            m for m in vocab._MODULES if name in vars(importlib.import_module(f"kb.vocab.{m}"))
        ]
        assert homes, name
        assert getattr(vocab, name) is getattr(
            importlib.import_module(f"kb.vocab.{homes[0]}"), name
        )
    probe = (
        "import kb.vocab.roles, kb.vocab.spellings\n"
        "from kb.vocab import normalize, scheme_roles\n"
        "print(callable(normalize) and callable(scheme_roles), normalize('dtype', 'torch.half'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["True", "float16"]
    with pytest.raises(AttributeError):
        _ = vocab.NO_SUCH_TABLE


def test_the_freshness_check_sees_added_removed_and_edited_records(record_tree) -> None:  # type: ignore[no-untyped-def]
    """What the cheaper freshness key (one hash over every file's stat line) must keep
    seeing: a record added, one removed, one edited in place, and a search after each
    answers from the new records, never the old cache or index."""
    from kb.api.search import search
    from kb.catalog.compiled import open_catalog

    root = record_tree({"operators/npu_test_op.yaml": operator_yaml()})
    assert open_catalog().names() == ["npu_test_op"]
    record_tree({"operators/npu_other_op.yaml": operator_yaml("npu_other_op", "zebra")})
    catalog = open_catalog()
    assert catalog.names() == ["npu_other_op", "npu_test_op"]
    assert [h["name"] for h in search(catalog, "zebra")["results"]] == ["npu_other_op"]
    (root / "operators/npu_test_op.yaml").unlink()
    assert open_catalog().names() == ["npu_other_op"]
    record_tree({"operators/npu_other_op.yaml": operator_yaml("npu_other_op", "yak")})
    catalog = open_catalog()
    assert catalog.get("npu_other_op")["keywords"]["en"] == ["yak"]  # type: ignore[index]
    assert [h["name"] for h in search(catalog, "yak")["results"]] == ["npu_other_op"]
    assert search(catalog, "zebra")["results"] == []
