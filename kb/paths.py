"""Where records live and where derived artefacts are cached."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def records_dir() -> Path:
    """The record tree: ``KB_RECORDS_DIR`` when set (tests, contributors), else shipped."""
    override = os.environ.get("KB_RECORDS_DIR")
    return Path(override).resolve() if override else PACKAGE_DIR / "records"


def cache_dir() -> Path:
    """Per-user cache: ``KB_CACHE_DIR``, else ``$XDG_CACHE_HOME/kb``, else ``~/.cache/kb``."""
    override = os.environ.get("KB_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kb"
