"""``kb validate``: load every record, check types and cross-references."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "validate",
        help="validate every record and cross-reference",
        description="Load all records under the records directory, validate them against "
        "the models and resolve every cross-reference; then cross-check chains and trees "
        "against the operator records with the kb check rules, and replay every recorded "
        "shipping call (seen_in) against its own record: a record that rejects a call that "
        "ships must be fixed with evidence, or the site marked a defect. Problems are "
        "printed as file:line:col: field: message. Exit 2 when a record does not load or "
        "validate (the code every verb gives for a broken record store), 1 when the records "
        "load but a cross-check or a shipping call disagrees with them.",
    )
    p.add_argument("--records", type=Path, help="records directory (default: the shipped ones)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def practice_problems(root: Path, result: object) -> list:  # type: ignore[type-arg]
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
        loaded = result.records[c.record]  # type: ignore[attr-defined]
        line, col = loaded.located.where(("seen_in", c.repo, "sites", c.site))
        problems.append(Problem(loaded.file, line, col, f"seen_in[{c.repo}].sites[{c.site}]",
                                f"{c.message}; fix the record with evidence, or mark the site "
                                "a defect"))  # fmt: skip
    return problems


def run(args: argparse.Namespace) -> int:
    from kb.catalog.store import load_store
    from kb.core.paths import records_dir

    root = (args.records or records_dir()).resolve()
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
    if args.format == "json":
        out = {
            "records": counts,
            "problems": [p.__dict__ | {"file": str(root / p.file)} for p in result.problems],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for problem in result.problems:
            print(problem.located_in(root))
        summary = ", ".join(f"{n} {k}s" for k, n in sorted(counts.items())) or "no records"
        status = f"{len(result.problems)} problem(s)" if result.problems else "all valid"
        print(f"{summary}; {status}")
    if broken:
        return 2
    return 1 if result.problems else 0
