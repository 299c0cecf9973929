"""The files whose code decides what a valid record is (they key the compiled catalog
and the stored results of each record's own checks).  Imports nothing that parses."""

from __future__ import annotations

import os
from pathlib import Path

from kb.core.paths import PACKAGE_DIR

#: The layers whose code decides what a valid record is: the catalog and everything it
#: may import (the architecture test keeps catalog from importing anything above these),
#: plus the package data they read.  Every file in them keys the cache, so a new module
#: cannot be forgotten the way a hand-kept list of files was.
CODE_LAYERS = ("core", "vocab", "catalog")
DATA_DIR = "data"


def code_inputs(package: Path = PACKAGE_DIR) -> list[tuple[str, str]]:
    """(``<code>/relative name``, path) of the code and data files records are validated by."""
    out: list[tuple[str, str]] = []
    for layer in CODE_LAYERS:
        out += _tree(package, layer, ".py")
    out += _tree(package, DATA_DIR, "")
    return sorted(out)


def _tree(package: Path, sub: str, suffix: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    cut = len(os.path.join(package, ""))  # the walk's paths all start with the package's
    for dirpath, dirnames, filenames in os.walk(os.path.join(package, sub)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if name.endswith(suffix) and not name.startswith("."):
                path = os.path.join(dirpath, name)
                out.append((f"<code>/{path[cut:]}", path))
    return out
