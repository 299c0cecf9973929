"""Shared fixtures: an isolated cache per session, tiny record trees per test."""

from __future__ import annotations

import os
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Site builds are session fixtures (one build of each site per test run).
from site_builds import fixture_site, real_site  # noqa: F401

# Never touch the user's ~/.cache/kb from tests; one cache for the whole session, and
# under pytest-xdist (scripts/test.sh runs `-n auto`) one per worker, inside the given one,
# so no test sees another worker's builds appear or vanish in its cache.
os.environ.setdefault("KB_CACHE_DIR", tempfile.mkdtemp(prefix="kb-test-cache-"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["KB_CACHE_DIR"] = os.path.join(
        os.environ["KB_CACHE_DIR"], f"xdist-{os.environ['PYTEST_XDIST_WORKER']}"
    )
os.environ.pop("KB_RECORDS_DIR", None)

MINIMAL_OPERATOR = """\
kind: operator
name: {name}
calls: [torch_npu.{name}]
status: stable
category: norm
summary: {{en: Test operator {name}., zh: 测试算子。}}
description: A small operator used by the tests.
keywords: {{en: [{keyword}], zh: [测试]}}
fuses: [rms_norm]
signature: "{name}(Tensor x, float eps=1e-06, *, str mode=\\"a\\") -> Tensor"
parameters:
  - name: x
    type: Tensor
    dtypes: [bfloat16]
    formats: [ND]
  - name: eps
    type: float
    required: false
    default: "1e-06"
  - name: mode
    type: str
    required: false
    default: '"a"'
    keyword_only: true
    allowed: [a, b]
products: [atlas-a2]
related: [{related}]
"""


def operator_yaml(name: str = "npu_test_op", keyword: str = "testing", related: str = "") -> str:
    return MINIMAL_OPERATOR.format(name=name, keyword=keyword, related=related)


@pytest.fixture
def record_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write records into a fresh tree, point KB at it, with a private cache."""
    root = tmp_path / "records"
    root.mkdir()
    monkeypatch.setenv("KB_RECORDS_DIR", str(root))
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return write


@pytest.fixture(scope="module")
def emulation() -> Iterator[Any]:
    """kb.emulate for the tests of one module (torch is imported on first use only)."""
    pytest.importorskip("torch", reason="the [emulate] extra is not installed")
    from kb.emulate.session import install, uninstall

    em = install()
    try:
        yield em
    finally:
        uninstall()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``heavy`` run first (otherwise in their usual order): with
    pytest-xdist's ``--dist loadfile`` the long files start at once and the short ones fill
    in behind them, instead of one long file running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
