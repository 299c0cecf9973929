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


def run(args: argparse.Namespace) -> int:
    from kb.api.validate import validate
    from kb.text.escape import printable

    found = validate(args.records)
    if args.format == "json":
        print(json.dumps(found.as_json(), ensure_ascii=False, indent=2))
    else:
        for problem in found.problems:
            print(printable(problem.located_in(found.root)))
        summary = (
            ", ".join(f"{n} {k}{'' if n == 1 else 's'}" for k, n in sorted(found.counts.items()))
            or "no records"
        )
        status = f"{len(found.problems)} problem(s)" if found.problems else "all valid"
        print(f"{summary}; {status}")
    if found.broken:
        return 2
    return 1 if found.problems else 0
