"""Re-proofs of plan stages, remembered across runs.

A stage's row is proved again with the module's facts and the plan's arguments
(:func:`kb.reference.proofs.reprove`); the same question comes back on every scan of a
model, and answering it costs the numpy import and the reference run.  The answers are
kept in the user's cache (``KB_CACHE_DIR``), in one file per version of the reference
code (a changed proof or operator is a new file), so a warm scan imports no numpy.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

_MEMO: dict[str, list[str]] = {}
_LOADED: list[Path] = []


def _stamp() -> str:
    """A digest of the reference package's files (name, size, modification time)."""
    import kb.reference

    here = Path(kb.reference.__file__).parent
    parts = []
    for p in sorted(here.glob("*.py")):
        try:
            st = p.stat()
        except OSError:
            continue
        parts.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _store() -> Path | None:
    try:
        from kb.core.paths import cache_dir

        return cache_dir() / f"reproofs-{_stamp()}.json"
    except (OSError, ImportError):
        return None


def _load(path: Path) -> None:
    if _LOADED and _LOADED[0] == path:
        return
    _LOADED[:] = [path]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        _MEMO.update({str(k): list(v) for k, v in data.items() if isinstance(v, list)})


def _save(path: Path) -> None:
    """Write the memo atomically (scans in parallel processes may race: the last wins)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".reproofs-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(_MEMO, out, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def reproved(
    mapping_id: str, facts: dict[str, Any], args: dict[str, Any], op: str, records: str = ""
) -> list[str]:
    """What differs when the row is proved with these facts and arguments (cached; the
    key holds ``records``, a digest of the operator records the reference binds against);
    ImportError when the reference extra (numpy) is not installed and no answer is kept."""
    key = json.dumps([mapping_id, facts, args, op, records], sort_keys=True, default=repr)
    store = _store()
    if store is not None:
        _load(store)
    if key not in _MEMO:
        from kb.reference.proofs import reprove

        _MEMO[key] = reprove(mapping_id, facts, args, op)
        if store is not None:
            _save(store)
    return list(_MEMO[key])
