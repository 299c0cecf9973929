"""pytest plugin (entry point ``kb_emulate``): the ``npu_emulator`` fixture.

A test that asks for ``npu_emulator`` runs with torch_npu emulated (``import torch_npu``
inside it gets the emulator) and gets the :class:`kb.emulate.session.Emulation`, whose
``calls`` are the emulated calls so far.  Loading the plugin imports neither torch nor
numpy: a test session that never uses the fixture pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def npu_emulator(request: pytest.FixtureRequest) -> Iterator[Any]:
    """torch_npu on the CPU for one test; the product comes from an ``npu_product`` mark
    (``@pytest.mark.npu_product("atlas-a2")``) or ``$KB_EMULATE_PRODUCT``."""
    from kb.emulate.session import install, uninstall

    mark = request.node.get_closest_marker("npu_product")
    emulation = install(mark.args[0] if mark and mark.args else None)
    try:
        yield emulation
    finally:
        uninstall()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "npu_product(product): judge emulated calls for this product"
    )
