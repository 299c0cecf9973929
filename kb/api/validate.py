"""``kb validate`` as a function: every record loaded and validated, then cross-checked
against the others and against the shipping calls recorded for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.catalog.recordfiles import Problem
    from kb.catalog.store import StoreResult


@dataclass
class Validation:
    """What ``kb validate`` found under ``root``: the problems and the records per kind."""

    root: Path
    problems: list[Problem]
    counts: dict[str, int]
    #: a record does not load or validate (exit 2); otherwise problems are cross-checks (exit 1)
    broken: bool

    def as_json(self) -> dict[str, Any]:
        """The ``--format json`` document: ``{"records": {kind: n}, "problems": [...]}``."""
        return {
            "records": self.counts,
            "problems": [p.__dict__ | {"file": str(self.root / p.file)} for p in self.problems],
        }


def validate(records: Path | None = None) -> Validation:
    """Validate the records directory (default: ``KB_RECORDS_DIR`` or the shipped one)."""
    from kb.catalog.store import load_store
    from kb.core.paths import records_dir

    root = (records or records_dir()).resolve()
    result = load_store(root)
    broken = bool(result.problems)
    if not broken:
        from kb.audit.crosscheck import crosscheck

        result.problems += crosscheck(result, root)
        result.problems += practice_problems(root, result)
    counts: dict[str, int] = {}
    for loaded in result.records.values():
        kind = loaded.record.kind  # type: ignore[attr-defined]
        counts[kind] = counts.get(kind, 0) + 1
    return Validation(root, result.problems, counts, broken)


def practice_problems(root: Path, result: StoreResult) -> list[Problem]:
    """Recorded shipping calls (``seen_in``) that their own record rejects, as problems."""
    from kb.audit.practice import contradictions
    from kb.catalog.compiled import StoreInvalid, open_catalog
    from kb.catalog.store import Problem

    try:
        catalog = open_catalog(root)
    except StoreInvalid:
        return []
    problems = []
    for c in contradictions(catalog):
        loaded = result.records[c.record]
        line, col = loaded.located.where(("seen_in", c.repo, "sites", c.site))
        problems.append(Problem(loaded.file, line, col, f"seen_in[{c.repo}].sites[{c.site}]",
                                f"{c.message}; fix the record with evidence, or mark the site "
                                "a defect"))  # fmt: skip
    return problems
