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
        "the models and resolve every cross-reference. Problems are printed as "
        "file:line:col: field: message; exit 2 when there is any (the code every verb "
        "gives for a broken record store).",
    )
    p.add_argument("--records", type=Path, help="records directory (default: the shipped ones)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.paths import records_dir
    from kb.store import load_store

    root = (args.records or records_dir()).resolve()
    result = load_store(root)
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
    return 2 if result.problems else 0
