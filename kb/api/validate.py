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
            "problems": [p._asdict() | {"file": str(self.root / p.file)} for p in self.problems],
        }


#: Loads tried before giving up on a record tree that keeps changing under us.
SNAPSHOT_TRIES = 4


def validate(records: Path | None = None) -> Validation:
    """Validate the records directory (default: ``KB_RECORDS_DIR`` or the shipped one).

    The verdict is about one state of the tree: when a record is rewritten while it is
    being read (an editor saving, a script regenerating records), the stat key of the
    tree differs before and after, and the whole load is done again, so a half-written
    file is never reported as broken and the later cross-checks never meet a store that
    no longer validates.
    """
    from kb.catalog.compiled import StoreInvalid, fingerprint
    from kb.catalog.store import Problem, load_store
    from kb.core.paths import records_dir

    root = (records or records_dir()).resolve()
    for _ in range(SNAPSHOT_TRIES):
        before = fingerprint(root)
        result = load_store(root)
        broken = bool(result.problems)
        if not broken:
            from kb.audit.crosscheck import crosscheck

            try:
                result.problems += crosscheck(result, root)
                result.problems += practice_problems(root, result)
            except StoreInvalid:  # changed between the load and the cross-checks
                continue
        if fingerprint(root) == before:
            break
    else:
        result.problems.append(
            Problem(
                ".",
                1,
                1,
                "",
                f"the records kept changing while they "
                f"were validated ({SNAPSHOT_TRIES} tries); run kb "
                "validate again once they are written",
            )
        )
        broken = True
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
        problems.append(
            Problem(
                loaded.file,
                line,
                col,
                f"seen_in[{c.repo}].sites[{c.site}]",
                f"{c.message}; fix the record with evidence, or mark the site a defect",
            )
        )
    return problems
