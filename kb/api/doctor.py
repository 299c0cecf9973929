"""``kb doctor`` as functions: the installed torch_npu against what the records document.

Two steps, because no install is itself the finding (exit 1, not an error) and the
records are only opened once there is something to compare them with.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.audit.doctor import Install, NotInstalled, Report
    from kb.catalog.compiled import Catalog


def find(path: Path | None = None) -> Install:
    """The torch_npu at ``path`` or on this interpreter's path; UsageError for a ``path``
    that does not exist, :class:`kb.audit.doctor.NotInstalled` when there is none."""
    from kb.api.errors import UsageError
    from kb.audit.doctor import find_install

    if path is not None and not path.exists():
        raise UsageError(f"--path {path} does not exist")
    return find_install(path)


def absent(exc: NotInstalled) -> dict[str, Any]:
    """The ``--format json`` document when no torch_npu is installed."""
    return {"torch_npu": None, "finding": str(exc)}


def compare(catalog: Catalog, install: Install) -> Report:
    """The install's schemas against the operator records (``Report.as_json()`` is the
    document); UsageError for schemas that cannot be read."""
    from kb.api.errors import UsageError
    from kb.audit.doctor import NotInstalled
    from kb.audit.doctor import compare as diff

    try:
        return diff(install, catalog.records("operator"), resolve=catalog.resolve)
    except NotInstalled as exc:
        raise UsageError(str(exc)) from None
